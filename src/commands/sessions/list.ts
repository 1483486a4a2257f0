import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { MethodResults } from '../../shared/protocol/results.ts';

type SessionsResult = MethodResults['sessions.list'];

export default class SessionsList extends BaseCommand<SessionsResult> {
  static override summary = 'List conversations with approved senders and rooms, most recent first.';
  static override examples = ['<%= config.bin %> sessions list', '<%= config.bin %> sessions list --channel irc --json'];
  static override flags = {
    url: BaseCommand.urlFlag,
    channel: Flags.string({ description: 'only this channel (or chat, api, automation: sessions with an agent no channel holds); a name that is none of them exits 5, naming those there are' }),
    limit: Flags.integer({ description: 'at most this many (1-1000)', default: 100, min: 1, max: 1000 }),
  };

  async run(): Promise<SessionsResult> {
    const { flags } = await this.parse(SessionsList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('sessions.list', { limit: flags.limit, ...(flags.channel ? { channel: flags.channel } : {}) });
    const preview = (text: string) => (text.length > 40 ? `${text.slice(0, 39)}…` : text);
    this.say(result.sessions.length === 0 ? 'No sessions yet.' : table(['KEY', 'PEER', 'MESSAGES', 'UPDATED', 'LAST'], result.sessions.map((s) => [
      s.key, s.peerName ?? s.peer, String(s.messageCount), s.updatedAt ?? '-', s.lastMessage ? `${s.lastMessage.direction === 'in' ? '<' : '>'} ${preview(s.lastMessage.text)}` : '',
    ])));
    return result;
  }
}
