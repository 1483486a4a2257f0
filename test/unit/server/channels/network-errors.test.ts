import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeNetworkError } from '../../../../src/server/channels/network-errors.ts';
import { freePort } from '../../../support/cli.ts';

/** What a real fetch to `url` throws. */
async function fetchError(url: string, init: RequestInit = {}): Promise<unknown> {
  try {
    await fetch(url, init);
  } catch (error) {
    return error;
  }
  throw new Error(`${url} answered`);
}

const listen = async (server: Server) => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
};

describe('a failed network call told with its address and cause', function () {
  this.timeout(20_000);

  it('a closed loopback port: connection refused at host:port, not "fetch failed"', async () => {
    const port = await freePort();
    const error = await fetchError(`http://127.0.0.1:${port}/bot123:secret/getMe`);
    expect((error as Error).message).to.equal('fetch failed');
    expect(describeNetworkError(error, `http://127.0.0.1:${port}`)).to.equal(`connection refused at 127.0.0.1:${port}`);
    // Where the cause says it went wins: localhost resolved, the address is named.
    expect(describeNetworkError(await fetchError(`http://localhost:${port}/`))).to.match(new RegExp(`^connection refused at (127\\.0\\.0\\.1|\\[::1\\]):${port}$`));
  });

  it('a name that does not resolve: DNS lookup failed for host X', async () => {
    const error = await fetchError('https://nothing.invalid/bot123:secret/getMe');
    expect(describeNetworkError(error, 'https://nothing.invalid')).to.match(/^DNS lookup failed for host nothing\.invalid \((ENOTFOUND|EAI_AGAIN)/);
  });

  it('a server whose certificate is not trusted: a TLS error naming host:port and the certificate\'s fault', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gateway-tls-'));
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`);
    const server = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (_, res) => res.end('{}'));
    const port = await listen(server as unknown as Server);
    try {
      const described = describeNetworkError(await fetchError(`https://127.0.0.1:${port}/`), `https://127.0.0.1:${port}`);
      expect(described).to.match(new RegExp(`^TLS error with 127\\.0\\.0\\.1:${port}: self-signed certificate.* \\(DEPTH_ZERO_SELF_SIGNED_CERT\\)$`));
    } finally {
      server.close();
    }
  });

  it('a plain socket where TLS was expected, or one closed without answering: said so, with the address', async () => {
    const server = createNetServer((socket) => socket.destroy());
    const port = await listen(server);
    try {
      expect(describeNetworkError(await fetchError(`https://127.0.0.1:${port}/`), `https://127.0.0.1:${port}`))
        .to.equal(`TLS error with 127.0.0.1:${port}: the connection closed before TLS was established (ECONNRESET)`);
      expect(describeNetworkError(await fetchError(`http://127.0.0.1:${port}/`), `http://127.0.0.1:${port}`))
        .to.equal(`the connection to 127.0.0.1:${port} was closed by the other side (UND_ERR_SOCKET)`);
    } finally {
      server.close();
    }
  });

  it('a server that never answers: timed out waiting for host:port', async () => {
    const server = createNetServer(() => undefined);
    const port = await listen(server);
    try {
      const error = await fetchError(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(200) });
      expect(describeNetworkError(error, `http://127.0.0.1:${port}/api`)).to.equal(`timed out waiting for 127.0.0.1:${port}`);
    } finally {
      server.close();
    }
  });

  it('reads the causes client libraries wrap: grammY\'s HttpError (.error), Slack\'s request error (.original), an AggregateError\'s errors', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:8443'), { code: 'ECONNREFUSED', address: '10.1.2.3', port: 8443, syscall: 'connect' });
    const grammy = Object.assign(new Error('Network request for \'getMe\' failed!'), { error: new TypeError('fetch failed', { cause: refused }) });
    expect(describeNetworkError(grammy, 'https://api.telegram.org')).to.equal('connection refused at 10.1.2.3:8443');
    const axios = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', cause: refused });
    const slack = Object.assign(new Error('A request error occurred: connect ECONNREFUSED'), { code: 'slack_webapi_request_error', original: axios });
    expect(describeNetworkError(slack, 'https://slack.com/api/')).to.equal('connection refused at 10.1.2.3:8443');
    const both = new AggregateError([
      Object.assign(new Error('connect ECONNREFUSED ::1:9'), { code: 'ECONNREFUSED', address: '::1', port: 9 }),
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED', address: '127.0.0.1', port: 9 }),
    ]);
    expect(describeNetworkError(new TypeError('fetch failed', { cause: both }))).to.equal('connection refused at [::1]:9');
    const unreachable = Object.assign(new Error('connect EHOSTUNREACH'), { code: 'EHOSTUNREACH', address: '10.9.9.9', port: 443 });
    expect(describeNetworkError(unreachable)).to.equal('no route to host 10.9.9.9:443 (EHOSTUNREACH)');
  });

  it('names the host and the port its scheme implies when the cause names none, and never a URL\'s path or query', () => {
    const tls = Object.assign(new Error('certificate has expired'), { code: 'CERT_HAS_EXPIRED' });
    expect(describeNetworkError(new TypeError('fetch failed', { cause: tls }), 'https://api.telegram.org/bot123:secret/getMe?offset=1'))
      .to.equal('TLS error with api.telegram.org:443: certificate has expired (CERT_HAS_EXPIRED)');
    const timeout = Object.assign(new Error('Connect Timeout Error'), { code: 'UND_ERR_CONNECT_TIMEOUT' });
    expect(describeNetworkError(new TypeError('fetch failed', { cause: timeout }), 'http://matrix.example.org')).to.equal('timed out reaching matrix.example.org:80 (UND_ERR_CONNECT_TIMEOUT)');
    const leaky = new Error('request to https://api.telegram.org/bot123:secret/getFile failed');
    expect(describeNetworkError(leaky)).to.equal('request to <url> failed').and.not.include('secret');
  });

  it('tells an error that is no network failure by its own message', () => {
    expect(describeNetworkError(new Error('the platform answered 404'))).to.equal('the platform answered 404');
    expect(describeNetworkError('a string')).to.equal('a string');
    expect(describeNetworkError(Object.assign(new Error('Unexpected end of JSON input'), {}), 'https://discord.com')).to.equal('Unexpected end of JSON input');
    const grammyTimeout = Object.assign(new Error('Network request for \'getUpdates\' failed!'), { error: new Error('Request to \'getUpdates\' timed out after 60 seconds') });
    expect(describeNetworkError(grammyTimeout, 'https://api.telegram.org')).to.equal('timed out waiting for api.telegram.org:443');
  });
});
