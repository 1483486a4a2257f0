import { expect } from 'chai';
import { pino } from 'pino';
import type { AccountStatus, Channel, ChannelContext, ChannelKind } from '../../../../src/server/kernel/channel.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import { DmPairing } from '../../../../src/server/channels/dm-pairing.ts';
import { ircFold } from '../../../../src/server/channels/irc/irc-names.ts';
import { ChannelManager } from '../../../../src/server/channels/manager.ts';
import { Outbox } from '../../../../src/server/channels/outbox/outbox.ts';
import { InboundMarks } from '../../../../src/server/channels/inbound-marks.ts';
import { Attachments } from '../../../../src/server/channels/attachments.ts';
import { SessionStore } from '../../../../src/server/sessions/session-store.ts';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../../src/shared/config/types.ts';
import { freshStore } from '../../../support/store.ts';

/**
 * A channel that lives in memory: what the gateway sends is kept, and tests
 * hand it inbound messages. The IRC channel is tested against a real server
 * in test/e2e/irc.test.ts; this isolates the policy and the clock.
 */
class MemoryChannel implements Channel {
  readonly sent: { account: string; to: string; text: string }[] = [];
  connected = true;
  readonly id: string;
  readonly context: ChannelContext;

  constructor(id: string, context: ChannelContext) {
    this.id = id;
    this.context = context;
  }

  accounts() { return ['default']; }
  async start() {}
  async stop() {}
  status(): AccountStatus[] { return [{ account: 'default', state: this.connected ? 'connected' : 'disconnected', since: 0 }]; }
  async send(account: string, to: string, text: string) {
    if (!this.connected) throw new Error('not connected');
    this.sent.push({ account, to, text });
  }
  normalizePeer(peer: string) { return ircFold(peer); }
  isRoom(peer: string) { return peer.startsWith('#'); }
  checkPeer(peer: string) { return /\s/.test(peer) ? 'has spaces' : undefined; }
  dm(nick: string, text: string, at = 0) {
    void this.context.inbound({ account: 'default', sender: ircFold(nick), senderName: nick, kind: 'direct', text, at });
  }
}

describe('channel manager: DM policy, pairing codes and sessions', () => {
  const current = freshStore();
  let now: number;
  let config: GatewayConfig;
  let channel: MemoryChannel;
  let manager: ChannelManager;
  let pairing: DmPairing;
  let sessions: SessionStore;
  let events: { event: string; payload: any }[];
  let outbox: Outbox;

  const configure = (irc: Record<string, unknown>) => {
    config = effectiveConfig({ channels: { irc: { enabled: true, host: 'irc.test', nick: 'gw', ...irc } } });
  };
  /** A direct message, handled, and the replies it queued sent. */
  const dm = async (nick: string, text: string, at?: number) => {
    channel.dm(nick, text, at);
    await manager.settled();
    await outbox.idle();
  };
  const codeIn = (text: string) => /pairing code is ([A-Z2-9]{8})/.exec(text)![1]!;

  beforeEach(async () => {
    now = Date.parse('2026-01-01T00:00:00Z');
    configure({});
    events = [];
    pairing = new DmPairing(current(), () => now);
    sessions = new SessionStore(current());
    outbox = new Outbox({ store: current(), logger: pino({ level: 'silent' }), now: () => now });
    const irc: ChannelKind = {
      label: 'memory', normalizePeer: ircFold,
      create: (id, context) => { channel = new MemoryChannel(id, context); return channel; },
    };
    manager = new ChannelManager({
      kinds: () => new Map([['irc', { value: irc }]]), config: () => config, secret: async () => undefined, folder: (id) => `/nonexistent/channels/${id}`, logger: pino({ level: 'silent' }), pairing,
      // As the sessions module does: what is recorded is told to operators.
      sessions: {
        store: sessions,
        record: async (message, db) => {
          const recorded = await sessions.record(message, db);
          events.push({ event: 'session.message', payload: recorded });
          return recorded;
        },
        append: (key, entry, db) => sessions.append(key, entry, db),
        decorate: () => undefined,
      },
      store: current(), outbox, marks: new InboundMarks({ store: current(), now: () => now }), attachments: new Attachments(current(), pino({ level: 'silent' })),
      emit: (event, payload) => events.push({ event, payload }), now: () => now,
    });
    await manager.start();
  });
  afterEach(() => manager.stop());

  it('answers a stranger once with a code from the alphabet, valid one hour, and keeps the message out of sessions', async () => {
    await dm('Alice', 'hi');
    expect(channel.sent).to.have.length(1);
    const code = codeIn(channel.sent[0]!.text);
    expect(code).to.match(/^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{8}$/);
    expect(channel.sent[0]!.to).to.equal('Alice');
    const [request] = await pairing.pending('irc');
    expect(request!.expiresAt - request!.createdAt).to.equal(60 * 60_000);
    await dm('ALICE', 'hello again?');
    expect(channel.sent, 'a repeat within the TTL reuses the request silently').to.have.length(1);
    expect(await sessions.list({ limit: 10 })).to.deep.equal([]);
    expect(events.map((e) => e.event)).to.deep.equal(['channel.pair.requested']);
  });

  it('admits a sender who asks before speaking (an invite): allowed, pending with a listed request sent nowhere, or refused by the policy', async () => {
    const admit = (sender: string, ask = true) => channel.context.admit({ account: 'default', sender, senderName: sender, ask });
    expect(await admit('zed', false), 'only looked at: no request').to.equal('pending');
    expect(await pairing.pending('irc')).to.deep.equal([]);
    expect(await admit('zed')).to.equal('pending');
    const [request] = await pairing.pending('irc');
    expect(request).to.include({ sender: 'zed', account: 'default' });
    expect(channel.sent, 'no code is sent: the channel cannot reach them yet').to.deep.equal([]);
    expect(events.map((e) => e.event)).to.deep.equal(['channel.pair.requested']);
    expect(await admit('zed'), 'asking again makes no second request').to.equal('pending');
    expect(await pairing.pending('irc')).to.have.length(1);
    await manager.approve('irc', request!.code, 'op', false);
    expect(await admit('zed', false)).to.equal('allowed');
    configure({ allowFrom: ['Yan'] });
    expect(await admit('yan', false)).to.equal('allowed');
    configure({ dmPolicy: 'allowlist', allowFrom: ['Yan'] });
    expect(await admit('xi')).to.equal('refused');
    configure({ dmPolicy: 'disabled', allowFrom: ['Yan'] });
    expect(await admit('yan')).to.equal('refused');
  });

  it('approves case-insensitively, then the sender reaches a session; approving twice says so', async () => {
    await dm('Alice', 'hi');
    const code = codeIn(channel.sent[0]!.text);
    const approved = await manager.approve('irc', code.toLowerCase().toUpperCase(), 'op', true);
    expect(approved).to.include({ approved: true, alreadyApproved: false, sender: 'alice', notified: true });
    expect(channel.sent[1]!.text).to.match(/approved/);
    expect((await manager.approve('irc', code, 'op', false)).alreadyApproved).to.equal(true);
    await dm('alice', 'the real question', now);
    const [session] = await sessions.list({ limit: 10 });
    expect(session!.key).to.equal('irc:default:dm:alice');
    expect((await sessions.history(session!.key, { limit: 10 })).map((m) => m.text)).to.deep.equal(['the real question']);
    expect(events.map((e) => e.event)).to.include.members(['channel.pair.resolved', 'session.message']);
  });

  it('refuses an expired code, then gives the sender a new one', async () => {
    await dm('bob', 'hi');
    const code = codeIn(channel.sent[0]!.text);
    now += 60 * 60_000 + 1;
    expect(await pairing.pending('irc')).to.deep.equal([]);
    try {
      await manager.approve('irc', code, 'op', false);
      expect.fail('approved an expired code');
    } catch (error) {
      expect(error).to.be.instanceOf(DomainError);
      expect((error as DomainError).kind).to.equal('not_found');
      expect((error as Error).message).to.match(/has expired/);
    }
    await dm('bob', 'hi?');
    expect(channel.sent).to.have.length(2);
    expect(codeIn(channel.sent[1]!.text)).to.not.equal(code);
  });

  it('ignores a fourth pending sender without answering, and frees a slot when a code expires', async () => {
    for (const nick of ['a1', 'a2', 'a3', 'a4']) await dm(nick, 'hi');
    expect(channel.sent.map((m) => m.to)).to.deep.equal(['a1', 'a2', 'a3']);
    expect(await pairing.pending('irc')).to.have.length(3);
    now += 60 * 60_000 + 1;
    await dm('a4', 'hi');
    expect(channel.sent.map((m) => m.to)).to.deep.equal(['a1', 'a2', 'a3', 'a4']);
  });

  it('does not answer a rejected sender again while the code would have been valid', async () => {
    await dm('mallory', 'hi');
    const code = codeIn(channel.sent[0]!.text);
    await manager.reject('irc', code, 'op');
    await dm('mallory', 'hi hi');
    expect(channel.sent).to.have.length(1);
    await manager.approve('irc', code, 'op', false).then(() => expect.fail('approved a rejected code'), (error: Error) => expect(error.message).to.match(/was rejected/));
  });

  it('allowlist drops unknown senders silently and admits allowFrom entries in any case', async () => {
    configure({ dmPolicy: 'allowlist', allowFrom: ['Friend'] });
    await dm('stranger', 'hi');
    await dm('FRIEND', 'hello');
    expect(channel.sent).to.deep.equal([]);
    expect((await sessions.list({ limit: 10 })).map((s) => s.key)).to.deep.equal(['irc:default:dm:friend']);
  });

  it('disabled ignores every direct message, even from approved senders', async () => {
    configure({ dmPolicy: 'disabled', allowFrom: ['friend'] });
    await dm('friend', 'hello');
    await dm('stranger', 'hi');
    expect(channel.sent).to.deep.equal([]);
    expect(await sessions.list({ limit: 10 })).to.deep.equal([]);
  });

  it('open admits everyone only with "*" in allowFrom', async () => {
    configure({ dmPolicy: 'open', allowFrom: ['*'] });
    await dm('anyone', 'hello');
    expect((await sessions.list({ limit: 10 })).map((s) => s.key)).to.deep.equal(['irc:default:dm:anyone']);
    configure({ dmPolicy: 'open', allowFrom: [] });
    await dm('other', 'hello');
    expect(channel.sent).to.deep.equal([]);
    expect(await sessions.list({ limit: 10 })).to.have.length(1);
  });

  it('revoking a sender makes them a stranger again; revoking a config entry or an unknown sender says why', async () => {
    await dm('carol', 'hi');
    await manager.approve('irc', codeIn(channel.sent[0]!.text), 'op', false);
    expect(await manager.revoke('irc', 'CAROL')).to.deep.equal({ revoked: true, channel: 'irc', sender: 'carol' });
    await dm('carol', 'hi again');
    expect(channel.sent).to.have.length(2);
    await manager.revoke('irc', 'carol').then(() => expect.fail(), (e: Error) => { expect(e).to.be.instanceOf(DomainError); expect(e.message).to.match(/not on the allow-list/); });
    configure({ allowFrom: ['dave'] });
    await manager.revoke('irc', 'Dave').then(() => expect.fail(), (e: Error) => { expect(e).to.be.instanceOf(DomainError); expect(e.message).to.match(/allowFrom in the config/); });
  });

  it('records operator messages in the session, sends them through the outbox, queues them while the account is down, and refuses bad recipients and empty text', async () => {
    const sent = await manager.send({ channel: 'irc', to: 'Erin', text: 'hello Erin', via: 'dev1' });
    expect(sent.session.key).to.equal('irc:default:dm:erin');
    expect(sent.message).to.include({ direction: 'out', text: 'hello Erin', via: 'dev1' });
    expect(sent.delivery).to.include({ status: 'sent', attempts: 1 });
    expect(channel.sent.map((message) => message.text)).to.deep.equal(['hello Erin']);
    const room = await manager.send({ channel: 'irc', to: '#Ops', text: 'deploy done', via: 'dev1' });
    expect(room.session.key).to.equal('irc:default:group:#ops');
    await manager.send({ channel: 'irc', to: 'a b', text: 'x', via: 'd' }).then(() => expect.fail(), (e: DomainError) => expect(e.kind).to.equal('invalid'));
    await manager.send({ channel: 'irc', to: 'erin', text: '  ', via: 'd' }).then(() => expect.fail(), (e: DomainError) => expect(e.kind).to.equal('invalid'));
    await manager.send({ channel: 'nope', to: 'erin', text: 'x', via: 'd' }).then(() => expect.fail(), (e: DomainError) => expect(e.kind).to.equal('not_found'));
    channel.connected = false;
    const queued = await manager.send({ channel: 'irc', to: 'erin', text: 'while away', via: 'd' });
    expect(queued.delivery).to.include({ status: 'pending', attempts: 1, error: 'not connected' });
    expect((await sessions.get('irc:default:dm:erin'))!.messageCount, 'said, and waiting in the outbox').to.equal(2);
    // The account is back: its waiting messages go at once, not when their backoff ends.
    channel.connected = true;
    await outbox.retryNow('irc', 'default');
    await outbox.idle();
    expect(channel.sent.map((message) => message.text)).to.deep.equal(['hello Erin', 'deploy done', 'while away']);
  });
});
