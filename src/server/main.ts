import type { DaemonMessage } from '../shared/daemon-messages.ts';
import { Daemon } from './daemon.ts';

export interface MainOptions {
  profile: string;
  port?: number;
  bind?: string;
  verbose?: boolean;
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
  const code = await Daemon.run({
    profile: options.profile,
    port: options.port,
    bind: options.bind,
    verbose: options.verbose,
    report: (message) => report(message),
    onCreated: (created) => { daemon = created; },
  });
  return code;
}
