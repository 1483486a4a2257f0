/**
 * Which agent answers a channel's message: the first of channels.<id>.routes
 * whose match holds (the account it reached, its sender, its room), else the
 * channel's own agent. Chosen once, as the message is recorded: the session
 * it goes to is the agent's own.
 */
import type { ChannelRoute } from '../../shared/config/types.ts';
import type { ChannelSettings, InboundMessage } from '../kernel/channel.ts';

/** The agent that answers, and the route that chose it (absent: the channel's own agent, or none). */
export interface Routed {
  agent?: string;
  route?: number;
}

/** The agent for a message; `normalize` folds a peer or room as the channel compares them (IRC's case folding). */
export function routeOf(settings: ChannelSettings | undefined, message: Pick<InboundMessage, 'account' | 'sender' | 'kind' | 'room'>, normalize: (peer: string) => string): Routed {
  const routes = (settings?.routes as ChannelRoute[] | undefined) ?? [];
  const index = routes.findIndex(({ match }) => Object.keys(match).length > 0
    && (match.account === undefined || match.account === message.account)
    && (match.peer === undefined || normalize(match.peer) === message.sender)
    && (match.room === undefined || (message.kind === 'group' && message.room !== undefined && normalize(match.room) === message.room)));
  if (index >= 0) return { agent: routes[index]!.agent, route: index };
  const agent = settings?.agent as string | undefined;
  return agent ? { agent } : {};
}

/**
 * The agent a session is kept for, in its key: none for the channel's own
 * agent (its sessions are those the channel always had), the routed agent's
 * id for another one, so that each agent keeps its own conversation.
 */
export function sessionAgent(settings: ChannelSettings | undefined, routed: Routed): string | undefined {
  return routed.agent !== undefined && routed.agent !== settings?.agent ? routed.agent : undefined;
}
