import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileSystemSize, imagePaths } from '../../../src/shared/workspace-image.ts';

const MB = 1024 * 1024;

describe('shared: a workspace\'s image', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-image-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps the image and its steps beside the folder, hidden, named after it', () => {
    expect(imagePaths('/p/workspaces/ops')).to.deep.equal({
      image: '/p/workspaces/.ops.img', fresh: '/p/workspaces/.ops.img.new', moved: '/p/workspaces/.ops.moved', filling: '/p/workspaces/.ops.filling',
    });
  });

  it('reads the file system\'s size from its superblock, not from the length of its file', async function () {
    const image = join(dir, 'a.img');
    writeFileSync(image, '');
    spawnSync('truncate', ['-s', '20M', image]);
    const made = spawnSync('mkfs.ext4', ['-q', '-F', '-T', 'default', image], { env: { PATH: '/usr/sbin:/sbin:/usr/bin:/bin' } });
    if (made.error || made.status !== 0) this.skip();
    // A file made longer than its file system (a crash between the two) still tells the file system's own size.
    spawnSync('truncate', ['-s', '30M', image]);
    expect(await fileSystemSize(image)).to.equal(20 * MB);
  });

  it('refuses a file that holds no ext4 file system, naming it', async () => {
    const image = join(dir, 'b.img');
    writeFileSync(image, Buffer.alloc(4096));
    const failure = await fileSystemSize(image).then(() => undefined, (error: Error) => error);
    expect(failure?.message).to.equal(`${image} holds no ext4 file system`);
  });
});
