/**
 * A profile's daemon under the host's service manager: a systemd unit (a user
 * unit, or a system unit running as a named user), or on macOS a launchd agent
 * (or a daemon running as a named user). The unit runs `gateway run`
 * with absolute paths, restarts on failure but never after an invalid
 * configuration (exit 78), and carries no secret: they stay in the secret
 * store, or in an optional environment file of mode 0600 beside the profile.
 * The profile records that it is managed (service.json), so `gateway start`,
 * `stop` and `status` act through the manager, never as a second supervisor.
 */
import type { SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import { writeFileAtomic } from '../shared/atomic-file.ts';
import { homedir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { GatewayError, usageError } from '../shared/errors.ts';
import { gatewayHome, homeId, type ProfilePaths } from '../shared/profile.ts';
import { DAEMON_NODE_FLAGS } from '../shared/run-args.ts';

export type ServiceScope = 'user' | 'system';

export type ServiceManager = 'systemd' | 'launchd';

export interface ServiceRecord {
  manager: ServiceManager;
  scope: ServiceScope;
  unit: string;
  /** The unit file. */
  path: string;
  /** The account the daemon runs as. */
  user: string;
}

const recordPath = (paths: ProfilePaths) => join(paths.dir, 'service.json');

/** The service that manages the profile's daemon, if one was installed (and its unit file is still there). */
export function serviceOf(paths: ProfilePaths): ServiceRecord | undefined {
  let record: ServiceRecord;
  try {
    record = JSON.parse(readFileSync(recordPath(paths), 'utf8')) as ServiceRecord;
  } catch {
    return undefined;
  }
  if ((record?.manager !== 'systemd' && record?.manager !== 'launchd') || typeof record.unit !== 'string' || typeof record.path !== 'string' || !existsSync(record.path)) return undefined;
  return record;
}

export function writeServiceRecord(paths: ProfilePaths, record: ServiceRecord): void {
  writeFileAtomic(recordPath(paths), `${JSON.stringify(record, null, 2)}\n`);
}

export function removeServiceRecord(paths: ProfilePaths): void {
  rmSync(recordPath(paths), { force: true });
}

/** gateway-<profile>, with the home's id when GATEWAY_HOME is not the default, so two homes never share a unit. */
export function unitName(paths: ProfilePaths, env: NodeJS.ProcessEnv = process.env): string {
  const defaultHome = gatewayHome({ ...env, GATEWAY_HOME: undefined });
  return paths.home === defaultHome ? `gateway-${paths.name}.service` : `gateway-${paths.name}-${homeId(paths.home)}.service`;
}

/** Where unit files go: the user's systemd folder, or /etc/systemd/system for a system unit. */
export function unitDirectory(scope: ServiceScope, env: NodeJS.ProcessEnv = process.env): string {
  if (scope === 'system') return '/etc/systemd/system';
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'systemd', 'user');
}

/** The optional environment file (0600) a unit reads, for those who keep secrets in the environment. */
export const environmentFile = (paths: ProfilePaths) => join(paths.dir, 'service.env');

/** A value for a unit file line: quoted when it has spaces or quotes; % escaped (systemd's specifier). */
function unitWord(value: string): string {
  const escaped = value.replace(/%/g, '%%');
  return /[\s"'\\]/.test(escaped) ? `"${escaped.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : escaped;
}

export interface UnitOptions {
  paths: ProfilePaths;
  scope: ServiceScope;
  user: string;
  node: string;
  bin: string;
}

/** The unit file's text. */
export function systemdUnit(options: UnitOptions): string {
  const { paths, scope, user, node, bin } = options;
  const exec = [node, ...DAEMON_NODE_FLAGS, bin, 'run', '--profile', paths.name].map(unitWord).join(' ');
  return [
    '# Written by `gateway service install`; `gateway service uninstall` removes it.',
    '[Unit]',
    `Description=gateway daemon (profile ${paths.name})`,
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    `ExecStart=${exec}`,
    ...(scope === 'system' ? [`User=${user}`] : []),
    `Environment=${unitWord(`GATEWAY_HOME=${paths.home}`)}`,
    // Secrets stay in the secret store; this optional file (mode 0600) is for those who keep them in the environment.
    `EnvironmentFile=-${unitWord(environmentFile(paths))}`,
    'Restart=on-failure',
    'RestartSec=2',
    // 78 is an invalid configuration: restarting cannot fix it.
    'RestartPreventExitStatus=78',
    'TimeoutStopSec=30',
    'UMask=0077',
    'NoNewPrivileges=yes',
    // The daemon's own control group is its to divide: exec gives each command a group of its own (memory and processes bounded together).
    'Delegate=yes',
    '',
    '[Install]',
    `WantedBy=${scope === 'system' ? 'multi-user.target' : 'default.target'}`,
    '',
  ].join('\n');
}

/** Runs a command to its end; child_process loads here, when a service manager is asked something (`gateway status` only reads records). */
const runSync = (command: string, args: string[]): SpawnSyncReturns<string> =>
  process.getBuiltinModule('node:child_process').spawnSync(command, args, { encoding: 'utf8' });

/** Runs a service manager's command; a missing command or a refusal is an error naming what was asked. */
function runManagerCommand(command: string, args: string[], options: { check?: boolean }, refusalHints: string[] = []): SpawnSyncReturns<string> {
  const result = runSync(command, args);
  if (result.error) {
    throw new GatewayError(`${command} is not available (${(result.error as NodeJS.ErrnoException).code ?? result.error.message}): this host has no ${command === 'launchctl' ? 'launchd' : 'systemd'} to manage the daemon.`, {
      hints: ['run the daemon under another supervisor with: gateway run --profile <name>'],
    });
  }
  if (options.check !== false && result.status !== 0) {
    throw new GatewayError(`${command} ${args.join(' ')} failed (exit ${result.status}): ${(result.stderr || result.stdout).trim() || 'no output'}`, { hints: refusalHints });
  }
  return result;
}

/** Runs systemctl for the scope. */
export function systemctl(scope: ServiceScope, args: string[], options: { check?: boolean } = {}): SpawnSyncReturns<string> {
  return runManagerCommand('systemctl', scope === 'user' ? ['--user', ...args] : args, options,
    scope === 'user' ? ['a user unit needs a user session: log in over SSH (not su), or use --system --user <name>'] : []);
}

/** Whether the user's services outlive their sessions; undefined when logind cannot say. */
export function lingering(user: string): boolean | undefined {
  const result = runSync('loginctl', ['show-user', user, '--property=Linger', '--value']);
  if (result.error || result.status !== 0) return undefined;
  const value = result.stdout.trim();
  return value === 'yes' ? true : value === 'no' ? false : undefined;
}

/** What install is asked for: a user unit for the current account, or a system unit running as the named one. */
export function serviceTarget(flags: { system?: boolean; user?: string }): { scope: ServiceScope; user: string } {
  const current = userInfo().username;
  if (!flags.system) {
    if (flags.user && flags.user !== current) throw usageError(`--user ${flags.user} needs --system: a user unit runs as the user who installs it (${current}).`, ['gateway service install --system --user <name>']);
    return { scope: 'user', user: current };
  }
  if (!flags.user) throw usageError('--system needs --user <name>: the account the daemon runs as (never root by default).', ['gateway service install --system --user gateway']);
  if (process.getuid?.() !== 0) throw new GatewayError('A system unit is written to /etc/systemd/system, which needs root.', { kind: 'forbidden', hints: ['sudo gateway service install --system --user <name>'] });
  return { scope: 'system', user: flags.user };
}

/**
 * Writes the unit file atomically; returns what takes it back: the file, and
 * the folders made for it (while they are empty), so a failed install leaves
 * nothing behind.
 */
export function writeUnit(path: string, text: string): () => void {
  const folder = dirname(path);
  const made = mkdirSync(folder, { recursive: true });
  const undo = () => {
    rmSync(path, { force: true });
    if (made === undefined) return;
    for (let dir = folder; dir.length >= made.length; dir = dirname(dir)) {
      try {
        rmdirSync(dir);
      } catch {
        return; // not empty any more (something else was put there), or gone
      }
    }
  };
  try {
    writeFileAtomic(path, text, 0o644);
  } catch (error) {
    undo();
    throw error;
  }
  return undo;
}

/**
 * Checks that the service manager answers for the scope before anything is
 * stopped or written: `systemctl --user` needs the user's own systemd (a login
 * session, or lingering, with XDG_RUNTIME_DIR); launchd needs the domain the
 * agent goes into (an agent, the user's GUI session).
 */
export function assertManagerReachable(manager: ServiceManager, scope: ServiceScope, user: string): void {
  const untouched = 'nothing was installed or stopped';
  if (manager === 'launchd') {
    const domain = scope === 'system' ? 'system' : `gui/${process.getuid?.() ?? 0}`;
    const result = launchctl(['print', domain], { check: false });
    if (result.status === 0) return;
    throw new GatewayError(`The service manager launchd has no ${domain} domain to load the agent into (launchctl print ${domain}: exit ${result.status}, ${managerOutput(result)}); ${untouched}.`, {
      hints: scope === 'user' ? ['a launchd agent needs the user\'s graphical login session; over SSH use: sudo gateway service install --system --user <name>'] : [],
    });
  }
  const result = systemctl(scope, ['show-environment'], { check: false });
  if (result.status === 0) return;
  if (scope === 'system') {
    throw new GatewayError(`The service manager systemd does not answer here (systemctl show-environment: exit ${result.status}, ${managerOutput(result)}); ${untouched}.`, {
      hints: ['this host (or container) does not run systemd as its init system: run the daemon under its own supervisor with gateway run --profile <name>, or keep gateway start'],
    });
  }
  const uid = process.getuid?.() ?? 0;
  throw new GatewayError(`systemctl --user cannot reach ${user}'s systemd (${managerOutput(result)}); ${untouched}.`, {
    hints: [
      'a user unit needs the user\'s own systemd: log in as that user over SSH or at a console (not su or sudo -u), then run gateway service install again',
      `without a login session: sudo loginctl enable-linger ${user}; export XDG_RUNTIME_DIR=/run/user/${uid}`,
      'or a system unit running as that account: sudo gateway service install --system --user <name>',
    ],
  });
}

const managerOutput = (result: SpawnSyncReturns<string>) => (result.stderr || result.stdout).trim().split('\n')[0] || 'no output';

/** What the manager says of the service: active, inactive or failed; enabled or disabled. */
export function unitState(record: ServiceRecord): { active: string; enabled: string } {
  if (record.manager === 'launchd') {
    const printed = launchctl(['print', launchdTarget(record)], { check: false });
    if (printed.status !== 0) return { active: 'inactive', enabled: 'disabled' };
    const state = /^\s*state = (\S+)/m.exec(printed.stdout)?.[1];
    const lastExit = Number(/last exit code = (-?\d+)/.exec(printed.stdout)?.[1] ?? 0);
    return { active: state === 'running' ? 'active' : lastExit !== 0 ? 'failed' : 'inactive', enabled: 'enabled' };
  }
  const ask = (verb: string) => systemctl(record.scope, [verb, record.unit], { check: false }).stdout.trim() || 'unknown';
  return { active: ask('is-active'), enabled: ask('is-enabled') };
}

/** The manager of this host: launchd on macOS, systemd elsewhere. */
export const hostManager = (): ServiceManager => (process.platform === 'darwin' ? 'launchd' : 'systemd');

/** Asks the service's manager to act: enable (install and start), disable (stop and uninstall), start, stop. */
export function manage(record: ServiceRecord, action: 'enable' | 'disable' | 'start' | 'stop', options: { check?: boolean } = {}): void {
  if (record.manager === 'launchd') {
    const target = launchdTarget(record);
    const domain = target.slice(0, target.lastIndexOf('/'));
    const args = {
      enable: ['bootstrap', domain, record.path],
      disable: ['bootout', target],
      start: ['kickstart', target],
      stop: ['kill', 'SIGTERM', target],
    }[action];
    launchctl(args, options);
    return;
  }
  if (action === 'enable') {
    systemctl(record.scope, ['daemon-reload'], options);
    systemctl(record.scope, ['enable', '--now', record.unit], options);
  } else if (action === 'disable') {
    systemctl(record.scope, ['disable', '--now', record.unit], options);
  } else {
    systemctl(record.scope, [action, record.unit], options);
  }
}

/** Where the service's log is read. */
export const serviceLogHint = (record: ServiceRecord, profile: string): string => (record.manager === 'launchd'
  ? `gateway logs --profile ${profile}`
  : `journalctl ${record.scope === 'user' ? '--user ' : ''}-u ${record.unit} -n 50`);

// launchd -----------------------------------------------------------------

/** dev.gateway.<profile>, with the home's id when GATEWAY_HOME is not the default. */
export const launchdLabel = (paths: ProfilePaths, env: NodeJS.ProcessEnv = process.env): string =>
  unitName(paths, env).replace(/^gateway-/, 'dev.gateway.').replace(/\.service$/, '').replace(/-([0-9a-f]{12})$/, '.$1');

/** ~/Library/LaunchAgents for an agent, /Library/LaunchDaemons for a daemon running as a named user. */
export const launchdDirectory = (scope: ServiceScope): string => (scope === 'system' ? '/Library/LaunchDaemons' : join(homedir(), 'Library', 'LaunchAgents'));

const launchdTarget = (record: ServiceRecord) => (record.scope === 'system' ? `system/${record.unit}` : `gui/${process.getuid?.() ?? 0}/${record.unit}`);

const xml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The property list of a launchd agent (or daemon): the same command line, restarted after a failure, never holding a secret. */
export function launchdPlist(options: UnitOptions & { label: string }): string {
  const { paths, scope, user, node, bin, label } = options;
  const strings = (values: string[]) => values.map((value) => `    <string>${xml(value)}</string>`).join('\n');
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<!-- Written by `gateway service install`; `gateway service uninstall` removes it. -->',
    '<plist version="1.0">',
    '<dict>',
    `  <key>Label</key>\n  <string>${xml(label)}</string>`,
    `  <key>ProgramArguments</key>\n  <array>\n${strings([node, ...DAEMON_NODE_FLAGS, bin, 'run', '--profile', paths.name])}\n  </array>`,
    `  <key>EnvironmentVariables</key>\n  <dict>\n    <key>GATEWAY_HOME</key>\n    <string>${xml(paths.home)}</string>\n  </dict>`,
    ...(scope === 'system' ? [`  <key>UserName</key>\n  <string>${xml(user)}</string>`] : []),
    '  <key>RunAtLoad</key>\n  <true/>',
    // Restarted after a failure, not after a clean stop; an invalid configuration (78) is retried at most every 30 s.
    '  <key>KeepAlive</key>\n  <dict>\n    <key>SuccessfulExit</key>\n    <false/>\n  </dict>',
    '  <key>ThrottleInterval</key>\n  <integer>30</integer>',
    '  <key>Umask</key>\n  <integer>63</integer>',
    // The daemon writes its log file; stdout repeats it as JSON lines, which launchd would only keep twice.
    '  <key>StandardOutPath</key>\n  <string>/dev/null</string>',
    `  <key>StandardErrorPath</key>\n  <string>${xml(join(paths.dir, 'launchd.err.log'))}</string>`,
    '</dict>',
    '</plist>',
    '',
  ].join('\n');
}

/** Runs launchctl. */
export function launchctl(args: string[], options: { check?: boolean } = {}): SpawnSyncReturns<string> {
  return runManagerCommand('launchctl', args, options);
}
