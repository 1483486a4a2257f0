import { BaseCommand } from '../cli/base-command.ts';
import { ExitCode } from '../shared/exit-codes.ts';

interface ReloadResult {
  ok: boolean;
  pid: number;
  config: { ok: boolean; error?: string };
  plugins: { ok: boolean; generation: number; errors: { plugin: string; error: string }[] };
}

export default class Reload extends BaseCommand<ReloadResult> {
  static override summary = 'Re-read the configuration and plugins without restarting the daemon (also: kill -HUP <pid>).';
  static override description = 'Routes, methods and tools are swapped at once; requests in flight finish on the old table and open WebSocket connections stay. '
    + 'A plugin that fails to load leaves the previous table in place; the command then exits 1 naming it. '
    + 'A configuration the daemon cannot run is refused whole, naming each problem, and the command exits 78.';
  static override examples = ['<%= config.bin %> reload', '<%= config.bin %> reload --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<ReloadResult> {
    const { flags } = await this.parse(Reload);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('reload', {}, 30_000);
    if (!result.config.ok) this.note(`Configuration not applied: ${result.config.error}`);
    for (const failure of result.plugins.errors) this.note(`Plugin ${failure.plugin} failed: ${failure.error}`);
    if (result.ok) this.say(`Reloaded (pid ${result.pid}, plugin table ${result.plugins.generation}).`);
    else {
      this.note(result.plugins.ok ? 'The plugins were reloaded.' : 'The previous plugin table stays in place.');
      // A configuration the daemon would not take exits as an invalid configuration does everywhere (78).
      this.exitWith(result.config.ok ? ExitCode.failure : ExitCode.invalidConfig);
    }
    return result;
  }
}
