import { expect } from 'chai';
import { xml, type XmppElement } from '@xmpp/client';
import { discoverUpload, fileStanza, requestSlot, uploadAddress, uploadRefusal } from '../../../../src/server/channels/xmpp/upload.ts';
import { ChannelSendError } from '../../../../src/server/kernel/channel.ts';

const NS = 'urn:xmpp:http:upload:0';
const file = { name: 'report.pdf', mimeType: 'application/pdf', data: new Uint8Array(2048) };
const info = (...features: string[]) => (max?: number) => xml('iq', { type: 'result' }, xml('query', { xmlns: 'http://jabber.org/protocol/disco#info' },
  ...features.map((feature) => xml('feature', { var: feature })),
  ...(max === undefined ? [] : [xml('x', { xmlns: 'jabber:x:data', type: 'result' },
    xml('field', { var: 'FORM_TYPE', type: 'hidden' }, xml('value', {}, NS)), xml('field', { var: 'max-file-size' }, xml('value', {}, String(max))))])));
/** An IQ answered by who it is to (and what it asks): a function of the request, or an error thrown. */
const server = (answers: Record<string, (request: XmppElement) => XmppElement>) => {
  const asked: string[] = [];
  const request = async (stanza: XmppElement) => {
    const query = stanza.children[0] as XmppElement;
    const key = `${stanza.attrs.to} ${query.attrs.xmlns.split('#')[1] ?? query.name}`;
    asked.push(key);
    const answer = answers[key];
    if (!answer) throw Object.assign(new Error('service-unavailable'), { condition: 'service-unavailable', type: 'cancel' });
    return answer(stanza);
  };
  return { request, asked };
};
const stanzaError = (condition: string, type: string, application?: XmppElement) => Object.assign(new Error(condition), { condition, type, text: '', application });

describe('xmpp: files through HTTP upload (XEP-0363)', () => {
  it('finds the upload service among the server\'s items, with its max-file-size; none when no item offers it', async () => {
    const withService = server({
      'gw.test info': () => info('http://jabber.org/protocol/disco#info')(),
      'gw.test items': () => xml('iq', { type: 'result' }, xml('query', { xmlns: 'http://jabber.org/protocol/disco#items' }, xml('item', { jid: 'conference.gw.test' }), xml('item', { jid: 'upload.gw.test' }))),
      'conference.gw.test info': () => info('http://jabber.org/protocol/muc')(),
      'upload.gw.test info': () => info(NS)(1048576),
    });
    expect(await discoverUpload(withService.request, xml, 'gw.test')).to.deep.equal({ jid: 'upload.gw.test', maxBytes: 1048576 });
    const itself = server({ 'gw.test info': () => info(NS)() });
    expect(await discoverUpload(itself.request, xml, 'gw.test')).to.deep.equal({ jid: 'gw.test' });
    const none = server({ 'gw.test info': () => info()(), 'gw.test items': () => xml('iq', { type: 'result' }, xml('query', { xmlns: 'http://jabber.org/protocol/disco#items' }, xml('item', { jid: 'down.gw.test' }))) });
    expect(await discoverUpload(none.request, xml, 'gw.test')).to.equal(undefined);
    expect(none.asked, 'an item that does not answer is not the service').to.deep.equal(['gw.test info', 'gw.test items', 'down.gw.test info']);
  });

  it('refuses for good a server without a service, and a file larger than it takes', () => {
    const missing = uploadRefusal(undefined, 'gw.test', file)!;
    expect(missing).to.be.instanceOf(ChannelSendError);
    expect(missing.permanent).to.equal(true);
    expect(missing.message).to.include('the server gw.test offers no HTTP upload service (XEP-0363)');
    expect(uploadRefusal({ jid: 'upload.gw.test', maxBytes: 1024 }, 'gw.test', file)!.permanent).to.equal(true);
    expect(uploadRefusal({ jid: 'upload.gw.test', maxBytes: 4096 }, 'gw.test', file)).to.equal(undefined);
  });

  it('asks for a slot with the file\'s name, size and type; keeps only the headers the spec allows, on one line', async () => {
    let asked: XmppElement | undefined;
    const slot = await requestSlot(async (stanza) => {
      asked = stanza;
      return xml('iq', { type: 'result' }, xml('slot', { xmlns: NS },
        xml('put', { url: 'https://upload.gw.test/put/abc/report.pdf' }, xml('header', { name: 'Authorization' }, 'Basic x\r\nInjected: 1'), xml('header', { name: 'Host' }, 'elsewhere'), xml('header', { name: 'Cookie' }, 'c=1')),
        xml('get', { url: 'https://upload.gw.test/get/abc/report.pdf' })));
    }, xml, { jid: 'upload.gw.test' }, file);
    const request = asked!.getChild('request', NS)!;
    expect(asked!.attrs).to.include({ type: 'get', to: 'upload.gw.test' });
    expect(request.attrs).to.include({ filename: 'report.pdf', size: '2048', 'content-type': 'application/pdf' });
    expect(slot.put.href).to.equal('https://upload.gw.test/put/abc/report.pdf');
    expect(slot.get.href).to.equal('https://upload.gw.test/get/abc/report.pdf');
    expect(slot.headers).to.deep.equal({ authorization: 'Basic x Injected: 1', cookie: 'c=1' });
  });

  it('says what a refused slot means: too large and not allowed for good, a quota to wait for', async () => {
    const refused = async (error: unknown) => requestSlot(async () => { throw error; }, xml, { jid: 'upload.gw.test' }, file).then(() => undefined, (thrown: ChannelSendError) => thrown);
    const large = await refused(stanzaError('not-acceptable', 'modify', xml('file-too-large', { xmlns: NS }, xml('max-file-size', {}, '1024'))));
    expect(large).to.include({ permanent: true });
    expect(large!.message).to.include('too large for the server\'s upload service (it takes files up to 1 KB)');
    expect(await refused(stanzaError('not-allowed', 'cancel'))).to.include({ permanent: true });
    const stamp = new Date(Date.now() + 60_000).toISOString();
    const quota = await refused(stanzaError('resource-constraint', 'wait', xml('retry', { xmlns: NS, stamp })));
    expect(quota!.permanent).to.equal(false);
    expect(quota!.retryAfterMs).to.be.within(50_000, 60_000);
    const timeout = await refused(new Error('timeout'));
    expect(timeout!.permanent, 'no answer: tried again').to.equal(false);
  });

  it('takes https addresses, and plain http only to this host', () => {
    expect(uploadAddress('https://upload.example.org/f', 'upload').href).to.equal('https://upload.example.org/f');
    expect(uploadAddress('http://127.0.0.1:5280/f', 'upload').host).to.equal('127.0.0.1:5280');
    expect(uploadAddress('http://[::1]:5280/f', 'upload').host).to.equal('[::1]:5280');
    for (const bad of ['http://upload.example.org/f', 'ftp://127.0.0.1/f', 'not a url', undefined]) {
      expect(() => uploadAddress(bad, 'upload'), String(bad)).to.throw(ChannelSendError).with.property('permanent', true);
    }
  });

  it('sends the address as the body and as out-of-band data', () => {
    const stanza = fileStanza(xml, { to: 'ann@gw.test', type: 'chat', id: 'x1' }, new URL('https://upload.gw.test/get/abc/report.pdf'), false);
    expect(stanza.getChildText('body')).to.equal('https://upload.gw.test/get/abc/report.pdf');
    expect(stanza.getChild('x', 'jabber:x:oob')!.getChildText('url')).to.equal('https://upload.gw.test/get/abc/report.pdf');
    expect(stanza.getChild('active', 'http://jabber.org/protocol/chatstates')).to.not.equal(undefined);
    expect(fileStanza(xml, { to: 'room@conference.gw.test', type: 'groupchat', id: 'x2' }, new URL('https://a.test/f'), true).getChild('active', 'http://jabber.org/protocol/chatstates')).to.equal(undefined);
  });
});
