import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';

interface Registered { routes: string[]; wsRoutes: string[]; methods: string[]; tools: string[]; channels: string[]; jobKinds: string[] }
interface PluginsList {
  plugins: { name: string; source: string; builtin: boolean; status: 'loaded' | 'error'; error?: string; registered: Registered }[];
  lastReload: { ok: boolean; at: string; generation: number; errors: { plugin: string; error: string }[] } | null;
}

export default class PluginsList_ extends BaseCommand<PluginsList> {
  static override summary = 'List plugins: where each comes from, what it registered, and any load error.';
  static override examples = ['<%= config.bin %> plugins list', '<%= config.bin %> plugins list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<PluginsList> {
    const { flags } = await this.parse(PluginsList_);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('plugins.list');
    const summary = (r: Registered) => [
      r.routes.length && `${r.routes.length} route${r.routes.length > 1 ? 's' : ''}`, r.wsRoutes.length && `${r.wsRoutes.length} ws`,
      r.methods.length && `methods ${r.methods.join(',')}`, r.tools.length && `tools ${r.tools.join(',')}`,
      r.channels.length && `channels ${r.channels.join(',')}`, r.jobKinds.length && `jobs ${r.jobKinds.join(',')}`,
    ].filter(Boolean).join('; ');
    this.say(table(['PLUGIN', 'SOURCE', 'STATUS', 'REGISTERED'], result.plugins.map((p) => [
      p.name, p.source, p.status === 'error' ? `error: ${p.error}` : 'loaded', summary(p.registered) || '-',
    ])));
    if (result.lastReload && !result.lastReload.ok) this.note(`The last load (${result.lastReload.at}) failed; see the errors above.`);
    return result;
  }
}
