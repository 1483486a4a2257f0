import { expect } from 'chai';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Workspace } from '../../../../src/server/toolbox/workspace.ts';

/** Workspace.bytes: what a file sent on a channel is read with (src/server/channels/outbound.ts). */
describe('a workspace file read whole to send it', () => {
  let dir: string;
  let root: string;
  let workspace: Workspace;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-bytes-'));
    root = join(dir, 'ws');
    mkdirSync(root);
    writeFileSync(join(dir, 'secret.txt'), 'TOP-SECRET\n');
    workspace = new Workspace(root);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('gives a regular file\'s bytes; refuses a path out, a link out, a FIFO, and a file over the limit without reading it', async () => {
    writeFileSync(join(root, 'a.bin'), Buffer.from([0, 1, 2, 255]));
    expect(Buffer.from((await workspace.bytes('a.bin', 10)).data)).to.deep.equal(Buffer.from([0, 1, 2, 255]));
    symlinkSync(join(dir, 'secret.txt'), join(root, 'out'));
    execFileSync('mkfifo', [join(root, 'pipe')]);
    for (const [path, pattern] of [['../secret.txt', /outside the workspace/], ['out', /outside the workspace/], [join(dir, 'secret.txt'), /outside the workspace/], ['pipe', /not a regular file/]] as const) {
      const error = await workspace.bytes(path, 1000).catch((thrown: Error) => thrown);
      expect(error, path).to.be.instanceOf(Error);
      expect((error as Error).message).to.match(pattern);
    }
    const tooLarge = await workspace.bytes('a.bin', 3).catch((thrown: { kind?: string }) => thrown);
    expect(tooLarge).to.include({ kind: 'too_large' });
  });

  it('a file swapped with a link out thousands of times a second: no read ever gives what is outside', async function () {
    this.timeout(30_000);
    writeFileSync(join(root, 'f'), 'inside\n');
    symlinkSync(join(dir, 'secret.txt'), join(root, 'l'));
    // f and the link exchanged in one step (renameat2 RENAME_EXCHANGE): f is always there, the file or the link.
    const swapper = spawn('python3', ['-c', `import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
end = time.time() + 4
while time.time() < end:
    libc.renameat2(-100, b'f', -100, b'l', 2)`], { cwd: root, stdio: 'ignore' });
    const exited = new Promise((resolve) => swapper.on('exit', resolve));
    const seen = { inside: 0, refused: 0, breaches: 0 };
    const until = Date.now() + 3500;
    while (Date.now() < until) {
      const read = await workspace.bytes('f', 1000).catch(() => undefined);
      if (!read) seen.refused++;
      else if (Buffer.from(read.data).toString() === 'inside\n') seen.inside++;
      else seen.breaches++;
    }
    await exited;
    expect(seen.breaches).to.equal(0);
    expect(seen.inside, 'some reads found the file').to.be.greaterThan(0);
    expect(seen.refused, 'some reads met the link, and were refused').to.be.greaterThan(0);
  });
});
