import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import type { StartOutcome } from '../cli/supervisor.ts';
import { BIND_MODES } from '../shared/config/schema.ts';

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
    const { startProfile } = await import('../cli/start-flow.ts');
    return startProfile(this.selectProfile(flags.profile), flags, {
      say: (text) => this.say(text), warning: (text) => this.warning(text), json: this.jsonEnabled(),
    });
  }
}
