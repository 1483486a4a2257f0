/**
 * A workspace as a file system of its own: an ext4 image beside the folder
 * (`workspaces/.<agent>.img`, 0600), loop-mounted at the folder itself, so
 * the person sees their agent's files where they always were, and a write
 * past tools.exec.workspaceMB fails with ENOSPC at the bound, whoever writes
 * and however many write at once. Only a root daemon with loop devices can
 * make one; elsewhere the size is watched (sandbox.ts) and `gateway doctor`
 * says why.
 *
 * The mount outlives the daemon (stop, kill -9): it belongs to the profile,
 * and is found again in /proc/self/mountinfo (its source a loop device
 * backed by this image) rather than mounted twice. Removing the profile
 * unmounts it; mount's loop devices clear themselves when unmounted.
 *
 * Files already in the folder the first time are copied into the new image
 * before anything is swapped: a crash at any step leaves either the folder
 * as it was or the whole image (see `recover`).
 *
 * Beneath the image, at the same folder, is a guard: an empty read-only
 * tmpfs, mounted before the image is. While the image is unmounted to be
 * grown, the folder shows the guard, so a write meant for the workspace
 * fails (EROFS, root's included) instead of landing in the bare folder under
 * it, where it would be hidden once the image is back and never counted.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { chmod, chown, lstat, mkdir, open, readdir, realpath, rename, rm, rmdir, statfs } from 'node:fs/promises';
import { basename, delimiter, dirname, join } from 'node:path';

/** One inode per this many bytes of the image: ext4's own default, so a million empty files fill the workspace, not the host. */
export const BYTES_PER_INODE = 16 * 1024;
/** The fewest inodes an image gets, however small. */
const MIN_INODES = 128;
/** How long one of the file system programs may take. */
const PROGRAM_TIMEOUT_MS = 120_000;

const PROGRAMS = ['losetup', 'mkfs.ext4', 'e2fsck', 'resize2fs', 'mount', 'umount', 'cp', 'du'] as const;
/** How a workspace is mounted: no set-user-id programs or devices from it, and blocks freed in it given back to the host's disk. */
const MOUNT_OPTIONS = 'loop,nosuid,nodev,discard';
/** The source the guard beneath a workspace's image is mounted with: how it is told from any other tmpfs. */
export const GUARD_SOURCE = 'gateway-workspace-guard';
/** The guard: empty, read-only for everyone (root too), nothing to run or open as a device, the least room tmpfs takes. */
const GUARD_OPTIONS = 'ro,nosuid,nodev,noexec,size=4k,nr_inodes=1,mode=0500';

export type ImageSupport = { available: true } | { available: false; reason: string };

/** How the workspace's size is bounded: by its own file system (of `bytes`), or watched while commands run (and why). */
export type WorkspaceBound = { by: 'filesystem'; bytes: number; image: string } | { by: 'watch'; reason: string };

interface Mount {
  point: string;
  source: string;
  type: string;
}

/** Where a program is on the PATH (with the system's sbin folders, where root's tools are). */
function which(program: string): string | undefined {
  const folders = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  return folders.filter(Boolean).map((folder) => join(folder, program)).find((path) => existsSync(path));
}

/** Whether this process can give a workspace a file system of its own, or why not. */
export function imageSupport(): ImageSupport {
  if (process.platform !== 'linux') return { available: false, reason: 'loop-mounted file systems are Linux\'s' };
  if (process.getuid?.() !== 0) return { available: false, reason: 'the daemon does not run as root, and only root may mount a file system' };
  if (!existsSync('/dev/loop-control')) return { available: false, reason: 'this host has no loop devices (/dev/loop-control)' };
  let filesystems = '';
  try {
    filesystems = readFileSync('/proc/filesystems', 'utf8');
  } catch {
    // Unreadable: as if ext4 were missing.
  }
  if (!/\text4$/m.test(filesystems)) return { available: false, reason: 'the kernel does not mount ext4' };
  const missing = PROGRAMS.filter((program) => !which(program));
  if (missing.length > 0) return { available: false, reason: `${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not installed (apt-get install e2fsprogs mount util-linux)` };
  return { available: true };
}

/** A mountinfo field as the kernel escapes it (space, tab, newline, backslash as \ooo). */
const unescape = (field: string) => field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));

/** The mounts this process sees, in the order they were made. */
function mounts(): Mount[] {
  let text = '';
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  const found: Mount[] = [];
  for (const line of text.split('\n')) {
    const [before, after] = line.split(' - ');
    if (!before || !after) continue;
    const point = before.split(' ')[4];
    const [type, source] = after.split(' ');
    if (point && type && source) found.push({ point: unescape(point), source: unescape(source), type });
  }
  return found;
}

/** The file a loop device reads, or undefined (not a loop device, or detached). */
function backingFile(device: string): string | undefined {
  const name = /^\/dev\/(loop\d+)$/.exec(device)?.[1];
  if (!name) return undefined;
  try {
    return readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** The loop devices attached to an image, mounted or not. */
function loopsOf(image: string): string[] {
  const found: string[] = [];
  let names: string[] = [];
  try {
    names = readdirSync('/sys/block').filter((name) => /^loop\d+$/.test(name));
  } catch {
    return found;
  }
  for (const name of names) if (backingFile(`/dev/${name}`) === image) found.push(`/dev/${name}`);
  return found;
}

/** Runs one of the file system programs without a shell; rejects with what it said (an exit code not in `ok`). */
function run(program: string, args: readonly string[], ok: readonly number[] = [0]): Promise<string> {
  return new Promise((resolve, reject) => {
    const path = which(program);
    if (!path) return reject(new Error(`${program} is not installed`));
    const child = spawn(path, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' }, timeout: PROGRAM_TIMEOUT_MS });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      err += chunk;
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code !== null && ok.includes(code)) resolve(out);
      else reject(new Error(`${program} ${signal ? `was killed (${signal})` : `failed (${code})`}: ${err.trim().split('\n').slice(-2).join(' ') || 'no message'}`));
    });
  });
}

const isGuard = (mount: Mount) => mount.type === 'tmpfs' && mount.source === GUARD_SOURCE;

/**
 * What is mounted at a folder: the image's mount (the last made there, its
 * device, and whether the guard is beneath it), the guard alone, nothing
 * (undefined), or another file system (`foreign`).
 */
function mountAt(folder: string, image: string): { device: string; guarded: boolean } | { guard: true } | { foreign: string } | undefined {
  const here = mounts().filter((mount) => mount.point === folder);
  const top = here.at(-1);
  if (!top) return undefined;
  if (top.type === 'ext4' && backingFile(top.source) === image) return { device: top.source, guarded: here.length > 1 && isGuard(here.at(-2)!) };
  if (isGuard(top)) return { guard: true };
  return { foreign: `${top.type} from ${top.source}` };
}

/** Mounts the guard at the folder, beneath where the image goes. */
async function mountGuard(folder: string): Promise<void> {
  await run('mount', ['-t', 'tmpfs', '-o', GUARD_OPTIONS, '--', GUARD_SOURCE, folder]);
}

const isEmptyFolder = async (path: string) => (await readdir(path)).length === 0;
const exists = (path: string) => lstat(path).then(() => true, () => false);

/** The names a workspace's image works with, all beside the folder in the profile's own folder. */
export function imagePaths(folder: string): { image: string; fresh: string; moved: string; filling: string } {
  const hidden = join(dirname(folder), `.${basename(folder)}`);
  return { image: `${hidden}.img`, fresh: `${hidden}.img.new`, moved: `${hidden}.moved`, filling: `${hidden}.filling` };
}

export interface MountOptions {
  /** The size the image should have: tools.exec.workspaceMB. */
  bytes: number;
  /** Who owns the workspace's root (a root daemon's sandbox user). */
  owner?: { uid: number; gid: number };
  /** Whether a new image may be made (tools.exec.workspaceImage auto); one made before is mounted either way. */
  make: boolean;
  /** Whether no call acts in the workspace now, so it may be unmounted to be grown (none: it may). */
  idle?: () => boolean;
}

/**
 * Makes sure the folder is its image's mount point, making, filling, mounting
 * or growing the image as needed; answers how the workspace's size is bounded.
 */
export async function mountWorkspace(given: string, options: MountOptions): Promise<WorkspaceBound> {
  const support = imageSupport();
  if (!support.available) return { by: 'watch', reason: support.reason };
  await mkdir(dirname(given), { recursive: true, mode: 0o700 });
  // Mount points are named by their real path in mountinfo.
  const folder = join(await realpath(dirname(given)), basename(given));
  const paths = imagePaths(folder);
  let mounted = mountAt(folder, paths.image);
  if (mounted && 'foreign' in mounted) return { by: 'watch', reason: `${folder} is the mount point of another file system (${mounted.foreign})` };
  if (mounted && 'device' in mounted) return grown(folder, mounted.device, mounted.guarded, paths.image, options);
  // A guard whose image is gone (removed by hand) comes off: the folder is as it was before the image.
  if (mounted && !(await exists(paths.image)) && !(await exists(paths.fresh))) {
    await run('umount', [folder]);
    mounted = undefined;
  }
  await recover(folder, paths);
  if (!(await exists(paths.image))) {
    if (!options.make) return { by: 'watch', reason: 'tools.exec.workspaceImage is off' };
    const made = await makeImage(folder, paths, options);
    if (made) return made;
  }
  // An image whose loop device outlived its mount (a crash inside mount itself) is freed first: one image, one device.
  const elsewhere = mounts().find((mount) => backingFile(mount.source) === paths.image);
  if (elsewhere) return { by: 'watch', reason: `its image ${paths.image} is mounted at ${elsewhere.point}, not at the workspace` };
  for (const device of loopsOf(paths.image)) await run('losetup', ['-d', device]).catch(() => undefined);
  await imageFileChecked(paths.image);
  if (!mounted) {
    if (await exists(folder)) {
      const info = await lstat(folder);
      if (!info.isDirectory()) return { by: 'watch', reason: `${folder} is not a folder` };
      if (!(await isEmptyFolder(folder))) {
        return { by: 'watch', reason: `${folder} holds files while its image ${paths.image} is not mounted there: move them out of the folder and the image is mounted at the next call` };
      }
    } else {
      await mkdir(folder, { mode: 0o700 });
    }
    await mountGuard(folder);
  }
  await run('mount', ['-t', 'ext4', '-o', MOUNT_OPTIONS, '--', paths.image, folder]);
  await rm(paths.moved, { recursive: true, force: true });
  const now = mountAt(folder, paths.image);
  if (!now || !('device' in now)) throw new Error(`${paths.image} was mounted at ${folder}, but mountinfo does not show it there`);
  // The root of the file system is the workspace's root: the sandbox's user owns it, no one else reads it.
  if (options.owner) await chown(folder, options.owner.uid, options.owner.gid);
  await chmod(folder, 0o700);
  return grown(folder, now.device, now.guarded, paths.image, options);
}

/** Refuses an image that is not a regular file of this user's alone (a link put in its place would be mounted by its target). */
async function imageFileChecked(image: string): Promise<void> {
  const info = await lstat(image);
  if (!info.isFile() || info.uid !== process.getuid?.() || (info.mode & 0o077) !== 0) {
    throw new Error(`${image} is not a regular file of the daemon's user with mode 0600; it is not mounted`);
  }
}

/**
 * Finishes or undoes what a crash interrupted. The fresh image is whole once
 * the folder has been moved aside (`moved` exists): from there on, forward;
 * before, the fresh image is dropped and the folder was never touched.
 */
async function recover(folder: string, paths: ReturnType<typeof imagePaths>): Promise<void> {
  if (mounts().some((mount) => mount.point === paths.filling)) await run('umount', [paths.filling]);
  await rm(paths.filling, { recursive: true, force: true });
  if (await exists(paths.moved)) {
    if (!(await exists(paths.image)) && (await exists(paths.fresh))) await rename(paths.fresh, paths.image);
    if (!(await exists(paths.image))) {
      // Neither image: the folder goes back where it was.
      if (await exists(folder)) await rmdir(folder);
      await rename(paths.moved, folder);
    }
    return;
  }
  await rm(paths.fresh, { force: true });
}

/** Makes the image, filled with what the folder holds; answers a bound only when the folder's files do not fit. */
async function makeImage(folder: string, paths: ReturnType<typeof imagePaths>, options: MountOptions): Promise<WorkspaceBound | undefined> {
  const hasFiles = (await exists(folder)) && (await lstat(folder)).isDirectory() && !(await isEmptyFolder(folder));
  const tooMuch = { by: 'watch', reason: `${folder} holds more than tools.exec.workspaceMB (${Math.round(options.bytes / 1024 / 1024)} MB), so it was not moved into a file system of its own: remove files or raise the bound` } as const;
  // What plainly cannot fit is not copied to find out.
  if (hasFiles && Number((await run('du', ['-s', '-x', '-B1', '--', folder]).catch(() => '0')).split('\t')[0]) > options.bytes) return tooMuch;
  const handle = await open(paths.fresh, 'wx', 0o600);
  try {
    await handle.truncate(options.bytes);
  } finally {
    await handle.close();
  }
  const inodes = Math.max(MIN_INODES, Math.floor(options.bytes / BYTES_PER_INODE));
  const owner = options.owner ?? { uid: process.getuid!(), gid: process.getgid!() };
  // No blocks kept for root (-m 0): the daemon's own writes (files.write) meet the same bound as the sandbox's.
  await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-T', 'default', '-N', String(inodes), '-L', 'workspace', '-E', `root_owner=${owner.uid}:${owner.gid},lazy_itable_init=1,nodiscard`, paths.fresh]);
  await mkdir(paths.filling, { mode: 0o700 });
  await run('mount', ['-t', 'ext4', '-o', 'loop,nosuid,nodev', '--', paths.fresh, paths.filling]);
  try {
    // A new file system makes lost+found; the workspace shows only the person's files (e2fsck makes it again if it needs one).
    await rmdir(join(paths.filling, 'lost+found')).catch(() => undefined);
    if (hasFiles) {
      try {
        await run('cp', ['-a', '--', `${folder}/.`, `${paths.filling}/`]);
      } catch (error) {
        await run('umount', [paths.filling]);
        await rmdir(paths.filling);
        await rm(paths.fresh, { force: true });
        if (!/No space left|Disk quota/i.test((error as Error).message)) throw error;
        return tooMuch;
      }
    }
  } catch (error) {
    if (mounts().some((mount) => mount.point === paths.filling)) await run('umount', [paths.filling]).catch(() => undefined);
    throw error;
  }
  await run('umount', [paths.filling]);
  await rmdir(paths.filling);
  const synced = await open(paths.fresh, 'r+');
  try {
    await synced.sync();
  } finally {
    await synced.close();
  }
  // From here the fresh image is whole (recover goes forward): the folder aside, then the image under its name.
  if (await exists(folder)) await rename(folder, paths.moved);
  await rename(paths.fresh, paths.image);
  return undefined;
}

/**
 * The bound of a mounted image, grown first when tools.exec.workspaceMB grew
 * (it is never shrunk here). ext4 grows while mounted where the daemon holds
 * CAP_SYS_RESOURCE; elsewhere it is unmounted, grown and mounted again, but
 * only while no call is in it (`idle`) and nothing holds it (umount refuses a
 * busy file system): else it keeps its size, which holds a smaller bound, and
 * is grown at a later call. While it is unmounted the folder shows the guard
 * beneath it, never the bare folder: an image mounted with no guard beneath
 * (by an earlier version) is not grown offline, since nothing can be slid
 * under a mount; it keeps its size until it is next mounted (`gateway
 * doctor` says so).
 */
async function grown(folder: string, device: string, guarded: boolean, image: string, options: MountOptions): Promise<WorkspaceBound> {
  const size = await fileSystemSize(image);
  if (options.bytes <= size) return { by: 'filesystem', bytes: size, image };
  const as = (bytes: number): WorkspaceBound => ({ by: 'filesystem', bytes, image });
  // The image file is made larger only right before its file system grows: a crash between the two leaves a file system
  // smaller than its file (a bound smaller than said), never the other way round.
  if (growsOnline()) {
    await setSize(image, options.bytes);
    await run('losetup', ['--set-capacity', device]);
    if (await run('resize2fs', [device]).then(() => true, () => false)) return as(options.bytes);
  }
  if (!guarded || (options.idle && !options.idle())) return as(size);
  if (!(await run('umount', [folder]).then(() => true, () => false))) return as(size);
  try {
    const state = await superblockState(image);
    if (state.freeInodes === 0 && state.clean) {
      // Every inode used: e2fsck would have none for the lost+found it makes again (the workspace keeps none) and stop, so
      // the workspace could never grow. The kernel marked it unmounted cleanly with no error just now: grown unchecked.
      await setSize(image, options.bytes);
      await run('resize2fs', ['-f', image]);
    } else {
      // 1: it corrected something (the file system was marked not clean when unmounted): still whole.
      await run('e2fsck', ['-f', '-p', image], [0, 1]);
      await setSize(image, options.bytes);
      await run('resize2fs', [image]);
    }
  } finally {
    await run('mount', ['-t', 'ext4', '-o', MOUNT_OPTIONS, '--', image, folder]);
  }
  // e2fsck makes lost+found again; the workspace shows only the person's files.
  await rmdir(join(folder, 'lost+found')).catch(() => undefined);
  return as(options.bytes);
}

/** Whether this process may grow a mounted ext4 (the kernel asks for CAP_SYS_RESOURCE; containers often drop it). */
function growsOnline(): boolean {
  try {
    const effective = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return effective !== undefined && (BigInt(`0x${effective}`) & (1n << 24n)) !== 0n;
  } catch {
    return false;
  }
}

/** The size of the ext4 file system in an image, as its superblock says (what the file system holds, whatever the file's length). */
export async function fileSystemSize(image: string): Promise<number> {
  const handle = await open(image, 'r');
  try {
    const block = Buffer.alloc(1024);
    await handle.read(block, 0, 1024, 1024);
    if (block.readUInt16LE(0x38) !== 0xef53) throw new Error(`${image} holds no ext4 file system`);
    const is64 = (block.readUInt32LE(0x60) & 0x80) !== 0;
    const blocks = block.readUInt32LE(0x4) + (is64 ? block.readUInt32LE(0x150) * 2 ** 32 : 0);
    return blocks * (1024 << block.readUInt32LE(0x18));
  } finally {
    await handle.close();
  }
}

/** What an image's superblock says of its file system: inodes still free, and whether it was unmounted cleanly with no error recorded. */
async function superblockState(image: string): Promise<{ freeInodes: number; clean: boolean }> {
  const handle = await open(image, 'r');
  try {
    const block = Buffer.alloc(1024);
    await handle.read(block, 0, 1024, 1024);
    if (block.readUInt16LE(0x38) !== 0xef53) throw new Error(`${image} holds no ext4 file system`);
    const state = block.readUInt16LE(0x3a);
    return { freeInodes: block.readUInt32LE(0x10), clean: (state & 0x1) !== 0 && (state & 0x2) === 0 };
  } finally {
    await handle.close();
  }
}

/** Sets an image file's size (its new blocks are a hole until written). */
async function setSize(image: string, bytes: number): Promise<void> {
  const handle = await open(image, 'r+');
  try {
    await handle.truncate(bytes);
  } finally {
    await handle.close();
  }
}

/** Bytes still free on the file system holding a folder (undefined where it cannot be read). */
export async function freeBytes(folder: string): Promise<number | undefined> {
  try {
    const info = await statfs(folder);
    return info.bavail * info.bsize;
  } catch {
    return undefined;
  }
}

/** The device of a folder, to tell later whether it is still the mount point it was. */
export const deviceOf = (folder: string): number | undefined => {
  try {
    return statSync(folder).dev;
  } catch {
    return undefined;
  }
};

/** The workspace images kept under a folder (a profile's) that are mounted now: where, their size, and whether the guard is beneath. */
export function mountedImages(under: string): Promise<{ folder: string; image: string; bytes: number; guarded: boolean }[]> {
  const prefix = ourPrefix(under);
  const all = mounts();
  return Promise.all(all.map(async (mount, index) => {
    const image = backingFile(mount.source);
    if (!image || !ours(image, prefix)) return [];
    const guarded = all.slice(0, index).some((below) => below.point === mount.point && isGuard(below));
    return fileSystemSize(image).then((bytes) => [{ folder: mount.point, image, bytes, guarded }], () => []);
  })).then((found) => found.flat());
}

/** A folder's real path as a prefix of the paths below it. */
function ourPrefix(under: string): string {
  let real = under;
  try {
    real = realpathSync(under);
  } catch {
    // Gone already: nothing of it can be backing a mount by this name either.
  }
  return real.endsWith('/') ? real : `${real}/`;
}

/** Whether a loop device's file is a workspace image below a prefix. */
const ours = (file: string, prefix: string) => file.startsWith(prefix) && /\/\.[^/]+\.img(\.new)?$/.test(file);

/**
 * Unmounts every workspace image kept under a folder (a profile's, before it
 * is removed); mount's loop devices detach themselves. Answers the folders
 * unmounted. A folder still in use (a shell in it) is detached lazily: it
 * goes when the last user leaves.
 */
export function unmountImages(under: string): string[] {
  const prefix = ourPrefix(under);
  const found = mounts().filter((mount) => {
    // The guards beneath the images go too (after them: the last made comes off first).
    if (isGuard(mount)) return mount.point.startsWith(prefix);
    const file = backingFile(mount.source);
    return file !== undefined && ours(file, prefix);
  });
  const umount = which('umount');
  const done: string[] = [];
  // The last made first: a mount on top of another comes off before it.
  for (const mount of found.reverse()) {
    if (!umount) break;
    const options = { stdio: 'ignore' as const, timeout: PROGRAM_TIMEOUT_MS };
    if (spawnSync(umount, [mount.point], options).status !== 0) spawnSync(umount, ['-l', mount.point], options);
    done.push(mount.point);
  }
  return done;
}
