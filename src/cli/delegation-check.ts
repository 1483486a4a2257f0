/**
 * `gateway doctor`'s delegation check: an agent whose memory keeps each
 * person's apart (memory.scope person) that the configuration lets hand
 * tasks to an agent whose memory all its people share (memory.scope agent,
 * allowed by agents.<id>.delegation.allowSharedMemory). The child acts for
 * the same person, and what it keeps of a task every one of its people may
 * find: said as a warning, with the setting that ends it.
 */
import type { GatewayConfig } from '../shared/config/types.ts';

/** A check as doctor.ts reports it. */
interface Check { name: string; status: 'ok' | 'warn' | 'fail'; detail: string; fix?: string }

export function delegationCheck(config: GatewayConfig | undefined, profile: string): Check[] {
  if (!config) return [];
  const agents = config.agents;
  const crossings: { from: string; to: string[] }[] = [];
  for (const [id, agent] of Object.entries(agents)) {
    if (!agent.delegation?.allowSharedMemory || agent.memory.scope !== 'person') continue;
    const to = agent.delegation.agents.filter((target) => Object.hasOwn(agents, target) && agents[target]!.memory.scope === 'agent');
    if (to.length > 0) crossings.push({ from: id, to });
  }
  if (crossings.length === 0) return [];
  return [{
    name: 'delegation', status: 'warn',
    detail: crossings.map(({ from, to }) => `agent ${from} keeps each person's memory apart, but may hand tasks to ${to.join(', ')}, whose memory all ${to.length === 1 ? 'its' : 'their'} people share `
      + `(agents.${from}.delegation.allowSharedMemory): one person's words can reach what others read`).join('; '),
    fix: crossings.map(({ from }) => `gateway config set agents.${from}.delegation.allowSharedMemory false --profile ${profile}`).join('\n'),
  }];
}
