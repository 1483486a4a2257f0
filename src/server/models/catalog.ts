/** Model references: `<provider>/<model>` or an alias, resolved against the providers in the configuration. */
import type { GatewayConfig, ProviderSettings } from '../../shared/config/types.ts';
import { DomainError } from '../kernel/errors.ts';

export interface ModelTarget {
  /** The reference as resolved: `<provider>/<model>`. */
  ref: string;
  providerId: string;
  model: string;
  provider: ProviderSettings;
}

export const modelNotFound = (message: string) => new DomainError('not_found', message, { code: 'model_not_found', details: { param: 'model' } });

/** Resolves a reference (an alias first); not_found (model_not_found) names what is missing. */
export function resolveModel(config: GatewayConfig, reference: string): ModelTarget {
  // Names from requests are looked up as the configuration's own keys: "valueOf" or "constructor/x" name nothing.
  const { aliases, providers } = config.models;
  const ref = Object.hasOwn(aliases, reference) ? aliases[reference]! : reference;
  const slash = ref.indexOf('/');
  if (slash <= 0 || slash === ref.length - 1) {
    throw modelNotFound(`Model ${JSON.stringify(reference)} is neither <provider>/<model> nor an alias (models.aliases).`);
  }
  const providerId = ref.slice(0, slash);
  const provider = Object.hasOwn(providers, providerId) ? providers[providerId] : undefined;
  if (!provider) throw modelNotFound(`Model ${JSON.stringify(reference)} names provider ${JSON.stringify(providerId)}, which is not configured (models.providers.${providerId}).`);
  return { ref, providerId, model: ref.slice(slash + 1), provider };
}

/** The provider models the configuration offers: those listed under each provider, and every alias. */
export function offeredModels(config: GatewayConfig): { id: string; provider: string; kind: 'chat' | 'embedding'; alias?: string }[] {
  const models: { id: string; provider: string; kind: 'chat' | 'embedding'; alias?: string }[] = [];
  for (const [providerId, provider] of Object.entries(config.models.providers)) {
    for (const model of provider.models) models.push({ id: `${providerId}/${model}`, provider: providerId, kind: 'chat' });
    for (const model of provider.embeddingModels) models.push({ id: `${providerId}/${model}`, provider: providerId, kind: 'embedding' });
  }
  for (const [alias, ref] of Object.entries(config.models.aliases)) {
    const slash = ref.indexOf('/');
    models.push({ id: alias, provider: ref.slice(0, slash), kind: 'chat', alias: ref });
  }
  return models;
}
