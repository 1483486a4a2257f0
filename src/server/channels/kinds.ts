/**
 * The channel kinds built in, one folder each; a kind loads its platform's
 * code (and client library) only when a channel of it starts. Plugins add
 * more through the same table.
 */
import { unknownChannelProblems } from '../../shared/config/channel-kinds.ts';
import type { ChannelKind } from '../kernel/channel.ts';
import type { ModuleContext } from '../kernel/module.ts';
import { deltachatPeer } from './deltachat/peers.ts';
import { ircFold } from './irc/irc-names.ts';
import { signalPeer } from './signal/peers.ts';

export const BUILT_IN_KINDS: readonly (ChannelKind & { id: string })[] = [
  {
    id: 'irc',
    label: 'IRC',
    normalizePeer: ircFold,
    create: async (id, context) => {
      const { IrcChannel } = await import('./irc/irc.ts');
      return new IrcChannel(id, context);
    },
  },
  {
    id: 'telegram',
    label: 'Telegram',
    buttons: true,
    normalizePeer: (peer) => (peer.trim().startsWith('@') ? peer.trim().toLowerCase() : peer.trim()),
    create: async (id, context) => {
      const { TelegramChannel } = await import('./telegram/telegram.ts');
      return new TelegramChannel(id, context);
    },
  },
  {
    id: 'slack',
    label: 'Slack',
    buttons: true,
    normalizePeer: (peer) => peer.trim().toUpperCase(),
    create: async (id, context) => {
      const { SlackChannel } = await import('./slack/slack.ts');
      return new SlackChannel(id, context);
    },
  },
  {
    id: 'discord',
    label: 'Discord',
    buttons: true,
    normalizePeer: (peer) => peer.trim().replace(/^<@!?(\d+)>$/, '@$1'),
    create: async (id, context) => {
      const { DiscordChannel } = await import('./discord/discord.ts');
      return new DiscordChannel(id, context);
    },
  },
  {
    id: 'email',
    label: 'Email',
    normalizePeer: (peer) => peer.trim().replace(/^mailto:/i, '').split('?')[0]!.toLowerCase(),
    create: async (id, context) => {
      const { EmailChannel } = await import('./email/email.ts');
      return new EmailChannel(id, context);
    },
  },
  {
    id: 'matrix',
    label: 'Matrix',
    normalizePeer: (peer) => peer.trim(),
    create: async (id, context) => {
      const { MatrixChannel } = await import('./matrix/matrix.ts');
      return new MatrixChannel(id, context);
    },
  },
  {
    id: 'whatsapp',
    label: 'WhatsApp',
    // Interactive messages (reply buttons, a list); a message cannot be edited.
    buttons: true,
    edits: false,
    normalizePeer: (peer) => peer.split('/')[0]!.replace(/[^\d]/g, ''),
    create: async (id, context) => {
      const { WhatsAppChannel } = await import('./whatsapp/whatsapp.ts');
      return new WhatsAppChannel(id, context);
    },
  },
  {
    id: 'signal',
    label: 'Signal',
    normalizePeer: signalPeer,
    create: async (id, context) => {
      const { SignalChannel } = await import('./signal/signal.ts');
      return new SignalChannel(id, context);
    },
  },
  {
    id: 'deltachat',
    label: 'Delta Chat',
    normalizePeer: deltachatPeer,
    create: async (id, context) => {
      const { DeltaChatChannel } = await import('./deltachat/deltachat.ts');
      return new DeltaChatChannel(id, context);
    },
  },
  {
    id: 'xmpp',
    label: 'XMPP',
    normalizePeer: (peer) => peer.split('/')[0]!.trim().toLowerCase(),
    create: async (id, context) => {
      const { XmppChannel } = await import('./xmpp/xmpp.ts');
      return new XmppChannel(id, context);
    },
  },
];

/** A configuration whose channels.<id> names a kind the gateway does not have (built in, or from a loaded plugin) is refused. */
export function checkChannelKinds(ctx: ModuleContext): void {
  ctx.configCheck((next) => {
    // Plugins configured and not loaded yet may add channels: their names wait for the reload to say.
    const loaded = new Set(ctx.daemon.plugins().plugins.filter((plugin) => !plugin.builtin && plugin.status === 'loaded').map((plugin) => plugin.source));
    if (next.plugins.load.some((source) => !loaded.has(source))) return [];
    return unknownChannelProblems(next, [...ctx.table().channels.keys()]);
  });
}
