import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LookupAddress } from 'node:dns';
import { BrowserProxy, REFUSED_HEADER } from '../../../src/server/toolbox/browser-proxy.ts';

/** One request through the proxy's socket, as Chromium sends it (absolute form). */
function viaProxy(socketPath: string, url: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: url, method: 'GET', headers: { host: new URL(url).host, 'proxy-connection': 'keep-alive' } }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A CONNECT through the proxy: its status line, then (when it opened) what the tunnel echoes back. */
function tunnel(socketPath: string, authority: string, say?: string): Promise<{ head: string; echoed: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(socketPath);
    let got = '';
    socket.on('data', (chunk) => {
      got += chunk.toString();
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = got.slice(0, end);
      const rest = got.slice(end + 4);
      if (!head.startsWith('HTTP/1.1 200') || !say) {
        socket.destroy();
        return resolve({ head, echoed: rest });
      }
      if (rest.length >= say.length) {
        socket.destroy();
        resolve({ head, echoed: rest });
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve({ head: got, echoed: '' }));
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n\r\n`);
    if (say) setTimeout(() => socket.write(say), 50);
  });
}

describe('the browser\'s proxy: every request held to the address guard, connected to the address checked', () => {
  let dir: string;
  let site: Server;
  let echo: TcpServer;
  let sitePort: number;
  let echoPort: number;
  let proxy: BrowserProxy;
  let lookups: string[];
  let allowPrivate: string[];
  const names: Record<string, LookupAddress[]> = {};

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-proxy-test-'));
    site = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain', connection: 'close' }).end(`site saw ${req.url} for ${req.headers.host}; proxy headers ${req.headers['proxy-connection'] ?? 'none'}`));
    echo = createTcpServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    sitePort = (site.address() as { port: number }).port;
    echoPort = (echo.address() as { port: number }).port;
    Object.assign(names, {
      'pages.test': [{ address: '127.0.0.1', family: 4 }],
      'metadata.test': [{ address: '169.254.169.254', family: 4 }],
      'mixed.test': [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.7', family: 4 }],
    });
    proxy = await BrowserProxy.listen(join(dir, 'proxy.sock'), {
      allowPrivate: () => allowPrivate,
      resolve: async (host) => {
        lookups.push(host);
        const found = names[host];
        if (!found) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
        return found;
      },
      maxConnections: 16, connectTimeoutMs: 2000,
    });
  });
  after(async () => {
    await proxy.close();
    site.close();
    echo.close();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    lookups = [];
    allowPrivate = [`pages.test:${sitePort}`, `pages.test:${echoPort}`];
  });

  it('passes an allowed request on to the address its name resolved to, looked up once, without the proxy\'s own headers', async () => {
    const mark = proxy.mark();
    const answer = await viaProxy(join(dir, 'proxy.sock'), `http://pages.test:${sitePort}/page?x=1`);
    expect(answer.status).to.equal(200);
    expect(answer.body).to.equal(`site saw /page?x=1 for pages.test:${sitePort}; proxy headers none`);
    expect(lookups).to.deep.equal(['pages.test']);
    expect(proxy.refusedSince(mark)).to.deep.equal([]);
  });

  it('refuses loopback, metadata and a name with any private address, with a 403 saying why, and keeps the refusal', async () => {
    const mark = proxy.mark();
    const cases: [string, RegExp][] = [
      [`http://127.0.0.1:${sitePort}/`, /127\.0\.0\.1 is a loopback address; the browser reaches only public addresses/],
      [`http://metadata.test/latest/`, /metadata\.test resolves to 169\.254\.169\.254, which is a cloud metadata address/],
      [`http://mixed.test/`, /mixed\.test resolves to 10\.0\.0\.7, which is a private address/],
      [`http://[::ffff:127.0.0.1]:${sitePort}/`, /is a loopback address/],
    ];
    for (const [url, why] of cases) {
      const answer = await viaProxy(join(dir, 'proxy.sock'), url);
      expect(answer.status, url).to.equal(403);
      expect(answer.headers[REFUSED_HEADER]).to.equal('1');
      expect(answer.body, url).to.match(why);
    }
    expect(proxy.refusedSince(mark).map((refusal) => refusal.url)).to.deep.equal(cases.map(([url]) => new URL(url).toString()));
    expect(proxy.refusedSince(proxy.mark())).to.deep.equal([]);
  });

  it('a name that does not resolve fails (502) without counting as a refusal', async () => {
    const mark = proxy.mark();
    const answer = await viaProxy(join(dir, 'proxy.sock'), 'http://nowhere.test/');
    expect(answer.status).to.equal(502);
    expect(answer.headers[REFUSED_HEADER]).to.equal(undefined);
    expect(proxy.refusedSince(mark)).to.deep.equal([]);
    expect(proxy.failedSince(mark)?.reason).to.match(/nowhere\.test could not be resolved \(ENOTFOUND\)/);
  });

  it('opens a CONNECT tunnel (https, WebSockets) only to an allowed address, and names a refused one by its host and port', async () => {
    const open = await tunnel(join(dir, 'proxy.sock'), `pages.test:${echoPort}`, 'hello through the tunnel');
    expect(open.head).to.match(/^HTTP\/1\.1 200/);
    expect(open.echoed).to.equal('hello through the tunnel');
    const mark = proxy.mark();
    const refused = await tunnel(join(dir, 'proxy.sock'), `127.0.0.1:${echoPort}`);
    expect(refused.head).to.match(/^HTTP\/1\.1 403 Forbidden/);
    expect(refused.echoed).to.match(/127\.0\.0\.1 is a loopback address/);
    expect(proxy.refusedSince(mark)).to.deep.equal([{ url: `127.0.0.1:${echoPort}`, reason: refused.echoed.replace(/^The gateway refused this request: /, '').trim() }]);
    expect((await tunnel(join(dir, 'proxy.sock'), 'no-port.test')).head).to.match(/^HTTP\/1\.1 400/);
    // A changed allowPrivate holds at once.
    allowPrivate = [];
    expect((await tunnel(join(dir, 'proxy.sock'), `pages.test:${echoPort}`)).head).to.match(/^HTTP\/1\.1 403/);
  });
});
