import { expect } from 'chai';
import { cpSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { freePort, Home, PLUGIN_FIXTURES, sleep, waitFor } from '../support/cli.ts';
import { RawSocket } from '../support/ws-client.ts';

const HELLO = join(PLUGIN_FIXTURES, 'hello');

/** A request with the path exactly as written: no client-side normalisation of dot segments or escapes. */
function raw(port: number, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('plugins, reload, tools and static surfaces (e2e)', function () {
  let home: Home;
  let port: number;
  let token: string;
  const auth = () => ({ authorization: `Bearer ${token}` });
  const get = (path: string, headers: Record<string, string> = auth()) => raw(port, 'GET', path, headers);
  const invoke = async (body: unknown, bearer: string | null = token, headers: Record<string, string> = {}) => {
    const response = await raw(port, 'POST', '/tools/invoke', { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), 'content-type': 'application/json', ...headers }, typeof body === 'string' ? body : JSON.stringify(body));
    return { status: response.status, body: JSON.parse(response.body) };
  };
  const load = async (...plugins: string[]) => {
    const set = await home.run(['config', 'set', 'plugins.load', JSON.stringify(plugins)]);
    expect(set.code, set.stderr).to.equal(0);
    expect(set.stdout).to.match(/gateway reload/);
  };
  const pid = () => home.lock().pid as number;

  beforeEach(async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    expect((await home.run(['start'])).code).to.equal(0);
    token = home.token();
  });
  afterEach(() => home.cleanup());

  it('serves what a plugin registers: routes with gateway or plugin auth, a WebSocket endpoint, a method, a tool', async () => {
    await load(HELLO);
    expect((await home.run(['reload'])).code).to.equal(0);
    expect((await get('/hello', {})).status).to.equal(401);
    const hello = await get('/hello');
    expect(hello.status).to.equal(200);
    expect(JSON.parse(hello.body)).to.deep.equal({ hello: 'world', plugin: 'hello-plugin' });
    expect((await raw(port, 'POST', '/hello/files/a/b', {})).status, 'plugin auth: the plugin decides').to.equal(401);
    expect(JSON.parse((await raw(port, 'POST', '/hello/files/a/b', { 'x-hello-key': 'let-me-in' })).body)).to.deep.equal({ path: '/hello/files/a/b' });
    const wrongMethod = await raw(port, 'DELETE', '/hello', auth());
    expect(wrongMethod.status).to.equal(405);
    expect(wrongMethod.headers.allow).to.equal('GET');

    const ws = new WebSocket(`ws://127.0.0.1:${port}/hello/ws`, { headers: auth() });
    const echoed = await new Promise<string>((resolve, reject) => {
      ws.once('open', () => ws.send('ping'));
      ws.once('message', (data) => resolve(data.toString()));
      ws.once('error', reject);
    });
    expect(echoed).to.equal('echo:ping');
    ws.close();
    const refused = new WebSocket(`ws://127.0.0.1:${port}/hello/ws`);
    const status = await new Promise<number>((resolve) => refused.once('unexpected-response', (_req, res) => resolve(res.statusCode!)));
    expect(status).to.equal(401);

    const operator = new RawSocket(`ws://127.0.0.1:${port}/`);
    await operator.connect({ token }, ['operator.read']);
    const greeting = await operator.call('hello.greet', { name: 'ops' });
    expect(greeting.payload).to.deep.equal({ greeting: 'hello, ops' });
    operator.close();

    const listed = JSON.parse((await home.run(['plugins', 'list', '--json'])).stdout);
    const entry = listed.plugins.find((p: any) => p.name === 'hello-plugin');
    expect(entry).to.include({ source: HELLO, builtin: false, status: 'loaded' });
    expect(entry.registered.methods).to.deep.equal(['hello.greet']);
    expect(entry.registered.tools).to.deep.equal(['hello.echo', 'hello.wipe']);
    expect(entry.registered.wsRoutes).to.deep.equal(['/hello/ws']);
  });

  it('reload adds and removes a plugin while a WebSocket client stays connected and a request is in flight', async () => {
    const before = pid();
    const operator = new RawSocket(`ws://127.0.0.1:${port}/`);
    await operator.connect({ token }, ['operator.read', 'operator.admin']);
    expect((await get('/hello')).status).to.equal(404);

    await load(HELLO);
    const added = await home.run(['reload', '--json']);
    expect(added.code, added.stderr).to.equal(0);
    expect(JSON.parse(added.stdout)).to.include({ ok: true, pid: before });
    expect((await get('/hello')).status).to.equal(200);
    expect((await operator.call('hello.greet')).ok, 'the open connection sees the new method').to.equal(true);

    const inFlight = get('/hello/slow?ms=1500', {});
    await sleep(300);
    await load();
    const removed = await operator.call('reload');
    expect(removed.ok).to.equal(true);
    expect(removed.payload.ok).to.equal(true);
    expect((await get('/hello')).status, 'gone for new requests').to.equal(404);
    const finished = await inFlight;
    expect(finished.status, 'the request in flight finished on the old table').to.equal(200);
    expect(JSON.parse(finished.body)).to.deep.equal({ slow: true });
    const gone = await operator.call('hello.greet');
    expect(gone.error.code).to.equal('NOT_FOUND');
    expect((await operator.call('health')).ok, 'the connection stayed open').to.equal(true);
    expect(operator.closeCode).to.equal(undefined);
    expect(pid()).to.equal(before);
    operator.close();
  });

  it('a plugin that fails to load leaves the previous table in place and says so in status, plugins list and the log', async () => {
    await load(HELLO);
    expect((await home.run(['reload'])).code).to.equal(0);
    await load(HELLO, join(PLUGIN_FIXTURES, 'broken'));
    const failed = await home.run(['reload']);
    expect(failed.code).to.equal(1);
    expect(failed.stderr).to.match(/the broken plugin refuses to start/);
    expect(failed.stderr).to.match(/previous plugin table stays/);
    expect((await get('/hello')).status, 'the previous table still serves').to.equal(200);
    const tools = await invoke({ tool: 'broken.tool' });
    expect(tools.status, 'nothing of the failed plugin is registered').to.equal(404);
    const status = await home.run(['status', '--json']);
    expect(JSON.parse(status.stdout).plugins.errors).to.deep.equal([{ plugin: 'broken', error: 'the broken plugin refuses to start' }]);
    expect((await home.run(['status'])).stderr).to.match(/plugin broken failed to load/);
    const listed = JSON.parse((await home.run(['plugins', 'list', '--json'])).stdout);
    expect(listed.plugins.find((p: any) => p.name === 'broken')).to.include({ status: 'error' });
    expect(listed.lastReload.ok).to.equal(false);

    await load(HELLO, join(PLUGIN_FIXTURES, 'clash'));
    const clash = await home.run(['reload', '--json']);
    expect(clash.code).to.equal(1);
    expect(JSON.parse(clash.stdout).plugins.errors[0].error).to.match(/tool hello\.echo of plugin clash conflicts with the tool of plugin hello-plugin/);

    await load(join(PLUGIN_FIXTURES, 'nowhere'));
    const missing = await home.run(['reload', '--json']);
    expect(missing.code).to.equal(1);
    expect(JSON.parse(missing.stdout).plugins.errors[0].error).to.match(/no plugin at/);
    expect((await get('/hello')).status).to.equal(200);
    expect((await home.run(['logs', '-n', '200', '--raw'])).stdout).to.match(/plugin failed to load/);
  });

  it('a plugin channel runs beside the built-in ones, with the same policy and sessions', async () => {
    await load(HELLO);
    expect((await home.run(['config', 'set', 'channels.loopback', JSON.stringify({ enabled: true, allowFrom: ['Bob'] })])).code).to.equal(0);
    expect((await home.run(['restart'])).code).to.equal(0);
    const status = JSON.parse((await home.run(['channels', 'status', '--json'])).stdout).channels;
    expect(status.find((c: any) => c.channel === 'loopback')).to.include({ account: 'default', state: 'connected' });
    const listed = JSON.parse((await home.run(['channels', 'list', '--json'])).stdout).channels;
    expect(listed.find((c: any) => c.channel === 'loopback')).to.include({ label: 'loopback (hello plugin)', installed: true, running: true });
    expect((await home.run(['message', 'send', '--channel', 'loopback', '--to', 'Bob', 'hi'])).code).to.equal(0);
    const shown = await waitFor(async () => {
      const result = JSON.parse((await home.run(['sessions', 'show', 'loopback:default:dm:bob', '--json'])).stdout);
      return result.messages.length === 2 ? result : undefined;
    }, 10_000, 'the answer');
    expect(shown.messages.map((m: any) => [m.direction, m.text])).to.deep.equal([['out', 'hi'], ['in', 'you said: hi']]);
    expect((await home.run(['message', 'send', '--channel', 'loopback', '--to', 'Eve', 'hi'])).code).to.equal(0);
    await sleep(300);
    const eve = JSON.parse((await home.run(['sessions', 'show', 'loopback:default:dm:eve', '--json'])).stdout);
    expect(eve.messages.map((m: any) => m.direction), 'a stranger\'s answer goes to pairing, not the session').to.deep.equal(['out']);
    expect(JSON.parse((await home.run(['pair', 'list', 'loopback', '--json'])).stdout).requests).to.have.length(1);
  });

  it('loads a plugin installed as a package in the profile folder, by its name', async () => {
    const installed = join(home.profileDir(), 'node_modules', '@acme', 'gateway-hello');
    mkdirSync(installed, { recursive: true });
    cpSync(HELLO, installed, { recursive: true });
    writeFileSync(join(installed, 'package.json'), JSON.stringify({ name: '@acme/gateway-hello', type: 'module', exports: { '.': { import: './index.js' } } }));
    await load('@acme/gateway-hello');
    expect((await home.run(['reload'])).code).to.equal(0);
    expect((await get('/hello')).status).to.equal(200);
    const listed = JSON.parse((await home.run(['plugins', 'list', '--json'])).stdout);
    expect(listed.plugins.find((p: any) => p.source === '@acme/gateway-hello')).to.include({ name: '@acme/gateway-hello', status: 'loaded' });
    await load('not-installed-anywhere');
    const missing = await home.run(['reload', '--json']);
    expect(missing.code).to.equal(1);
    expect(JSON.parse(missing.stdout).plugins.errors[0].error).to.match(/package not-installed-anywhere is not installed/);
  });

  it('a damaged config file keeps the previous configuration on reload, and says so', async () => {
    await load(HELLO);
    expect((await home.run(['reload'])).code).to.equal(0);
    writeFileSync(home.file('config.json'), '{"plugins": {"load": [');
    const reload = await home.run(['reload']);
    expect(reload.code, 'the daemon names the damaged file, and the CLI exits as for any invalid configuration').to.equal(78);
    expect(reload.stderr).to.include('config.json is not valid JSON');
    process.kill(pid(), 'SIGHUP');
    await waitFor(async () => /reload kept the previous configuration/.test((await home.run(['logs', '-n', '50', '--raw'])).stdout), 10_000, 'the daemon to log the refusal');
    expect((await get('/hello')).status, 'the plugins of the previous configuration still serve').to.equal(200);
  });

  it('SIGHUP reloads too, keeping the pid', async () => {
    const before = pid();
    await load(HELLO);
    process.kill(before, 'SIGHUP');
    await waitFor(async () => (await get('/hello')).status === 200, 10_000, 'the SIGHUP reload');
    expect(pid()).to.equal(before);
    expect((await home.run(['status'])).code).to.equal(0);
  });

  it('POST /tools/invoke: scopes, schemas, policy, dry runs and idempotency keys', async () => {
    await load(HELLO);
    expect((await home.run(['reload'])).code).to.equal(0);
    const created = async (scope: string) => JSON.parse((await home.run(['tokens', 'create', '--name', scope, '--scope', scope, '--json'])).stdout).token as string;
    const reader = await created('jobs:read');
    const invoker = await created('tools:invoke');

    expect(await invoke({ tool: 'hello.echo', args: { text: 'hi' } }, null)).to.deep.include({ status: 401 });
    const forbidden = await invoke({ tool: 'hello.echo', args: { text: 'hi' } }, reader);
    expect(forbidden.status).to.equal(403);
    expect(forbidden.body).to.include({ ok: false, error: 'forbidden', statusCode: 403 });
    expect(forbidden.body.message).to.contain('tools:invoke');
    const ok = await invoke({ tool: 'hello.echo', args: { text: 'hi' } }, invoker);
    expect(ok).to.deep.equal({ status: 200, body: { ok: true, result: { echoed: 'hi', caller: ok.body.result.caller } } });

    const badArgs = await invoke({ tool: 'hello.echo', args: { text: 42 } });
    expect(badArgs.status).to.equal(400);
    expect(badArgs.body).to.include({ ok: false, error: 'bad_request' });
    expect(badArgs.body.message).to.match(/text must be string/);
    expect((await invoke({ tool: 'hello.echo', args: { text: 'hi' }, extra: 1 })).status).to.equal(400);
    expect((await invoke('{"tool":')).body).to.include({ ok: false, statusCode: 400 });
    expect((await invoke({ tool: 'no.such.tool' })).body).to.include({ ok: false, statusCode: 404 });

    expect((await invoke({ tool: 'hello.wipe' })).status, 'dangerous tools are denied over HTTP').to.equal(404);
    expect((await invoke({ tool: 'gateway.reload' })).status).to.equal(404);
    expect((await home.run(['config', 'set', 'gateway.tools.allow', '["hello.wipe"]'])).code).to.equal(0);
    expect((await invoke({ tool: 'hello.wipe' })).body).to.deep.equal({ ok: true, result: { wiped: false } });
    expect((await home.run(['config', 'set', 'gateway.tools.deny', '["hello.*"]'])).code).to.equal(0);
    expect((await invoke({ tool: 'hello.echo', args: { text: 'hi' } })).status, 'deny wins').to.equal(404);
    expect((await home.run(['config', 'unset', 'gateway.tools.deny'])).code).to.equal(0);

    const dry = await invoke({ tool: 'jobs.enqueue', args: { kind: 'hello.job', payload: { n: 1 } }, dryRun: true });
    expect(dry.body).to.deep.equal({ ok: true, result: { tool: 'jobs.enqueue', valid: true }, dryRun: true });
    const first = await invoke({ tool: 'jobs.enqueue', args: { kind: 'hello.job', payload: { n: 1 } } }, token, { 'idempotency-key': 'enqueue-1' });
    expect(first.status).to.equal(200);
    const again = await invoke({ tool: 'jobs.enqueue', args: { kind: 'hello.job', payload: { n: 1 } } }, token, { 'idempotency-key': 'enqueue-1' });
    expect(again.body.replayed).to.equal(true);
    expect(again.body.result.id, 'a retry does not queue a second job').to.equal(first.body.result.id);
    expect((await invoke({ tool: 'jobs.enqueue', args: { kind: 'hello.job', payload: { n: 2 } }, idempotencyKey: 'enqueue-1' })).status).to.equal(409);
    const jobs = JSON.parse((await home.run(['jobs', 'list', '--kind', 'hello.job', '--json'])).stdout).jobs;
    expect(jobs).to.have.length(1);
    await waitFor(async () => (await invoke({ tool: 'jobs.get', args: { id: first.body.result.id } })).body.result.status === 'succeeded', 10_000, 'the plugin job to run');
    expect((await invoke({ tool: 'jobs.enqueue', args: { kind: 'no.handler' } })).status).to.equal(400);

    expect((await home.run(['config', 'set', 'gateway.http.maxBodyBytes', '1024'])).code).to.equal(0);
    const big = await invoke({ tool: 'hello.echo', args: { text: 'x'.repeat(4000) } });
    expect(big.status).to.equal(413);
    expect(big.body.ok).to.equal(false);

    const cli = await home.run(['tools', 'invoke', 'hello.echo', '--args', '{"text":"from the shell"}', '--json']);
    expect(cli.code, cli.stderr).to.equal(0);
    expect(JSON.parse(cli.stdout).result.echoed).to.equal('from the shell');
    expect((await home.run(['tools', 'invoke', 'hello.echo', '--args', '{"text":1}'])).code).to.equal(2);
    expect((await home.run(['tools', 'invoke', 'nope'])).code).to.equal(5);
    expect((await home.run(['tools', 'invoke', 'hello.echo', '--args', 'not json'])).code).to.equal(2);
    const catalog = JSON.parse((await home.run(['tools', 'list', '--json'])).stdout).tools;
    expect(catalog.map((t: any) => t.name)).to.include.members(['jobs.enqueue', 'jobs.get', 'sessions.list', 'message.send', 'gateway.status', 'gateway.reload', 'hello.echo']);
    expect(catalog.find((t: any) => t.name === 'gateway.reload')).to.include({ dangerous: true, overHttp: false });

    const reader2 = new RawSocket(`ws://127.0.0.1:${port}/`);
    await reader2.connect({ token }, ['operator.read', 'operator.write']);
    const status = await reader2.call('tools.invoke', { tool: 'gateway.status' });
    expect(status.payload.result.profile).to.equal('default');
    const denied = await reader2.call('tools.invoke', { tool: 'gateway.reload' });
    expect(denied.error.code, 'dangerous tools over the WebSocket need operator.admin').to.equal('FORBIDDEN');
    reader2.close();
  });

  it('serves the canvas and a2ui folders safely: MIME types, 404s, no way out of the folder', async () => {
    const canvas = home.file('canvas');
    mkdirSync(join(canvas, 'app'), { recursive: true });
    mkdirSync(join(canvas, 'empty'), { recursive: true });
    writeFileSync(join(canvas, 'index.html'), '<h1>canvas</h1>');
    writeFileSync(join(canvas, 'app', 'main.js'), 'console.log(1)');
    writeFileSync(join(canvas, 'app', 'style.css'), 'body{}');
    writeFileSync(join(canvas, 'app', 'data.bin'), 'raw');
    writeFileSync(home.file('outside.txt'), 'secret');
    symlinkSync(home.file('outside.txt'), join(canvas, 'link.txt'));
    const a2ui = join(home.profileDir(), 'ui-elsewhere');
    mkdirSync(a2ui);
    writeFileSync(join(a2ui, 'index.html'), '<p>a2ui</p>');
    expect((await home.run(['config', 'set', 'plugins.a2ui.root', a2ui])).code).to.equal(0);
    expect((await home.run(['reload'])).code).to.equal(0);

    const index = await get('/__gateway__/canvas/');
    expect(index.status).to.equal(200);
    expect(index.headers['content-type']).to.equal('text/html; charset=utf-8');
    expect(index.body).to.equal('<h1>canvas</h1>');
    expect((await get('/__gateway__/canvas/app/main.js')).headers['content-type']).to.equal('text/javascript; charset=utf-8');
    expect((await get('/__gateway__/canvas/app/style.css')).headers['content-type']).to.equal('text/css; charset=utf-8');
    expect((await get('/__gateway__/canvas/app/data.bin')).headers['content-type']).to.equal('application/octet-stream');
    expect((await get('/__gateway__/canvas/app/main.js')).headers['x-content-type-options']).to.equal('nosniff');
    expect((await get('/__gateway__/a2ui/')).body).to.equal('<p>a2ui</p>');
    expect((await get('/__gateway__/canvas/', {})).status, 'behind gateway auth').to.equal(401);
    expect((await raw(port, 'HEAD', '/__gateway__/canvas/app/main.js', auth())).status).to.equal(200);

    expect((await get('/__gateway__/canvas/missing.html')).status).to.equal(404);
    expect((await get('/__gateway__/canvas/empty/')).status, 'a folder without index.html').to.equal(404);
    const attempts = [
      '/__gateway__/canvas/../outside.txt',
      '/__gateway__/canvas/app/../../outside.txt',
      '/__gateway__/canvas/%2e%2e/outside.txt',
      '/__gateway__/canvas/%2E%2E/outside.txt',
      '/__gateway__/canvas/..%2foutside.txt',
      '/__gateway__/canvas/..%2Foutside.txt',
      '/__gateway__/canvas/..%5coutside.txt',
      '/__gateway__/canvas/%252e%252e/outside.txt',
      '/__gateway__/canvas/%c0%ae%c0%ae/outside.txt',
      '/__gateway__/canvas/index.html%00.png',
      '/__gateway__/canvas/link.txt',
      '/__gateway__/canvas//etc/passwd',
      '/__gateway__/canvas/%2fetc%2fpasswd',
      '/__gateway__/a2ui/../canvas/index.html',
    ];
    for (const path of attempts) {
      const answer = await get(path);
      expect(answer.status, path).to.be.oneOf([400, 404]);
      expect(answer.body, path).to.not.contain('secret');
      expect(answer.body, path).to.not.contain('root:');
    }
  });
});
