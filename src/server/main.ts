import { asGatewayError, errorJson, errorText, GatewayError } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import type { DaemonMessage } from '../shared/daemon-messages.ts';
import { selectProfileName } from '../shared/profiles.ts';
import { parseRunArgs } from '../shared/run-args.ts';
import { Daemon } from './daemon.ts';
import type { ConsoleLog } from './logger.ts';

export interface MainOptions {
  profile: string;
  port?: number;
  bind?: string;
  verbose?: boolean;
  /** Write the profile's log file (default true). */
  logFile?: boolean;
  /** Also log to stdout: JSON lines, or readable lines on a terminal. */
  console?: ConsoleLog;
  /** Where start-up outcomes go when no parent listens over IPC (foreground `gateway run`). */
  onReport?: (message: DaemonMessage) => void;
}

/**
 * The daemon's entry: runs until SIGTERM/SIGINT or an RPC shutdown and resolves
 * with the exit code. A second signal exits at once.
 */
export async function main(options: MainOptions): Promise<number> {
  // Everything the daemon creates (state.db, its WAL, logs) is for the profile's owner only.
  process.umask(0o077);
  let daemon: Daemon | undefined;
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1 || !daemon || daemon.readiness === 'starting') {
      daemon?.abort();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
    void daemon.stop(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // A daemon has no terminal: SIGHUP means what it means to daemons, re-read the configuration and plugins.
  process.on('SIGHUP', () => {
    if (daemon?.readiness === 'ready') void daemon.reload('SIGHUP').catch(() => undefined);
  });

  const report = (message: DaemonMessage) => {
    options.onReport?.(message);
    if (process.send && process.connected) {
      process.send(message, () => process.connected && process.disconnect());
    }
  };
  return Daemon.run({
    profile: options.profile,
    port: options.port,
    bind: options.bind,
    verbose: options.verbose,
    logFile: options.logFile,
    console: options.console,
    report: (message) => report(message),
    onCreated: (created) => { daemon = created; },
  });
}

/**
 * `gateway run [flags]`: parses the flags (one parser, shared with the help of
 * the `run` command), runs the daemon and says what happened. A daemon spawned
 * by `gateway start` (--detached) reports over IPC only.
 */
export async function runCommand(argv: readonly string[]): Promise<number> {
  let json = argv.includes('--json');
  let profile = '';
  const fail = (failure: GatewayError): number => {
    if (json) process.stdout.write(`${JSON.stringify(errorJson(failure), null, 2)}\n`);
    process.stderr.write(errorText(failure));
    return failure.exitCode;
  };
  try {
    const args = parseRunArgs(argv);
    json = args.json;
    profile = selectProfileName(args.profile).name;
    let refusal: DaemonMessage | undefined;
    const code = await main({
      profile, port: args.port, bind: args.bind, verbose: args.verbose, logFile: args.logFile,
      // In the foreground the log goes to stdout too (journald and container runtimes read it); a detached daemon has no stdout.
      console: args.detached ? undefined : process.stdout.isTTY ? 'pretty' : 'json',
      onReport: (message) => {
        if (args.detached) return;
        if (message.type === 'ready') process.stderr.write(`Gateway (profile "${profile}") listening on ${message.url} (pid ${message.pid}).\n`);
        else refusal = message;
      },
    });
    if (refusal?.type === 'error') return fail(new GatewayError(refusal.message, { exitCode: refusal.exitCode as ExitCode, hints: refusal.hints }));
    if (refusal?.type === 'running') {
      return fail(new GatewayError(`Profile "${profile}" already has a running daemon (pid ${refusal.pid}, port ${refusal.port}).`, { hints: [`gateway stop --profile ${profile}`] }));
    }
    if (json) process.stdout.write(`${JSON.stringify({ profile, exitCode: code }, null, 2)}\n`);
    return code;
  } catch (error) {
    return fail(asGatewayError(error));
  }
}
