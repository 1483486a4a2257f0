import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { runSteps } from '../cli/progress.ts';
import type { StartOutcome } from '../cli/supervisor.ts';
import { BIND_MODES } from '../shared/config/schema.ts';
import { usageError } from '../shared/errors.ts';

export default class Start extends BaseCommand<StartOutcome> {
  static override summary = 'Start the profile\'s daemon in the background and wait until it is ready.';
  static override description = 'Creates the profile if it does not exist. Starting a running profile succeeds and says so. --port and --bind apply to this run only.';
  static override examples = [
    '<%= config.bin %> start',
    '<%= config.bin %> start --profile staging --bind lan',
    '<%= config.bin %> start --port 18800 --json',
  ];
  static override flags = {
    port: Flags.integer({ description: 'listen port for this run (else GATEWAY_PORT, else gateway.port)', min: 1, max: 65535 }),
    bind: Flags.string({ description: 'bind mode for this run (else gateway.bind)', options: [...BIND_MODES] }),
    verbose: Flags.boolean({ description: 'log at debug level' }),
    timeout: Flags.integer({ description: 'milliseconds to wait for the daemon to become ready', default: 30_000, min: 100 }),
  };

  async run(): Promise<StartOutcome> {
    const { flags } = await this.parse(Start);
    const profile = this.selectProfile(flags.profile);
    const [{ ensureProfile }, { loadConfig }, { resolveListen }, { assertExposure }, { startDaemon }, { inspectDaemon }] = await Promise.all([
      import('../shared/profile-setup.ts'),
      import('../shared/config/profile-config.ts'),
      import('../shared/listen.ts'),
      import('../shared/config/exposure.ts'),
      import('../cli/supervisor.ts'),
      import('../shared/daemon-lock.ts'),
    ]);

    // A profile a service manages is started by its manager, never by a second supervisor.
    const { serviceOf } = await import('../cli/service.ts');
    const record = serviceOf(profile.paths);
    if (record) {
      if (flags.port !== undefined || flags.bind) throw usageError(`Profile "${profile.name}" runs as the service ${record.unit}, which takes its port and bind from the configuration.`, [`gateway config set gateway.port <port> --profile ${profile.name}`]);
      const { startService } = await import('../cli/service-control.ts');
      const started = await startService(profile.paths, record, flags.timeout);
      this.say(started.state === 'already-running'
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
          const setup = await ensureProfile(profile.paths);
          if (setup.warning) this.warning(setup.warning);
        },
      },
      {
        title: 'Check configuration',
        run: () => {
          const found = inspectDaemon(profile.paths);
          // A stale daemon's own --port/--bind are reused when it is reclaimed.
          if (found.state === 'stale' && found.record?.overrides) {
            port ??= found.record.overrides.port;
            bind ??= found.record.overrides.bind;
          }
          const { effective } = loadConfig(profile.paths);
          const listen = resolveListen(profile.name, effective, { port, bind });
          assertExposure(effective, listen.bind);
        },
      },
      {
        title: 'Start daemon',
        run: async () => {
          context.outcome = await startDaemon(profile.paths, { port, bind, verbose: flags.verbose, timeoutMs: flags.timeout });
        },
      },
    ], context, { json: this.jsonEnabled() });

    const outcome = context.outcome!;
    if (outcome.state === 'already-running') {
      this.say(`The daemon of profile "${profile.name}" is already running at ${outcome.url} (pid ${outcome.pid}).`);
    } else {
      this.say(`The daemon of profile "${profile.name}" is running at ${outcome.url} (pid ${outcome.pid}, ready in ${outcome.startMs} ms).`);
    }
    return outcome;
  }
}
