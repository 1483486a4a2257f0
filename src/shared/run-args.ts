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

/**
 * Node flags of every daemon the CLI starts (gateway start, the service units).
 * The semi-space cap: V8 otherwise grows the young generation to its largest
 * under steady load and keeps it. Measured under mixed load: resident memory
 * 265-281 MB -> 200 MB, webhook deliveries/s the same or better and their p99
 * lower (33-38 ms against 45-48). 8 MB rather than 16: the webhook thread
 * is an isolate of its own, and a backlog of jobs grows its young generation
 * as well; with 50 senders of 2-8 KB deliveries, each round then 50,000 jobs
 * queued (alternating daemons, 3 rounds each): peak RSS 228-235 -> 192-204 MB,
 * deliveries/s and p99 the same within the machine's noise. The webhook
 * thread keeps 16 MB (webhooks/thread-client.ts).
 * The invocation counts (10x V8's), for start-up only: code is not optimised
 * because start-up ran it a few hundred times. A single early optimisation
 * brings V8's optimising compilers into memory, about 5 MB of resident code in
 * a daemon that then idles. Once ready, the daemon goes back to V8's counts
 * (DAEMON_READY_NODE_FLAGS, server/core/tiering.ts), so a first load is not
 * left on unoptimised code for its first seconds.
 * No V8 memory reducer: the daemon's own (server/core/memory-reducer.ts) gives
 * memory back after a burst. V8's runs a full collection some seconds after
 * activity drops, also between one burst of requests and the next, and one
 * that falls between bursts of probes left GET /healthz at 0.72x a bare server
 * for the rest of the process's life (one run in three, measured in rounds of
 * 5 s alternating with the bare server; none in nine without it).
 * One V8 helper thread, not four: the daemon's heaps are small, and on a small
 * host four threads of concurrent collection and compilation take turns with
 * the threads that answer. Measured on 2 cores with 50 senders of 2-8 KB
 * webhook deliveries (the bench, alternating runs): p99 13-15 ms -> 10-11 ms,
 * 9,981-10,309 -> 10,444-10,622 deliveries/s, RSS under load and after it the
 * same. (No parallel collection at all, --single-threaded-gc, took as many a
 * second but held 30 MB more under load.)
 */
export const DAEMON_NODE_FLAGS = ['--max-semi-space-size=8', '--invocation-count-for-maglev=4000', '--invocation-count-for-maglev-osr=1000', '--no-memory-reducer', '--v8-pool-size=1'] as const;
/**
 * Whether the process runs with DAEMON_NODE_FLAGS' own flags of a kind (a
 * prefix), and none of that kind of the user's choosing: only then may the
 * daemon change those settings itself.
 */
export function daemonFlagsInForce(prefix: string, execArgv: readonly string[] = process.execArgv): boolean {
  const ours: readonly string[] = DAEMON_NODE_FLAGS.filter((flag) => flag.startsWith(prefix));
  return ours.length > 0 && ours.every((flag) => execArgv.includes(flag)) && execArgv.every((flag) => !flag.startsWith(prefix) || ours.includes(flag));
}
/** V8's own invocation counts, set by the daemon once it is ready. */
export const DAEMON_READY_NODE_FLAGS = ['--invocation-count-for-maglev=400'] as const;

export const RUN_OPTIONS = {
  profile: { type: 'string', short: 'p', description: 'profile to run (else GATEWAY_PROFILE, else the one chosen with `profiles use`, else default)' },
  port: { type: 'string', description: 'listen port for this run' },
  bind: { type: 'string', description: `bind mode for this run (${BIND_MODES.join(', ')})` },
  verbose: { type: 'boolean', description: 'log at debug level' },
  json: { type: 'boolean', description: 'print {profile, exitCode} as JSON when the daemon exits' },
  'log-file': { type: 'string', description: 'write the profile\'s log file: on (default) or off; under systemd it is off, the journal keeps stdout' },
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
  /** Write the profile's log file: the flag, else off in the foreground under systemd (its journal keeps stdout), else on. */
  logFile: boolean;
}

/** Started by systemd, whose journal keeps what the daemon writes to stdout. */
export const underSystemd = (env: NodeJS.ProcessEnv = process.env): boolean => Boolean(env.JOURNAL_STREAM || env.INVOCATION_ID);

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
  const logFileFlag = values['log-file'];
  if (logFileFlag !== undefined && logFileFlag !== 'on' && logFileFlag !== 'off') throw usageError(`--log-file must be on or off (got ${JSON.stringify(logFileFlag)}).`);
  // A daemon `gateway start` spawned has no stdout: its log is the file, whatever the environment it inherited says (cron under systemd).
  const detached = values.detached === true;
  const logFile = logFileFlag === undefined ? detached || !underSystemd() : logFileFlag === 'on';
  return { profile, port, bind, verbose: values.verbose === true, json: values.json === true, detached, logFile };
}
