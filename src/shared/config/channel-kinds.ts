/**
 * The channel kinds the gateway has built in: `channels.<id>` names one of
 * them, or a channel a loaded plugin adds. A name that is neither (a typo,
 * `channels.telgram`) is refused when it is set, with the kind meant.
 */
import { suggestions } from '../suggest.ts';
import type { GatewayConfig } from './types.ts';

export const BUILT_IN_CHANNELS = ['deltachat', 'discord', 'email', 'irc', 'matrix', 'signal', 'slack', 'telegram', 'whatsapp', 'xmpp'] as const;

/**
 * Problems ("channels.<id>: ...") for channel ids that name no kind among
 * the known ones. Without `known` (the daemon is stopped: plugins are not
 * loaded), any id is taken while plugins are configured, which may add it.
 */
export function unknownChannelProblems(config: GatewayConfig, known?: readonly string[]): string[] {
  const kinds = known ?? BUILT_IN_CHANNELS;
  if (!known && config.plugins.load.length > 0) return [];
  return Object.keys(config.channels).filter((id) => !kinds.includes(id)).map((id) => {
    const meant = suggestions(id, kinds);
    return `channels.${id}: no channel kind is named ${id}${meant.length ? `; did you mean ${meant.join(' or ')}?` : ''} (channels: ${[...kinds].sort().join(', ')}${known ? '' : '; a plugin\'s channel needs plugins.load'})`;
  });
}
