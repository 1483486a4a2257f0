import { expect } from 'chai';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { freePort, Home } from '../support/cli.ts';
import { RawSocket } from '../support/ws-client.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

const TOKEN = 'toolbox-gateway-token-for-tests';

const PAGE = `<!doctype html><html><head><title>The &amp; Page</title><script>document.write("tracking")</script><style>p{}</style></head>
<body><nav>Home | About</nav><h1>Release notes</h1><p>Version <b>2.1</b> fixes the <a href="/bugs/42">login bug</a>.</p>
<ul><li>faster</li><li>smaller</li></ul><pre><code>npm install gateway</code></pre><footer>© someone</footer></body></html>`;

describe('built-in tools, contained: web.fetch and files.* (e2e)', function () {
  this.timeout(60_000);
  let home: Home;
  let base: string;
  let pages: Server;
  let pagesPort: number;
  let elsewherePort: number;
  let elsewhere: Server;
  let elsewhereHits = 0;
  const set = (key: string, value: unknown) => home.set(key, value);
  const invoke = async (tool: string, args: Record<string, unknown>) => {
    const response = await fetch(`${base}/tools/invoke`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool, args }) });
    return { status: response.status, body: await response.json() as any };
  };

  before(async () => {
    pagesPort = await freePort();
    elsewherePort = await freePort();
    pages = createServer((req, res) => {
      if (req.url === '/page') return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
      if (req.url === '/moved') return void res.writeHead(301, { location: '/page' }).end();
      if (req.url === '/to-loopback') return void res.writeHead(302, { location: `http://127.0.0.1:${elsewherePort}/secret` }).end();
      if (req.url === '/to-localhost') return void res.writeHead(302, { location: `http://localhost:${elsewherePort}/secret` }).end();
      if (req.url === '/loop') return void res.writeHead(302, { location: '/loop' }).end();
      if (req.url === '/json') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      if (req.url === '/image') return void res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.alloc(100));
      if (req.url === '/bomb') return void res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' }).end(gzipSync(Buffer.alloc(50 * 1024 * 1024, 'a')));
      if (req.url === '/slow') return; // never answers
      if (req.url === '/gone') return void res.writeHead(404).end();
      if (req.url === '/broken') return void res.writeHead(500, { 'content-type': 'text/plain' }).end('the page broke');
      if (req.url === '/bad-redirect') return void res.writeHead(302, { location: 'http://[not an address' }).end();
      if (req.url === '/ftp-redirect') return void res.writeHead(302, { location: 'ftp://example.com/file' }).end();
      if (req.url === '/cut') return void req.socket.destroy();
      res.writeHead(404).end();
    });
    elsewhere = createServer((_req, res) => {
      elsewhereHits++;
      res.writeHead(200, { 'content-type': 'text/plain' }).end('internal secret');
    });
    await Promise.all([new Promise<void>((resolve) => pages.listen(pagesPort, '127.0.0.1', resolve)), new Promise<void>((resolve) => elsewhere.listen(elsewherePort, '::', resolve))]);
  });
  after(() => {
    pages.closeAllConnections();
    pages.close();
    elsewhere.close();
  });

  beforeEach(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN });
    await set('tools.web', { allowPrivate: [`127.0.0.1:${pagesPort}`], timeoutMs: 2000, maxBytes: 1024 * 1024 });
    expect((await home.run(['start'])).code).to.equal(0);
    elsewhereHits = 0;
  });
  afterEach(() => home.cleanup());

  it('web.fetch reads a page as Markdown, follows redirects, reads JSON as it is, and bounds what it reads', async () => {
    const page = await invoke('web.fetch', { url: `http://127.0.0.1:${pagesPort}/moved` });
    expect(page.status, JSON.stringify(page.body)).to.equal(200);
    const result = page.body.result;
    expect(result).to.include({ url: `http://127.0.0.1:${pagesPort}/page`, status: 200, title: 'The & Page', truncated: false });
    expect(result.redirects).to.deep.equal([`http://127.0.0.1:${pagesPort}/page`]);
    expect(result.content).to.include('# Release notes');
    expect(result.content).to.include(`[login bug](http://127.0.0.1:${pagesPort}/bugs/42)`);
    expect(result.content).to.include('**2.1**').and.to.include('- faster').and.to.include('```\nnpm install gateway\n```');
    for (const gone of ['tracking', 'Home | About', '© someone', 'p{}', 'The & Page']) expect(result.content).to.not.include(gone);

    expect((await invoke('web.fetch', { url: `http://127.0.0.1:${pagesPort}/json` })).body.result.content).to.equal('{"ok":true}');
    const bomb = await invoke('web.fetch', { url: `http://127.0.0.1:${pagesPort}/bomb`, maxBytes: 4096 });
    expect(bomb.body.result).to.include({ bytes: 4096, truncated: true });
    const image = await invoke('web.fetch', { url: `http://127.0.0.1:${pagesPort}/image` });
    expect(image.status).to.equal(400);
    expect(image.body.message).to.match(/image\/png, not a page or text/);
    const loop = await invoke('web.fetch', { url: `http://127.0.0.1:${pagesPort}/loop` });
    expect(loop.status).to.equal(502);
    expect(loop.body.message).to.match(/redirected more than 5 times/);
    const slow = await invoke('web.fetch', { url: `http://127.0.0.1:${pagesPort}/slow` });
    expect(slow.status).to.equal(502);
    expect(slow.body.message).to.match(/did not answer within 2000 ms/);
    for (const url of ['file:///etc/passwd', 'ftp://example.com/', `http://user:pw@127.0.0.1:${pagesPort}/page`, 'not a url']) {
      expect((await invoke('web.fetch', { url })).status, url).to.equal(400);
    }
  });

  it('a tool\'s outcome is its result and a server it works against failing is 502, the same over HTTP and the WebSocket; 500 is kept for the gateway\'s own faults', async () => {
    const closed = await freePort();
    await set('tools.web.allowPrivate', [`127.0.0.1:${pagesPort}`, `127.0.0.1:${closed}`]);
    // The page answered: whatever its status, that is the result.
    const gone = await invoke('web.fetch', { url: `http://127.0.0.1:${pagesPort}/gone` });
    expect(gone.status, JSON.stringify(gone.body)).to.equal(200);
    expect(gone.body.result).to.include({ status: 404, content: '', bytes: 0 });
    const broken = await invoke('web.fetch', { url: `http://127.0.0.1:${pagesPort}/broken` });
    expect(broken.status).to.equal(200);
    expect(broken.body.result).to.include({ status: 500, content: 'the page broke' });
    // The server failed the call: 502, saying how, never 500.
    const failures: [string, RegExp, string][] = [
      [`http://127.0.0.1:${closed}/`, /could not be reached \(ECONNREFUSED\)/, 'fetch_failed'],
      [`http://127.0.0.1:${pagesPort}/cut`, /could not be reached \(ECONNRESET\)/, 'fetch_failed'],
      ['http://no-such-host.invalid/', /no-such-host\.invalid could not be reached \((ENOTFOUND|EAI_AGAIN)\)/, 'fetch_failed'],
      [`http://127.0.0.1:${pagesPort}/bad-redirect`, /redirected to "http:\/\/\[not an address", which is not an address/, 'fetch_bad_redirect'],
      [`http://127.0.0.1:${pagesPort}/ftp-redirect`, /redirected to an address web\.fetch does not follow \(web\.fetch takes http and https addresses, not ftp\)/, 'fetch_bad_redirect'],
    ];
    const socket = new RawSocket(`ws://${base.slice('http://'.length)}/`);
    expect((await socket.connect({ token: TOKEN })).ok).to.equal(true);
    for (const [url, why, reason] of failures) {
      const failed = await invoke('web.fetch', { url });
      expect(failed.status, url).to.equal(502);
      expect(failed.body, url).to.include({ ok: false, error: 'unavailable', statusCode: 502 });
      expect(failed.body.message, url).to.match(why);
      const rpc = await socket.call('tools.invoke', { tool: 'web.fetch', args: { url } });
      expect(rpc.ok, url).to.equal(false);
      expect(rpc.error, url).to.deep.include({ code: 'UNAVAILABLE', details: { kind: 'upstream', reason } });
      expect(rpc.error.message, url).to.match(why);
    }
    // The caller's request refused: 400 and INVALID_REQUEST.
    const refusedHttp = await invoke('web.fetch', { url: 'ftp://example.com/' });
    expect(refusedHttp.status).to.equal(400);
    const refusedRpc = await socket.call('tools.invoke', { tool: 'web.fetch', args: { url: `http://127.0.0.1:${elsewherePort}/` } });
    expect(refusedRpc.error).to.deep.include({ code: 'INVALID_REQUEST', details: { reason: 'fetch_refused' } });
    // A job that is not there is not found, on both.
    expect((await invoke('jobs.get', { id: 'job_nothing' })).status).to.equal(404);
    expect((await socket.call('tools.invoke', { tool: 'jobs.get', args: { id: 'job_nothing' } })).error.code).to.equal('NOT_FOUND');
    socket.close();
    expect(elsewhereHits).to.equal(0);
    const log = (await home.run(['logs', '-n', '200', '--raw'])).stdout;
    expect(log, 'no outcome was logged as a failure of the gateway').to.not.include('tool failed');
  });

  it('web.fetch refuses loopback addresses, by address in any spelling, by name and behind a redirect, before connecting', async () => {
    const refusals: [string, RegExp][] = [
      [`http://127.0.0.1:${elsewherePort}/secret`, /127\.0\.0\.1 is a loopback address/],
      [`http://[::1]:${elsewherePort}/secret`, /::1 is a loopback address/],
      [`http://localhost:${elsewherePort}/secret`, /localhost resolves to (127\.0\.0\.1|::1), which is a loopback address/],
      [`http://127.1.2.3:${elsewherePort}/secret`, /127\.1\.2\.3 is a loopback address/],
      [`http://0.0.0.0:${elsewherePort}/secret`, /is an unspecified address/],
      [`http://[::ffff:127.0.0.1]:${elsewherePort}/secret`, /is a loopback address/],
      // Every other spelling of a loopback address, as the URL parser reads it and the guard judges it.
      [`http://2130706433:${elsewherePort}/secret`, /127\.0\.0\.1 is a loopback address/],
      [`http://0177.0.0.1:${elsewherePort}/secret`, /127\.0\.0\.1 is a loopback address/],
      [`http://0x7f.1:${elsewherePort}/secret`, /127\.0\.0\.1 is a loopback address/],
      [`http://127.1:${elsewherePort}/secret`, /127\.0\.0\.1 is a loopback address/],
      [`http://[::FFFF:7F00:0001]:${elsewherePort}/secret`, /::ffff:7f00:1 is a loopback address/],
      [`http://[::127.0.0.1]:${elsewherePort}/secret`, /::7f00:1 is an IPv4-compatible address/],
      [`http://[0:0:0:0:0:0:7f00:1]:${elsewherePort}/secret`, /::7f00:1 is an IPv4-compatible address/],
      [`http://[64:ff9b::127.0.0.1]:${elsewherePort}/secret`, /64:ff9b::7f00:1 is a loopback address/],
      [`http://[64:ff9b:1::7f00:1]:${elsewherePort}/secret`, /local-use NAT64/],
      [`http://[2002:7f00:1::1]:${elsewherePort}/secret`, /6to4/],
      [`http://[2001:0:7f00:1::1]:${elsewherePort}/secret`, /Teredo/],
      [`http://[::ffff:127.0.0.1%25eth0]:${elsewherePort}/secret`, /is not an address/],
      // Allowed is one host and port: the same host on another port is not.
      [`http://127.0.0.1:${elsewherePort}/`, /tools\.web\.allowPrivate \["127\.0\.0\.1:\d+"\]/],
      [`http://127.0.0.1:${pagesPort}/to-loopback`, /127\.0\.0\.1 is a loopback address/],
      [`http://127.0.0.1:${pagesPort}/to-localhost`, /localhost resolves to/],
    ];
    for (const [url, why] of refusals) {
      const refused = await invoke('web.fetch', { url });
      expect(refused.status, url).to.equal(400);
      expect(refused.body.message, url).to.match(why);
    }
    expect(elsewhereHits, 'nothing reached the loopback server').to.equal(0);
  });

  it('a file or folder name longer than the file system takes is the caller\'s to shorten: 400 over HTTP, INVALID_REQUEST over the WebSocket, exit 2 in the CLI', async () => {
    await set('gateway.tools.allow', ['files.write']);
    const long = 'n'.repeat(256);
    const multibyte = 'é'.repeat(128); // 128 characters, 256 bytes
    for (const [tool, args] of [
      ['files.read', { path: long }], ['files.read', { path: `${multibyte}.md` }], ['files.list', { path: long }],
      ['files.write', { path: `${long}/todo.md`, content: 'x' }], ['files.write', { path: `notes/${multibyte}`, content: 'x' }],
    ] as [string, Record<string, unknown>][]) {
      const answer = await invoke(tool, args);
      expect(answer.status, `${tool} ${JSON.stringify(args).slice(0, 40)}`).to.equal(400);
      expect(answer.body).to.include({ ok: false, error: 'bad_request' });
      expect(answer.body.message).to.match(/longer than the file system takes \(255 bytes a name/).and.not.include(home.file(''));
    }
    const socket = new RawSocket(`ws://${base.slice('http://'.length)}/`);
    expect((await socket.connect({ token: TOKEN })).ok).to.equal(true);
    const refused = await socket.call('tools.invoke', { tool: 'files.read', args: { path: long } });
    expect(refused.error).to.deep.include({ code: 'INVALID_REQUEST', details: { reason: 'name_too_long' } });
    socket.close();
    const cli = await home.run(['tools', 'invoke', 'files.read', '--args', JSON.stringify({ path: long })]);
    expect(cli.code, cli.stderr).to.equal(2);
    expect(cli.stderr).to.include('longer than the file system takes');
    // A name of 255 bytes is one the file system takes.
    expect((await invoke('files.write', { path: `notes/${'m'.repeat(255)}`, content: 'fits' })).body.result).to.include({ created: true });
  });

  it('files.* act in the workspace only: reads, atomic writes, edits and lists; .., absolute paths, symlinks and other profiles refused', async () => {
    const workspace = join(home.file('config.json'), '..', 'workspace');
    // Writing changes files: over HTTP only once gateway.tools.allow names it.
    const unlisted = await invoke('files.write', { path: 'notes/todo.md', content: 'first' });
    expect(unlisted.status).to.equal(404);
    expect(unlisted.body.message).to.match(/gateway\.tools\.allow/);
    await set('gateway.tools.allow', ['files.write', 'files.edit']);

    const written = await invoke('files.write', { path: 'notes/todo.md', content: '- buy milk\n- call Sam\n' });
    expect(written.body.result).to.deep.equal({ path: 'notes/todo.md', bytes: 22, created: true });
    expect(readFileSync(join(workspace, 'notes/todo.md'), 'utf8')).to.equal('- buy milk\n- call Sam\n');
    expect((await invoke('files.read', { path: 'notes/todo.md' })).body.result).to.include({ content: '- buy milk\n- call Sam\n', truncated: false });
    expect((await invoke('files.edit', { path: 'notes/todo.md', oldText: 'call Sam', newText: 'call Alex' })).body.result).to.include({ replacements: 1 });
    expect(readFileSync(join(workspace, 'notes/todo.md'), 'utf8')).to.include('call Alex');
    const ambiguous = await invoke('files.edit', { path: 'notes/todo.md', oldText: '- ', newText: '* ' });
    expect(ambiguous.body.message).to.match(/2 times/);
    expect((await invoke('files.edit', { path: 'notes/todo.md', oldText: '- ', newText: '* ', all: true })).body.result.replacements).to.equal(2);
    const listed = (await invoke('files.list', { depth: 2 })).body.result;
    expect(listed.entries).to.deep.include({ path: 'notes', type: 'folder', bytes: null });
    expect(listed.entries.map((entry: any) => entry.path)).to.include('notes/todo.md');
    expect(listed.entries.some((entry: any) => entry.path.endsWith('.tmp')), 'no temporary file left').to.equal(false);

    // Escapes.
    const outside = join(workspace, '..', 'secrets.json');
    const other = new Home({});
    mkdirSync(join(other.file('config.json'), '..'), { recursive: true });
    writeFileSync(other.file('config.json'), '{}');
    symlinkSync('/etc', join(workspace, 'etc-link'));
    symlinkSync(join(workspace, '..', 'config.json'), join(workspace, 'config-link'));
    symlinkSync('/nonexistent/target', join(workspace, 'dangling'));
    const attempts: [string, Record<string, unknown>][] = [
      ['files.read', { path: '/etc/shadow' }], ['files.read', { path: '../config.json' }], ['files.read', { path: 'notes/../../config.json' }],
      ['files.read', { path: outside }], ['files.read', { path: other.file('config.json') }], ['files.read', { path: 'etc-link/shadow' }],
      ['files.read', { path: 'config-link' }], ['files.list', { path: 'etc-link' }], ['files.list', { path: '..' }],
      ['files.write', { path: '../escaped.txt', content: 'x' }], ['files.write', { path: 'etc-link/evil', content: 'x' }],
      ['files.write', { path: 'config-link', content: '{}' }], ['files.write', { path: 'dangling', content: 'x' }],
      ['files.write', { path: '/tmp/escaped.txt', content: 'x' }], ['files.edit', { path: 'config-link', oldText: '{', newText: '[' }],
    ];
    for (const [tool, args] of attempts) {
      const refused = await invoke(tool, args);
      expect(refused.status, `${tool} ${JSON.stringify(args)}`).to.equal(403);
      expect(refused.body.message).to.match(/outside the workspace/);
    }
    expect(existsSync(join(workspace, '..', 'escaped.txt'))).to.equal(false);
    expect(existsSync('/tmp/escaped.txt')).to.equal(false);
    expect(existsSync('/nonexistent/target')).to.equal(false);
    expect(JSON.parse(readFileSync(join(workspace, '..', 'config.json'), 'utf8'))).to.have.property('tools');
    other.cleanup();
    expect((await invoke('files.read', { path: 'missing.txt' })).status).to.equal(404);
    expect((await invoke('files.write', { path: 'big.txt', content: 'x'.repeat(1024 * 1024 + 1) })).status).to.equal(413);
  });

  it('an agent with the coding profile fetches and writes in its own workspace, each call in its session', async () => {
    const upstream = await new ScriptedUpstream().start();
    try {
      await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
      await set('agents.coder', { model: 'script/m', toolProfile: 'coding' });
      await set('gateway.tools.allow', ['files.write']);
      upstream.enqueue(
        openaiToolCalls([{ name: 'web_fetch', args: { url: `http://127.0.0.1:${pagesPort}/page` } }]),
        openaiToolCalls([{ name: 'files_write', args: { path: 'release.md', content: 'Version 2.1 fixes the login bug.' } }]),
        openaiText('Saved the summary to release.md.'),
      );
      const chat = await home.run(['chat', '--agent', 'coder', 'Summarise the release notes into release.md', '--json']);
      expect(chat.code, chat.stderr).to.equal(0);
      expect(chat.json.text).to.equal('Saved the summary to release.md.');
      const written = join(home.file('config.json'), '..', 'workspaces', 'coder', 'release.md');
      expect(readFileSync(written, 'utf8')).to.equal('Version 2.1 fixes the login bug.');
      // The model saw the page as Markdown.
      expect(JSON.stringify(upstream.requests[1]!.body.messages)).to.include('# Release notes');
      const names = upstream.requests[0]!.body.tools.map((tool: any) => tool.function.name).sort();
      expect(names).to.include.members(['files_list', 'files_read', 'files_write', 'web_fetch']);
      expect(names, 'dangerous tools stay out until allowed').to.not.include('files_edit');
    } finally {
      await upstream.stop();
    }
  });
});
