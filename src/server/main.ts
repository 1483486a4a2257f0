import { writeFileSync } from 'node:fs';
import { asGatewayError, errorJson, errorText, GatewayError } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import type { DaemonMessage } from '../shared/daemon-messages.ts';
import { selectProfileName } from '../shared/profiles.ts';
import { parseRunArgs } from '../shared/run-args.ts';
import { assertExposure } from '../shared/config/exposure.ts';
import { loadConfig } from '../shared/config/profile-config.ts';
import { DaemonAlreadyRunning } from '../shared/daemon-lock.ts';
import { resolveListen } from '../shared/listen.ts';
import { profilePaths } from '../shared/profile.ts';
import { ensureProfile } from '../shared/profile-setup.ts';
import { onLooseSecretFile } from '../shared/secrets/file-store.ts';
import { openSecretStore } from '../shared/secrets/secret-store.ts';
import { Daemon } from './daemon.ts';
import { createLogger, type ConsoleLog } from './logger.ts';

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
  return runDaemon({
    ...options,
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
    nameProcess(profile);
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

/**
 * Names the daemon where ps, top and ss show it (Node calls its main thread
 * MainThread): its command line reads `gateway-daemon <profile>`, and the
 * kernel's short name (15 bytes) `gateway-daemon`, not the profile cut short.
 * Nothing finds the daemon by either: its lock names its pid and start time.
 */
function nameProcess(profile: string): void {
  process.title = `gateway-daemon ${profile}`;
  if (process.platform !== 'linux') return;
  try {
    writeFileSync('/proc/self/comm', 'gateway-daemon');
  } catch {
    // a /proc that is read-only or absent: the title stands as set
  }
}

interface RunOptions extends Omit<MainOptions, 'onReport'> {
  /** Called once with the outcome of start-up (ready, already running, or failed). */
  report: (message: DaemonMessage) => void;
  /** Receives the daemon as soon as it exists, so signals can stop it. */
  onCreated?: (daemon: Daemon) => void;
}

/**
 * Starts the daemon of a profile and resolves with its exit code once it has
 * stopped (or failed to start). Start-up failures are reported, never thrown.
 */
async function runDaemon(options: RunOptions): Promise<number> {
  const paths = profilePaths(options.profile);
  let daemon: Daemon | undefined;
  try {
    const setup = await ensureProfile(paths);
    const { effective: config } = loadConfig(paths);
    const { port, bind } = resolveListen(paths.name, config, { port: options.port, bind: options.bind });
    assertExposure(config, bind);
    const log = createLogger({
      path: paths.log, level: options.verbose ? 'debug' : config.log.level, maxBytes: config.log.maxBytes, maxFiles: config.log.maxFiles, profile: paths.name,
      file: options.logFile, console: options.console,
    });
    if (setup.warning) log.logger.warn(setup.warning);
    onLooseSecretFile((message) => log.logger.warn(message));
    // A promise a library let fail with no one to catch it (a channel SDK's background reconnect, say) is logged,
    // and costs nothing else: the daemon serves everything else it holds, as before.
    process.on('unhandledRejection', (reason) => log.logger.error({ err: reason }, 'a failure no one waited for (the daemon goes on)'));
    daemon = new Daemon({ paths, config, bind, port, log, secrets: openSecretStore(paths, setup.backend), overrides: { port: options.port, bind: options.bind } });
    options.onCreated?.(daemon);
    await daemon.start();
  } catch (error) {
    if (error instanceof DaemonAlreadyRunning) {
      daemon?.logger.info({ pid: error.record.pid }, 'another daemon holds this profile');
      options.report({ type: 'running', pid: error.record.pid, port: error.record.port });
      return ExitCode.failure;
    }
    const failure = asGatewayError(error);
    daemon?.logger.error({ err: error }, 'start-up failed');
    await daemon?.teardown();
    options.report({ type: 'error', message: failure.message, hints: failure.hints, exitCode: failure.exitCode });
    return failure.exitCode;
  }
  options.report({ type: 'ready', pid: process.pid, port: daemon.port, host: daemon.bind.host, url: daemon.url, secretStore: daemon.secrets.backend });
  await daemon.stopped;
  return ExitCode.ok;
}
