import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { WhatsAppApi } from '../support/whatsapp-api.ts';

const VERIFY_TOKEN = 'verify-me-7c1e4b';
const DAY_MS = 24 * 60 * 60_000;

/** The gateway's own client of the Graph API against a stand-in of Meta's Cloud API: what the number sends is what Meta would receive, and Meta's signed notifications come in as Meta posts them. */
describe('WhatsApp channel (e2e, the Cloud API through a stand-in of Meta\'s Graph API and webhooks)', function () {
  this.timeout(120_000);
  let api: WhatsAppApi;
  let home: Home;
  let upstream: ScriptedUpstream;
  let port = 0;
  let url = '';
  let serial = 0;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const account = async (name = 'default') => (await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'whatsapp' && c.account === name);
  const connected = (name = 'default') => waitFor(async () => ((await account(name))?.state === 'connected' ? true : undefined), 20_000, `the ${name} number to be checked`);
  const person = () => `4915${String(100_000_000 + ++serial * 7919)}`;
  const replyTo = (to: string, after: number, pattern: RegExp = /\S/) =>
    waitFor(() => api.texts(to).slice(after).find((text) => pattern.test(text)), 30_000, `a message to ${to} matching ${pattern}`);
  const secret = (name: string, value: string) => home.run(['secrets', 'set', `channels.whatsapp.${name}`], { input: value });
  const inbound = async (who: string) => (await json(['sessions', 'show', `whatsapp:default:dm:${who}`])).messages.filter((m: any) => m.direction === 'in');

  beforeEach(async () => {
    api = await new WhatsAppApi().start();
    upstream = await new ScriptedUpstream().start();
    port = await freePort();
    url = `http://127.0.0.1:${port}/channels/whatsapp/default/webhook`;
    home = new Home({ GATEWAY_PORT: String(port) });
    // The acknowledgement reaction is a message of its own on WhatsApp: off here, and seen in its own test.
    await set('channels.whatsapp', { enabled: true, agent: 'helper', apiRoot: api.apiRoot, phoneNumberId: api.phoneNumberId, reconnectMaxDelayMs: 2000, ackReaction: '' });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    for (const [name, value] of [['accessToken', api.accessToken], ['appSecret', api.appSecret], ['verifyToken', VERIFY_TOKEN]] as const) {
      expect((await secret(name, value)).code).to.equal(0);
    }
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await connected();
    api.subscribe(url);
  });
  afterEach(async () => {
    home.cleanup();
    await api.stop();
    await upstream.stop();
  });

  it('answers Meta\'s subscription handshake only with the verify token; a stranger gets a code; approved, they are answered by the agent, their message marked read; statuses are no messages', async () => {
    const verified = await api.verify(url, VERIFY_TOKEN, '1158201444');
    expect(verified).to.include({ status: 200, body: '1158201444' });
    expect((await api.verify(url, 'not-the-token')).status).to.equal(403);
    expect((await fetch(`${url}?hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=${VERIFY_TOKEN}`)).status).to.equal(400);
    expect((await fetch(url.replace('/default/', '/nobody/'))).status).to.equal(404);
    expect(await account()).to.include({ state: 'connected', detail: `${api.displayNumber} (${api.verifiedName})` });

    const ann = person();
    upstream.responder = (request) => openaiText(`**Hello**, you said: ${String(request.body.messages.at(-1).content)}`);
    api.message(ann, { text: 'hi there' }, { name: 'Ann Example' });
    const codeText = await replyTo(ann, 0, /pairing code is/);
    const code = /pairing code is ([A-Z2-9]{8})/.exec(codeText)![1]!;
    expect(codeText).to.include('Hello Ann Example.').and.to.include(`gateway pair approve whatsapp ${code}`);
    await sleep(1000);
    expect(api.texts(ann), 'the code and nothing else').to.have.length(1);
    expect(upstream.requests, 'no model call for a stranger').to.have.length(0);
    expect((await json(['pair', 'list', 'whatsapp'])).requests[0]).to.include({ channel: 'whatsapp', account: 'default', code, sender: ann, senderName: 'Ann Example' });

    const approved = await home.run(['pair', 'approve', 'whatsapp', code.toLowerCase(), '--notify', '--json']);
    expect(approved.code, approved.stderr).to.equal(0);
    expect(approved.json).to.include({ approved: true, notified: true, sender: ann });
    expect(await replyTo(ann, 1)).to.match(/approved/);

    const asked = api.message(ann, { text: 'what time is it?' }, { name: 'Ann Example' });
    expect(await replyTo(ann, 2)).to.equal('*Hello*, you said: what time is it?');
    const sent = api.sent(ann).at(-1)!;
    expect(sent.path).to.equal(`/v24.0/${api.phoneNumberId}/messages`);
    expect(sent.token).to.equal(api.accessToken);
    expect(sent.body).to.deep.include({ messaging_product: 'whatsapp', recipient_type: 'individual', to: ann, type: 'text' });
    expect(sent.body.text).to.deep.equal({ body: '*Hello*, you said: what time is it?', preview_url: false });
    // While the agent worked: the message marked read, with the typing indicator.
    expect(api.receipts().map((call) => call.body)).to.deep.include({ messaging_product: 'whatsapp', status: 'read', message_id: asked, typing_indicator: { type: 'text' } });

    const shown = await json(['sessions', 'show', `whatsapp:default:dm:${ann}`]);
    const last = shown.messages.at(-1);
    expect(last.delivery).to.include({ status: 'sent', to: ann });
    expect(last.delivery.receipts).to.deep.equal([sent.answer.messages[0].id]);
    await api.settled();
    // Every sent and delivered status came and was taken; none of them is a message.
    expect(api.deliveries.filter((delivery) => delivery.status !== 200), 'every notification taken at once').to.deep.equal([]);
    expect((await inbound(ann)).map((m: any) => [m.text, m.data.platformId])).to.deep.equal([['what time is it?', asked]]);
    expect(shown.messages.filter((m: any) => m.direction === 'in')[0].senderName).to.equal('Ann Example');
    expect(upstream.requests).to.have.length(1);

    const log = (await home.run(['logs', '-n', '500', '--raw'])).stdout;
    for (const value of [api.accessToken, api.appSecret, VERIFY_TOKEN]) expect(log).to.not.include(value);
    const status = await home.run(['status', '--json']);
    for (const value of [api.accessToken, api.appSecret, VERIFY_TOKEN]) expect(status.stdout).to.not.include(value);
    const doctor = await home.run(['doctor', '--json']);
    expect(doctor.stdout).to.include('whatsapp/default connected');
    expect(doctor.stdout).to.not.include(api.accessToken);
  });

  it('images, documents and voice notes reach the agent, fetched through the media endpoint with the access token; one over the limit is named, not kept', async () => {
    const eve = person();
    await set('channels.whatsapp.allowFrom', [`+${eve.slice(0, 2)} ${eve.slice(2)}`]);
    await set('channels.whatsapp.maxAttachmentBytes', 64 * 1024);
    await set('models.providers.script.imageModels', ['m']);
    upstream.responder = () => openaiText('Seen.');
    const content = () => upstream.requests.at(-1)!.body.messages.at(-1).content;
    const flat = (value: unknown) => (typeof value === 'string' ? value : (value as any[]).map((part) => part.text ?? '').join('\n'));
    const png = Uint8Array.from({ length: 3000 }, (_, index) => [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a][index] ?? index % 251);

    api.message(eve, { image: api.upload(png, 'image/png'), caption: 'what is this?' });
    await replyTo(eve, 0, /Seen/);
    const parts = content() as any[];
    expect(parts[0]).to.deep.equal({ type: 'text', text: 'what is this?' });
    expect(parts[1].image_url.url).to.equal(`data:image/png;base64,${Buffer.from(png).toString('base64')}`);
    const fetched = api.calls.filter((call) => call.path.startsWith('/lookaside/'));
    expect(fetched).to.have.length(1);
    expect(fetched[0]!.token, 'the download carries the access token').to.equal(api.accessToken);

    api.message(eve, { document: api.upload(new TextEncoder().encode('remember the milk'), 'text/plain'), filename: 'notes.txt', caption: 'my notes' });
    await replyTo(eve, 1, /Seen/);
    expect(flat(content())).to.equal('my notes\n[file notes.txt (text/plain, 17 bytes)]\nContent of notes.txt:\nremember the milk');

    // A voice note is heard before the agent runs (voice-notes.test.ts); one whose bytes are no sound is answered with why.
    const asked = upstream.requests.length;
    api.message(eve, { audio: api.upload(new Uint8Array(2000).fill(7), 'audio/ogg; codecs=opus'), voice: true });
    expect(await replyTo(eve, 2)).to.match(/^Sorry, I could not listen to your voice note: /);
    expect(upstream.requests, 'the agent is not run for it').to.have.length(asked);

    const big = api.upload(new Uint8Array(100_000), 'application/pdf');
    api.message(eve, { document: big, filename: 'big.pdf' });
    await replyTo(eve, 3, /Seen/);
    // Meta's notification does not say a file's size; its media endpoint does, before any byte is fetched.
    expect(flat(content())).to.equal("[file big.pdf (application/pdf): not kept: larger than this channel's limit of 64 KB]");
    expect(api.calls.filter((call) => call.path === `/lookaside/${big.id}`), 'never downloaded').to.have.length(0);

    const files = (await inbound(eve)).map((message: any) => message.data.attachments.map((file: any) => [file.name, file.kept]));
    expect(files).to.deep.equal([[['image.png', true]], [['notes.txt', true]], [['voice.ogg', true]], [['big.pdf', false]]]);
  });

  it('puts the acknowledgement reaction on a message it stored, and sends a workspace file as a document (an image as an image) with its bytes', async () => {
    const liv = person();
    await set('channels.whatsapp.allowFrom', [liv]);
    await set('channels.whatsapp.ackReaction', '👀');
    upstream.enqueue(openaiText('Noted.'));
    const asked = api.message(liv, { text: 'file the report' });
    await replyTo(liv, 0, /Noted/);
    const ack = await waitFor(() => api.sent(liv).find((call) => call.body.type === 'reaction'), 10_000, 'the acknowledgement');
    expect(ack.body.reaction).to.deep.equal({ message_id: asked, emoji: '👀' });

    const workspace = join(home.profileDir(), 'workspaces', 'helper');
    mkdirSync(workspace, { recursive: true });
    const report = Buffer.from('%PDF-1.4\n' + 'quarterly figures '.repeat(200));
    writeFileSync(join(workspace, 'report.pdf'), report);
    const sent = await home.run(['message', 'send', '--channel', 'whatsapp', '--to', liv, '--file', 'report.pdf', 'the report', '--json']);
    expect(sent.code, sent.stderr).to.equal(0);
    const document = await waitFor(() => api.sent(liv).find((call) => call.body.type === 'document'), 15_000, 'the document');
    expect(document.body.document).to.include({ caption: 'the report', filename: 'report.pdf' });
    const uploaded = await (await fetch(`${api.apiRoot}/lookaside/${document.body.document.id}`, { headers: { authorization: `Bearer ${api.accessToken}` } })).arrayBuffer();
    expect(Buffer.from(uploaded).equals(report), 'the bytes that were in the workspace').to.equal(true);
    const outside = await home.run(['message', 'send', '--channel', 'whatsapp', '--to', liv, '--file', '../../config.json', 'no', '--json']);
    expect(outside.code).to.not.equal(0);
    expect(outside.json.error.message).to.include('outside the workspace');
  });

  it('replies in WhatsApp\'s markup, split at 4,096 characters with code blocks whole; an image line goes as an image; an operator reacts to a message and quotes it', async () => {
    const gus = person();
    await set('channels.whatsapp.allowFrom', [gus]);
    const prose = 'Here is the plan, step by step. '.repeat(110);
    const code = Array.from({ length: 120 }, (_, index) => `const line${index} = compute(${index}); // keep`).join('\n');
    upstream.enqueue(openaiText(`# Plan\n\n${prose}\n\n\`\`\`ts\n${code}\n\`\`\`\n\n![the chart](https://example.org/charts/q3.png)\n\nThat is **all**, see [the docs](https://example.org/docs).`, undefined, { pieces: 30 }));
    const asked = api.message(gus, { text: 'plan please' });
    await waitFor(() => (api.sent(gus).some((call) => call.body.text?.body?.includes('That is *all*')) ? true : undefined), 30_000, 'the last part');
    const calls = api.sent(gus);
    const texts = calls.filter((call) => call.body.type === 'text').map((call) => String(call.body.text.body));
    expect(texts[0]!.startsWith('*Plan*\n\nHere is the plan')).to.equal(true);
    for (const text of texts) {
      expect(text.length).to.be.at.most(4096);
      expect((text.match(/```/g) ?? []).length % 2, 'whole code blocks').to.equal(0);
    }
    expect(texts.join('\n')).to.include('const line0 = ').and.to.include('const line119 = ');
    expect(texts.at(-1)).to.equal('That is *all*, see the docs (https://example.org/docs).');
    const image = calls.find((call) => call.body.type === 'image')!;
    expect(image.body.image).to.deep.equal({ link: 'https://example.org/charts/q3.png', caption: 'the chart' });
    expect(calls.indexOf(image), 'in its place, between the code and the last words').to.equal(calls.length - 2);
    const receipts = await waitFor(async () => (await json(['sessions', 'show', `whatsapp:default:dm:${gus}`])).messages.at(-1).delivery?.receipts, 10_000, 'the delivery');
    expect(receipts).to.have.length(calls.length);

    const reacted = await home.run(['message', 'send', '--channel', 'whatsapp', '--to', `${gus}/${asked}`, '👍', '--json']);
    expect(reacted.code, reacted.stderr).to.equal(0);
    expect(reacted.json).to.include({ sent: true, sessionKey: `whatsapp:default:dm:${gus}` });
    expect(api.sent(gus).at(-1)!.body).to.deep.include({ type: 'reaction', reaction: { message_id: asked, emoji: '👍' } });
    const quoted = await home.run(['message', 'send', '--channel', 'whatsapp', '--to', `+${gus}/${asked}`, 'About this: done.', '--json']);
    expect(quoted.json).to.include({ sent: true });
    expect(api.sent(gus).at(-1)!.body).to.deep.include({ type: 'text', context: { message_id: asked } });
    const refused = await home.run(['message', 'send', '--channel', 'whatsapp', '--to', 'alice', 'hi', '--json']);
    expect(refused.code).to.equal(2);
    expect(refused.json.error.message).to.include('is not a WhatsApp number');
  });

  it('outside the 24-hour window a reply is never sent free-form: without a template it is given up with the reason; with one, the template invites the person back and the reply waits for their answer', async () => {
    const hal = person();
    await set('channels.whatsapp.allowFrom', [hal]);
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    // Meta posts a notification again for days when it was not taken: this one was written 25 hours ago.
    api.message(hal, { text: 'old question' }, { at: Date.now() - DAY_MS - 60 * 60_000 });
    const failed = await waitFor(async () => {
      const last = (await json(['sessions', 'show', `whatsapp:default:dm:${hal}`])).messages.at(-1);
      return last.role === 'assistant' && last.delivery?.status === 'failed' ? last.delivery : undefined;
    }, 30_000, 'the reply to be given up');
    expect(failed.attempts, 'given up at once, not retried').to.equal(1);
    expect(failed.error).to.match(/outside WhatsApp's 24-hour customer service window \(\d+ last wrote at .*Z\)/).and.to.include('channels.whatsapp.template is not set; not sent');
    const shown = await home.run(['sessions', 'show', `whatsapp:default:dm:${hal}`]);
    expect(shown.stdout).to.include('not delivered to').and.to.include('24-hour customer service window');
    const never = await home.run(['message', 'send', '--channel', 'whatsapp', '--to', person(), 'Hello out of the blue', '--json']);
    expect(never.code, 'a number that never wrote cannot be sent free-form').to.equal(1);
    expect(never.json.error.message).to.include('has not written to this number in the last 24 hours');
    expect(api.sent(), 'nothing free-form went out').to.deep.equal([]);

    await set('channels.whatsapp.template', { name: 'welcome_back', language: 'en_US' });
    api.message(hal, { text: 'another old one' }, { at: Date.now() - DAY_MS - 30 * 60_000 });
    const invite = await waitFor(() => api.sent(hal).find((call) => call.body.type === 'template'), 30_000, 'the template');
    expect(invite.body.template).to.deep.equal({ name: 'welcome_back', language: { code: 'en_US' } });
    const waiting = await waitFor(async () => {
      const last = (await json(['sessions', 'show', `whatsapp:default:dm:${hal}`])).messages.at(-1);
      return last.role === 'assistant' && last.delivery?.status === 'pending' && last.delivery.error ? last.delivery : undefined;
    }, 30_000, 'the reply to wait');
    expect(waiting.error).to.include('the template welcome_back was sent at').and.to.include(`waits for ${hal} to answer it`);
    await sleep(2500);
    expect(api.sent(hal).filter((call) => call.body.type === 'template'), 'invited once, however often the reply is tried').to.have.length(1);

    // They tap the template's button: the window is open again, and the waiting reply goes first.
    api.message(hal, { raw: { type: 'button', button: { text: 'Show me', payload: 'show' }, context: { from: api.metadata().display_phone_number, id: invite.answer.messages[0].id } } });
    await waitFor(() => (api.texts(hal).length >= 2 ? true : undefined), 60_000, 'the waiting reply and the answer to the button');
    expect(api.texts(hal)).to.deep.equal(['Answer: another old one', 'Answer: Show me']);
    await api.settled();
    expect(api.sent(hal).filter((call) => call.body.type === 'text').length).to.equal(2);
    expect((await account()).detail, 'Meta reported no failure').to.not.include('undelivered');
  });

  it('a failure Meta reports later is shown with the account\'s state; statuses and malformed notifications harm nothing', async () => {
    const ivy = person();
    await set('channels.whatsapp.allowFrom', [ivy]);
    api.message(ivy, { text: 'hello' });
    await replyTo(ivy, 0);
    api.notify({
      messaging_product: 'whatsapp', metadata: api.metadata(),
      statuses: [{ id: 'wamid.HBgLfailedmessage0001', status: 'failed', timestamp: String(Math.floor(Date.now() / 1000)), recipient_id: ivy, errors: [{ code: 131026, title: 'Message undeliverable', error_data: { details: 'The recipient\'s app is too old' } }] }],
    });
    api.notify({ messaging_product: 'whatsapp', metadata: api.metadata(), messages: [{ from: ivy, id: 'wamid.x1', type: 'reaction', reaction: { message_id: 'wamid.x0', emoji: '❤️' } }, { from: 'not-a-number', id: 'wamid.x2', type: 'text', text: { body: 'x' } }, { id: 'wamid.x3', type: 'text' }, null, 7] });
    api.notify({ messaging_product: 'whatsapp', metadata: api.metadata('999999999'), contacts: [], messages: [{ from: ivy, id: 'wamid.other', timestamp: '1', type: 'text', text: { body: 'for another number' } }] });
    api.notify({ messaging_product: 'whatsapp', metadata: api.metadata(), messages: [{ from: ivy, id: 'wamid.long', timestamp: String(Math.floor(Date.now() / 1000)), type: 'text', text: { body: 'y'.repeat(60_000) } }] });
    await api.settled();
    const detail = await waitFor(async () => ((await account()).detail?.includes('undelivered') ? (await account()).detail : undefined), 10_000, 'the failure in the state');
    expect(detail).to.include(`last undelivered: to ${ivy}`).and.to.include('error 131026: Message undeliverable (The recipient\'s app is too old)');
    expect((await account()).state).to.equal('connected');
    await replyTo(ivy, 1);
    expect((await inbound(ivy)).map((m: any) => m.text.length)).to.deep.equal(['hello'.length, 16_384]);
    expect(api.deliveries.every((delivery) => delivery.status === 200)).to.equal(true);
  });

  it('refuses a bad signature, an unsigned or malformed body, one over 1 MiB or not JSON, with nothing stored; a notification is stored once however often Meta posts it', async () => {
    const kim = person();
    await set('channels.whatsapp.allowFrom', [kim]);
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    const notification = (text: string, id = `wamid.HBgLtest${++serial}abcdef`) => JSON.stringify(api.envelope({
      messaging_product: 'whatsapp', metadata: api.metadata(), contacts: [{ profile: { name: 'Kim' }, wa_id: kim }],
      messages: [{ from: kim, id, timestamp: String(Math.floor(Date.now() / 1000)), type: 'text', text: { body: text } }],
    }));
    expect((await api.postSigned(url, notification('forged one'), { secret: 'not-the-app-secret' })).status).to.equal(401);
    expect((await api.postSigned(url, notification('forged two'), { secret: null })).status).to.equal(401);
    const tampered = notification('forged three');
    const good = await api.postSigned(url, notification('untampered'), {});
    expect(good.status).to.equal(200);
    const signature = (await fetch(url, { method: 'POST', body: tampered.replace('forged three', 'forged four'), headers: { 'content-type': 'application/json', 'x-hub-signature-256': 'sha256=' + '0'.repeat(64) } })).status;
    expect(signature).to.equal(401);
    const malformed = await api.postSigned(url, '{"object":"whatsapp_business_account","entry":[');
    expect(malformed).to.deep.include({ status: 400 });
    expect(malformed.body).to.include({ statusCode: 400, message: 'The body is not valid JSON.' });
    expect((await api.postSigned(url, '{"object":"whatsapp_business_account","entry":"no"}')).status).to.equal(400);
    const deep = await api.postSigned(url, `{"object":"whatsapp_business_account","entry":${'['.repeat(10_000)}${']'.repeat(10_000)}}`);
    expect(deep.body.message).to.equal('The body nests deeper than 64 levels; the gateway takes at most 64.');
    const huge = await api.postSigned(url, notification(`forged huge ${'z'.repeat(1100 * 1024)}`));
    expect(huge.status).to.equal(413);
    expect((await api.postSigned(url, notification('forged form'), { contentType: 'application/x-www-form-urlencoded' })).status).to.equal(415);

    expect(await replyTo(kim, 0)).to.equal('Answer: untampered');
    // Meta posts what it thinks was not taken again: stored once, answered once.
    const again = notification('once only', 'wamid.HBgLonceonly0001');
    for (let index = 0; index < 3; index++) expect((await api.postSigned(url, again)).status).to.equal(200);
    await replyTo(kim, 1, /once only/);
    await sleep(1500);
    expect(api.texts(kim)).to.deep.equal(['Answer: untampered', 'Answer: once only']);
    expect((await inbound(kim)).map((m: any) => m.text)).to.deep.equal(['untampered', 'once only']);
    expect(home.stateText()).to.not.include('forged');
  });

  it('checks Meta\'s signature before anything reads the body: a forged or unsigned malformed body is 401, not 400; the handshake\'s token before its challenge', async () => {
    const malformed = '{"object":"whatsapp_business_account","entry":[{"changes":[{"value":{"messages":[{"type":"text","text":{"body":"forged malformed"';
    const forged = await api.postSigned(url, malformed, { secret: 'not-the-app-secret' });
    expect(forged).to.deep.equal({ status: 401, body: { error: 'unauthorized', message: 'The request\'s signature does not match the app secret.', statusCode: 401 } });
    expect((await api.postSigned(url, malformed, { secret: null })).status).to.equal(401);
    // Signed by Meta, the same bytes are read, and refused as what they are.
    expect((await api.postSigned(url, malformed)).body).to.deep.include({ statusCode: 400, message: 'The body is not valid JSON.' });
    expect((await fetch(`${url}?hub.mode=subscribe&hub.challenge=not%20a%20number&hub.verify_token=wrong`)).status).to.equal(403);
    expect((await fetch(`${url}?hub.mode=subscribe&hub.challenge=not%20a%20number&hub.verify_token=${VERIFY_TOKEN}`)).status).to.equal(400);
    expect(home.stateText()).to.not.include('forged malformed');
  });

  it('kill -9 with a message waiting for its answer: after a restart it is answered exactly once, and what Meta posted meanwhile too', async () => {
    const dan = person();
    await set('channels.whatsapp.allowFrom', [dan]);
    upstream.responder = (request) => ({ ...openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`), delayMs: 1500 });
    const questions = ['question 1', 'question 2'];
    for (const question of questions) api.message(dan, { text: question });
    await waitFor(() => (upstream.requests.length >= 1 ? true : undefined), 20_000, 'the first run to start');
    await api.settled();
    process.kill(home.lock().pid, 'SIGKILL');
    api.message(dan, { text: 'question 3' });
    questions.push('question 3');
    await waitFor(() => (api.deliveries.some((delivery) => delivery.status === 0) ? true : undefined), 10_000, 'a post nobody took');
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(() => (api.texts(dan).length >= questions.length ? true : undefined), 60_000, 'every answer');
    await sleep(2500);
    expect([...api.texts(dan)].sort()).to.deep.equal(questions.map((question) => `Answer: ${question}`));
    expect((await inbound(dan)).map((m: any) => m.text)).to.deep.equal(questions);
  });

  it('an API that is down, then back: the reply waits and is delivered once; a rate limit (429, 130429) pauses the number; a refused token puts it in error', async () => {
    const lea = person();
    await set('channels.whatsapp.allowFrom', [lea]);
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    api.message(lea, { text: 'first' });
    await replyTo(lea, 0);

    api.down = true;
    api.message(lea, { text: 'while Meta is away' });
    await waitFor(async () => ((await account())?.state === 'disconnected' ? true : undefined), 20_000, 'the account to notice');
    expect((await account()).detail).to.match(/^cannot reach the Graph API/);
    const queued = await home.run(['message', 'send', '--channel', 'whatsapp', '--to', lea, 'Said while Meta was away', '--json']);
    expect(queued.code, queued.stderr).to.equal(0);
    expect(queued.json).to.include({ sent: false });
    api.down = false;
    await connected();
    await waitFor(() => (api.texts(lea).length >= 3 ? true : undefined), 30_000, 'both waiting messages');
    await sleep(1500);
    expect(api.texts(lea)).to.deep.equal(['Answer: first', 'Answer: while Meta is away', 'Said while Meta was away']);

    api.fail('messages', { status: 429, code: 130429, message: '(#130429) Rate limit hit' });
    api.message(lea, { text: 'in a hurry' });
    await replyTo(lea, 3);
    const tries = api.sent(lea, { all: true }).slice(-2);
    expect(tries[0]!.refused).to.equal(true);
    expect(tries[1]!.at - tries[0]!.at, 'the number waited').to.be.at.least(1900);

    api.revoke();
    api.message(lea, { text: 'after the token expired' });
    const refused = await waitFor(async () => ((await account())?.state === 'error' ? account() : undefined), 20_000, 'the refused token');
    expect(refused.detail).to.include('Meta refused the access token (error 190').and.to.include('gateway secrets set channels.whatsapp.accessToken');
    expect(refused.detail).to.not.include(api.accessToken);
    const waiting = (await json(['sessions', 'show', `whatsapp:default:dm:${lea}`])).messages.at(-1);
    expect(waiting.delivery).to.include({ status: 'pending' });
  });

  it('several numbers of one Meta app on one address: each notification goes to the account of its number, each answers from its own', async () => {
    const second = '106540352249999';
    api.numbers.set(second, '+1 555-010-0200');
    await set('channels.whatsapp.accounts.sales', { phoneNumberId: second });
    expect((await home.run(['restart'])).code).to.equal(0);
    await connected();
    await connected('sales');
    expect((await account('sales')).detail, 'the app\'s secrets serve the second number too').to.include('+1 555-010-0200');
    const ola = person();
    await set('channels.whatsapp.allowFrom', [ola]);
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    api.message(ola, { text: 'to sales' }, { phoneNumberId: second });
    api.message(ola, { text: 'to support' });
    await waitFor(() => (api.texts(ola).length >= 2 ? true : undefined), 30_000, 'both answers');
    const from = (text: string) => api.sent(ola).find((call) => call.body.text?.body === text)!.path;
    expect(from('Answer: to sales')).to.equal(`/v24.0/${second}/messages`);
    expect(from('Answer: to support')).to.equal(`/v24.0/${api.phoneNumberId}/messages`);
    expect((await json(['sessions', 'show', `whatsapp:sales:dm:${ola}`])).messages.map((m: any) => m.text)).to.deep.equal(['to sales', 'Answer: to sales']);
  });

  it('says what is missing: the secrets (by the commands that set them) and the phone number id; deliveries wait with 503 until then', async () => {
    expect((await home.run(['secrets', 'unset', 'channels.whatsapp.appSecret'])).code).to.equal(0);
    expect((await home.run(['config', 'unset', 'channels.whatsapp.phoneNumberId'])).code).to.equal(0);
    expect((await home.run(['restart'])).code).to.equal(0);
    const waiting = await waitFor(async () => ((await account())?.state === 'error' ? account() : undefined), 20_000, 'the account to say what it needs');
    expect(waiting.detail).to.include('gateway secrets set channels.whatsapp.appSecret');
    const refused = await api.postSigned(url, JSON.stringify(api.envelope({ messaging_product: 'whatsapp', metadata: api.metadata(), messages: [] })));
    expect(refused.status).to.equal(503);
    expect(JSON.stringify(refused.body)).to.not.include('appSecret');
    expect((await secret('appSecret', api.appSecret)).code).to.equal(0);
    expect((await home.run(['restart'])).code).to.equal(0);
    const again = await waitFor(async () => ((await account())?.detail?.includes('phoneNumberId') ? account() : undefined), 20_000, 'the account to want its number');
    expect(again.detail).to.include('gateway config set channels.whatsapp.phoneNumberId');
    const bad = await home.run(['config', 'set', 'channels.whatsapp.phoneNumberId', '"+1 555 0100"']);
    expect(bad.code, 'a phone number id is digits').to.equal(2);
  });
});
