import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { BIN, freePort, Home, sleep, waitFor, type CliResult } from '../support/cli.ts';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { followLogin, startExampleServer, StrictMcp, type ExampleServer, type ToolSpec } from '../support/mcp.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

describe('MCP servers as tool sources, with their OAuth login (e2e)', function () {
  this.timeout(120_000);
  let example: ExampleServer;
  let strict: StrictMcp;
  let short: StrictMcp;
  let calls: StrictMcp;
  let callsJson: StrictMcp;
  let script: ScriptedUpstream;
  let home: Home;
  let base: string;
  /** Everything the CLI and the API printed, checked for tokens at the end. */
  const printed: string[] = [];

  const run = async (args: string[], options: Parameters<Home['run']>[1] = {}): Promise<CliResult> => {
    const result = await home.run(args, { timeoutMs: 60_000, ...options });
    printed.push(result.stdout, result.stderr);
    return result;
  };
  const json = async (args: string[]) => {
    const result = await run([...args, '--json']);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    return JSON.parse(result.stdout);
  };
  const api = async (path: string, init: RequestInit & { token?: string | null } = {}) => {
    const headers = new Headers(init.headers);
    if (init.token !== null) headers.set('authorization', `Bearer ${init.token ?? home.token()}`);
    const res = await fetch(`${base}${path}`, { ...init, headers, redirect: 'manual' });
    const text = await res.text();
    printed.push(text);
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    return { status: res.status, headers: res.headers, body };
  };
  const invoke = (tool: string, args: Record<string, unknown>) =>
    api('/tools/invoke', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tool, args }) });
  const server = async (name: string) => (await json(['mcp', 'list'])).servers.find((s: any) => s.name === name);
  /** Starts a login over the API and follows the authorization server back to the gateway's callback. */
  const login = async (name: string) => {
    const started = await api(`/oauth/mcp?server=${name}`, { headers: { accept: 'application/json' } });
    expect(started.status, JSON.stringify(started.body)).to.equal(200);
    expect(started.body.authorizationUrl, JSON.stringify(started.body)).to.be.a('string');
    return followLogin(started.body.authorizationUrl, `${base}/oauth/mcp/callback`);
  };
  const finish = (params: Record<string, string>) =>
    api('/oauth/mcp/callback', { method: 'POST', token: null, headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(params) });

  before(async () => {
    [example, strict, short, script, calls, callsJson] = await Promise.all([
      startExampleServer(), new StrictMcp().start(), new StrictMcp({ accessTokenTtl: 6 }).start(), new ScriptedUpstream().start(),
      new StrictMcp({ open: true, resumable: true }).start(), new StrictMcp({ open: true, json: true }).start(),
    ]);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    await run(['config', 'set', 'models.providers', JSON.stringify({ script: { kind: 'openai-compatible', baseUrl: script.url, models: ['m'], retries: { max: 0 } } })]);
    await run(['config', 'set', 'agents', JSON.stringify({ helper: { model: 'script/m', tools: ['mcp.demo.greet'] } })]);
    expect((await run(['start'])).code).to.equal(0);
  });
  after(async () => {
    home?.cleanup();
    example?.stop();
    await Promise.all([strict?.stop(), short?.stop(), script?.stop(), calls?.stop(), callsJson?.stop()]);
  });

  it('logs in to the SDK\'s example server through GET /oauth/mcp and the callback, offers its tools to HTTP and agents, and keeps the login across a restart', async () => {
    const added = await json(['mcp', 'add', 'demo', example.url]);
    expect(added.server).to.include({ name: 'demo', state: 'needs-login' });
    expect((await server('demo')).reason).to.match(/gateway mcp login demo/);

    // A browser with the gateway's credential is sent to the authorization server, with PKCE S256, the resource and a state.
    const start = await api('/oauth/mcp?server=demo');
    expect(start.status).to.equal(302);
    const authorize = new URL(start.headers.get('location')!);
    expect(authorize.origin).to.equal(new URL(example.authUrl).origin);
    expect(authorize.searchParams.get('code_challenge_method')).to.equal('S256');
    expect(authorize.searchParams.get('resource')).to.equal(example.url);
    expect(authorize.searchParams.get('redirect_uri')).to.equal(`${base}/oauth/mcp/callback`);
    expect(authorize.searchParams.get('state')).to.have.length.above(30);

    // The authorization server sends the browser back; the page there posts {code, state}.
    const callback = await followLogin(authorize.toString(), `${base}/oauth/mcp/callback`);
    const page = await fetch(callback);
    const html = await page.text();
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-security-policy')).to.match(/default-src 'none'; script-src 'self'/);
    expect(page.headers.get('x-frame-options')).to.equal('DENY');
    expect(html).to.include('<form id="finish" method="post" action="/oauth/mcp/callback">').and.include('src="/oauth/mcp/callback.js"').and.not.match(/<script>/);
    expect((await fetch(`${base}/oauth/mcp/callback.js`)).headers.get('content-type')).to.match(/javascript/);
    const done = await finish(Object.fromEntries(callback.searchParams));
    expect(done.status, JSON.stringify(done.body)).to.equal(200);
    expect(done.body.connected).to.equal(true);
    expect(done.body.server).to.include({ name: 'demo', state: 'connected', auth: 'oauth' });

    const tools = await json(['mcp', 'tools', 'demo']);
    const greet = tools.tools.find((t: any) => t.name === 'mcp.demo.greet');
    expect(greet).to.include({ tool: 'greet', overHttp: false });
    expect(greet.inputSchema.properties.name.type).to.equal('string');
    const catalog = await json(['tools', 'list']);
    expect(catalog.tools.find((t: any) => t.name === 'mcp.demo.greet')).to.include({ plugin: 'mcp', overHttp: false });

    // Not callable over HTTP (or by agents) until the policy allows it.
    const refused = await invoke('mcp.demo.greet', { name: 'Ann' });
    expect(refused.status).to.equal(404);
    expect(refused.body.message).to.match(/runs on MCP server demo.*gateway\.tools\.allow/);
    expect((await run(['config', 'set', 'gateway.tools.allow', '["mcp.demo.*"]'])).code).to.equal(0);
    const greeted = await invoke('mcp.demo.greet', { name: 'Ann' });
    expect(greeted.status).to.equal(200);
    expect(greeted.body.result.content).to.deep.equal([{ type: 'text', text: 'Hello, Ann!' }]);
    const badArgs = await invoke('mcp.demo.greet', { nom: 'Ann' });
    expect(badArgs.status).to.equal(400);
    expect(badArgs.body.message).to.match(/required property 'name'/);

    // An agent calls it in a run.
    script.enqueue(openaiToolCalls([{ name: 'mcp_demo_greet', args: { name: 'Cy' } }]), openaiText('Greeted.'));
    const chat = await json(['chat', '--agent', 'helper', 'greet Cy']);
    expect(chat.toolCalls).to.have.length(1);
    expect(chat.toolCalls[0]).to.include({ name: 'mcp.demo.greet' });
    expect(JSON.stringify(chat.toolCalls[0].result)).to.include('Hello, Cy!');
    expect(chat.text).to.equal('Greeted.');

    // After a restart the stored login serves at once: no new login.
    expect((await run(['restart'])).code).to.equal(0);
    const again = await invoke('mcp.demo.greet', { name: 'Bo' });
    expect(again.status, JSON.stringify(again.body)).to.equal(200);
    expect(again.body.result.content[0].text).to.equal('Hello, Bo!');
    expect((await server('demo')).state).to.equal('connected');
  });

  it('gateway mcp login prints the URL and waits; a browser without JavaScript finishes with the form\'s button', async () => {
    expect((await json(['mcp', 'add', 'strict', strict.url])).server.state).to.equal('needs-login');
    const child = spawn(process.execPath, [BIN, 'mcp', 'login', 'strict', '--no-browser'], { env: { ...process.env, ...home.env, CI: 'true' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk) => { out += chunk; });
    child.stderr.on('data', (chunk) => { out += chunk; });
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const url = await waitFor(() => /(http:\/\/127\.0\.0\.1:\d+\/auth\?\S+)/.exec(out)?.[1], 30_000, 'the authorization URL');
    const callback = await followLogin(url, `${base}/oauth/mcp/callback`);
    // The form posts urlencoded and reads the page it gets back.
    const res = await fetch(`${base}/oauth/mcp/callback`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' }, body: callback.searchParams.toString() });
    const html = await res.text();
    expect(res.status).to.equal(200);
    expect(html).to.match(/MCP server strict is connected with 1 tool\b/);
    expect(await exited).to.equal(0);
    printed.push(out);
    expect(out).to.match(/Logged in: MCP server strict is connected with 1 tool\./);
    // The gateway registered itself with the authorization server (RFC 7591) and kept the client in the secret store.
    expect(home.secrets()).to.have.property('mcp.servers.strict.client');
    expect(strict.accepted).to.be.above(0);

    await run(['config', 'set', 'gateway.tools.allow', '["mcp.*"]']);
    const echoed = await invoke('mcp.strict.echo', { text: 'over OAuth' });
    expect(echoed.status, JSON.stringify(echoed.body)).to.equal(200);
    expect(echoed.body.result.content[0].text).to.equal('over OAuth');
  });

  it('over SSH, gateway mcp login prints the ssh -L line that lets a browser elsewhere reach the callback', async () => {
    const result = await run(['mcp', 'login', 'strict', '--no-wait', '--json'], { env: { SSH_CONNECTION: '10.0.0.5 52000 10.0.0.9 22', USER: 'ops' } });
    expect(result.code, result.stderr).to.equal(0);
    const port = new URL(base).port;
    expect(result.stderr).to.include(`ssh -N -L ${port}:127.0.0.1:${port} ops@10.0.0.9`);
    expect(JSON.parse(result.stdout).authorizationUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+\/auth\?/);
  });

  it('refuses a replayed state, a code with another login\'s verifier, a wrong iss, and passes on the authorization server\'s error', async () => {
    // Each refusal takes its own login; none stores a token.
    const replayed = await login('strict');
    expect((await finish(Object.fromEntries(replayed.searchParams))).status).to.equal(200);
    const replay = await finish(Object.fromEntries(replayed.searchParams));
    expect(replay.status).to.equal(400);
    expect(replay.body).to.include({ error: 'bad_request', statusCode: 400 });
    expect(replay.body.message).to.match(/unknown, already finished or expired/);

    // PKCE: flow A's code with flow B's state (so B's verifier) is refused by the authorization server.
    const a = await login('strict');
    const b = await login('strict');
    const swapped = await finish({ code: a.searchParams.get('code')!, state: b.searchParams.get('state')!, iss: b.searchParams.get('iss')! });
    expect(swapped.status).to.equal(400);
    expect(swapped.body.message).to.match(/invalid_grant/);

    // RFC 9207: an iss that is not the authorization server's.
    expect(a.searchParams.get('iss')).to.equal(strict.issuer);
    const c = await login('strict');
    const wrongIss = await finish({ code: c.searchParams.get('code')!, state: c.searchParams.get('state')!, iss: 'https://attacker.example' });
    expect(wrongIss.status).to.equal(400);
    expect(wrongIss.body.message).to.match(/issuer mismatch/);
    expect(JSON.stringify(wrongIss.body)).to.not.include('attacker.example');

    // The authorization server's own error, with its description.
    strict.denyNext = { error: 'access_denied', error_description: 'alice said no' };
    const denied = await login('strict');
    expect(denied.searchParams.get('error')).to.equal('access_denied');
    const refused = await finish(Object.fromEntries(denied.searchParams));
    expect(refused.status).to.equal(400);
    expect(refused.body.message).to.match(/access_denied: alice said no/);

    // Still connected with the first login's tokens.
    expect((await invoke('mcp.strict.echo', { text: 'still' })).status).to.equal(200);
  });

  it('refreshes the tokens before they expire, rotating the refresh token; a revoked one turns the server to needs-login everywhere', async () => {
    await json(['mcp', 'add', 'short', short.url]);
    const callback = await login('short');
    expect((await finish(Object.fromEntries(callback.searchParams))).status).to.equal(200);
    const first = JSON.parse(home.secrets()['mcp.servers.short.oauth']!);
    expect(first.refresh_token).to.be.a('string');
    const received = (await server('short')).tokenReceivedAt;
    // Access tokens last 6 s: the gateway refreshes at two thirds of their life.
    await waitFor(async () => (await server('short')).tokenReceivedAt > received, 20_000, 'a refresh');
    expect(short.grants).to.include('refresh_token');
    const second = JSON.parse(home.secrets()['mcp.servers.short.oauth']!);
    expect(second.refresh_token).to.not.equal(first.refresh_token);
    expect(second.access_token).to.not.equal(first.access_token);
    expect((await invoke('mcp.short.echo', { text: 'fresh' })).body.result.content[0].text).to.equal('fresh');

    await short.revokeRefreshTokens();
    const lost = await waitFor(async () => {
      const s = await server('short');
      return s.state === 'needs-login' ? s : undefined;
    }, 20_000, 'needs-login');
    expect(lost.reason).to.match(/refused to refresh.*gateway mcp login short/);
    const unavailable = await invoke('mcp.short.echo', { text: 'x' });
    expect(unavailable.status).to.equal(503);
    expect(unavailable.body.message).to.match(/needs-login/);
    const audit = await json(['audit']);
    expect(audit.events.map((e: any) => `${e.kind}:${e.subject}`)).to.include('mcp.login.lost:short');
    expect(readFileSync(home.file('gateway.log'), 'utf8')).to.match(/MCP token refresh refused/);
  });

  it('follows tools/list_changed, and a server that goes away answers unavailable until it is back', async () => {
    await strict.addTool({
      name: 'shout', description: 'Upper-cases its text', inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      run: (args) => ({ content: [{ type: 'text', text: String(args.text).toUpperCase() }] }),
    });
    await waitFor(async () => (await json(['mcp', 'tools', 'strict'])).tools.some((t: any) => t.name === 'mcp.strict.shout'), 10_000, 'the new tool');
    expect((await invoke('mcp.strict.shout', { text: 'hey' })).body.result.content[0].text).to.equal('HEY');

    await strict.stopMcp();
    const gone = await invoke('mcp.strict.echo', { text: 'anyone?' });
    expect(gone.status).to.equal(503);
    expect(gone.body.error).to.equal('unavailable');
    expect((await server('strict')).state).to.equal('error');
    await strict.startMcp();
    await waitFor(async () => (await server('strict')).state === 'connected', 30_000, 'the reconnection');
    expect((await invoke('mcp.strict.echo', { text: 'back' })).body.result.content[0].text).to.equal('back');
  });

  it('a call answers from an event stream or a JSON body, takes up a stream the server closed, passes on what the server says on the way, and checks the result as the MCP client would', async () => {
    const text = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] };
    const tools: ToolSpec[] = [
      {
        // Tells the client, inside the call's own stream, that the list changed.
        name: 'announce', description: 'Adds a tool and says so while it runs', inputSchema: text,
        run: async (args, extra) => {
          calls.tools.push({ name: 'late', description: 'Came later', inputSchema: text, run: () => ({ content: [{ type: 'text', text: 'late' }] }) });
          await extra.sendNotification({ method: 'notifications/tools/list_changed' });
          return { content: [{ type: 'text', text: String(args.text) }] };
        },
      },
      {
        // Closes the call's stream before the answer: the client takes it up again from the last event id.
        name: 'poll', description: 'Answers after closing its stream', inputSchema: text,
        run: async (args, extra) => {
          extra.closeSSEStream?.();
          await sleep(150);
          return { content: [{ type: 'text', text: `polled ${String(args.text)}` }] };
        },
      },
      {
        name: 'typed', description: 'Answers structured content', inputSchema: { type: 'object', properties: { good: { type: 'boolean' } }, required: ['good'] },
        outputSchema: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
        run: (args) => ({ content: [{ type: 'text', text: 'n' }], structuredContent: args.good ? { n: 1 } : { n: 'one' } }),
      },
      {
        name: 'refuse', description: 'Refuses its arguments', inputSchema: text,
        run: () => {
          throw new McpError(ErrorCode.InvalidParams, 'the text is not one this tool takes');
        },
      },
      { name: 'crash', description: 'Fails', inputSchema: text, run: () => { throw new Error('the tool broke'); } },
      { name: 'declines', description: 'Says the work could not be done', inputSchema: text, run: () => ({ content: [{ type: 'text', text: 'no such city' }], isError: true }) },
      { name: 'slow', description: 'Takes its time', inputSchema: text, run: async () => { await sleep(2500); return { content: [] }; } },
    ];
    calls.tools.push(...tools);
    callsJson.tools.push(...tools.filter((tool) => ['typed', 'refuse'].includes(tool.name)));
    await json(['mcp', 'add', 'calls', calls.url]);
    await json(['mcp', 'add', 'callsjson', callsJson.url]);
    await waitFor(async () => (await server('calls'))?.state === 'connected' && (await server('callsjson'))?.state === 'connected', 20_000, 'both servers');

    for (const name of ['calls', 'callsjson']) {
      const echoed = await invoke(`mcp.${name}.echo`, { text: `via ${name}` });
      expect(echoed.status, JSON.stringify(echoed.body)).to.equal(200);
      expect(echoed.body.result.content).to.deep.equal([{ type: 'text', text: `via ${name}` }]);
      const typed = await invoke(`mcp.${name}.typed`, { good: true });
      expect(typed.status, JSON.stringify(typed.body)).to.equal(200);
      expect(typed.body.result.structuredContent).to.deep.equal({ n: 1 });
      const mistyped = await invoke(`mcp.${name}.typed`, { good: false });
      expect(mistyped.status).to.equal(502);
      expect(mistyped.body.message, mistyped.body.message).to.match(/failed the call: the structured content does not match the tool's output schema: n must be number/);
      const refused = await invoke(`mcp.${name}.refuse`, { text: 'x' });
      expect(refused.status).to.equal(400);
      expect(refused.body.message).to.match(/refused the arguments: .*not one this tool takes/);
    }
    // Calls at once each get their own answer.
    const together = await Promise.all(Array.from({ length: 24 }, (_, n) => invoke(`mcp.${n % 2 ? 'calls' : 'callsjson'}.echo`, { text: `call ${n}` })));
    expect(together.map((answer) => answer.body.result?.content[0].text)).to.deep.equal(Array.from({ length: 24 }, (_, n) => `call ${n}`));
    // A server that answers a call with an HTTP error is taken for gone: 503 with its status (its text cut short), then back.
    calls.failNext = { status: 500, text: `overloaded ${'x'.repeat(10_000)}` };
    const failed = await invoke('mcp.calls.echo', { text: 'x' });
    expect(failed.status).to.equal(503);
    expect(failed.body.message).to.match(/unreachable \(the server answered HTTP 500: overloaded x+/);
    expect(failed.body.message.length).to.be.below(1000);
    await waitFor(async () => (await server('calls')).state === 'connected', 20_000, 'the reconnection');
    const crashed = await invoke('mcp.calls.crash', { text: 'x' });
    expect(crashed.status).to.equal(502);
    expect(crashed.body.message).to.match(/failed the call: .*the tool broke/);
    // A tool that ran and says its work could not be done (isError) is an outcome, not a failure of the call: the caller reads it.
    const declined = await invoke('mcp.calls.declines', { text: 'Atlantis' });
    expect(declined.status, JSON.stringify(declined.body)).to.equal(200);
    expect(declined.body).to.deep.equal({ ok: true, result: { content: [{ type: 'text', text: 'no such city' }], isError: true } });

    const announced = await invoke('mcp.calls.announce', { text: 'news' });
    expect(announced.body.result.content[0].text).to.equal('news');
    await waitFor(async () => (await json(['mcp', 'tools', 'calls'])).tools.some((t: any) => t.name === 'mcp.calls.late'), 10_000, 'the tool announced in the call');

    const polled = await invoke('mcp.calls.poll', { text: 'later' });
    expect(polled.status, JSON.stringify(polled.body)).to.equal(200);
    expect(polled.body.result.content[0].text).to.equal('polled later');
    expect(calls.resumed.length).to.be.above(0);

    expect((await run(['config', 'set', 'mcp.servers.calls.timeoutMs', '1000'])).code).to.equal(0);
    const slow = await invoke('mcp.calls.slow', { text: 'x' });
    expect(slow.status).to.equal(502);
    expect(slow.body.message).to.match(/did not answer within 1000 ms/);
    await run(['config', 'set', 'mcp.servers.calls.timeoutMs', '30000']);
    expect((await invoke('mcp.calls.echo', { text: 'after' })).body.result.content[0].text).to.equal('after');
    expect((await server('calls')).state).to.equal('connected');

    // An access token the server stopped taking (refused twice: the call's own POST, then the MCP client's): the call
    // renews the login with the refresh token and goes through.
    const refreshes = strict.grants.filter((grant) => grant === 'refresh_token').length;
    strict.refuseNext = 2;
    const renewed = await invoke('mcp.strict.echo', { text: 'renewed' });
    expect(renewed.status, JSON.stringify(renewed.body)).to.equal(200);
    expect(renewed.body.result.content[0].text).to.equal('renewed');
    expect(strict.grants.filter((grant) => grant === 'refresh_token').length).to.equal(refreshes + 1);

    for (const name of ['calls', 'callsjson']) await json(['mcp', 'remove', name]);
  });

  it('refuses bad input with the right status and exit code', async () => {
    expect((await run(['mcp', 'add', 'Bad Name', strict.url])).code).to.equal(2);
    const clear = await run(['mcp', 'add', 'remote', 'http://mcp.example.com/mcp']);
    expect(clear.code).to.equal(2);
    expect(clear.stderr).to.match(/use https/);
    expect((await run(['mcp', 'add', 'hdr', strict.url, '--header', 'X-Key:'])).code).to.equal(2);
    expect((await run(['mcp', 'add', 'creds', 'https://user:pw@mcp.example.com/mcp'])).code).to.equal(2);
    expect((await run(['mcp', 'add', 'strict', strict.url])).code).to.equal(1);
    expect((await run(['mcp', 'remove', 'nope'])).code).to.equal(5);
    expect((await run(['mcp', 'login', 'nope'])).code).to.equal(5);
    expect((await run(['mcp', 'tools', 'nope'])).code).to.equal(5);

    // The daemon's configuration check says the same to config set.
    const viaConfig = await run(['config', 'set', 'mcp.servers.plain', JSON.stringify({ url: 'http://mcp.example.com/mcp' })]);
    expect(viaConfig.code).to.equal(2);
    expect(viaConfig.stderr).to.match(/mcp\.servers\.plain\.url: plain http is accepted only on this host/);

    expect((await api('/oauth/mcp?server=nope')).status).to.equal(404);
    expect((await api('/oauth/mcp')).status).to.equal(400);
    expect((await api('/oauth/mcp?server=strict', { token: null })).status).to.equal(401);
    expect((await api('/oauth/mcp?server=strict', { token: 'wrong' })).status).to.equal(401);
    // A product token may start a login when it holds admin, and only then.
    const admin = await json(['tokens', 'create', '--name', 'mcp-admin', '--scope', 'admin']);
    const reader = await json(['tokens', 'create', '--name', 'mcp-reader', '--scope', 'jobs:read']);
    const byAdmin = await api('/oauth/mcp?server=strict', { token: admin.token, headers: { accept: 'application/json' } });
    expect(byAdmin.status).to.equal(200);
    expect(byAdmin.body.authorizationUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+\/auth\?/);
    expect((await api('/oauth/mcp?server=strict', { token: reader.token })).status).to.equal(403);
    const wrongType = await api('/oauth/mcp/callback', { method: 'POST', token: null, headers: { 'content-type': 'text/plain' }, body: 'code=x' });
    expect(wrongType.status).to.equal(415);
    expect((await api('/oauth/mcp/callback', { method: 'POST', token: null, headers: { 'content-type': 'application/json' }, body: '{nope' })).status).to.equal(400);
    expect((await finish({ code: 'x' })).body.message).to.match(/no state/);
    expect((await finish({ code: 'x', state: 'made-up' })).status).to.equal(400);
    expect((await api('/oauth/mcp/callback', { method: 'DELETE', token: null })).status).to.equal(405);
    const big = await api('/oauth/mcp/callback', { method: 'POST', token: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: 'x'.repeat(20_000) }) });
    expect(big.status).to.equal(413);
  });

  it('a static header goes to the secret store, and remove takes the server, its tools and its secrets away', async () => {
    const added = await json(['mcp', 'add', 'keyed', strict.url, '--header', 'X-Api-Key: k3y-value-123']);
    expect(added.headers).to.deep.equal(['X-Api-Key']);
    expect(readFileSync(home.file('config.json'), 'utf8')).to.not.include('k3y-value-123');
    expect(home.secrets()['mcp.servers.keyed.header.X-Api-Key']).to.equal('k3y-value-123');
    // A value on stdin, kept out of the process list.
    const piped = await run(['mcp', 'add', 'piped', strict.url, '--header', 'Authorization', '--json'], { input: 'Bearer piped-secret-456\n' });
    expect(piped.code, piped.stderr).to.equal(0);
    expect(home.secrets()['mcp.servers.piped.header.Authorization']).to.equal('Bearer piped-secret-456');
    await json(['mcp', 'remove', 'piped']);
    const removed = await json(['mcp', 'remove', 'keyed']);
    expect(removed.secretsDeleted).to.include('mcp.servers.keyed.header.X-Api-Key');
    expect(home.secrets()).to.not.have.property('mcp.servers.keyed.header.X-Api-Key');
    await json(['mcp', 'remove', 'short']);
    expect(home.secrets()).to.not.have.property('mcp.servers.short.oauth');
    expect((await json(['tools', 'list'])).tools.some((t: any) => t.name.startsWith('mcp.short.'))).to.equal(false);
    expect((await invoke('mcp.short.echo', { text: 'x' })).status).to.equal(404);
    await sleep(100);
  });

  it('no token ever appears in config, logs, --json output or error messages', async () => {
    const secrets = home.secrets();
    const values = Object.entries(secrets).filter(([name]) => name.startsWith('mcp.servers.')).flatMap(([, value]) => {
      try {
        const parsed = JSON.parse(value);
        return [parsed.access_token, parsed.refresh_token, parsed.client_secret];
      } catch {
        return [value];
      }
    }).filter((v): v is string => typeof v === 'string' && v.length > 8);
    expect(values.length).to.be.above(0);
    const places = [readFileSync(home.file('config.json'), 'utf8'), readFileSync(home.file('gateway.log'), 'utf8'), ...printed];
    for (const value of values) for (const place of places) expect(place.includes(value), 'a token was shown').to.equal(false);
  });
});
