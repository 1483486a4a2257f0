import { expect } from 'chai';
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

const TOKEN = 'exec-gateway-token-for-tests';

describe('exec in a bubblewrap sandbox, with approvals (e2e)', function () {
  this.timeout(90_000);
  let home: Home;
  let base: string;
  let listener: Server;
  let listenerPort: number;
  let connections = 0;
  const set = (key: string, value: unknown) => home.set(key, value);
  const exec = async (command: string, extra: Record<string, unknown> = {}) => {
    const response = await fetch(`${base}/tools/invoke`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool: 'exec', args: { command, ...extra } }),
    });
    return { status: response.status, body: await response.json() as any };
  };
  const workspace = () => join(home.file('config.json'), '..', 'workspace');

  before(async () => {
    listenerPort = await freePort();
    listener = createServer((socket) => {
      connections++;
      socket.end('hello from the host\n');
    });
    await new Promise<void>((resolve) => listener.listen(listenerPort, '127.0.0.1', resolve));
  });
  after(() => listener.close());

  beforeEach(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN });
    await set('gateway.tools.allow', ['exec']);
    expect((await home.run(['start'])).code).to.equal(0);
    connections = 0;
  });
  afterEach(() => home.cleanup());

  it('is off until the operator turns it on, and says how', async () => {
    const refused = await exec('echo hi');
    expect(refused.status).to.equal(403);
    expect(refused.body.message).to.match(/exec is off: gateway config set tools\.exec\.approval ask/);
  });

  it('runs a command in the workspace, seeing the system but no secret, no home, no profile and no network', async () => {
    await set('tools.exec.approval', 'full');
    const ran = await exec('echo hello; pwd; echo made > made.txt; ls /');
    expect(ran.status, JSON.stringify(ran.body)).to.equal(200);
    expect(ran.body.result).to.include({ exitCode: 0, timedOut: false, truncated: false });
    expect(ran.body.result.stdout).to.match(/^hello\n\/workspace\n/);
    expect(readFileSync(join(workspace(), 'made.txt'), 'utf8')).to.equal('made\n');
    const listing = ran.body.result.stdout.split('\n');
    for (const absent of ['home', 'root', 'srv', 'opt', 'var']) expect(listing, absent).to.not.include(absent);

    const secrets = await exec(`cat /etc/shadow; ls /root; ls /home; cat ${home.file('config.json')}; cat ${join(home.file('config.json'), '..', 'secrets.json')}; echo done`);
    expect(secrets.body.result.stdout).to.equal('done\n');
    expect(secrets.body.result.stderr).to.match(/\/etc\/shadow: No such file/).and.to.match(/\/root.*No such file/);
    expect(secrets.body.result.stderr).to.not.include('gateway-token');
    // A link in the workspace to the host's files leads nowhere inside the sandbox.
    symlinkSync('/etc/shadow', join(workspace(), 'shadow-link'));
    expect((await exec('cat shadow-link')).body.result.exitCode).to.not.equal(0);
    const passwd = (await exec('cat /etc/passwd')).body.result.stdout as string;
    expect(passwd.trim().split('\n'), 'the sandbox has its own users').to.have.length(1);

    const network = await exec(`bash -c 'echo > /dev/tcp/127.0.0.1/${listenerPort}' && echo connected`);
    expect(network.body.result.stdout).to.not.include('connected');
    expect(network.body.result.exitCode).to.not.equal(0);
    expect(connections, 'no connection left the sandbox').to.equal(0);
    await set('tools.exec.network', true);
    const allowed = await exec(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/${listenerPort}; cat <&3'`);
    expect(allowed.body.result.stdout).to.equal('hello from the host\n');
    expect(connections).to.equal(1);
  });

  it('contains a fork bomb, an endless loop and a gigabyte of output, and the daemon goes on answering', async () => {
    await set('tools.exec.approval', 'full');
    await set('tools.exec.processes', 32);
    const bomb = await exec('f() { f | f & }; f; sleep 2; echo survived', { timeout: 10 });
    expect(bomb.status).to.equal(200);
    expect(bomb.body.result.stderr).to.match(/Cannot fork|Resource temporarily unavailable/);
    await sleep(500);
    const leftovers = Number((await exec('ls /proc | grep -c "^[0-9]"')).body.result.stdout.trim());
    expect(leftovers, 'nothing of the bomb outlives its sandbox').to.be.at.most(4);

    const started = Date.now();
    const loop = await exec('while :; do :; done', { timeout: 2 });
    expect(loop.body.result).to.include({ timedOut: true, exitCode: null });
    expect(loop.body.result.note).to.equal('stopped after 2 s of wall time');
    expect(Date.now() - started).to.be.below(6000);

    const flood = await exec('head -c 1000000000 /dev/zero | tr "\\000" x', { timeout: 60 });
    expect(flood.body.result.truncated).to.equal(true);
    expect(flood.body.result.stdout.length).to.equal(64 * 1024);
    expect(flood.body.result.durationMs).to.be.below(10_000);

    const health = await fetch(`${base}/healthz`);
    expect(health.status).to.equal(200);
    expect((await exec('echo still here')).body.result.stdout).to.equal('still here\n');
    const big = await exec('head -c 200000000 /dev/zero > big.bin; echo $?', { timeout: 30 });
    expect(big.body.result.stderr, 'a file past tools.exec.fileMB is cut').to.match(/File size limit exceeded|file too large/i);
    expect(existsSync(join(workspace(), 'big.bin'))).to.equal(true);
  });

  it('asks an operator: approved from the CLI it runs, rejected or left to time out it does not', async () => {
    await set('tools.exec.approval', 'ask');
    await set('tools.exec.approvalTimeoutSeconds', 5);
    const waiting = exec('echo approved > approved.txt; echo ran');
    const pending = await waitFor(async () => {
      const listed = (await home.run(['approvals', 'list', '--json'])).json?.approvals;
      return listed?.length === 1 ? listed[0] : undefined;
    }, 5000, 'the command to wait for approval');
    expect(pending).to.include({ command: 'echo approved > approved.txt; echo ran', status: 'pending', why: 'every command asks (approval ask)' });
    expect(existsSync(join(workspace(), 'approved.txt')), 'nothing ran yet').to.equal(false);
    const approved = await home.run(['approvals', 'approve', pending.id]);
    expect(approved.code, approved.stderr).to.equal(0);
    expect((await waiting).body.result.stdout).to.equal('ran\n');
    expect(existsSync(join(workspace(), 'approved.txt'))).to.equal(true);

    const rejectedCall = exec('touch rejected.txt');
    const second = await waitFor(async () => (await home.run(['approvals', 'list', '--json'])).json?.approvals?.[0], 5000, 'the second request');
    expect((await home.run(['approvals', 'reject', second.id])).code).to.equal(0);
    const rejected = await rejectedCall;
    expect(rejected.status).to.equal(403);
    expect(rejected.body.message).to.match(/rejected the command/);
    expect(existsSync(join(workspace(), 'rejected.txt'))).to.equal(false);

    const started = Date.now();
    const expired = await exec('touch expired.txt');
    expect(expired.status).to.equal(403);
    expect(expired.body.message).to.match(/Nobody approved the command within 5 s/);
    expect(Date.now() - started).to.be.within(4500, 9000);
    expect(existsSync(join(workspace(), 'expired.txt'))).to.equal(false);
    // A request decided already is said to be, and by whom: the first answer stands.
    const late = await home.run(['approvals', 'approve', second.id]);
    expect(late.code).to.equal(1);
    expect(late.stderr).to.match(new RegExp(`Approval ${second.code} was already rejected by device:\\S+ \\(cli\\)`));
    const gone = await home.run(['approvals', 'approve', 'ap_000000000000']);
    expect(gone.code).to.equal(5);
  });

  it('allowlist: matching commands run at once, others ask; an agent of its own approval runs in its own workspace', async () => {
    await set('tools.exec.approval', 'allowlist');
    await set('tools.exec.allow', ['echo *', 'ls']);
    expect((await exec('echo listed')).body.result.stdout).to.equal('listed\n');
    const chained = exec('echo listed; touch chained.txt');
    const asked = await waitFor(async () => (await home.run(['approvals', 'list', '--json'])).json?.approvals?.[0], 5000, 'the chained command to ask');
    expect(asked.why).to.equal('the command matches no tools.exec.allow pattern');
    expect((await home.run(['approvals', 'reject', asked.id])).code).to.equal(0);
    expect((await chained).status).to.equal(403);

    const upstream = await new ScriptedUpstream().start();
    try {
      await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
      await set('agents.builder', { model: 'script/m', tools: ['exec'], exec: { approval: 'full' } });
      upstream.enqueue(openaiToolCalls([{ name: 'exec', args: { command: 'echo built > out.txt && cat out.txt' } }]), openaiText('Built it.'));
      const chat = await home.run(['chat', '--agent', 'builder', 'build it', '--json']);
      expect(chat.code, chat.stderr).to.equal(0);
      expect(readFileSync(join(home.file('config.json'), '..', 'workspaces', 'builder', 'out.txt'), 'utf8')).to.equal('built\n');
      expect(JSON.stringify(upstream.requests[1]!.body.messages)).to.match(/stdout.{0,8}built/);
    } finally {
      await upstream.stop();
    }
  });

  it('allowlist: a pattern matches what will run, so `git *` never covers git -c running a shell command; approvers see every character', async () => {
    await set('tools.exec.approval', 'allowlist');
    await set('tools.exec.allow', ['git *']);
    await set('tools.exec.approvalTimeoutSeconds', 60);
    const plain = await exec('git --version');
    expect(plain.status, JSON.stringify(plain.body)).to.equal(200);
    expect(plain.body.result.stdout).to.match(/^git version /);

    // The attacker's form: git's own option defines an alias that runs a shell command.
    let settled = false;
    const attack = exec("git -c alias.x='!touch pwned.txt' x").finally(() => {
      settled = true;
    });
    const asked = await waitFor(async () => (await home.run(['approvals', 'list', '--json'])).json?.approvals?.[0], 10_000, 'git -c to wait for approval');
    expect(asked.command).to.equal("git -c alias.x='!touch pwned.txt' x");
    expect(asked.why).to.equal('the command matches no tools.exec.allow pattern');
    await sleep(500);
    expect(settled, 'the call waits for an operator').to.equal(false);
    expect(existsSync(join(workspace(), 'pwned.txt')), 'nothing ran unasked').to.equal(false);
    expect((await home.run(['approvals', 'reject', asked.id])).code).to.equal(0);
    const refused = await attack;
    expect(refused.status).to.equal(403);
    expect(refused.body.message).to.match(/rejected the command/);
    expect(existsSync(join(workspace(), 'pwned.txt'))).to.equal(false);

    // A command hiding its tail behind a line break and terminal escapes is shown whole, every such character escaped.
    const hiding = `git status${' '.repeat(100)}\ntouch hidden.txt \x1b[8m\u202e invisible tail ${'x'.repeat(120)}`;
    const waiting = exec(hiding);
    const pending = await waitFor(async () => (await home.run(['approvals', 'list', '--json'])).json?.approvals?.[0], 10_000, 'the hiding command to wait');
    expect(pending.command, 'JSON gives the command as it is').to.equal(hiding);
    const listed = await home.run(['approvals', 'list']);
    expect(listed.code, listed.stderr).to.equal(0);
    expect(listed.stdout).to.not.match(/[\x1b\u202e]/);
    const row = listed.stdout.split('\n').find((line) => line.startsWith(pending.id))!;
    expect(row, 'one line per command').to.be.a('string');
    expect(row.endsWith(`git status${' '.repeat(100)}\\ntouch hidden.txt \\x1b[8m\\u202e invisible tail ${'x'.repeat(120)}`), row).to.equal(true);
    const json = await home.run(['approvals', 'list', '--json']);
    expect(json.stdout, 'raw JSON holds no ESC or bidi override either').to.not.match(/[\x1b\u202e]/);
    expect(json.json.approvals[0].command).to.equal(hiding);
    const rejected = await home.run(['approvals', 'reject', pending.id]);
    expect(rejected.stdout).to.include(`Rejected ${pending.id}: git status`).and.include('\\ntouch hidden.txt \\x1b[8m\\u202e');
    expect((await waiting).status).to.equal(403);
    expect(existsSync(join(workspace(), 'hidden.txt'))).to.equal(false);
  });

  it('without bubblewrap exec is unavailable and says why; it never runs the command unsandboxed', async () => {
    home.cleanup();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const bin = join(home.file('config.json'), '..', '..', '..', 'nobwrap-bin');
    home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN, PATH: '/nonexistent' });
    mkdirSync(bin, { recursive: true });
    await set('gateway.tools.allow', ['exec']);
    await set('tools.exec.approval', 'full');
    expect((await home.run(['start'])).code).to.equal(0);
    const refused = await exec('touch unsandboxed.txt');
    expect(refused.status).to.equal(503);
    expect(refused.body.message).to.match(/bubblewrap \(bwrap\) is not installed: apt-get install bubblewrap/);
    expect(existsSync(join(workspace(), 'unsandboxed.txt'))).to.equal(false);
  });
});
