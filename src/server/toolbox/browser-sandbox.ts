/**
 * How a browser is started: Chromium inside bubblewrap, the way exec's
 * commands run (sandbox.ts), with what a browser needs besides.
 *
 * - No network of its own (a network namespace with loopback only). Its one
 *   way out is the gateway's proxy (browser-proxy.ts), reached through a unix
 *   socket bound into the sandbox: a small relay in the sandbox (Node, the
 *   daemon's own) listens on the sandbox's loopback, where Chromium's
 *   --proxy-server points, and passes each connection to the socket. So a
 *   page, or a renderer taken over by one, can reach nothing the proxy does
 *   not allow: not the daemon's port, not the host's loopback services, not
 *   the cloud metadata address.
 * - Chromium told to send everything to the proxy (loopback included,
 *   --proxy-bypass-list=<-loopback>), to look no name up itself
 *   (--host-resolver-rules) and to send WebRTC nowhere but through it.
 * - As the sandbox's user: `nobody` for a root daemon (setpriv), else the
 *   daemon's user in a user namespace of its own that can make no other.
 *   Chromium's own sandbox needs namespaces the system-call filter refuses,
 *   so it runs with --no-sandbox: bubblewrap, the filter and the unprivileged
 *   user are its sandbox.
 * - Sees the system read-only, a private /tmp (bounded), its own profile
 *   folder (one per agent and person, browsers.ts) and its downloads folder,
 *   nothing else of the host; other people's profiles are not there.
 * - Playwright launches a script in Chromium's place and talks to it over
 *   --remote-debugging-pipe (descriptors 3 and 4, passed through bubblewrap
 *   and the relay): never a debugging port.
 * - Bounds: its memory and processes together in a control group where the
 *   daemon can make one (the script joins it before anything starts), the
 *   size of a file it may write, no core files.
 */
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { SandboxGroup } from '../../shared/cgroup.ts';
import { canDisableUserns, ETC_READ, SANDBOX_USER, systemMounts } from '../sandbox/sandbox.ts';
import { seccompProgram } from '../sandbox/seccomp.ts';

/** Where Chromium finds the proxy: the relay's port on the sandbox's own loopback. */
export const RELAY_PORT = 3128;
/** Where the sandbox shows the relay's script and the proxy's socket. */
const INSIDE = '/run/gateway';

/** The relay, run by Node in the sandbox: listens, then starts Chromium with descriptors 0-4 as given (3 and 4 are Playwright's pipe). */
const RELAY = `'use strict';
// The browser sandbox's way out: each connection to 127.0.0.1:<port> here goes to the gateway's proxy socket (browser-sandbox.ts).
const fs = require('node:fs');
const net = require('node:net');
const { spawn } = require('node:child_process');
const [socketPath, port, program, ...args] = process.argv.slice(2);
const relay = net.createServer((inner) => {
  const outer = net.connect(socketPath);
  const end = () => { inner.destroy(); outer.destroy(); };
  for (const side of [inner, outer]) { side.on('error', end); side.on('close', end); }
  inner.pipe(outer);
  outer.pipe(inner);
});
relay.on('error', (error) => { process.stderr.write('gateway relay: ' + error.message + '\\n'); process.exit(70); });
relay.listen(Number(port), '127.0.0.1', () => {
  // What Chromium makes (its profile's files, downloads) is its user's alone.
  process.umask(0o077);
  const browser = spawn(program, args, { stdio: [0, 1, 2, 3, 4] });
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => browser.kill(signal));
  browser.on('error', (error) => { process.stderr.write('gateway relay: ' + error.message + '\\n'); process.exit(71); });
  // Chromium's other processes (its network service writing the cookies down) may outlive it a moment: the sandbox, and
  // everything in it, ends when this does, so it waits for them (its /proc shows the sandbox's processes only).
  browser.on('exit', (code, signal) => {
    const until = Date.now() + 5000;
    const others = () => fs.readdirSync('/proc').filter((name) => /^[0-9]+$/.test(name) && Number(name) !== 1 && Number(name) !== process.pid);
    const wait = () => (others().length === 0 || Date.now() > until ? process.exit(code ?? (signal ? 1 : 0)) : setTimeout(wait, 50));
    wait();
  });
});
`;

/** Chromium's switches for the sandbox; Playwright adds its own (headless, --no-sandbox, the pipe, the profile). */
export const CHROMIUM_SWITCHES = [
  `--proxy-server=http://127.0.0.1:${RELAY_PORT}`,
  // Loopback goes through the proxy too (Chromium would otherwise connect to it directly), where the guard judges it.
  '--proxy-bypass-list=<-loopback>',
  // No lookups of its own: every name is resolved by the proxy.
  '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1',
  '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
  '--webrtc-ip-handling-policy=disable_non_proxied_udp',
  '--dns-prefetch-disable',
  '--disable-dev-shm-usage',
  '--disable-gpu',
  '--disable-crash-reporter',
  '--lang=en-US',
];

export interface SandboxPlan {
  /** The script Playwright starts in Chromium's place. */
  launcher: string;
  /** Chromium's own switches. */
  args: string[];
  /** Where the proxy must listen. */
  proxySocket: string;
  /** Where the launcher writes the process id of the sandbox (bubblewrap's). */
  pidFile: string;
}

export interface SandboxOptions {
  chromium: string;
  bwrap: string;
  prlimit: string;
  setpriv?: string;
  /** The folder of this browser's run: the launcher, the proxy's socket, the downloads (made 0700 by the caller). */
  runDir: string;
  /** The profile folder (kept between runs). */
  profileDir: string;
  /** Where Playwright has Chromium put downloads. */
  downloadsDir: string;
  /** The largest file a process of the browser may write. */
  fileBytes: number;
  /** Size of the private /tmp (memory: Chromium's shared memory lives there). */
  tmpBytes: number;
  /** The control group the browser runs in, if any. */
  group?: SandboxGroup;
}

/** The folders above a path that the sandbox must make: below /, not the ones it mounts itself. */
function ancestors(path: string): string[] {
  const made = new Set(['/', '/tmp', '/etc', '/run', '/usr', '/proc', '/dev']);
  const found: string[] = [];
  for (let above = dirname(path); !made.has(above); above = dirname(above)) found.unshift(above);
  return found;
}

const quote = (text: string) => `'${text.replace(/'/g, '\'\\\'\'')}'`;

/** A folder the browser's user owns, made if missing. */
async function ownedFolder(path: string, root: boolean): Promise<void> {
  await mkdir(path, { recursive: true, mode: 0o700 });
  if (root) await chown(path, SANDBOX_USER.uid, SANDBOX_USER.gid);
}

/** Writes the launcher and what it reads; the caller starts the proxy on `proxySocket`, then Playwright on `launcher`. */
export async function prepareSandbox(options: SandboxOptions): Promise<SandboxPlan> {
  const root = process.getuid?.() === 0;
  const uid = root ? SANDBOX_USER.uid : process.getuid!();
  const gid = root ? SANDBOX_USER.gid : process.getgid!();
  await ownedFolder(options.profileDir, root);
  await ownedFolder(options.downloadsDir, root);
  const node = realpathSync(process.execPath);
  const proxySocket = join(options.runDir, 'proxy.sock');
  const relay = join(options.runDir, 'relay.cjs');
  const passwd = join(options.runDir, 'passwd');
  const group = join(options.runDir, 'group');
  const user = root ? 'nobody' : 'browser';
  // Read by the sandbox's user (the daemon's umask would keep them from it).
  for (const [path, text] of [[relay, RELAY], [passwd, `${user}:x:${uid}:${gid}:${user}:/tmp:/usr/sbin/nologin\n`], [group, `${user}:x:${gid}:\n`]] as const) {
    await writeFile(path, text);
    await chmod(path, 0o644);
  }
  const seccomp = join(options.runDir, 'seccomp.bpf');
  await writeFile(seccomp, seccompProgram(), { mode: 0o600 });

  // The private /tmp first: the folders bound below may lie under the host's /tmp.
  const args = ['--perms', '1777', '--size', String(options.tmpBytes), '--tmpfs', '/tmp', ...systemMounts(), '--perms', '0755', '--dir', '/etc'];
  for (const name of [...ETC_READ, 'fonts']) {
    if (existsSync(`/etc/${name}`)) args.push('--ro-bind', `/etc/${name}`, `/etc/${name}`);
  }
  args.push('--ro-bind', passwd, '/etc/passwd', '--ro-bind', group, '/etc/group');
  // Node and Chromium from outside /usr (a Node of its own, a Chromium elsewhere), read-only: Node's program alone (it needs
  // nothing beside it), Chromium's folder (its resources are there).
  for (const shown of [node, dirname(options.chromium)]) {
    if (shown.startsWith('/usr/')) continue;
    for (const above of ancestors(shown)) args.push('--perms', '0711', '--dir', above);
    args.push('--ro-bind', shown, shown);
  }
  args.push('--perms', '0755', '--dir', INSIDE, '--ro-bind', relay, `${INSIDE}/relay.cjs`, '--bind', proxySocket, `${INSIDE}/proxy.sock`);
  // Playwright names these by their host paths (--user-data-dir, the downloads it reads back): the same paths inside, the
  // folders above them made to be walked through (bubblewrap would make them the daemon's alone) and to show nothing else.
  for (const folder of [options.profileDir, options.downloadsDir]) {
    for (const above of ancestors(folder)) args.push('--perms', '0711', '--dir', above);
    args.push('--bind', folder, folder);
  }
  args.push(
    '--proc', '/proc', '--dev', '/dev',
    '--unshare-ipc', '--unshare-pid', '--unshare-uts', '--unshare-net', '--unshare-cgroup-try',
    ...(root ? [] : ['--unshare-user', ...(canDisableUserns(options.bwrap) ? ['--disable-userns'] : []), '--uid', String(uid), '--gid', String(gid)]),
    '--hostname', 'browser', '--die-with-parent', '--new-session',
    '--clearenv', '--setenv', 'PATH', '/usr/local/bin:/usr/bin:/bin', '--setenv', 'HOME', '/tmp', '--setenv', 'XDG_CONFIG_HOME', '/tmp/.config',
    '--setenv', 'XDG_CACHE_HOME', '/tmp/.cache', '--setenv', 'TMPDIR', '/tmp', '--setenv', 'LANG', 'C.UTF-8', '--setenv', 'USER', user,
    '--seccomp', '6',
  );
  const bwrapArgs = join(options.runDir, 'sandbox.args');
  await writeFile(bwrapArgs, args.map((arg) => `${arg}\0`).join(''), { mode: 0o600 });

  const drop = root && options.setpriv
    ? [options.setpriv, `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--']
    : [];
  const inner = [...drop, node, '--max-old-space-size=32', `${INSIDE}/relay.cjs`, `${INSIDE}/proxy.sock`, String(RELAY_PORT), options.chromium];
  const limits = ['--core=0', `--fsize=${options.fileBytes}`];
  const joinGroup = options.group ? options.group.procs.map((procs) => `echo $$ > ${quote(procs)} || exit 70`).join('\n') : '';
  const launcher = join(options.runDir, 'launch.sh');
  const pidFile = join(options.runDir, 'sandbox.pid');
  await writeFile(launcher, [
    '#!/bin/sh',
    '# One browser\'s sandbox, written by the gateway (src/server/toolbox/browser-sandbox.ts).',
    joinGroup,
    // The process that becomes bubblewrap: killing it ends the sandbox and everything in it.
    `echo $$ > ${quote(pidFile)}`,
    `exec ${[options.prlimit, ...limits, '--', options.bwrap, '--args', '5', '--', ...inner].map(quote).join(' ')} "$@" 5< ${quote(bwrapArgs)} 6< ${quote(seccomp)}`,
    '',
  ].join('\n'), { mode: 0o700 });
  return { launcher, args: [...CHROMIUM_SWITCHES], proxySocket, pidFile };
}
