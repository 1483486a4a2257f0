import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { MethodResults } from '../../shared/protocol/results.ts';

export default class ModelsList extends BaseCommand<MethodResults['models.list']> {
  static override summary = 'List the model providers and the models and aliases they offer.';
  static override examples = ['<%= config.bin %> models list', '<%= config.bin %> models list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<MethodResults['models.list']> {
    const { flags } = await this.parse(ModelsList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('models.list');
    if (result.providers.length === 0) {
      this.say('No providers. Add one: gateway config set models.providers.local \'{"kind":"openai-compatible","baseUrl":"http://127.0.0.1:11434/v1"}\'');
      return result;
    }
    this.say(table(['PROVIDER', 'KIND', 'ADDRESS', 'API KEY', 'MODELS'], result.providers.map((provider) => [
      provider.id, provider.kind ?? '-', provider.baseUrl ?? '-', provider.apiKey,
      [...provider.models, ...provider.embeddingModels.map((model) => `${model} (embeddings)`)].join(', ') || '-',
    ])));
    const aliases = Object.entries(result.aliases);
    if (aliases.length) this.say(`\nAliases: ${aliases.map(([alias, ref]) => `${alias} -> ${ref}`).join(', ')}`);
    return result;
  }
}
