import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../../src/shared/config/types.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import type { ToolContext } from '../../../../src/server/kernel/module.ts';
import { askReason, execTool, RunningCommands, stopNote } from '../../../../src/server/toolbox/exec-tool.ts';
import type { ExecResult, SandboxLimits } from '../../../../src/server/sandbox/sandbox.ts';
import { Workspaces } from '../../../../src/server/toolbox/workspaces.ts';

const done: ExecResult = { exitCode: 0, signal: null, stdout: 'ok\n', stderr: '', truncated: false, timedOut: false, durationMs: 5, limitsPer: 'sandbox' };

describe('toolbox: exec, as its approval and limits say', () => {
  let dir: string;
  let config: GatewayConfig;
  let asked: { command: string; why: string; agent: string | null }[];
  let decision: 'approved' | 'rejected' | 'expired';
  let ran: { command: string; root: string; limits: SandboxLimits }[];
  let hold: Promise<void> | undefined;
  let missing: string | undefined;
  const context = (over: Partial<ToolContext> = {}): ToolContext => ({ caller: 'agent:ops', surface: 'agent', agent: 'ops', person: 'p', logger: pino({ level: 'silent' }), ...over });
  const tool = () => execTool({
    config: () => config,
    approvals: { ask: async (request) => { asked.push(request); return { decision, id: 'appr_1' }; } },
    workspaces: new Workspaces({ config: () => config, profileDir: dir, defaultAgent: () => { throw new Error('none'); } }),
    run: async (command, root, limits) => {
      ran.push({ command: String(command), root, limits });
      await hold;
      return done;
    },
    sandbox: () => (missing ? { missing } : { bwrap: '/usr/bin/bwrap', prlimit: '/usr/bin/prlimit' }),
  });
  const refusal = (promise: unknown) => Promise.resolve(promise).then(() => expect.fail('expected a refusal'), (error: unknown) => error as DomainError);

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-profile-'));
    config = effectiveConfig({ agents: { ops: { model: 'a/m', exec: { approval: 'full' } }, shy: { model: 'a/m' } }, tools: { exec: { approval: 'off', allow: ['ls *'], concurrency: 1 } } });
    asked = [];
    decision = 'approved';
    ran = [];
    hold = undefined;
    missing = undefined;
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('runs a command in the sandbox over the agent\'s workspace, with the configured limits', async () => {
    const result = await tool().handler({ command: 'echo ok' }, context()) as ExecResult;
    expect(result).to.deep.equal(done);
    expect(ran[0]!.root).to.equal(join(dir, 'workspaces', 'ops'));
    expect(ran[0]!.limits).to.deep.include({ timeoutMs: config.tools.exec.timeoutSeconds * 1000, memoryBytes: config.tools.exec.memoryMB * 1024 * 1024, network: false });
    expect(asked).to.deep.equal([]);
  });

  it('is off unless the agent or tools.exec.approval says otherwise, naming the setting', async () => {
    const off = await refusal(tool().handler({ command: 'ls' }, context({ agent: 'shy' })));
    expect([off.status, off.code]).to.deep.equal([403, 'exec_off']);
    expect(off.message).to.include('gateway config set agents.shy.exec.approval ask');
    const overHttp = await refusal(tool().handler({ command: 'ls' }, context({ agent: undefined, surface: 'http', caller: 'gateway' })));
    expect(overHttp.message).to.include('gateway config set tools.exec.approval ask');
    expect(ran).to.deep.equal([]);
  });

  it('refuses without its sandbox, and a timeout beyond the most allowed', async () => {
    missing = 'bubblewrap (bwrap) is not installed';
    expect((await refusal(tool().handler({ command: 'ls' }, context()))).code).to.equal('sandbox_missing');
    missing = undefined;
    const long = await refusal(tool().handler({ command: 'ls', timeout: config.tools.exec.maxTimeoutSeconds + 1 }, context()));
    expect(long.status).to.equal(400);
  });

  it('asks an operator as the allowlist says, and runs only what was approved', async () => {
    config = { ...config, tools: { ...config.tools, exec: { ...config.tools.exec, approval: 'allowlist' } } };
    await tool().handler({ command: 'ls -la' }, context({ agent: undefined }));
    expect(asked, 'allowed without asking').to.deep.equal([]);
    decision = 'rejected';
    expect((await refusal(tool().handler({ command: 'rm -rf x' }, context({ agent: undefined })))).code).to.equal('exec_rejected');
    expect(asked[0]).to.include({ command: 'rm -rf x', why: 'the command matches no tools.exec.allow pattern', agent: null });
    decision = 'expired';
    expect((await refusal(tool().handler({ command: 'rm -rf x' }, context({ agent: undefined })))).code).to.equal('exec_expired');
    decision = 'approved';
    await tool().handler({ command: 'rm -rf x' }, context({ agent: undefined }));
    expect(ran.map((one) => one.command)).to.deep.equal(['ls -la', 'rm -rf x']);
  });

  it('runs at most tools.exec.concurrency commands of an agent at once, and frees the place when one ends', async () => {
    const exec = tool();
    let release!: () => void;
    hold = new Promise((resolve) => { release = resolve; });
    const first = exec.handler({ command: 'sleep 1' }, context());
    await new Promise((resolve) => setImmediate(resolve));
    const busy = await refusal(exec.handler({ command: 'ls' }, context({ caller: 'someone else' })));
    expect([busy.status, busy.message]).to.deep.equal([429, '1 commands of this agent are running already (tools.exec.concurrency); try again in 1 s.']);
    release();
    await first;
    hold = undefined;
    await exec.handler({ command: 'ls' }, context());
    expect(ran).to.have.length(2);
  });

  it('counts places per key and frees each once', () => {
    const running = new RunningCommands();
    const one = running.take(['agent:a', 'caller:x'], 2);
    const two = running.take(['agent:a', 'caller:y'], 2);
    expect(running.take(['agent:a', 'caller:z'], 2)).to.deep.equal({ busy: 'agent:a' });
    expect(running.count('caller:x')).to.equal(1);
    if ('release' in one) { one.release(); one.release(); }
    expect(running.count('agent:a')).to.equal(1);
    expect(running.count('caller:x')).to.equal(0);
    if ('release' in two) two.release();
    expect(running.count('agent:a')).to.equal(0);
  });

  it('says why a command waits, and what stopped it', () => {
    expect(askReason('ask', 'ls', ['ls'])).to.equal('every command asks (approval ask)');
    expect(askReason('allowlist', 'ls', ['ls'])).to.equal(undefined);
    expect(askReason('full', 'rm -rf /', [])).to.equal(undefined);
    const settings = { outputBytes: 1000, workspaceMB: 50, memoryMB: 256 };
    expect(stopNote({ timedOut: true, truncated: true, stopped: 'memory' }, settings, 30)).to.equal('stopped after 30 s of wall time');
    expect(stopNote({ timedOut: false, truncated: true }, settings, 30)).to.equal('stopped after 1000 bytes of output');
    expect(stopNote({ timedOut: false, truncated: false, stopped: 'workspace' }, settings, 30)).to.match(/workspaceMB \(50 MB\)/);
    expect(stopNote({ timedOut: false, truncated: false, stopped: 'memory' }, settings, 30)).to.match(/memoryMB \(256 MB\)/);
    expect(stopNote({ timedOut: false, truncated: false }, settings, 30)).to.equal(undefined);
  });
});

describe('toolbox: where the tools act', () => {
  const profile = '/profiles/p';
  const workspaces = (agents: Record<string, unknown>, defaultAgent = () => ({ id: 'main', settings: { workspace: undefined } as never })) =>
    new Workspaces({ config: () => effectiveConfig({ agents }), profileDir: profile, defaultAgent });

  it('an agent acts in its own folder, or the one its settings name', () => {
    const places = workspaces({ main: { model: 'a/m' }, ops: { model: 'a/m', workspace: '/srv/ops' } });
    expect(places.of('main')).to.equal('/profiles/p/workspaces/main');
    expect(places.of('ops')).to.equal('/srv/ops');
  });

  it('a caller without an agent acts in the default agent\'s folder, or the profile\'s own without agents', () => {
    expect(workspaces({ main: { model: 'a/m' } }).of()).to.equal('/profiles/p/workspaces/main');
    expect(workspaces({ main: { model: 'a/m' } }).of('unknown')).to.equal('/profiles/p/workspaces/main');
    expect(workspaces({}).of()).to.equal('/profiles/p/workspace');
    expect(workspaces({ main: { model: 'a/m' } }, () => { throw new Error('no default'); }).of()).to.equal('/profiles/p/workspace');
  });
});
