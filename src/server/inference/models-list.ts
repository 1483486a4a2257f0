/** The models the inference API offers: the agents (gateway/<agent>, and gateway for the default), the providers' models and the aliases. */
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { AgentInfo } from '../../shared/protocol/results.ts';

/** Whether a model is one the API offers to call bare: an alias, or a provider's model as <provider>/<model>. */
export function offered(config: GatewayConfig, model: string): boolean {
  const { models: { providers, aliases } } = config;
  if (Object.hasOwn(aliases, model)) return true;
  const slash = model.indexOf('/');
  const provider = model.slice(0, slash);
  return slash > 0 && Object.hasOwn(providers, provider) && providers[provider]!.models.includes(model.slice(slash + 1));
}

/** GET /v1/models. */
export function modelList(config: GatewayConfig, agents: readonly AgentInfo[]) {
  const data = [
    ...(agents.length ? [{ id: 'gateway', object: 'model', created: 0, owned_by: 'gateway' }] : []),
    ...agents.map((agent) => ({ id: `gateway/${agent.id}`, object: 'model', created: 0, owned_by: 'gateway' })),
    ...Object.entries(config.models.providers).flatMap(([provider, settings]) => [...new Set([...settings.models, ...settings.embeddingModels])].map((model) => ({ id: `${provider}/${model}`, object: 'model', created: 0, owned_by: provider }))),
    ...Object.keys(config.models.aliases).map((alias) => ({ id: alias, object: 'model', created: 0, owned_by: 'gateway' })),
  ];
  return { object: 'list', data };
}
