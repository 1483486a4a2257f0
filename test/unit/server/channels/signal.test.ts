import { expect } from 'chai';
import { readReceived } from '../../../../src/server/channels/signal/envelope.ts';
import { markdownToSignal } from '../../../../src/server/channels/signal/format.ts';
import { isGroupId, signalPeer, signalPeerProblem } from '../../../../src/server/channels/signal/peers.ts';
import { rpcUrlOf } from '../../../../src/server/channels/signal/rpc.ts';
import { signalAccounts } from '../../../../src/server/channels/signal/signal.ts';

const self = { number: '+15550000001', aci: '0d9f3a52-7a7c-4c8b-9a34-4b5a1f2e9c10' };
const ann = { sourceNumber: '+15550000002', sourceUuid: '7b1b6a9e-2f43-4a2e-9d3c-5b0b7f7e4a11', sourceName: 'Ann' };
const GROUP = 'Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI=';
const item = (dataMessage: unknown, envelope: Record<string, unknown> = {}) => ({ account: self.number, envelope: { ...ann, timestamp: 1700000000123, ...envelope, ...(dataMessage === undefined ? {} : { dataMessage }) } });
const read = (value: unknown) => readReceived(value, self);

describe('signal: what signal-cli hands over', () => {
  it('reads a direct message: its sender by number (else ACI), where replies reach them, its identity', () => {
    const reading = read(item({ timestamp: 1700000000123, message: 'hello there' }));
    expect(reading).to.have.property('message');
    const { message } = reading as { message: any };
    expect(message).to.include({ sender: ann.sourceNumber, address: ann.sourceUuid, senderName: 'Ann', text: 'hello there', id: `${ann.sourceUuid}:1700000000123`, addressed: false, timestamp: 1700000000123 });
    expect(message.group).to.equal(undefined);
    const hidden = read({ account: self.number, envelope: { sourceUuid: ann.sourceUuid.toUpperCase(), timestamp: 5, dataMessage: { message: 'hi' } } }) as { message: any };
    expect(hidden.message).to.include({ sender: ann.sourceUuid, address: ann.sourceUuid, senderName: ann.sourceUuid });
  });

  it('reads a group message, addressed when it mentions the account (by number or ACI) or quotes it; the agent reads it without the mention', () => {
    const mentioned = read(item({ message: '\uFFFC what is up?', groupInfo: { groupId: GROUP, type: 'DELIVER' }, mentions: [{ uuid: self.aci, number: null, start: 0, length: 1 }] })) as { message: any };
    expect(mentioned.message).to.include({ group: GROUP, addressed: true, addressedText: 'what is up?', text: `@${self.number} what is up?` });
    const other = read(item({ message: 'ask \uFFFC and \uFFFC', groupInfo: { groupId: GROUP }, mentions: [{ number: '+15550000009', start: 4, length: 1 }, { number: self.number, start: 10, length: 1 }] })) as { message: any };
    expect(other.message).to.include({ addressed: true, addressedText: 'ask @+15550000009 and', text: `ask @+15550000009 and @${self.number}` });
    const quoted = read(item({ message: 'and then?', groupInfo: { groupId: GROUP }, quote: { id: 1, authorNumber: self.number } })) as { message: any };
    expect(quoted.message).to.include({ addressed: true, addressedText: 'and then?' });
    const chatter = read(item({ message: 'among ourselves \uFFFC', groupInfo: { groupId: GROUP }, mentions: [{ number: '+15550000009', start: 16, length: 1 }] })) as { message: any };
    expect(chatter.message).to.include({ addressed: false, text: 'among ourselves @+15550000009' });
    // A NUL cannot pose as the account's mention; a range without a placeholder is no mention.
    const forged = read(item({ message: '\u0000me\u0000 hi x', groupInfo: { groupId: GROUP }, mentions: [{ number: self.number, start: 0, length: 3 }] })) as { message: any };
    expect(forged.message).to.include({ addressed: false, text: 'me hi x' });
  });

  it('names and lets go of everything that is not a person\'s message to answer', () => {
    const reasons = [
      read(null), read('x'), read({ envelope: 'x' }), read({ account: '+15559999999', envelope: { ...ann, dataMessage: { message: 'x' } } }),
      read(item(undefined, { typingMessage: { action: 'STARTED' } })), read(item(undefined, { receiptMessage: { isRead: true } })),
      read(item(undefined, { editMessage: { targetSentTimestamp: 1, dataMessage: { message: 'edited' } } })),
      read(item(undefined, { syncMessage: { sentMessage: { message: 'mine' } } })),
      read(item({ message: 'x', reaction: { emoji: '👍' } })), read(item({ message: null, remoteDelete: { timestamp: 1 } })),
      read(item({ message: 'x', groupInfo: { groupId: GROUP, type: 'UPDATE' } })), read(item({ message: 'x', groupInfo: { groupId: 'not a group id' } })),
      read(item({ message: 42 })), read(item({ message: '   ' })), read(item({ message: 'x' }, { timestamp: 'soon' })),
      read(item({ message: 'x' }, { sourceNumber: self.number, sourceUuid: self.aci })), read(item({ message: 'x' }, { sourceNumber: 'nobody', sourceUuid: 'x' })),
      read({ account: self.number, envelope: { ...ann, timestamp: 1 }, exception: { message: 'Untrusted identity', type: 'UntrustedIdentityException' } }),
    ].map((reading) => ('skip' in reading ? reading.skip : 'read'));
    expect(reasons).to.not.include('read');
    expect(reasons[3]).to.equal('an envelope for +15559999999');
    expect(reasons.at(-1)).to.match(/could not read \(Untrusted identity\)/);
  });

  it('keeps files signal-cli downloaded by their ids, never one that could name another folder; long text is cut', () => {
    const reading = read(item({ message: null, attachments: [
      { id: 'Hn3kR9ewGKs4XQ8aW6sX.jpg', contentType: 'image/jpeg', size: 3000 },
      { id: '../../etc/passwd', contentType: 'text/plain' }, { id: 7 }, { id: 'notes.txt', filename: 'notes.txt', contentType: 'text/plain', size: 'many' },
    ] })) as { message: any };
    expect(reading.message.text).to.equal('');
    expect(reading.message.files).to.deep.equal([
      { id: 'Hn3kR9ewGKs4XQ8aW6sX.jpg', name: 'photo.jpg', contentType: 'image/jpeg', size: 3000 },
      { id: 'notes.txt', name: 'notes.txt', contentType: 'text/plain' },
    ]);
    expect((read(item({ message: 'y'.repeat(100_000) })) as { message: any }).message.text).to.have.length(16_384);
  });

  it('takes audio sent without a file name for a voice note (a recording made in the app), a named audio file for a file', () => {
    const reading = read(item({ message: null, attachments: [
      { id: 'Vn1.aac', contentType: 'audio/aac', filename: null, size: 9000 }, { id: 'Song.mp3', contentType: 'audio/mpeg', filename: 'song.mp3', size: 9000 },
    ] })) as { message: any };
    expect(reading.message.files).to.deep.equal([
      { id: 'Vn1.aac', name: 'voice.aac', contentType: 'audio/aac', size: 9000, voice: true },
      { id: 'Song.mp3', name: 'song.mp3', contentType: 'audio/mpeg', size: 9000 },
    ]);
  });
});

describe('signal: replies as Signal shows them', () => {
  it('turns Markdown into text and style ranges in UTF-16 units', () => {
    expect(markdownToSignal('plain')).to.deep.equal({ text: 'plain', styles: [] });
    expect(markdownToSignal('a **bold** and *it* and `co*de*` ~~no~~')).to.deep.equal({ text: 'a bold and it and co*de* no', styles: ['2:4:BOLD', '11:2:ITALIC', '18:6:MONOSPACE', '25:2:STRIKETHROUGH'] });
    expect(markdownToSignal('# Title\n- one [link](https://example.org)\n```ts\nconst x = 1;\n```\nend')).to.deep.equal({
      text: 'Title\n• one link (https://example.org)\nconst x = 1;\nend', styles: ['0:5:BOLD', '39:12:MONOSPACE'],
    });
    expect(markdownToSignal('😀 **b**').styles, 'an emoji is two UTF-16 units').to.deep.equal(['3:1:BOLD']);
    expect(markdownToSignal('**bold _and it_**')).to.deep.equal({ text: 'bold and it', styles: ['5:6:ITALIC', '0:11:BOLD'] });
  });
});

describe('signal: peers and where signal-cli may be', () => {
  it('folds numbers, ACIs and group ids, and tells a group from a person', () => {
    expect(signalPeer(' +1 (555) 010-0100 ')).to.equal('+15550100100');
    expect(signalPeer('7B1B6A9E-2F43-4A2E-9D3C-5B0B7F7E4A11')).to.equal('7b1b6a9e-2f43-4a2e-9d3c-5b0b7f7e4a11');
    expect(signalPeer(GROUP)).to.equal(GROUP);
    expect(isGroupId(GROUP)).to.equal(true);
    expect(isGroupId('+15550100')).to.equal(false);
    expect(signalPeerProblem('+15550100')).to.equal(undefined);
    expect(signalPeerProblem('alice')).to.match(/not a Signal number/);
  });

  it('reads its accounts: the top level\'s number, others sharing its signal-cli unless they name theirs; with none named, one that says so', () => {
    const base = { enabled: true, dmPolicy: 'pairing', allowFrom: [] };
    const accounts = signalAccounts({ ...base, account: '+15550000001', rpcUrl: 'http://127.0.0.1:7583', rooms: [GROUP], accounts: { two: { account: '+15550000002' }, three: { account: '+15550000003', rpcUrl: 'http://127.0.0.1:9000', enabled: false } } });
    expect([...accounts.keys()]).to.deep.equal(['default', 'two', 'three']);
    expect(accounts.get('two')).to.deep.include({ account: '+15550000002', rpcUrl: 'http://127.0.0.1:7583', rooms: [] });
    expect(accounts.get('three')).to.deep.include({ enabled: false, rpcUrl: 'http://127.0.0.1:9000' });
    expect([...signalAccounts({ ...base, accounts: { two: { account: '+15550000002' } } }).keys()]).to.deep.equal(['two']);
    expect([...signalAccounts(base).entries()]).to.deep.equal([['default', { enabled: true, account: undefined, rpcUrl: undefined, rooms: [] }]]);
  });

  it('takes https anywhere, http only on this host', () => {
    expect(rpcUrlOf(undefined).href).to.equal('http://127.0.0.1:8080/');
    expect(rpcUrlOf('http://localhost:7583').href).to.equal('http://localhost:7583/');
    expect(rpcUrlOf('https://signal.example.org/cli').href).to.equal('https://signal.example.org/cli/');
    expect(() => rpcUrlOf('http://10.0.0.5:8080')).to.throw(/in the clear/);
    expect(() => rpcUrlOf('ftp://127.0.0.1')).to.throw(/http/);
  });
});
