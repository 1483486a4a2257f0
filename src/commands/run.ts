import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { GatewayError } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import { BIND_MODES } from '../shared/config/schema.ts';
import type { DaemonMessage } from '../shared/daemon-messages.ts';

export interface RunResult {
  profile: string;
  exitCode: number;
}

export default class Run extends BaseCommand<RunResult> {
  static override summary = 'Run the profile\'s daemon in the foreground (for systemd, launchd and containers).';
  static override description = 'SIGTERM or SIGINT stops accepting, closes WebSockets with 1001, drains running work and exits 0; a second signal exits at once.';
  static override examples = ['<%= config.bin %> run --profile staging'];
  static override flags = {
    port: Flags.integer({ description: 'listen port for this run', min: 1, max: 65535 }),
    bind: Flags.string({ description: 'bind mode for this run', options: [...BIND_MODES] }),
    verbose: Flags.boolean({ description: 'log at debug level' }),
    detached: Flags.boolean({ hidden: true, description: 'started by `gateway start`; reports over IPC' }),
  };

  async run(): Promise<RunResult> {
    const { flags } = await this.parse(Run);
    const profile = this.selectProfile(flags.profile);
    const { main } = await import('../server/main.ts');
    let refusal: DaemonMessage | undefined;
    const code = await main({
      profile: profile.name,
      port: flags.port,
      bind: flags.bind,
      verbose: flags.verbose,
      onReport: (message) => {
        if (flags.detached) return;
        if (message.type === 'ready') this.note(`Gateway (profile "${profile.name}") listening on ${message.url} (pid ${message.pid}).`);
        else refusal = message;
      },
    });
    if (refusal?.type === 'error') throw new GatewayError(refusal.message, { exitCode: refusal.exitCode as ExitCode, hints: refusal.hints });
    if (refusal?.type === 'running') {
      throw new GatewayError(`Profile "${profile.name}" already has a running daemon (pid ${refusal.pid}, port ${refusal.port}).`, {
        hints: [`gateway stop --profile ${profile.name}`],
      });
    }
    this.exitWith(code as ExitCode);
    return { profile: profile.name, exitCode: code };
  }
}
