/**
 * A profile's daemon under the host's service manager: a systemd unit (a user
 * unit, or a system unit running as a named user). The unit runs `gateway run`
 * with absolute paths, restarts on failure but never after an invalid
 * configuration (exit 78), and carries no secret: they stay in the secret
 * store, or in an optional environment file of mode 0600 beside the profile.
 * The profile records that it is managed (service.json), so `gateway start`,
 * `stop` and `status` act through the manager, never as a second supervisor.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { join } from 'node:path';
import { GatewayError, usageError } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import { gatewayHome, homeId, type ProfilePaths } from '../shared/profile.ts';

export type ServiceScope = 'user' | 'system';

export interface ServiceRecord {
  manager: 'systemd';
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
  if (record?.manager !== 'systemd' || typeof record.unit !== 'string' || typeof record.path !== 'string' || !existsSync(record.path)) return undefined;
  return record;
}

export function writeServiceRecord(paths: ProfilePaths, record: ServiceRecord): void {
  const temporary = `${recordPath(paths)}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, recordPath(paths));
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
  const exec = [node, bin, 'run', '--profile', paths.name].map(unitWord).join(' ');
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
    '',
    '[Install]',
    `WantedBy=${scope === 'system' ? 'multi-user.target' : 'default.target'}`,
    '',
  ].join('\n');
}

/** Runs systemctl for the scope; a missing systemctl or a refusal is an error naming what was asked. */
export function systemctl(scope: ServiceScope, args: string[], options: { check?: boolean } = {}): SpawnSyncReturns<string> {
  const full = scope === 'user' ? ['--user', ...args] : args;
  const result = spawnSync('systemctl', full, { encoding: 'utf8' });
  if (result.error) {
    throw new GatewayError(`systemctl is not available (${(result.error as NodeJS.ErrnoException).code ?? result.error.message}): this host has no systemd to manage the daemon.`, {
      hints: ['run the daemon under another supervisor with: gateway run --profile <name>'],
    });
  }
  if (options.check !== false && result.status !== 0) {
    throw new GatewayError(`systemctl ${full.join(' ')} failed (exit ${result.status}): ${(result.stderr || result.stdout).trim() || 'no output'}`, {
      hints: scope === 'user' ? ['a user unit needs a user session: log in over SSH (not su), or use --system --user <name>'] : [],
    });
  }
  return result;
}

/** Whether the user's services outlive their sessions; undefined when logind cannot say. */
export function lingering(user: string): boolean | undefined {
  const result = spawnSync('loginctl', ['show-user', user, '--property=Linger', '--value'], { encoding: 'utf8' });
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
  if (process.getuid?.() !== 0) throw new GatewayError('A system unit is written to /etc/systemd/system, which needs root.', { exitCode: ExitCode.failure, hints: ['sudo gateway service install --system --user <name>'] });
  return { scope: 'system', user: flags.user };
}

/** Writes the unit file atomically. */
export function writeUnit(path: string, text: string): void {
  mkdirSync(join(path, '..'), { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, text, { mode: 0o644 });
  renameSync(temporary, path);
}

/** systemctl is-active / is-enabled of the unit, as systemd says them ("active", "inactive", "failed", "enabled", ...). */
export function unitState(record: ServiceRecord): { active: string; enabled: string } {
  const ask = (verb: string) => systemctl(record.scope, [verb, record.unit], { check: false }).stdout.trim() || 'unknown';
  return { active: ask('is-active'), enabled: ask('is-enabled') };
}
