/**
 * exec's sandbox: a command run by /bin/sh inside bubblewrap. The system's
 * programs and libraries read-only (/usr, the /bin /lib /sbin links, the
 * parts of /etc programs read: never /etc/shadow, home folders or the
 * gateway's profile), the workspace read-write at /workspace, a private /tmp,
 * no network unless allowed, new PID, IPC and UTS namespaces, no new
 * privileges, a system-call filter (seccomp.ts: no mounts, namespaces,
 * tracing, keyring, eBPF or modules, so no user namespace of its own), and
 * bubblewrap's arguments passed on a descriptor with an environment of PATH
 * alone, so the sandbox's process 1 names no host path or secret.
 * Per-process limits (CPU time, address space, processes, file size) are set
 * with prlimit before the sandbox starts; where the daemon can make a control
 * group, the command and everything it starts share one memory and one
 * process limit (cgroup.ts). A daemon running as root runs the command as an
 * unprivileged user, since the kernel does not count root's processes. Wall
 * time and output are watched here, and the workspace's size where it is
 * given (a workspace that is no file system of its own: workspace-image.ts):
 * past any of them, the whole sandbox is killed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { sandboxGroup } from '../../shared/cgroup.ts';
import { seccompProgram, seccompSupported } from './seccomp.ts';

export interface SandboxLimits {
  timeoutMs: number;
  cpuSeconds: number;
  memoryBytes: number;
  processes: number;
  fileBytes: number;
  tmpBytes: number;
  outputBytes: number;
  network: boolean;
  /** Most bytes the workspace may hold while the command runs, watched (undefined: none, or its own file system bounds it). */
  workspaceBytes?: number;
  /** Host files and folders bound read-only at the same path (an engine's model files). */
  readOnly?: readonly string[];
  /** Host folders bound read-only at a place of their own in the sandbox (a skill under /workspace/skills/<name>). */
  binds?: readonly { source: string; target: string }[];
  /** What the command reads on its standard input (none: an empty one). */
  input?: string | Buffer;
}

export interface ExecResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  truncated: boolean;
  timedOut: boolean;
  durationMs: number;
  /** Why the sandbox was stopped before the command ended by itself, besides time and output. */
  stopped?: 'memory' | 'workspace';
  /** Whether the memory and process limits held for the command as a whole (a control group) or for each process alone. */
  limitsPer: 'sandbox' | 'process';
}

/** The user a root daemon's commands run as: nobody. */
export const SANDBOX_USER = { uid: 65534, gid: 65534 };

/** Where a program is on the PATH, or undefined. */
function which(program: string, path = process.env.PATH ?? ''): string | undefined {
  for (const folder of path.split(delimiter)) {
    if (!folder) continue;
    const candidate = join(folder, program);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** Whether a bubblewrap takes --disable-userns (0.8 and later), asked once per program. */
const disablesUserns = new Map<string, boolean>();
export function canDisableUserns(bwrap: string): boolean {
  let known = disablesUserns.get(bwrap);
  if (known === undefined) {
    known = /--disable-userns/.test(spawnSync(bwrap, ['--help'], { encoding: 'utf8', timeout: 5000 }).stdout ?? '');
    disablesUserns.set(bwrap, known);
  }
  return known;
}

/** The programs the sandbox needs, or why it cannot run; `who` names what would run in it (exec's commands, the browser). */
export function sandboxTools(who: { tool: string; runs: string } = { tool: 'exec', runs: 'commands' }): { bwrap: string; prlimit: string; setpriv?: string } | { missing: string } {
  const bwrap = which('bwrap');
  if (!bwrap) return { missing: `bubblewrap (bwrap) is not installed: apt-get install bubblewrap (${who.tool} never runs ${who.runs} outside its sandbox)` };
  const prlimit = which('prlimit');
  if (!prlimit) return { missing: `prlimit (util-linux) is not installed; ${who.tool} needs it to bound the sandbox` };
  const root = process.getuid?.() === 0;
  const setpriv = root ? which('setpriv') : undefined;
  if (root && !setpriv) return { missing: `setpriv (util-linux) is not installed; a daemon running as root needs it to run ${who.runs} as an unprivileged user` };
  if (!seccompSupported()) return { missing: `no system-call filter is built for ${process.arch}; ${who.tool} runs only where its sandbox is whole (x64, arm64)` };
  return { bwrap, prlimit, ...(setpriv ? { setpriv } : {}) };
}

/**
 * Bytes a folder takes on disk, its links not followed and other file
 * systems not entered: du's own walk (fts, openat, no link followed), far
 * cheaper than one from here for a workspace of many files.
 */
export function diskUsage(folder: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('du', ['-s', '-x', '-B1', '--', folder], { stdio: ['ignore', 'pipe', 'ignore'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' } });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    child.on('error', reject);
    // du says 1 when a file vanished under it (a command removing files meanwhile): what it counted still stands.
    child.on('close', () => {
      const bytes = Number(/^(\d+)/.exec(out)?.[1]);
      if (Number.isFinite(bytes)) resolve(bytes);
      else reject(new Error(`du could not measure ${folder}`));
    });
  });
}

/** Files and folders of /etc that programs read and that hold no secret. */
export const ETC_READ = ['alternatives', 'ssl', 'ca-certificates', 'ca-certificates.conf', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'localtime', 'timezone', 'nsswitch.conf', 'mime.types', 'protocols', 'services', 'os-release', 'debian_version', 'profile', 'bash.bashrc', 'inputrc', 'magic', 'papersize'];
const ETC_NETWORK = ['resolv.conf', 'hosts', 'host.conf', 'gai.conf'];

/** Bytes in use on the file system holding a folder (undefined where it cannot be read). */
async function usedOnDisk(folder: string): Promise<number | undefined> {
  try {
    const info = await statfs(folder);
    return (info.blocks - info.bfree) * info.bsize;
  } catch {
    return undefined;
  }
}

/** The system's top-level folders as the sandbox mounts them: links as links, folders read-only. */
export function systemMounts(): string[] {
  const args: string[] = ['--ro-bind', '/usr', '/usr'];
  for (const top of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const path = `/${top}`;
    let info;
    try {
      info = lstatSync(path);
    } catch {
      continue;
    }
    if (info.isSymbolicLink()) args.push('--symlink', readlinkSync(path), path);
    else if (info.isDirectory()) args.push('--ro-bind', path, path);
  }
  return args;
}

/** The bwrap arguments of a sandbox over a workspace. */
export function sandboxArgs(workspace: string, limits: SandboxLimits, passwd: { user: string; home: string }): string[] {
  // /etc as a folder anyone in the sandbox may read, holding only what is bound below.
  const args = [...systemMounts(), '--perms', '0755', '--dir', '/etc'];
  for (const name of [...ETC_READ, ...(limits.network ? ETC_NETWORK : [])]) {
    if (existsSync(`/etc/${name}`)) args.push('--ro-bind', `/etc/${name}`, `/etc/${name}`);
  }
  // A passwd and group of the sandbox's own: the host's users stay unseen.
  args.push('--perms', '0644', '--file', '3', '/etc/passwd', '--perms', '0644', '--file', '4', '/etc/group');
  args.push(
    '--proc', '/proc', '--dev', '/dev',
    '--perms', '1777', '--size', String(limits.tmpBytes), '--tmpfs', '/tmp',
    '--bind', workspace, '/workspace',
    // After /tmp and the workspace, so neither hides them.
    ...readOnlyMounts(limits.readOnly ?? []),
    ...(limits.binds ?? []).flatMap(({ source, target }) => ['--ro-bind', source, target]),
    '--chdir', '/workspace',
    '--unshare-ipc', '--unshare-pid', '--unshare-uts', '--unshare-cgroup-try', ...(limits.network ? [] : ['--unshare-net']),
    '--hostname', 'sandbox', '--die-with-parent', '--new-session',
    '--clearenv', '--setenv', 'PATH', '/usr/local/bin:/usr/bin:/bin', '--setenv', 'HOME', passwd.home, '--setenv', 'USER', passwd.user,
    '--setenv', 'LANG', 'C.UTF-8', '--setenv', 'TMPDIR', '/tmp',
  );
  return args;
}

/**
 * Host paths bound read-only at the same place, their folders on the way made
 * open to the sandbox's user (bwrap would copy a host folder's 0700 onto the
 * one it makes, leaving the path out of reach).
 */
function readOnlyMounts(paths: readonly string[]): string[] {
  const args: string[] = [];
  for (const path of paths) {
    const parts = path.split('/').filter(Boolean);
    for (let depth = 1; depth < parts.length; depth++) args.push('--perms', '0755', '--dir', `/${parts.slice(0, depth).join('/')}`);
    args.push('--ro-bind', path, path);
  }
  return args;
}

/** How many processes a user runs now (what RLIMIT_NPROC counts). */
function processesOf(uid: number): number {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, 'utf8');
      if (new RegExp(`^Uid:\\s+${uid}\\s`, 'm').test(status)) count++;
    } catch {
      // Gone meanwhile.
    }
  }
  return count;
}

/** The system-call filter, built once. */
let filter: Buffer | undefined;
/** What each workspace holds, as measured after the last command there (the next one waits for that measure if it runs). */
const usage = new Map<string, Promise<number>>();

/**
 * Runs a command in the sandbox (a shell command line, or a program and its
 * arguments run without a shell); resolves when it and everything it started
 * are gone.
 */
export async function runSandboxed(command: string | readonly string[], workspace: string, limits: SandboxLimits): Promise<ExecResult> {
  const tools = sandboxTools();
  if ('missing' in tools) throw new Error(tools.missing);
  const root = process.getuid?.() === 0;
  const uid = root ? SANDBOX_USER.uid : process.getuid!();
  const gid = root ? SANDBOX_USER.gid : process.getgid!();
  const user = root ? 'nobody' : 'sandbox';
  // What the workspace holds (as last measured, or measured now): a command may add only what is left under its bound (and
  // a file no larger). bwrap, its reaper and setpriv count as processes of the group too.
  const measured = (): Promise<number> => {
    const bytes = diskUsage(workspace);
    usage.set(workspace, bytes);
    bytes.catch(() => usage.delete(workspace));
    return bytes;
  };
  const [used, group] = await Promise.all([
    limits.workspaceBytes === undefined ? 0 : (usage.get(workspace) ?? measured()),
    sandboxGroup({ memoryBytes: limits.memoryBytes, processes: limits.processes + 3 }).catch(() => undefined),
  ]);
  const room = limits.workspaceBytes === undefined ? Infinity : Math.max(0, limits.workspaceBytes - used);
  // (Never below 64 KiB: bwrap writes the sandbox's passwd under the same limit, and the watch below stops growth past the bound.)
  const fileBytes = Math.max(64 * 1024, Math.min(limits.fileBytes, room));
  // The kernel counts every process of the user: the limit is what the user runs now plus the sandbox's share (with a group,
  // its pids limit bounds the sandbox, and the user's count is not walked for).
  const prlimit = [
    `--cpu=${limits.cpuSeconds}`, `--as=${limits.memoryBytes}`, ...(group ? [] : [`--nproc=${processesOf(uid) + limits.processes}`]), `--fsize=${fileBytes}`, '--core=0',
  ];
  const argv = typeof command === 'string' ? ['/bin/sh', '-c', command] : [...command];
  const inner = root
    ? [tools.setpriv!, `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--', ...argv]
    : argv;
  // Everything that names a host path reaches bwrap on a descriptor, not on its command line (which the sandbox can read).
  const options = [
    ...(root ? [] : ['--unshare-user', ...(canDisableUserns(tools.bwrap) ? ['--disable-userns'] : []), '--uid', String(uid), '--gid', String(gid)]),
    ...sandboxArgs(workspace, limits, { user, home: '/workspace' }), '--seccomp', '5',
  ];
  // With a group, bwrap waits (--block-fd) before it runs the command until its processes are in the group.
  const [program, ...args] = [tools.prlimit, ...prlimit, '--', tools.bwrap, '--args', '6', ...(group ? ['--block-fd', '7'] : []), '--', ...inner];
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
  const started = Date.now();
  try {
    return await new Promise<ExecResult>((resolve, reject) => {
      const child = spawn(program!, args, { stdio: [limits.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe', ...(group ? ['pipe' as const] : [])], detached: true, env });
      // The sandbox's passwd and group, its system-call filter and bwrap's own arguments, written to the descriptors bwrap reads them from.
      const [, , , passwdFd, groupFd, seccompFd, argsFd, blockFd] = child.stdio as unknown as NodeJS.WritableStream[];
      const quiet = () => undefined;
      for (const stream of [passwdFd, groupFd, seccompFd, argsFd, blockFd]) (stream as unknown as NodeJS.EventEmitter | undefined)?.on('error', quiet);
      // Each process bwrap made is put in the group, a parent before its children are looked for (anything it starts after
      // is born inside); then the command may run. One that cannot be put there is not run at all.
      let unjoined: Error | undefined;
      if (group) {
        void group.adopt(child.pid!).then(() => blockFd!.end('go'), (error: unknown) => {
          unjoined = new Error(`the sandbox could not join its control group (${(error as Error).message}); the command was not run`);
          kill();
        });
      }
      passwdFd!.end(`${user}:x:${uid}:${gid}:${user}:/workspace:/bin/sh\n`);
      groupFd!.end(`${user}:x:${gid}:\n`);
      seccompFd!.end(filter ??= seccompProgram());
      argsFd!.end(options.map((option) => `${option}\0`).join(''));
      if (limits.input !== undefined) child.stdin!.on('error', quiet).end(limits.input);
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let size = 0;
      let truncated = false;
      let timedOut = false;
      let stopped: ExecResult['stopped'];
      const kill = () => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // Gone already.
        }
      };
      const take = (into: Buffer[]) => (chunk: Buffer) => {
        if (truncated) return;
        const room = limits.outputBytes - size;
        if (chunk.length > room) {
          into.push(chunk.subarray(0, room));
          size = limits.outputBytes;
          truncated = true;
          kill();
          return;
        }
        into.push(chunk);
        size += chunk.length;
      };
      child.stdout!.on('data', take(out));
      child.stderr!.on('data', take(err));
      const timer = setTimeout(() => {
        timedOut = true;
        kill();
      }, limits.timeoutMs);
      // The workspace's size, watched while the command runs: past its bound (what it held before plus the room left), the
      // sandbox is stopped. The file system's own count of used blocks is read every 10 ms (one statfs: nothing to walk);
      // once it has grown by more than the room left, du says how much of that is the workspace's. du also looks every
      // 250 ms (or ten times as long as it takes, for a workspace of many files), for growth the file system's count hides.
      let finished = false;
      let measuring = false;
      let fsBase: number | undefined;
      let fsStart: number | undefined;
      let duTimer: NodeJS.Timeout | undefined;
      let fsTimer: NodeJS.Timeout | undefined;
      const measure = (then?: (took: number) => void) => {
        if (measuring || finished) return;
        measuring = true;
        const began = Date.now();
        void Promise.all([diskUsage(workspace), usedOnDisk(workspace)]).then(([now, disk]) => {
          if (now > Math.max(used, limits.workspaceBytes!)) {
            stopped = 'workspace';
            kill();
          }
          // What the file system gained that is not the workspace's (other files on it) no longer counts toward a look.
          if (disk !== undefined) fsBase = disk - (now - used);
        }, () => undefined).finally(() => {
          measuring = false;
          then?.(Date.now() - began);
        });
      };
      const look = () => measure((took) => {
        if (finished) return;
        duTimer = setTimeout(look, Math.max(250, took * 10));
        duTimer.unref();
      });
      const glance = () => {
        if (finished) return;
        void usedOnDisk(workspace).then((disk) => {
          if (disk !== undefined && fsBase !== undefined && disk - fsBase > room) measure();
        }).finally(() => {
          if (finished) return;
          fsTimer = setTimeout(glance, 10);
          fsTimer.unref();
        });
      };
      if (limits.workspaceBytes !== undefined) {
        void usedOnDisk(workspace).then((disk) => {
          fsBase = disk;
          fsStart = disk;
          glance();
        });
        duTimer = setTimeout(look, 250);
        duTimer.unref();
      }
      const done = () => {
        finished = true;
        clearTimeout(timer);
        clearTimeout(duTimer);
        clearTimeout(fsTimer);
      };
      child.on('error', (error) => {
        done();
        reject(error);
      });
      child.on('close', (code, signal) => {
        done();
        // Measured again for the next command, off this answer's path, unless the file system's count of used blocks did not move.
        if (limits.workspaceBytes !== undefined) {
          void usedOnDisk(workspace).then((disk) => {
            if (disk === undefined || fsStart === undefined || disk !== fsStart) return measured();
            return undefined;
          }).catch(() => undefined);
        }
        if (unjoined) return reject(unjoined);
        void (async () => {
          if (!stopped && group && (await group.hitMemory())) stopped = 'memory';
          resolve({
            exitCode: code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'),
            truncated, timedOut, durationMs: Date.now() - started, ...(stopped ? { stopped } : {}), limitsPer: group ? 'sandbox' : 'process',
          });
        })();
      });
    });
  } finally {
    // The command and all it started are gone (bwrap's process 1 took its namespace's processes with it): the group is
    // removed after the answer, killing anything that still lingers in it.
    if (group) void group.remove();
  }
}
