/**
 * The flags of `gateway run`, declared and parsed in one place: by the
 * executable's fast path (no oclif on the daemon's start path) and for the
 * help of the `run` command. The daemon trusts nothing it is handed: a
 * profile name, port or bind mode that does not fit is a usage error.
 */
import { parseArgs } from 'node:util';
import { BIND_MODES, type BindMode } from './config/schema.ts';
import { usageError } from './errors.ts';
import { assertProfileName } from './profile.ts';

export const RUN_OPTIONS = {
  profile: { type: 'string', short: 'p', description: 'profile to run (else GATEWAY_PROFILE, else the one chosen with `profiles use`, else default)' },
  port: { type: 'string', description: 'listen port for this run' },
  bind: { type: 'string', description: `bind mode for this run (${BIND_MODES.join(', ')})` },
  verbose: { type: 'boolean', description: 'log at debug level' },
  json: { type: 'boolean', description: 'print {profile, exitCode} as JSON when the daemon exits' },
  detached: { type: 'boolean', description: 'started by `gateway start`; reports over IPC', hidden: true },
} as const;

export interface RunArgs {
  /** The profile named on the command line; the caller falls back to the environment and the saved choice. */
  profile?: string;
  port?: number;
  bind?: BindMode;
  verbose: boolean;
  json: boolean;
  detached: boolean;
}

export function parseRunArgs(argv: readonly string[]): RunArgs {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: [...argv], options: RUN_OPTIONS, strict: true, allowPositionals: false }));
  } catch (error) {
    throw usageError(`${(error as Error).message.replace(/\. To specify.*$/s, '')}.`, ['gateway run --help']);
  }
  const profile = values.profile === undefined ? undefined : assertProfileName(String(values.profile));
  let port: number | undefined;
  if (values.port !== undefined) {
    port = Number(values.port);
    if (!/^\d{1,5}$/.test(String(values.port)) || port < 1 || port > 65535) throw usageError(`--port must be a port from 1 to 65535 (got ${JSON.stringify(values.port)}).`);
  }
  const bind = values.bind as BindMode | undefined;
  if (bind !== undefined && !(BIND_MODES as readonly string[]).includes(bind)) {
    throw usageError(`--bind must be one of ${BIND_MODES.join(', ')} (got ${JSON.stringify(bind)}).`);
  }
  return { profile, port, bind, verbose: values.verbose === true, json: values.json === true, detached: values.detached === true };
}
