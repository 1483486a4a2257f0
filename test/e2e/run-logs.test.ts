import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { BIN, freePort, Home, spawnForeground } from '../support/cli.ts';

/** Collects a child's stdout until a line matches. */
function untilLine(child: ChildProcess, pattern: RegExp, timeoutMs = 15_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} in: ${text}`)), timeoutMs);
    child.stdout!.on('data', (chunk) => {
      text += chunk;
      if (pattern.test(text)) {
        clearTimeout(timer);
        resolve(text);
      }
    });
  });
}

const exited = (child: ChildProcess) => new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

describe('gateway run: the log on stdout for journald and containers (e2e)', function () {
  let home: Home;
  let port: number;
  beforeEach(async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
  });
  afterEach(() => home.cleanup());

  it('writes JSON lines to a stdout that is not a terminal, and to the profile\'s file', async () => {
    const child = spawnForeground(['run'], home.env);
    const text = await untilLine(child, /"msg":"daemon ready"/);
    const lines = text.trim().split('\n').map((line) => JSON.parse(line));
    expect(lines.map((line) => line.msg)).to.include.members(['daemon starting', 'daemon ready']);
    expect(lines.every((line) => typeof line.level === 'number' && line.profile === 'default')).to.equal(true);
    expect(existsSync(home.file('gateway.log')), 'the file too').to.equal(true);
    child.kill('SIGTERM');
    expect(await exited(child)).to.equal(0);
  });

  it('under systemd writes stdout only, so the journal does not keep the log twice; status says where it goes', async () => {
    const child = spawnForeground(['run'], { ...home.env, INVOCATION_ID: '0123456789abcdef', JOURNAL_STREAM: '8:12345' });
    await untilLine(child, /"msg":"daemon ready"/);
    expect(existsSync(home.file('gateway.log')), 'no file').to.equal(false);
    const status = await home.run(['status', '--json']);
    expect((status.json as { logFile: string }).logFile).to.equal('');
    expect((await home.run(['status'])).stdout).to.match(/Log:\s+stdout only/);
    const logs = await home.run(['logs']);
    expect(logs.code).to.equal(0);
    expect(logs.stderr).to.include('journalctl --user -u gateway-default');
    child.kill('SIGTERM');
    expect(await exited(child)).to.equal(0);
  });

  it('--log-file on keeps the file under systemd, off drops it anywhere, and anything else is a usage error', async () => {
    const kept = spawnForeground(['run', '--log-file', 'on'], { ...home.env, INVOCATION_ID: 'x' });
    await untilLine(kept, /daemon ready/);
    expect(existsSync(home.file('gateway.log'))).to.equal(true);
    kept.kill('SIGTERM');
    await exited(kept);

    const other = new Home({ GATEWAY_PORT: String(port) });
    try {
      await other.run(['profiles', 'create', 'default', '--secrets', 'file']);
      const dropped = spawnForeground(['run', '--log-file', 'off'], other.env);
      await untilLine(dropped, /daemon ready/);
      expect(existsSync(other.file('gateway.log'))).to.equal(false);
      dropped.kill('SIGTERM');
      await exited(dropped);
    } finally {
      other.cleanup();
    }
    const wrong = await home.run(['run', '--log-file', 'sometimes']);
    expect(wrong.code).to.equal(2);
    expect(wrong.stderr).to.include('--log-file must be on or off');
  });

  it('writes readable lines on a terminal', async () => {
    // script(1) gives the daemon a terminal for stdout.
    const child = spawn('script', ['-qfec', `${process.execPath} ${BIN} run`, '/dev/null'], { env: { ...process.env, ...home.env, NO_COLOR: '1' }, stdio: ['pipe', 'pipe', 'pipe'] });
    const text = await untilLine(child, /daemon ready/);
    expect(text).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ INFO  daemon starting port=\d+/m);
    expect(text).not.to.include('"msg"');
    child.kill('SIGTERM');
    await exited(child);
    await home.run(['stop']);
  });
});
