import { expect } from 'chai';
import { pino } from 'pino';
import { Attachments } from '../../../../src/server/channels/attachments.ts';
import { DmPairing } from '../../../../src/server/channels/dm-pairing.ts';
import { InboundMarks } from '../../../../src/server/channels/inbound-marks.ts';
import { Inbox, type Inbound } from '../../../../src/server/channels/inbox.ts';
import { Outbox } from '../../../../src/server/channels/outbox/outbox.ts';
import type { ChannelSettings, InboundAttachment, InboundMessage } from '../../../../src/server/kernel/channel.ts';
import { SessionStore } from '../../../../src/server/sessions/session-store.ts';
import { freshStore } from '../../../support/store.ts';

const silent = pino({ level: 'silent' });

/** A file whose fetches are counted. */
const file = (fetched: { count: number }, name = 'notes.txt'): InboundAttachment => ({
  name, mimeType: 'text/plain', size: 5,
  fetch: async () => {
    fetched.count += 1;
    return new TextEncoder().encode('hello');
  },
});

describe('the inbox: what a channel hands in, admitted and stored once, in order', () => {
  const current = freshStore();
  let settings: ChannelSettings;
  let inbox: Inbox;
  let sessions: SessionStore;
  let pairing: DmPairing;
  let outbox: Outbox;
  let marks: InboundMarks;
  let heard: Inbound[];
  let emitted: string[];

  const dm = (sender: string, text: string, extra: Partial<InboundMessage> = {}): InboundMessage =>
    ({ account: 'default', sender, senderName: sender.toUpperCase(), kind: 'direct', text, at: 1000, ...extra });
  const history = async (key: string) => (await sessions.history(key, { limit: 50 })).map((message) => message.text);
  const queued = async () => (await outbox.list({ limit: 50 })).reverse();

  beforeEach(() => {
    settings = { enabled: true, dmPolicy: 'pairing', allowFrom: [] };
    sessions = new SessionStore(current());
    pairing = new DmPairing(current());
    outbox = new Outbox({ store: current(), logger: silent });
    marks = new InboundMarks({ store: current() });
    heard = [];
    emitted = [];
    inbox = new Inbox({
      logger: silent, pairing, store: current(), outbox, marks, attachments: new Attachments(current(), silent),
      sessions: { store: sessions, record: (message, db) => sessions.record(message, db), append: (key, entry, db) => sessions.append(key, entry, db), decorate: () => undefined },
      emit: (event) => emitted.push(event),
    }, (id) => (id === 'chat' ? settings : undefined), (_channel, peer) => peer.trim().toLowerCase());
    inbox.onInbound((inbound) => {
      heard.push(inbound);
    });
  });

  it('stores a redelivery once, known by the platform\'s id for each account', async () => {
    settings.allowFrom = ['ann'];
    await inbox.enqueue('chat', dm('ann', 'first', { platformId: 'u1' }));
    await inbox.enqueue('chat', dm('ann', 'first again', { platformId: 'u1' }));
    await inbox.enqueue('chat', dm('ann', 'on another bot', { platformId: 'u1', account: 'second' }));
    expect(await history('chat:default:dm:ann')).to.deep.equal(['first']);
    expect(await history('chat:second:dm:ann')).to.deep.equal(['on another bot']);
    expect(heard.map((inbound) => inbound.message.text)).to.deep.equal(['first', 'on another bot']);
  });

  it('hands in each channel\'s messages in the order they came, even when an earlier one takes longer', async () => {
    settings.allowFrom = ['ann'];
    const slow: InboundAttachment = { name: 'big.txt', size: 5, fetch: async () => { await new Promise((resolve) => setTimeout(resolve, 50)); return new Uint8Array(5); } };
    const both = [inbox.enqueue('chat', dm('ann', 'one', { attachments: [slow] })), inbox.enqueue('chat', dm('ann', 'two'))];
    await Promise.all(both);
    expect(heard.map((inbound) => inbound.message.text)).to.deep.equal(['one', 'two']);
    expect(await history('chat:default:dm:ann')).to.deep.equal(['one', 'two']);
  });

  it('a message that cannot be stored is refused to its channel (not acknowledged), holds up none after it, and is stored when delivered again', async () => {
    settings.allowFrom = ['ann'];
    let fail = true;
    inbox.onInbound(() => {
      if (fail) throw new Error('the store is full');
    });
    const failed = inbox.enqueue('chat', dm('ann', 'lost for now', { platformId: 'u7' }));
    const next = inbox.enqueue('chat', dm('bob', 'from a stranger'));
    let refused: unknown;
    await failed.catch((error: unknown) => { refused = error; });
    await next;
    expect((refused as Error)?.message).to.equal('the store is full');
    expect(await history('chat:default:dm:ann'), 'rolled back with its listener').to.deep.equal([]);
    fail = false;
    await inbox.enqueue('chat', dm('ann', 'lost for now', { platformId: 'u7' }));
    expect(await history('chat:default:dm:ann'), 'not marked seen: the redelivery is stored').to.deep.equal(['lost for now']);
  });

  it('records a room\'s message in the room\'s session whatever the DM policy', async () => {
    settings.dmPolicy = 'disabled';
    await inbox.enqueue('chat', { account: 'default', sender: 'ann', senderName: 'Ann', kind: 'group', room: '#ops', text: 'deploying', at: 1 });
    expect(await history('chat:default:group:#ops')).to.deep.equal(['deploying']);
    expect(heard).to.have.length(1);
  });

  it('drops direct messages under the disabled policy, and a stranger\'s under allowlist, with no code sent', async () => {
    settings.dmPolicy = 'disabled';
    await inbox.enqueue('chat', dm('ann', 'hello'));
    settings.dmPolicy = 'allowlist';
    settings.allowFrom = ['Bob '];
    await inbox.enqueue('chat', dm('carol', 'hello'));
    await inbox.enqueue('chat', dm('bob', 'allowed, folded as the channel folds'));
    expect(heard.map((inbound) => inbound.message.sender)).to.deep.equal(['bob']);
    expect(await queued()).to.deep.equal([]);
    expect(await pairing.pending('chat')).to.deep.equal([]);
  });

  it('lets anyone in only under open with "*"', async () => {
    settings.dmPolicy = 'open';
    await inbox.enqueue('chat', dm('ann', 'not on the list'));
    settings.allowFrom = ['*'];
    await inbox.enqueue('chat', dm('bob', 'anyone'));
    expect(heard.map((inbound) => inbound.message.sender)).to.deep.equal(['bob']);
    expect(await inbox.isAllowed('chat', 'zed')).to.equal(true);
    settings.dmPolicy = 'pairing';
    expect(await inbox.isAllowed('chat', 'zed'), '"*" counts only under open').to.equal(false);
  });

  it('meets a stranger under pairing with one code, queued in the outbox to where replies go, told to operators after the commit', async () => {
    await inbox.enqueue('chat', dm('ann', 'hi', { replyTo: '555' }));
    await inbox.enqueue('chat', dm('ann', 'hi again', { replyTo: '555' }));
    const replies = await queued();
    expect(replies).to.have.length(1);
    expect(replies[0]).to.include({ channel: 'chat', account: 'default', to: '555', status: 'pending' });
    const [request] = await pairing.pending('chat');
    expect(request).to.include({ sender: 'ann', senderName: 'ANN' });
    expect(emitted).to.deep.equal(['channel.pair.requested']);
    expect(heard).to.deep.equal([]);
  });

  it('keeps each thread of a sender in a session of its own', async () => {
    settings.allowFrom = ['ann'];
    await inbox.enqueue('chat', dm('ann', 'about the invoice', { thread: 't1' }));
    await inbox.enqueue('chat', dm('ann', 'about the trip', { thread: 't2' }));
    expect(await history('chat:default:dm:ann#t1')).to.deep.equal(['about the invoice']);
    expect(await history('chat:default:dm:ann#t2')).to.deep.equal(['about the trip']);
  });

  it('fetches files only for whom the agent reads, and never again for a redelivery', async () => {
    const fetched = { count: 0 };
    await inbox.enqueue('chat', dm('stranger', 'look', { attachments: [file(fetched)] }));
    expect(fetched.count, 'a stranger\'s file is never fetched').to.equal(0);
    settings.allowFrom = ['ann'];
    await inbox.enqueue('chat', dm('ann', 'look', { platformId: 'm1', attachments: [file(fetched)] }));
    await inbox.enqueue('chat', dm('ann', 'look', { platformId: 'm1', attachments: [file(fetched)] }));
    expect(fetched.count).to.equal(1);
    const [kept] = heard;
    expect(kept!.recorded.data?.attachments).to.have.length(1);
  });

  it('admits a sender who asks before speaking by the policy: refused, allowed, pending (asking makes one request)', async () => {
    settings.dmPolicy = 'disabled';
    expect(await inbox.admit('chat', { account: 'default', sender: 'ann', senderName: 'Ann', ask: true })).to.equal('refused');
    settings.dmPolicy = 'allowlist';
    expect(await inbox.admit('chat', { account: 'default', sender: 'ann', senderName: 'Ann', ask: true })).to.equal('refused');
    settings.dmPolicy = 'pairing';
    expect(await inbox.admit('chat', { account: 'default', sender: 'ann', senderName: 'Ann', ask: false })).to.equal('pending');
    expect(await pairing.pending('chat'), 'not asked: no request').to.deep.equal([]);
    expect(await inbox.admit('chat', { account: 'default', sender: 'ann', senderName: 'Ann', ask: true })).to.equal('pending');
    expect(await pairing.pending('chat')).to.have.length(1);
    expect(emitted).to.deep.equal(['channel.pair.requested']);
    settings.allowFrom = ['ann'];
    expect(await inbox.admit('chat', { account: 'default', sender: 'ann', senderName: 'Ann', ask: true })).to.equal('allowed');
    expect(await inbox.admit('nowhere', { account: 'default', sender: 'ann', senderName: 'Ann', ask: true }), 'a channel with no settings').to.equal('refused');
  });
});
