import { expect } from 'chai';
import type { ChannelSettings } from '../../../../src/server/kernel/channel.ts';
import { accountsOf, settingPath } from '../../../../src/server/channels/accounts.ts';
import { ircAccounts } from '../../../../src/server/channels/irc/irc.ts';
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
});
