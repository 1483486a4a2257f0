/** What makes a hooks mapping unable to act, found when it is set rather than at every call. */
import type { GatewayConfig } from '../../shared/config/types.ts';

/** The mappings that queue jobs of a kind no handler runs, each named by its key. */
export function mappingProblems(config: GatewayConfig, handles: (kind: string) => boolean): string[] {
  return config.hooks.mappings.flatMap((mapping, index) => {
    const kind = mapping.kind ?? `hooks.${mapping.name}`;
    return mapping.action === 'job' && !handles(kind) ? [`hooks.mappings.${index} (${mapping.name}): no handler runs jobs of kind ${kind}`] : [];
  });
}
