import { ChannelRegistry } from './channel.ts';
import { ircFold } from './irc-names.ts';

/** The channels that ship with the gateway. Each loads its client library only when it starts. */
export function builtinChannels(): ChannelRegistry {
  return new ChannelRegistry().add('irc', {
    label: 'IRC',
    normalizePeer: ircFold,
    create: async (id, context) => {
      const { IrcChannel } = await import('./irc.ts');
      return new IrcChannel(id, context);
    },
  });
}
