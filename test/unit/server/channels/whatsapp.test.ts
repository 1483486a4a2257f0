import { expect } from 'chai';
import { markdownToWhatsApp, messageBody, splitReply, WHATSAPP_LIMIT } from '../../../../src/server/channels/whatsapp/format.ts';
import { graphRootOf } from '../../../../src/server/channels/whatsapp/graph.ts';
import { buttonPress, interactiveBodies } from '../../../../src/server/channels/whatsapp/interactive.ts';
import { changesOf } from '../../../../src/server/channels/whatsapp/notifications.ts';
import { ServiceWindows, WINDOW_MS } from '../../../../src/server/channels/whatsapp/service-window.ts';
import { normalizeWhatsAppPeer, WhatsAppChannel } from '../../../../src/server/channels/whatsapp/whatsapp.ts';
import { whatsappAccounts } from '../../../../src/server/channels/whatsapp/settings.ts';
import { interactiveRefusal } from '../../../support/whatsapp-api.ts';

const NOW = Date.UTC(2026, 10, 27, 12, 0, 0);
const envelope = (value: Record<string, unknown>, field = 'messages') => ({ object: 'whatsapp_business_account', entry: [{ id: 'WABA', changes: [{ field, value }] }] });
const metadata = { display_phone_number: '15550100199', phone_number_id: '1065' };

describe('whatsapp: what Meta posts', () => {
  it('reads each kind of message a person sends, with their profile name, into text and files', () => {
    const at = String(NOW / 1000 - 60);
    const [change] = changesOf(envelope({
      messaging_product: 'whatsapp', metadata,
      contacts: [{ profile: { name: 'Ann' }, wa_id: '4915100000001' }],
      messages: [
        { from: '4915100000001', id: 'wamid.1', timestamp: at, type: 'text', text: { body: 'hello' } },
        { from: '4915100000001', id: 'wamid.2', timestamp: at, type: 'image', image: { id: 'M1', mime_type: 'image/jpeg', caption: 'look' } },
        { from: '4915100000001', id: 'wamid.3', timestamp: at, type: 'document', document: { id: 'M2', mime_type: 'application/pdf', filename: 'report.pdf' } },
        { from: '4915100000001', id: 'wamid.4', timestamp: at, type: 'audio', audio: { id: 'M3', mime_type: 'audio/ogg; codecs=opus', voice: true } },
        { from: '4915100000001', id: 'wamid.5', timestamp: at, type: 'button', button: { text: 'Yes please', payload: 'yes' } },
        { from: '4915100000001', id: 'wamid.6', timestamp: at, type: 'interactive', interactive: { type: 'list_reply', list_reply: { id: 'a', title: 'Plan A', description: 'the cheap one' } } },
        { from: '4915100000001', id: 'wamid.7', timestamp: at, type: 'location', location: { latitude: 52.52, longitude: 13.405, name: 'Office', address: 'Berlin' } },
        { from: '4915100000001', id: 'wamid.8', timestamp: at, type: 'contacts', contacts: [{ name: { formatted_name: 'Bob B' }, phones: [{ phone: '+1 555 0100' }] }] },
        { from: '4915100000001', id: 'wamid.9', timestamp: at, type: 'reaction', reaction: { message_id: 'wamid.0', emoji: '👍' } },
        { from: '4915100000001', id: 'wamid.10', timestamp: at, type: 'unsupported', errors: [{ code: 131051 }] },
      ],
    }), NOW)!;
    expect(change!.phoneNumberId).to.equal('1065');
    const read = change!.messages.map((message) => [message.id, message.text, message.media.map((file) => file.name).join(), message.speaks]);
    expect(read).to.deep.equal([
      ['wamid.1', 'hello', '', true],
      ['wamid.2', 'look', 'image.jpg', true],
      ['wamid.3', '', 'report.pdf', true],
      ['wamid.4', '', 'voice.ogg', true],
      ['wamid.5', 'Yes please', '', true],
      ['wamid.6', 'Plan A: the cheap one', '', true],
      ['wamid.7', '[location: Office, Berlin (52.52, 13.405)]', '', true],
      ['wamid.8', '[contact: Bob B, +1 555 0100]', '', true],
      ['wamid.9', '', '', false],
      ['wamid.10', '', '', true],
    ]);
    expect(change!.messages[0]).to.include({ from: '4915100000001', name: 'Ann', at: NOW - 60_000 });
    expect(change!.messages[3]!.media[0], 'a voice note is marked as one').to.deep.equal({ id: 'M3', name: 'voice.ogg', mimeType: 'audio/ogg; codecs=opus', voice: true });
    expect(change!.messages[5]!.press, 'a list row picked is a press').to.deep.equal({ id: 'a', title: 'Plan A' });
    expect(change!.messages.filter((message) => message.press), 'a template\'s quick reply is words, not a press').to.have.length(1);
  });

  it('reads statuses with Meta\'s errors, skips what is malformed and fields other than messages, and refuses a body with no entries', () => {
    const changes = changesOf({
      object: 'whatsapp_business_account',
      entry: [
        { id: 'WABA', changes: [{ field: 'messages', value: { metadata, statuses: [
          { id: 'wamid.s1', status: 'delivered', timestamp: String(NOW / 1000 + 3600), recipient_id: '491' },
          { id: 'wamid.s2', status: 'failed', recipient_id: '491', errors: [{ code: 131047, title: 'Re-engagement message', error_data: { details: 'more than 24 hours' } }] },
          { status: 'read' }, null,
        ], messages: [{ from: 'nobody', id: 'x', type: 'text' }, { id: 'y', type: 'text' }, 'text'] } }] },
        { id: 'WABA', changes: [{ field: 'message_template_status_update', value: { event: 'APPROVED' } }, null] },
        'not an entry',
      ],
    }, NOW)!;
    expect(changes).to.have.length(1);
    expect(changes[0]!.messages).to.deep.equal([]);
    expect(changes[0]!.statuses).to.deep.equal([
      { id: 'wamid.s1', status: 'delivered', recipient: '491', at: NOW, errors: [] },
      { id: 'wamid.s2', status: 'failed', recipient: '491', at: NOW, errors: [{ code: 131047, title: 'Re-engagement message', details: 'more than 24 hours' }] },
    ]);
    expect(changesOf({ object: 'whatsapp_business_account' })).to.equal(undefined);
    expect(changesOf([1, 2])).to.equal(undefined);
    expect(changesOf(envelope({ messages: [{ from: '491', id: 'z', type: 'text', text: { body: 'x'.repeat(20_000) } }] }))![0]!.messages[0]!.text).to.have.length(16_384);
  });
});

describe('whatsapp: the 24-hour customer service window', () => {
  it('is open for 24 hours after a person last wrote, moves on with each message, and shuts when Meta says so', () => {
    const windows = new ServiceWindows();
    expect(windows.isOpen('491', NOW)).to.equal(false);
    expect(windows.heard('491', NOW - WINDOW_MS + 1000)).to.equal(true);
    expect(windows.isOpen('491', NOW)).to.equal(true);
    expect(windows.isOpen('491', NOW + 1000)).to.equal(false);
    expect(windows.heard('491', NOW - WINDOW_MS), 'an older message moves nothing').to.equal(false);
    windows.heard('491', NOW);
    expect(windows.isOpen('491', NOW + WINDOW_MS - 1)).to.equal(true);
    windows.shut('491');
    expect(windows.isOpen('491', NOW)).to.equal(false);
  });

  it('remembers an invitation until the person writes again, and keeps only the last day across a restart', () => {
    const windows = new ServiceWindows();
    windows.heard('491', NOW - 2 * WINDOW_MS);
    windows.heard('492', NOW - 1000);
    windows.invite('491', NOW - 500);
    windows.invite('493', NOW - WINDOW_MS - 1);
    expect(windows.invited('491', NOW)).to.equal(NOW - 500);
    expect(windows.invited('493', NOW), 'a day later, invited again').to.equal(undefined);
    const saved = windows.toCursor(NOW);
    expect(JSON.parse(saved)).to.deep.equal({ heard: { 492: NOW - 1000 }, invited: { 491: NOW - 500 } });
    const read = ServiceWindows.fromCursor(saved);
    expect(read.isOpen('492', NOW)).to.equal(true);
    expect(read.invited('491', NOW)).to.equal(NOW - 500);
    read.heard('491', NOW);
    expect(read.invited('491', NOW), 'they answered').to.equal(undefined);
    for (const garbage of [undefined, '', '{', '[1]', '{"heard":{"491":"soon"}}']) expect(ServiceWindows.fromCursor(garbage).isOpen('491', NOW)).to.equal(false);
  });
});

describe('whatsapp: replies as WhatsApp shows them', () => {
  it('turns Markdown into WhatsApp\'s markup', () => {
    expect(markdownToWhatsApp('## Title\n**bold** and *italic* and ~~gone~~, `code **not bold**`, [the docs](https://example.org/d) and https://x.org\n* one\n+ two\n> quoted'))
      .to.equal('*Title*\n*bold* and _italic_ and ~gone~, `code **not bold**`, the docs (https://example.org/d) and https://x.org\n- one\n- two\n> quoted');
    expect(markdownToWhatsApp('```ts\nconst a = **b**;\n```')).to.equal('```\nconst a = **b**;\n```');
  });

  it('splits a reply at 4,096 characters, each media line a message of its own, never inside a code block', () => {
    const parts = splitReply(`intro\n![chart](https://example.org/c.png)\n\`\`\`\n![not media](https://example.org/x.png)\n\`\`\`\n${'word '.repeat(1000)}\n![](https://example.org/a/report%202.pdf)`);
    expect(parts[0]).to.equal('intro');
    expect(parts[1]).to.equal('![chart](https://example.org/c.png)');
    expect(parts[2]!.startsWith('```\n![not media](https://example.org/x.png)\n```')).to.equal(true);
    expect(parts.at(-1)).to.equal('![](https://example.org/a/report%202.pdf)');
    for (const part of parts) expect(part.length).to.be.at.most(WHATSAPP_LIMIT);
    expect(parts.length).to.equal(5);
  });

  it('sends a media line by link as the kind its address says, one emoji to a message as a reaction, and anything else as text', () => {
    expect(messageBody('![the chart](https://example.org/c.PNG)')).to.deep.equal({ type: 'image', image: { link: 'https://example.org/c.PNG', caption: 'the chart' } });
    expect(messageBody('![](https://example.org/clip.mp4)')).to.deep.equal({ type: 'video', video: { link: 'https://example.org/clip.mp4' } });
    expect(messageBody('![a song](https://example.org/s.mp3)')).to.deep.equal({ type: 'audio', audio: { link: 'https://example.org/s.mp3' } });
    expect(messageBody('![Q3](https://example.org/a/report%202.pdf)')).to.deep.equal({ type: 'document', document: { link: 'https://example.org/a/report%202.pdf', caption: 'Q3', filename: 'report 2.pdf' } });
    expect(messageBody('![x](http://example.org/c.png)'), 'Meta fetches https only').to.deep.include({ type: 'text' });
    expect(messageBody('👍', 'wamid.A')).to.deep.equal({ type: 'reaction', reaction: { message_id: 'wamid.A', emoji: '👍' } });
    expect(messageBody('👍🏽', 'wamid.A')).to.deep.include({ type: 'reaction' });
    expect(messageBody('👨‍👩‍👧', 'wamid.A')).to.deep.include({ type: 'reaction' });
    expect(messageBody('👍')).to.deep.equal({ type: 'text', text: { body: '👍', preview_url: false } });
    expect(messageBody('👍 done', 'wamid.A')).to.deep.equal({ type: 'text', text: { body: '👍 done', preview_url: false }, context: { message_id: 'wamid.A' } });
  });
});

describe('whatsapp: buttons as interactive messages, within Meta\'s bounds', () => {
  const buttons = (labels: string[]) => labels.map((label, index) => ({ label, data: `q:q_0123456789ab:${index + 1}` }));

  it('sends up to three buttons as reply buttons under the text, and more as a list of rows; Meta\'s checks take each', () => {
    const [approval] = interactiveBodies('Approval 7f3a: run `ls`\nApprove or reject with the buttons.', [{ label: 'Approve', data: 'ap:y:ap_7f3a00000000' }, { label: 'Reject', data: 'ap:n:ap_7f3a00000000' }], 'wamid.ctx');
    expect(approval).to.deep.equal({
      type: 'interactive', context: { message_id: 'wamid.ctx' },
      interactive: {
        type: 'button', body: { text: 'Approval 7f3a: run `ls`\nApprove or reject with the buttons.' },
        action: { buttons: [{ type: 'reply', reply: { id: 'ap:y:ap_7f3a00000000', title: 'Approve' } }, { type: 'reply', reply: { id: 'ap:n:ap_7f3a00000000', title: 'Reject' } }] },
      },
    });
    expect(interactiveRefusal((approval as any).interactive)).to.equal(undefined);

    const labels = ['Red', 'Green', 'Blue', 'A much longer answer than a row title holds, with more words', 'A much longer answer than a row title holds, with others'];
    const [list] = interactiveBodies('Which one?', buttons(labels));
    const interactive = (list as any).interactive;
    expect(interactive.type).to.equal('list');
    expect(interactive.action.button).to.equal('Choose');
    const rows = interactive.action.sections[0].rows as any[];
    expect(rows.map((row) => row.id)).to.deep.equal(labels.map((_, index) => `q:q_0123456789ab:${index + 1}`));
    expect(rows.every((row) => row.title.length <= 24)).to.equal(true);
    expect(new Set(rows.map((row) => row.title)).size, 'titles unlike each other').to.equal(5);
    expect(rows[3].description).to.have.length.at.most(72).and.to.match(/^A much longer answer/);
    expect(rows[0]).to.not.have.property('description');
    expect(interactiveRefusal(interactive)).to.equal(undefined);
  });

  it('keeps titles within 20 characters and unlike each other; a text too long for the body goes first on its own', () => {
    const [only] = interactiveBodies('Pick', buttons(['Yes, deploy it to production', 'Yes, deploy it to staging', 'No']));
    const titles = (only as any).interactive.action.buttons.map((button: any) => button.reply.title) as string[];
    expect(titles.every((title) => title.length <= 20)).to.equal(true);
    expect(new Set(titles).size).to.equal(3);
    expect(interactiveRefusal((only as any).interactive)).to.equal(undefined);

    const long = 'x'.repeat(1500);
    const bodies = interactiveBodies(long, buttons(['Yes', 'No']));
    expect(bodies.map((body) => body.type)).to.deep.equal(['text', 'interactive']);
    expect((bodies[0] as any).text.body).to.equal(long);
    expect(interactiveRefusal((bodies[1] as any).interactive)).to.equal(undefined);
    // A list's body holds 4,096 characters.
    expect(interactiveBodies(long, buttons(['1', '2', '3', '4'])).map((body) => body.type)).to.deep.equal(['interactive']);
  });

  it('the stand-in refuses what Meta refuses: counts, lengths, duplicates, missing parts', () => {
    const reply = (id: string, title: string) => ({ type: 'reply', reply: { id, title } });
    const refusal = (interactive: unknown) => interactiveRefusal(interactive);
    expect(refusal({ type: 'button', body: { text: 'b' }, action: { buttons: [reply('1', 'a'), reply('2', 'b'), reply('3', 'c'), reply('4', 'd')] } })).to.include({ code: 131009 });
    expect(refusal({ type: 'button', body: { text: 'b' }, action: { buttons: [reply('1', 'x'.repeat(21))] } })!.details).to.match(/Button title length invalid/);
    expect(refusal({ type: 'button', body: { text: 'b' }, action: { buttons: [reply('1', 'a'), reply('2', 'a')] } })!.details).to.match(/unique/);
    expect(refusal({ type: 'button', body: { text: 'b' }, action: { buttons: [reply('x'.repeat(257), 'a')] } })!.details).to.match(/Button id/);
    expect(refusal({ type: 'button', body: { text: 'b'.repeat(1025) }, action: { buttons: [reply('1', 'a')] } })!.details).to.match(/Body text length/);
    expect(refusal({ type: 'button', action: { buttons: [reply('1', 'a')] } })).to.include({ code: 100 });
    const rows = (count: number, title = (index: number) => `row ${index}`) => Array.from({ length: count }, (_, index) => ({ id: String(index), title: title(index) }));
    expect(refusal({ type: 'list', body: { text: 'b' }, action: { button: 'Go', sections: [{ rows: rows(11) }] } })!.details).to.match(/row count/);
    expect(refusal({ type: 'list', body: { text: 'b' }, action: { button: 'Go', sections: [{ rows: rows(2, () => 'y'.repeat(25)) }] } })!.details).to.match(/Row title length/);
    expect(refusal({ type: 'list', body: { text: 'b' }, action: { button: 'Go', sections: [{ title: 'a', rows: rows(1) }, { rows: rows(1) }] } })).to.include({ code: 100 });
    expect(refusal({ type: 'list', body: { text: 'b' }, action: { sections: [{ rows: rows(1) }] } })).to.include({ code: 100 });
    expect(refusal({ type: 'list', body: { text: 'b' }, action: { button: 'Go', sections: [{ rows: [{ id: '1', title: 't', description: 'd'.repeat(73) }] }] } })!.details).to.match(/description/);
  });

  it('reads a press as the gateway takes it: answered by a message to the person who pressed, once by its message id', () => {
    expect(buttonPress('default', { id: 'wamid.press', from: '4915100000001', name: 'Ann', press: { id: 'ap:y:ap_7f3a00000000', title: 'Approve', messageId: 'wamid.req' } })).to.deep.equal({
      account: 'default', sender: '4915100000001', senderName: 'Ann', data: 'ap:y:ap_7f3a00000000', chat: '4915100000001', messageId: 'wamid.req', platformId: 'wamid.press', answerTo: '4915100000001',
    });
  });
});

describe('whatsapp: numbers, accounts and where the Graph API may be', () => {
  it('takes a number in international form, with a message id after a slash; never a name', () => {
    const channel = new WhatsAppChannel('whatsapp', {} as never);
    expect(normalizeWhatsAppPeer('+49 (151) 2345-6789')).to.equal('4915123456789');
    expect(channel.normalizePeer('4915123456789/wamid.HBgLabc=')).to.equal('4915123456789');
    expect(channel.checkPeer('+4915123456789')).to.equal(undefined);
    expect(channel.checkPeer('4915123456789/wamid.HBgLMTU1NTEyMzQ1NjcVAgASGBQzQTdC+/=')).to.equal(undefined);
    expect(channel.checkPeer('alice')).to.include('international form');
    expect(channel.checkPeer('4915123456789/12')).to.include('wamid');
    expect(channel.isRoom()).to.equal(false);
  });

  it('has a default account when the top level names a number or nothing else does; others inherit the API and the template', () => {
    const accounts = whatsappAccounts({ enabled: true, dmPolicy: 'pairing', allowFrom: [], phoneNumberId: '1', apiVersion: 'v23.0', template: { name: 'hi' }, accounts: { sales: { phoneNumberId: '2' } } });
    expect([...accounts.keys()]).to.deep.equal(['default', 'sales']);
    expect(accounts.get('sales')).to.deep.include({ phoneNumberId: '2', apiVersion: 'v23.0', template: { name: 'hi' } });
    expect([...whatsappAccounts({ enabled: true, dmPolicy: 'pairing', allowFrom: [], accounts: { sales: { phoneNumberId: '2' } } }).keys()]).to.deep.equal(['sales']);
  });

  it('sends the access token over https, or over http to this host only', () => {
    expect(graphRootOf(undefined).href).to.equal('https://graph.facebook.com/');
    expect(graphRootOf('http://127.0.0.1:8080').port).to.equal('8080');
    expect(graphRootOf('http://[::1]:8080').hostname).to.equal('[::1]');
    expect(() => graphRootOf('http://graph.example.org')).to.throw(/in the clear/);
    expect(() => graphRootOf('ftp://graph.example.org')).to.throw(/https:\/\//);
  });
});
