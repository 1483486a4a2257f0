import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { ChannelRoute } from '../../shared/config/types.ts';

export interface ChannelRoutes {
  profile: string;
  channel: string;
  /** In the order they are checked: the first whose match holds names the agent. */
  routes: { order: number; match: ChannelRoute['match']; who: string; agent: string; sessions: string }[];
  /** Whoever no route matches: the channel's own agent (null: no one answers them). */
  otherwise: { agent: string | null; sessions: string };
}

export default class ChannelsRoutes extends BaseCommand<ChannelRoutes> {
  static override summary = 'Show which agent answers whom on a channel: its routes in order, then everyone else.';
  static override description = 'Routes are channels.<id>.routes (checked in order), then channels.<id>.agent. Each agent keeps sessions of its own; the key of those sessions is shown with <account>, <peer> or <room> where a message fills them in.';
  static override examples = ['<%= config.bin %> channels routes irc', '<%= config.bin %> channels routes telegram --json'];
  static override args = { channel: Args.string({ description: 'channel id, such as irc or telegram', required: true }) };

  async run(): Promise<ChannelRoutes> {
    const { args, flags } = await this.parse(ChannelsRoutes);
    const profile = this.existingProfile(flags.profile);
    const [{ loadConfig }, { describeMatch }, { sessionKey }, { suggestions }, { notFoundError }] = await Promise.all([
      import('../../shared/config/profile-config.ts'), import('../../shared/config/keys.ts'), import('../../shared/channels.ts'),
      import('../../shared/suggest.ts'), import('../../shared/errors.ts'),
    ]);
    const { effective } = loadConfig(profile.paths);
    const settings = effective.channels[args.channel] as { agent?: string; routes?: ChannelRoute[] } | undefined;
    if (!settings) {
      const configured = Object.keys(effective.channels).sort();
      const meant = suggestions(args.channel, configured);
      throw notFoundError(`No channel ${args.channel} is configured${meant.length ? `; did you mean ${meant.join(' or ')}?` : ''} (channels: ${configured.join(', ') || 'none'}).`,
        [`gateway config set channels.${args.channel}.enabled true   # adds it`]);
    }
    const own = settings.agent ?? null;
    // The sessions a route's messages go to: the agent's own, unless it is the channel's agent.
    const keyFor = (match: ChannelRoute['match'], agent: string | null) => {
      const account = match.account ?? '<account>';
      const kept = agent === null || agent === own ? undefined : agent;
      if (match.room !== undefined) return sessionKey(args.channel, account, 'group', match.room, kept);
      return `${sessionKey(args.channel, account, 'direct', match.peer ?? '<peer>', kept)}, ${sessionKey(args.channel, account, 'group', '<room>', kept)}`;
    };
    const routes = (settings.routes ?? []).map((route, index) => ({
      order: index + 1, match: route.match, who: describeMatch(route.match), agent: route.agent, sessions: keyFor(route.match, route.agent),
    }));
    const otherwise = { agent: own, sessions: keyFor({}, own) };
    this.say(table(['#', 'WHO', 'AGENT', 'SESSIONS'], [
      ...routes.map((route) => [String(route.order), route.who, route.agent, route.sessions]),
      ['', routes.length ? 'everyone else' : 'everyone', own ?? '(no one answers)', otherwise.sessions],
    ]));
    if (!own && routes.length === 0) this.note(`No agent answers on ${args.channel}: gateway config set channels.${args.channel}.agent <agent>`);
    return { profile: profile.name, channel: args.channel, routes, otherwise };
  }
}
