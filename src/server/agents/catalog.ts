/**
 * The agents there are: the configured ones, the default among them, one
 * resolved by id, a bare model run as an agent of one step, and the tools an
 * agent may call (its list and its tool profile's, matched against the tool
 * registry's catalog for agents).
 */
import type { AgentSettings, ChannelRoute, GatewayConfig } from '../../shared/config/types.ts';
import { matchesPattern } from '../../shared/patterns.ts';
import type { AgentInfo } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ToolSpec } from '../models/module.ts';

/** What each tool profile adds to an agent's tools. */
export const TOOL_PROFILE_TOOLS: Record<NonNullable<AgentSettings['toolProfile']>, readonly string[]> = {
  minimal: ['memory.search', 'memory.get', 'memory.note'],
  messaging: ['memory.search', 'memory.get', 'memory.note', 'message.send', 'message.react', 'message.attach', 'sessions.list', 'automations.add', 'web.search', 'ask'],
  coding: ['memory.search', 'memory.get', 'memory.note', 'files.*', 'web.fetch', 'web.search', 'browser.*', 'exec'],
  full: ['*'],
};

/** The tool names and patterns an agent may call: its list and its profile's. */
export const toolPatterns = (settings: AgentSettings): readonly string[] => [
  ...settings.tools, ...(settings.toolProfile ? TOOL_PROFILE_TOOLS[settings.toolProfile] : []),
  // An agent that may delegate has the tool to do it.
  ...(settings.delegation?.agents.length ? ['agents.delegate'] : []),
];

/** A bare model as an agent of one step with no tools of its own. */
export const directSettings = (model: string): AgentSettings => ({
  model, fallbacks: [], instructions: '', tools: [], maxSteps: 1, toolChoice: 'auto', queue: 'followup', history: 0, clientTools: true, models: [], exec: {},
  memory: { scope: 'person' },
});

const agentNotFound = (message: string) => new DomainError('not_found', message, { code: 'agent_not_found' });

export class AgentCatalog {
  private readonly config: () => GatewayConfig;
  /** The tools agents may be given, with their schemas. */
  private readonly tools: () => readonly ToolSpec[];

  constructor(config: () => GatewayConfig, tools: () => readonly ToolSpec[]) {
    this.config = config;
    this.tools = tools;
  }

  /** runtime.defaultAgent, else the agent named default, else the first. */
  defaultAgent(): string | undefined {
    const { agents, runtime: settings } = this.config();
    return settings.defaultAgent ?? (agents.default ? 'default' : Object.keys(agents)[0]);
  }

  /** An agent by id (the default one without), or not_found saying what there is. */
  resolve(agentId?: string): { id: string; settings: AgentSettings } {
    const id = agentId ?? this.defaultAgent();
    if (!id) throw agentNotFound('No agent is configured: gateway config set agents.main \'{"model":"<provider>/<model>"}\'');
    const { agents } = this.config();
    const settings = Object.hasOwn(agents, id) ? agents[id] : undefined;
    if (!settings) throw agentNotFound(`No agent ${JSON.stringify(id)} (agents: ${Object.keys(agents).join(', ') || 'none'}).`);
    return { id, settings };
  }

  list(): AgentInfo[] {
    const fallback = this.defaultAgent();
    const { agents, channels } = this.config();
    // Who each agent answers on channels: the routes that name it, and the channels it answers for everyone else.
    const answers = (id: string) => Object.entries(channels).flatMap(([channel, settings]) => [
      ...((settings.routes as ChannelRoute[] | undefined) ?? []).flatMap((route, index) => (route.agent === id ? [{ channel, order: index + 1, match: route.match }] : [])),
      ...(settings.agent === id ? [{ channel, order: null, match: {} }] : []),
    ]);
    return Object.entries(agents).map(([id, agent]) => ({
      id, model: agent.model ?? null, fallbacks: agent.fallbacks, tools: agent.tools, maxSteps: agent.maxSteps, queue: agent.queue, default: id === fallback,
      skills: agent.skills ?? [], routes: answers(id), delegatesTo: agent.delegation?.agents ?? [],
    }));
  }

  /** The tools an agent may call. An agent without tools (the common case on the inference API) skips building and sorting the catalog. */
  toolsFor(settings: AgentSettings): ToolSpec[] {
    const patterns = toolPatterns(settings);
    if (patterns.length === 0) return [];
    return this.tools().filter((tool) => patterns.some((pattern) => matchesPattern(pattern, tool.name)))
      .map((tool) => ({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema }));
  }
}
