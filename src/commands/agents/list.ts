import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { MethodResults } from '../../shared/protocol/results.ts';

export default class AgentsList extends BaseCommand<MethodResults['agents.list']> {
  static override summary = 'List the agents: their model, fallbacks, tools and queue mode.';
  static override examples = ['<%= config.bin %> agents list', '<%= config.bin %> agents list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<MethodResults['agents.list']> {
    const { flags } = await this.parse(AgentsList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('agents.list');
    this.say(result.agents.length === 0
      ? 'No agents. Add one: gateway config set agents.main \'{"model":"<provider>/<model>"}\''
      : table(['AGENT', 'MODEL', 'FALLBACKS', 'TOOLS', 'STEPS', 'QUEUE'], result.agents.map((agent) => [
        `${agent.id}${agent.default ? ' (default)' : ''}`, agent.model ?? '-', agent.fallbacks.join(', ') || '-', agent.tools.join(', ') || '-', String(agent.maxSteps), agent.queue,
      ])));
    return result;
  }
}
