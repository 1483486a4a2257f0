import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { BIND_MODES } from '../shared/config/schema.ts';
import { RUN_OPTIONS } from '../shared/run-args.ts';

export interface RunResult {
  profile: string;
  exitCode: number;
}

/**
 * The daemon in the foreground. The executable runs `gateway run` without
 * loading oclif (see bin/run.js); this command gives it its help and, when
 * oclif is in front, hands the arguments to the same parser.
 */
export default class Run extends BaseCommand<RunResult> {
  static override summary = 'Run the profile\'s daemon in the foreground (for systemd, launchd and containers).';
  static override description = 'SIGTERM or SIGINT stops accepting, closes WebSockets with 1001, drains running work and exits 0; a second signal exits at once. '
    + 'The log goes to stdout as well as to the profile\'s file: JSON lines, or readable lines on a terminal. '
    + 'Under systemd (JOURNAL_STREAM or INVOCATION_ID set) it goes to stdout only, for the journal; --log-file on|off decides.';
  static override examples = ['<%= config.bin %> run --profile staging'];
  static override enableJsonFlag = false;
  static override flags = {
    port: Flags.integer({ description: RUN_OPTIONS.port.description, min: 1, max: 65535 }),
    bind: Flags.string({ description: RUN_OPTIONS.bind.description, options: [...BIND_MODES] }),
    verbose: Flags.boolean({ description: RUN_OPTIONS.verbose.description }),
    json: Flags.boolean({ description: RUN_OPTIONS.json.description }),
    'log-file': Flags.string({ description: RUN_OPTIONS['log-file'].description, options: ['on', 'off'] }),
    detached: Flags.boolean({ hidden: true, description: RUN_OPTIONS.detached.description }),
  };

  async run(): Promise<RunResult> {
    const { runCommand } = await import('../server/main.ts');
    process.exitCode = await runCommand(this.argv);
    return { profile: '', exitCode: Number(process.exitCode) };
  }
}
