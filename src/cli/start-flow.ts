/**
 * What `gateway start` does, shared by the oclif command and the fast path in
 * bin/run.js (a plain `gateway start [--json] [--profile <name>]` answered
 * without loading oclif): the same steps, the same output, byte for byte.
 */
import type { ProfileRef } from './base-command.ts';
import { runSteps } from './progress.ts';
import type { StartOutcome } from './supervisor.ts';
import { usageError } from '../shared/errors.ts';

export interface StartFlags {
  port?: number;
  bind?: string;
  verbose?: boolean;
  timeout: number;
}

export interface StartOutput {
  say: (text: string) => void;
  warning: (text: string) => void;
  json: boolean;
}

export async function startProfile(profile: ProfileRef, flags: StartFlags, out: StartOutput): Promise<StartOutcome> {
  const [{ ensureProfile }, { startDaemon }, { inspectDaemon }] = await Promise.all([
    import('../shared/profile-setup.ts'),
    import('./supervisor.ts'),
    import('../shared/daemon-lock.ts'),
  ]);

  // A profile a service manages is started by its manager, never by a second supervisor.
  const { serviceOf } = await import('./service.ts');
  const record = serviceOf(profile.paths);
  if (record) {
    if (flags.port !== undefined || flags.bind) throw usageError(`Profile "${profile.name}" runs as the service ${record.unit}, which takes its port and bind from the configuration.`, [`gateway config set gateway.port <port> --profile ${profile.name}`]);
    const { startService } = await import('./service-control.ts');
    const started = await startService(profile.paths, record, flags.timeout);
    out.say(started.state === 'already-running'
      ? `The daemon of profile "${profile.name}" is already running under ${record.unit} at ${started.url} (pid ${started.pid}).`
      : `Started ${record.unit}: the daemon of profile "${profile.name}" is running at ${started.url} (pid ${started.pid}).`);
    return { profile: profile.name, ...started, logFile: '', service: record.unit };
  }

  const context: { outcome?: StartOutcome } = {};
  let port = flags.port;
  let bind = flags.bind;
  await runSteps([
    {
      title: `Prepare profile ${profile.name}`,
      run: async () => {
        const setup = await ensureProfile(profile.paths, { checkedByDaemon: true });
        if (setup.warning) out.warning(setup.warning);
        const found = inspectDaemon(profile.paths);
        // A stale daemon's own --port/--bind are reused when it is reclaimed.
        if (found.state === 'stale' && found.record?.overrides) {
          port ??= found.record.overrides.port;
          bind ??= found.record.overrides.bind;
        }
      },
    },
    {
      // The daemon checks its configuration (settings, port and bind, exposure) before it listens, and a problem comes
      // back from it with its message, hints and exit code, as from a check made here: checking here first as well
      // would only add the time the check takes to every start.
      title: 'Check configuration and start daemon',
      run: async () => {
        context.outcome = await startDaemon(profile.paths, { port, bind, verbose: flags.verbose, timeoutMs: flags.timeout });
      },
    },
  ], context, { json: out.json });

  const outcome = context.outcome!;
  if (outcome.state === 'already-running') {
    out.say(`The daemon of profile "${profile.name}" is already running at ${outcome.url} (pid ${outcome.pid}).`);
  } else {
    out.say(`The daemon of profile "${profile.name}" is running at ${outcome.url} (pid ${outcome.pid}, ready in ${outcome.startMs} ms).`);
  }
  return outcome;
}
