/**
 * exec's sandbox: a command run by /bin/sh inside bubblewrap. The system's
 * programs and libraries read-only (/usr, the /bin /lib /sbin links, the
 * parts of /etc programs read: never /etc/shadow, home folders or the
 * gateway's profile), the workspace read-write at /workspace, a private /tmp,
 * no network unless allowed, new PID, IPC and UTS namespaces, no new
 * privileges. Resource limits (CPU time, address space, processes, file
 * size) are set with prlimit before the sandbox starts and hold inside it;
 * a daemon running as root runs the command as an unprivileged user, since
 * the kernel does not count root's processes. Wall time and output are
 * bounded here: past either, the whole sandbox is killed.
 */
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export interface SandboxLimits {
  timeoutMs: number;
  cpuSeconds: number;
  memoryBytes: number;
  processes: number;
  fileBytes: number;
  tmpBytes: number;
  outputBytes: number;
  network: boolean;
}

export interface ExecResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  truncated: boolean;
  timedOut: boolean;
  durationMs: number;
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

/** The programs the sandbox needs, or why it cannot run. */
export function sandboxTools(): { bwrap: string; prlimit: string; setpriv?: string } | { missing: string } {
  const bwrap = which('bwrap');
  if (!bwrap) return { missing: 'bubblewrap (bwrap) is not installed: apt-get install bubblewrap (exec never runs a command outside its sandbox)' };
  const prlimit = which('prlimit');
  if (!prlimit) return { missing: 'prlimit (util-linux) is not installed; exec needs it to bound the sandbox' };
  const root = process.getuid?.() === 0;
  const setpriv = root ? which('setpriv') : undefined;
  if (root && !setpriv) return { missing: 'setpriv (util-linux) is not installed; a daemon running as root needs it to run commands as an unprivileged user' };
  return { bwrap, prlimit, ...(setpriv ? { setpriv } : {}) };
}

/** Files and folders of /etc that programs read and that hold no secret. */
const ETC_READ = ['alternatives', 'ssl', 'ca-certificates', 'ca-certificates.conf', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'localtime', 'timezone', 'nsswitch.conf', 'mime.types', 'protocols', 'services', 'os-release', 'debian_version', 'profile', 'bash.bashrc', 'inputrc', 'magic', 'papersize'];
const ETC_NETWORK = ['resolv.conf', 'hosts', 'host.conf', 'gai.conf'];

/** The system's top-level folders as the sandbox mounts them: links as links, folders read-only. */
function systemMounts(): string[] {
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
    '--bind', workspace, '/workspace', '--chdir', '/workspace',
    '--unshare-ipc', '--unshare-pid', '--unshare-uts', '--unshare-cgroup-try', ...(limits.network ? [] : ['--unshare-net']),
    '--hostname', 'sandbox', '--die-with-parent', '--new-session',
    '--clearenv', '--setenv', 'PATH', '/usr/local/bin:/usr/bin:/bin', '--setenv', 'HOME', passwd.home, '--setenv', 'USER', passwd.user,
    '--setenv', 'LANG', 'C.UTF-8', '--setenv', 'TMPDIR', '/tmp',
  );
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

/** Runs a command in the sandbox; resolves when it and everything it started are gone. */
export function runSandboxed(command: string, workspace: string, limits: SandboxLimits): Promise<ExecResult> {
  const tools = sandboxTools();
  if ('missing' in tools) return Promise.reject(new Error(tools.missing));
  const root = process.getuid?.() === 0;
  const uid = root ? SANDBOX_USER.uid : process.getuid!();
  const gid = root ? SANDBOX_USER.gid : process.getgid!();
  const user = root ? 'nobody' : 'sandbox';
  // The kernel counts every process of the user: the limit is what the user runs now plus the sandbox's share.
  const processes = processesOf(uid) + limits.processes;
  const prlimit = [
    `--cpu=${limits.cpuSeconds}`, `--as=${limits.memoryBytes}`, `--nproc=${processes}`, `--fsize=${limits.fileBytes}`, '--core=0',
  ];
  const inner = root
    ? [tools.setpriv!, `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--', '/bin/sh', '-c', command]
    : ['/bin/sh', '-c', command];
  const args = [...prlimit, '--', tools.bwrap, ...(root ? [] : ['--unshare-user', '--uid', String(uid), '--gid', String(gid)]),
    ...sandboxArgs(workspace, limits, { user, home: '/workspace' }), '--', ...inner];
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(tools.prlimit, args, { stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'], detached: true });
    // The sandbox's passwd and group, written to the descriptors bwrap reads them from.
    const [, , , passwdFd, groupFd] = child.stdio as unknown as NodeJS.WritableStream[];
    passwdFd!.end(`${user}:x:${uid}:${gid}:${user}:/workspace:/bin/sh\n`);
    groupFd!.end(`${user}:x:${gid}:\n`);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let size = 0;
    let truncated = false;
    let timedOut = false;
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
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({
        exitCode: code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'),
        truncated, timedOut, durationMs: Date.now() - started,
      });
    });
  });
}
