import { expect } from 'chai';
import type { ChannelSettings } from '../../../../src/server/kernel/channel.ts';
import { accountsOf, settingPath } from '../../../../src/server/channels/accounts.ts';
import { discordAccounts } from '../../../../src/server/channels/discord/discord.ts';
import { emailAccounts } from '../../../../src/server/channels/email/email.ts';
import { ircAccounts } from '../../../../src/server/channels/irc/irc.ts';
import { matrixAccounts } from '../../../../src/server/channels/matrix/matrix.ts';
import { slackAccounts } from '../../../../src/server/channels/slack/slack.ts';
import { telegramAccounts } from '../../../../src/server/channels/telegram/telegram.ts';
import { xmppAccounts } from '../../../../src/server/channels/xmpp/xmpp.ts';

interface Bot { enabled: boolean; apiRoot?: string; mode?: string; rooms: string[] }
const settings = (values: Record<string, unknown>) => ({ enabled: true, dmPolicy: 'pairing', allowFrom: [], ...values }) as ChannelSettings;
const shape = { keys: ['apiRoot', 'mode', 'rooms'] as const, inherited: { apiRoot: true, mode: true } as const, defaults: { mode: 'poll', rooms: [] } };

describe('channel accounts from settings', () => {
  it('reads the default account from the top level and the others from accounts, taking what they leave out from the top level where it is inherited', () => {
    const accounts = accountsOf<Bot>(settings({
      apiRoot: 'https://api.example', rooms: ['1'],
      accounts: { second: { rooms: ['2'] }, third: { enabled: false, apiRoot: 'https://other.example', mode: 'hook' } },
    }), shape);
    expect([...accounts.keys()]).to.deep.equal(['default', 'second', 'third']);
    expect(accounts.get('default')).to.deep.equal({ enabled: true, apiRoot: 'https://api.example', mode: 'poll', rooms: ['1'] });
    expect(accounts.get('second')).to.deep.equal({ enabled: true, apiRoot: 'https://api.example', mode: 'poll', rooms: ['2'] });
    // Rooms are not inherited: an account answers only in its own.
    expect(accounts.get('third')).to.deep.equal({ enabled: false, apiRoot: 'https://other.example', mode: 'hook', rooms: [] });
  });

  it('sets every key, to undefined where no one gives it, and the default account is enabled whatever the channel\'s enabled says', () => {
    const accounts = accountsOf<Bot>(settings({ enabled: false }), shape);
    expect(Object.keys(accounts.get('default')!)).to.have.members(['enabled', 'apiRoot', 'mode', 'rooms']);
    expect(accounts.get('default')).to.deep.equal({ enabled: true, apiRoot: undefined, mode: 'poll', rooms: [] });
  });

  it('leaves the default account out when the top level describes none', () => {
    const hasDefault = (top: Partial<Bot>) => top.apiRoot !== undefined;
    expect([...accountsOf<Bot>(settings({ accounts: { a: {} } }), { ...shape, hasDefault }).keys()]).to.deep.equal(['a']);
    expect([...accountsOf<Bot>(settings({ apiRoot: 'https://api.example' }), { ...shape, hasDefault }).keys()]).to.deep.equal(['default']);
  });

  it('inherits under a condition: XMPP\'s server only for an account of the same domain', () => {
    const accounts = xmppAccounts(settings({
      jid: 'bot@example.org', service: 'xmpps://chat.example.org:5223', allowPlaintext: true,
      accounts: { same: { jid: 'other@example.org' }, elsewhere: { jid: 'bot@example.net', nick: 'b' } },
    }));
    expect(accounts.get('same')).to.include({ service: 'xmpps://chat.example.org:5223', allowPlaintext: true, nick: undefined });
    expect(accounts.get('elsewhere')).to.include({ service: undefined, allowPlaintext: true, nick: 'b' });
  });

  it('keeps IRC\'s default account when there is no other, even without a host', () => {
    expect([...ircAccounts(settings({})).keys()]).to.deep.equal(['default']);
    expect([...ircAccounts(settings({ accounts: { a: { host: 'irc.example' } } })).keys()]).to.deep.equal(['a']);
    const both = ircAccounts(settings({ host: 'irc.example', nick: 'gw', tls: true, rooms: ['#ops'], accounts: { b: { nick: 'gw2' } } }));
    expect(both.get('b')).to.deep.include({ host: 'irc.example', nick: 'gw2', tls: true, sasl: false, rooms: [] });
  });

  it('names where an account\'s setting or secret is', () => {
    expect(settingPath('tg', 'default', 'botToken')).to.equal('channels.tg.botToken');
    expect(settingPath('tg', 'second', 'botToken')).to.equal('channels.tg.accounts.second.botToken');
  });
  it('Telegram: each bot inherits the Bot API server, never the webhook address or the rooms', () => {
    const accounts = telegramAccounts(settings({ apiRoot: 'http://127.0.0.1:8081', webhookUrl: 'https://gw.example/channels/telegram/default/webhook', rooms: ['-100'], accounts: { two: {} } }));
    expect(accounts.get('default')).to.deep.equal({ enabled: true, apiRoot: 'http://127.0.0.1:8081', webhookUrl: 'https://gw.example/channels/telegram/default/webhook', rooms: ['-100'] });
    expect(accounts.get('two')).to.deep.equal({ enabled: true, apiRoot: 'http://127.0.0.1:8081', webhookUrl: undefined, rooms: [] });
  });

  it('Slack: Socket Mode unless the events say http, the choice inherited by each app', () => {
    expect(slackAccounts(settings({})).get('default')).to.include({ events: 'socket' });
    const accounts = slackAccounts(settings({ events: 'http', accounts: { other: { rooms: ['C1'] }, own: { events: 'socket' } } }));
    expect(accounts.get('other')).to.deep.equal({ enabled: true, apiRoot: undefined, events: 'http', rooms: ['C1'] });
    expect(accounts.get('own')).to.include({ events: 'socket' });
  });

  it('Discord: a disabled bot is kept, and listed as such, with the channel\'s API root', () => {
    const accounts = discordAccounts(settings({ apiRoot: 'http://127.0.0.1:9', accounts: { off: { enabled: false } } }));
    expect([...accounts.keys()]).to.deep.equal(['default', 'off']);
    expect(accounts.get('off')).to.deep.equal({ enabled: false, apiRoot: 'http://127.0.0.1:9', rooms: [] });
  });

  it('Matrix: a default account only with a homeserver at the top level; the others inherit it and encryption, never the user id', () => {
    expect([...matrixAccounts(settings({ accounts: { a: { homeserver: 'https://hs.example' } } })).keys()]).to.deep.equal(['a']);
    const accounts = matrixAccounts(settings({ homeserver: 'https://hs.example', userId: '@bot:hs.example', accounts: { b: {} } }));
    expect(accounts.get('b')).to.deep.equal({ enabled: true, homeserver: 'https://hs.example', userId: undefined, rooms: [], encryption: true });
    const plain = matrixAccounts(settings({ homeserver: 'https://hs.example', encryption: false, accounts: { c: {}, d: { encryption: true } } }));
    expect([plain.get('default')!.encryption, plain.get('c')!.encryption, plain.get('d')!.encryption]).to.deep.equal([false, false, true]);
  });

  it('Email: servers, mailbox and limits inherited, addresses and logins each mailbox\'s own, defaults filled in', () => {
    const accounts = emailAccounts(settings({
      address: 'bot@example.org', user: 'bot', imap: 'imaps://mail.example.org', smtp: 'smtp://mail.example.org:587', fromName: 'Bot',
      accounts: { sales: { address: 'sales@example.org' } },
    }));
    expect(accounts.get('default')).to.include({ mailbox: 'INBOX', allowPlaintext: false, maxMessageBytes: 25 * 1024 * 1024 });
    expect(accounts.get('sales')).to.deep.equal({
      enabled: true, address: 'sales@example.org', user: undefined, imap: 'imaps://mail.example.org', smtp: 'smtp://mail.example.org:587',
      allowPlaintext: false, mailbox: 'INBOX', fromName: 'Bot', maxMessageBytes: 25 * 1024 * 1024,
    });
    expect([...emailAccounts(settings({ accounts: { x: { address: 'x@example.org' } } })).keys()], 'no address at the top level: no default mailbox').to.deep.equal(['x']);
  });
});
