import { createHmac } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { pino } from 'pino';
import { GatewayCredential } from '../../../../src/server/auth/gateway-credential.ts';
import { HttpAuthenticator } from '../../../../src/server/auth/http-auth.ts';
import { AuthLockout, RequestBudget } from '../../../../src/server/auth/throttle.ts';
import { slackSignatureRefusal } from '../../../../src/server/channels/slack/signature.ts';
import { TELEGRAM_SECRET_HEADER } from '../../../../src/server/channels/telegram/telegram.ts';
import { deliveredJson, refusal, secretTokenRefusal } from '../../../../src/server/channels/webhook.ts';
import { registerWebhookRoute } from '../../../../src/server/channels/webhook-route.ts';
import { metaRefusal } from '../../../../src/server/channels/whatsapp/webhook-checks.ts';
import { createHttpServer } from '../../../../src/server/http/server.ts';
import type { Channel, ChannelRequest, ChannelResponse } from '../../../../src/server/kernel/channel.ts';
import type { ModuleContext } from '../../../../src/server/kernel/module.ts';
import { TableBuilder } from '../../../../src/server/kernel/registry.ts';
import type { ChannelManager } from '../../../../src/server/channels/manager.ts';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';

const log = pino({ level: 'silent' });
const APP_SECRET = 'meta-app-secret';
const VERIFY_TOKEN = 'meta-verify-token';
const SIGNING_SECRET = 'slack-signing-secret';
const TELEGRAM_SECRET = 'telegram-secret-token';

/**
 * The channels' webhook routes through the daemon's real HTTP pipeline, each
 * platform's own check (the one its channel declares) before a handler that
 * records what reaches it and parses it as the channel does.
 */
describe('the channels\' webhook routes: each platform\'s check is the route\'s verifier, run before the handler', () => {
  let server: Server;
  let url: string;
  /** What reached each channel's receive(). */
  const received: { channel: string; request: ChannelRequest }[] = [];
  /** Whether each platform's account is set up to check anything yet. */
  const ready = { whatsapp: true, slack: true, telegram: true };

  /** A channel whose verify is the platform's own check, and whose receive records and parses what reaches it. */
  const channel = (id: string, verify: (request: ChannelRequest) => ChannelResponse | undefined): Channel => ({
    id, buttons: id === 'slack', accounts: () => ['default'], verify,
    receive: async (request: ChannelRequest) => {
      received.push({ channel: id, request });
      if (request.method === 'GET') return { status: 200, body: request.query?.['hub.challenge'] ?? '' };
      if (request.interaction) return { status: 200, body: {} };
      const read = deliveredJson(request.body);
      return read.refused ?? { status: 200, body: {} };
    },
  }) as unknown as Channel;
  const channels = new Map<string, Channel>([
    ['whatsapp', channel('whatsapp', (request) => metaRefusal(request, ready.whatsapp ? { appSecret: APP_SECRET, verifyToken: VERIFY_TOKEN } : {}, log))],
    ['slack', channel('slack', (request) => slackSignatureRefusal(request, ready.slack ? SIGNING_SECRET : undefined))],
    ['telegram', channel('telegram', (request) => secretTokenRefusal(request, TELEGRAM_SECRET_HEADER, ready.telegram ? TELEGRAM_SECRET : undefined, 'This bot is not in webhook mode, or not connected yet.'))],
  ]);
  const manager = {
    webhookTarget: (id: string, request: Pick<ChannelRequest, 'account' | 'interaction'>) => {
      const found = channels.get(id);
      if (request.interaction && found && !found.buttons) return { refused: refusal(404, 'not_found', `Channel ${id} takes no interactions.`) };
      return found && found.accounts().includes(request.account) ? { channel: found } : { refused: refusal(404, 'not_found', 'No channel account here takes webhook deliveries at this address.') };
    },
  } as unknown as ChannelManager;

  before(async () => {
    const config = effectiveConfig({ gateway: { rateLimit: { max: 10_000, windowMs: 60_000 } } });
    const authenticator = new HttpAuthenticator({
      config: () => config, credential: new GatewayCredential('token', 'unit-gateway-token', undefined),
      lockout: new AuthLockout(config.gateway.auth.rateLimit), audit: () => undefined,
    });
    const builder = new TableBuilder({ reservedPaths: () => [], compileSchema: () => undefined });
    const api = builder.api('channels', log, true);
    registerWebhookRoute({ http: { route: api.http.route, document: () => undefined } } as unknown as ModuleContext, manager);
    server = createHttpServer({
      logger: log, config: () => config, exposed: false, readiness: () => 'ready', problems: () => ({}), detail: () => ({ profile: 'unit' }),
      fastRoute: () => undefined, budget: new RequestBudget(10_000, 60_000), authenticator, table: () => builder.table,
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/channels`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => {
    received.length = 0;
    Object.assign(ready, { whatsapp: true, slack: true, telegram: true });
  });

  const send = async (path: string, init: RequestInit = {}) => {
    const response = await fetch(`${url}${path}`, init);
    const text = await response.text();
    let body: any = text;
    try {
      body = JSON.parse(text);
    } catch {
      // the handshake's challenge, as text
    }
    return { status: response.status, body };
  };
  const post = (path: string, body: string, headers: Record<string, string>, type = 'application/json') => send(path, { method: 'POST', body, headers: { 'content-type': type, ...headers } });
  const meta = (body: string, secret = APP_SECRET) => ({ 'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` });
  const slack = (body: string, secret = SIGNING_SECRET, at = Math.floor(Date.now() / 1000)) => ({
    'x-slack-request-timestamp': String(at), 'x-slack-signature': `v0=${createHmac('sha256', secret).update(`v0:${at}:${body}`).digest('hex')}`,
  });
  const malformed = '{"object":"whatsapp_business_account","entry":[';

  it('WhatsApp: a bad or missing signature is 401 whatever the body (malformed JSON included), with the body left unparsed and unseen; a good one reaches the handler', async () => {
    const forged = await post('/whatsapp/default/webhook', malformed, meta(malformed, 'not-the-app-secret'));
    expect(forged).to.deep.equal({ status: 401, body: { error: 'unauthorized', message: 'The request\'s signature does not match the app secret.', statusCode: 401 } });
    expect((await post('/whatsapp/default/webhook', malformed, {})).body).to.deep.include({ statusCode: 401, message: 'The request is not signed (X-Hub-Signature-256).' });
    expect(received, 'the handler saw none of them').to.deep.equal([]);
    // Signed, the same malformed body reaches the handler, which parses it: 400.
    expect((await post('/whatsapp/default/webhook', malformed, meta(malformed))).body).to.deep.include({ statusCode: 400, message: 'The body is not valid JSON.' });
    expect((await post('/whatsapp/default/webhook', '{"entry":[]}', meta('{"entry":[]}'))).status).to.equal(200);
    expect(received.map(({ request }) => request.body.toString())).to.deep.equal([malformed, '{"entry":[]}']);
  });

  it('WhatsApp: the subscription handshake\'s verify token is checked before the handler echoes the challenge; an account not set up is 503', async () => {
    const hub = (token: string, mode = 'subscribe') => `/whatsapp/default/webhook?hub.mode=${mode}&hub.challenge=1158201444&hub.verify_token=${token}`;
    expect((await send(hub('wrong'))).status).to.equal(403);
    expect((await send(hub(VERIFY_TOKEN, 'unsubscribe'))).status).to.equal(400);
    expect(received).to.deep.equal([]);
    expect(await send(hub(VERIFY_TOKEN))).to.deep.equal({ status: 200, body: 1158201444 });
    expect(received.map(({ request }) => request.method)).to.deep.equal(['GET']);
    ready.whatsapp = false;
    expect((await send(hub(VERIFY_TOKEN))).status).to.equal(503);
    expect((await post('/whatsapp/default/webhook', '{}', meta('{}'))).body).to.deep.include({ statusCode: 503, message: 'This account is not set up to take deliveries yet.' });
    expect(received).to.have.length(1);
  });

  it('Slack: an unsigned, forged or stale request is 401 whatever the body, events and interactions alike; a signed one reaches the handler', async () => {
    expect((await post('/slack/default/webhook', '{"type":', slack('{"type":', 'not-the-secret'))).body).to.deep.include({ statusCode: 401, message: 'The request\'s signature does not match the signing secret.' });
    expect((await post('/slack/default/webhook', '{"type":', slack('{"type":', SIGNING_SECRET, Math.floor(Date.now() / 1000) - 600))).body).to.deep.include({ statusCode: 401, message: 'The request\'s timestamp is not within five minutes of now.' });
    expect((await post('/slack/default/webhook', '{"type":', {})).status).to.equal(401);
    const form = 'payload=%7B%22type%22%3A';
    expect((await post('/slack/default/interactivity', form, slack(form, 'not-the-secret'), 'application/x-www-form-urlencoded')).status).to.equal(401);
    expect(received).to.deep.equal([]);
    expect((await post('/slack/default/webhook', '{"type":', slack('{"type":'))).body).to.deep.include({ statusCode: 400, message: 'The body is not valid JSON.' });
    expect((await post('/slack/default/interactivity', form, slack(form), 'application/x-www-form-urlencoded')).status).to.equal(200);
    expect(received.map(({ request }) => request.interaction ?? false)).to.deep.equal([false, true]);
    ready.slack = false;
    expect((await post('/slack/default/webhook', '{}', slack('{}'))).status).to.equal(503);
  });

  it('Telegram: a missing or wrong secret token is 401 whatever the body; the right one reaches the handler', async () => {
    expect((await post('/telegram/default/webhook', '{"update_id":', { 'x-telegram-bot-api-secret-token': 'wrong' })).body)
      .to.deep.equal({ error: 'unauthorized', message: 'The X-Telegram-Bot-Api-Secret-Token header is missing or wrong.', statusCode: 401 });
    expect((await post('/telegram/default/webhook', '{"update_id":', {})).status).to.equal(401);
    expect(received).to.deep.equal([]);
    expect((await post('/telegram/default/webhook', '{"update_id":', { 'x-telegram-bot-api-secret-token': TELEGRAM_SECRET })).status).to.equal(400);
    expect(received).to.have.length(1);
    ready.telegram = false;
    expect((await post('/telegram/default/webhook', '{}', { 'x-telegram-bot-api-secret-token': TELEGRAM_SECRET })).body).to.deep.include({ statusCode: 503, message: 'This bot is not in webhook mode, or not connected yet.' });
  });

  it('reads the body as declared first (415, 413), and refuses an address no account takes (404) and interactions a channel has none of, before any platform check', async () => {
    expect((await post('/telegram/default/webhook', '{}', {}, 'text/plain')).status, 'not JSON: 415 before the secret is asked').to.equal(415);
    expect((await post('/whatsapp/default/webhook', `{"a":"${'x'.repeat(1024 * 1024)}"}`, {})).status).to.equal(413);
    expect((await post('/telegram/nobody/webhook', '{}', {})).body).to.deep.include({ statusCode: 404, message: 'No channel account here takes webhook deliveries at this address.' });
    expect((await post('/whatsapp/default/interactivity', 'payload=x', {}, 'application/x-www-form-urlencoded')).body).to.deep.include({ statusCode: 404, message: 'Channel whatsapp takes no interactions.' });
    expect(received).to.deep.equal([]);
  });
});
