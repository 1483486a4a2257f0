import { expect } from 'chai';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { upstreamFetch } from '../../../src/server/kernel/upstream-fetch.ts';
import { freePort } from '../../support/cli.ts';

describe('the fetch providers are given (node:http, kept-alive, watched)', function () {
  let server: Server;
  let url: string;
  let handler: (req: IncomingMessage, res: ServerResponse, body: string) => void;
  const sockets = new Set<Socket>();

  before(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => { body += chunk; });
      req.on('end', () => handler(req, res, body));
    });
    server.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends the method, headers and body, answers status, headers and body as fetch does, on one kept-alive connection', async () => {
    sockets.clear();
    handler = (req, res, body) => {
      res.writeHead(201, 'Made', { 'content-type': 'application/json', 'x-echo': String(req.headers['x-key']) });
      res.end(JSON.stringify({ method: req.method, body, length: req.headers['content-length'] }));
    };
    const calls: string[] = [];
    const watch = { sent: () => calls.push('sent'), heard: () => calls.push('heard') };
    for (let i = 0; i < 2; i++) {
      const response = await upstreamFetch(`${url}/v1/x`, { method: 'POST', headers: { 'x-key': 'k1', 'content-type': 'application/json' }, body: '{"é":1}' }, watch);
      expect(response.status).to.equal(201);
      expect(response.statusText).to.equal('Made');
      expect(response.headers.get('x-echo')).to.equal('k1');
      expect(await response.json()).to.deep.equal({ method: 'POST', body: '{"é":1}', length: '8' });
    }
    expect(calls.filter((call) => call === 'sent')).to.have.length(2);
    expect(calls.filter((call) => call === 'heard').length).to.be.at.least(4);
    expect(sockets.size).to.equal(1);
  });

  it('sends headers given as a record, a Headers object or pairs alike: names in any case, values trimmed, undefined ones left out', async () => {
    handler = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ key: req.headers['x-key'] ?? null, kind: req.headers['x-kind'] ?? null, gone: 'x-gone' in req.headers }));
    };
    const forms: RequestInit['headers'][] = [
      { 'X-Key': ' k1 ', 'x-kind': 'record', 'x-gone': undefined as unknown as string },
      new Headers({ 'X-Key': ' k1 ', 'x-kind': 'record' }),
      [['X-Key', ' k1 '], ['x-kind', 'record']],
    ];
    for (const headers of forms) {
      const response = await upstreamFetch(`${url}/v1/h`, { method: 'POST', headers, body: '{}' }, undefined);
      expect(await response.json()).to.deep.equal({ key: 'k1', kind: 'record', gone: false });
    }
  });

  it('fails to connect as fetch does: a TypeError "fetch failed" whose cause names the socket error', async () => {
    const port = await freePort();
    const error = await upstreamFetch(`http://127.0.0.1:${port}/v1`, { method: 'POST', body: '{}' }, undefined).catch((thrown: unknown) => thrown);
    expect(error).to.be.instanceOf(TypeError);
    expect((error as Error).message).to.equal('fetch failed');
    expect(((error as Error).cause as { code?: string }).code).to.equal('ECONNREFUSED');
  });

  it('aborts with the signal\'s reason before the answer and in the middle of it, and closes the connection', async () => {
    const closed: string[] = [];
    handler = (req, res) => {
      res.on('close', () => closed.push(req.url!));
      if (req.url === '/hang') return;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
    };
    const early = new AbortController();
    const pending = upstreamFetch(`${url}/hang`, { signal: early.signal }, undefined);
    setTimeout(() => early.abort(new Error('stop early')), 50);
    expect(((await pending.catch((thrown: unknown) => thrown)) as Error).message).to.equal('stop early');

    const late = new AbortController();
    const response = await upstreamFetch(`${url}/stream`, { signal: late.signal }, undefined);
    const reader = response.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).to.equal('data: 1\n\n');
    late.abort(new Error('stop late'));
    expect(((await reader.read().catch((thrown: unknown) => thrown)) as Error).message).to.equal('stop late');
    const started = Date.now();
    while (closed.length < 2 && Date.now() - started < 2000) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(closed.sort()).to.deep.equal(['/hang', '/stream']);

    const already = new AbortController();
    already.abort(new Error('never sent'));
    expect(((await upstreamFetch(`${url}/stream`, { signal: already.signal }, undefined).catch((thrown: unknown) => thrown)) as Error).message).to.equal('never sent');
  });

  it('reports a connection dropped mid-answer as fetch does (TypeError "terminated"), and a bodiless status with no body', async () => {
    handler = (req, res) => {
      if (req.url === '/empty') {
        res.writeHead(204).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: partial\n\n', () => setTimeout(() => res.socket?.destroy(), 20));
    };
    const response = await upstreamFetch(`${url}/drop`, {}, undefined);
    const error = await response.text().catch((thrown: unknown) => thrown);
    expect(error).to.be.instanceOf(TypeError);
    expect((error as Error).message).to.equal('terminated');

    const empty = await upstreamFetch(`${url}/empty`, { method: 'DELETE' }, undefined);
    expect(empty.status).to.equal(204);
    expect(empty.body).to.equal(null);
  });

  it('reads no faster than its reader: an unread answer holds the upstream back', async () => {
    let written = 0;
    let finished = false;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const piece = Buffer.alloc(64 * 1024, 1);
      const pump = () => {
        while (written < 64 * 1024 * 1024) {
          written += piece.length;
          if (!res.write(piece)) return void res.once('drain', pump);
        }
        finished = true;
        res.end();
      };
      pump();
    };
    const response = await upstreamFetch(`${url}/big`, {}, undefined);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(finished).to.equal(false);
    expect(written).to.be.below(16 * 1024 * 1024);
    await response.body!.cancel();
  });
});
