/**
 * What `gateway status` finds and says, shared by the oclif command and the
 * fast path bin/run.js takes for a plain `gateway status [--json] [--profile
 * <name>]` (a script's or a prompt's most frequent call: it skips loading
 * oclif).
 */
import { ExitCode } from '../shared/exit-codes.ts';
import type { ProfilePaths } from '../shared/profile.ts';
import type { StatusResult } from './daemon-status.ts';

export interface StatusOutput {
  say(text: string): void;
  /** A line for a person, on stderr (also under --json). */
  note(text: string): void;
  warning(text: string): void;
  exitWith(code: ExitCode): void;
}

/** The local daemon's status, with its service unit when one manages it. */
export async function localStatus(paths: ProfilePaths): Promise<StatusResult> {
  const [{ daemonStatus }, { serviceOf, unitState }] = await Promise.all([import('./daemon-status.ts'), import('./service.ts')]);
  const status = await daemonStatus(paths);
  const record = serviceOf(paths);
  if (record) status.service = { unit: record.unit, scope: record.scope, active: unitState(record).active };
  return status;
}

/** Sets the exit code for the state and writes the human report (say is silent under --json). */
export async function reportStatus(status: StatusResult, out: StatusOutput): Promise<StatusResult> {
  const { formatDuration } = await import('./daemon-status.ts');
  // Stopped with a config it cannot start with: the config's exit code, which says more than "stopped".
  if (status.state === 'stopped') out.exitWith(status.configError ? ExitCode.invalidConfig : ExitCode.notRunning);
  if (status.state === 'stale') out.exitWith(ExitCode.stale);

  const state = status.state === 'running'
    ? `running (pid ${status.pid}${status.uptimeMs === null ? '' : `, up ${formatDuration(status.uptimeMs)}`}${status.ready === false ? ', starting' : ''})`
    : status.state === 'stale' ? `stale (${status.reason}); gateway start --profile ${status.profile} reclaims it` : 'stopped';
  const rows: [string, string][] = [
    ['Profile', status.profile],
    ['State', state],
    ['URL', status.url],
    ['Bind', status.bind],
    ['Version', status.version ?? '-'],
    ['Secrets', status.secretStore ?? '-'],
    ['Log', status.logFile || (status.state === 'running' ? 'stdout only (the supervisor\'s journal keeps it)' : '')],
  ];
  if (status.overlay) rows.push(['Overlay', `${status.overlay.url} (tailscale ${status.overlay.mode})`]);
  if (status.service) rows.push(['Service', `${status.service.unit} (${status.service.scope}, ${status.service.active})`]);
  if (status.state === 'running') rows.push(['RPC', status.rpc.ok ? 'ok' : `failed: ${status.rpc.error}`]);
  if (status.configError) rows.push(['Config', `INVALID: ${status.configError}`]);
  for (const [name, reason] of Object.entries(status.problems ?? {})) rows.push(['Problem', `${name}: ${reason}`]);
  if (status.plugins && (status.plugins.loaded.length > 0 || status.plugins.errors.length > 0)) {
    rows.push(['Plugins', [status.plugins.loaded.join(', '), ...status.plugins.errors.map((e) => `${e.plugin} FAILED: ${e.error}`)].filter(Boolean).join('; ')]);
  }
  for (const [label, value] of rows) out.say(`${`${label}:`.padEnd(9)}${value}`);
  // What to do next, on stderr with the other notes: stdout stays the report (and --json one document).
  if (status.state === 'stopped' && !status.configError) out.note(`Start it: gateway start --profile ${status.profile}`);
  for (const failure of status.plugins?.errors ?? []) out.warning(`plugin ${failure.plugin} failed to load: ${failure.error}`);
  if (status.configError) out.warning(`${status.configError} ${status.state === 'running' ? 'The running daemon keeps the settings it loaded; a restart would fail until the file is fixed.' : '`gateway start` will fail until the file is fixed.'}`);
  return status;
}
