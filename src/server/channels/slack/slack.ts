/**
 * Slack: Socket Mode for events (socket-mode.ts, the gateway's own client),
 * with each event acknowledged only once it is stored, and the Web API
 * (Slack's @slack/web-api, on the channels' fetch: http-fetch.ts) for replies
 * in mrkdwn, in the thread of the message they answer. No public address is needed. Several apps
 * (accounts) per channel. How an event is read is in inbound.ts.
 */
import type { WebClient as WebClientType } from '@slack/web-api';
import type { Logger as PinoLogger } from 'pino';
import type { ChannelState } from '../../../shared/channels.ts';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelSettings, type ChannelRequest, type ChannelResponse, type InboundMessage, type OutboundFile, type OutboundVoice, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { deliveredJson, refusal, storeThenAcknowledge } from '../webhook.ts';
import { markdownToSlackMrkdwn, splitMessage } from '../formatting.ts';
import { describeNetworkError } from '../network-errors.ts';
import { channelFetch } from '../http-fetch.ts';
import { SlackSocket, type SlackEnvelope } from './socket-mode.ts';
import { inboundOf, type SlackEvent } from './inbound.ts';
import { actOn, answerInteractivity, blocksOf, type SlackInteraction } from './buttons.ts';
import { slackReaction } from './emoji.ts';
import { slackSignatureRefusal } from './signature.ts';

/** Slack cuts a message's text past 40,000 characters. */
export const SLACK_LIMIT = 40_000;

interface AccountSettings {
  enabled: boolean;
  apiRoot?: string;
  /** How Slack delivers events: Socket Mode, or the Events API posting to this daemon. */
  events: 'socket' | 'http';
  rooms: string[];
}

export function slackAccounts(settings: ChannelSettings): Map<string, AccountSettings> {
  return accountsOf<AccountSettings>(settings, { keys: ['apiRoot', 'events', 'rooms'], inherited: { apiRoot: true, events: true }, defaults: { events: 'socket', rooms: [] } });
}

const secretFor = (channelId: string, account: string, name: 'botToken' | 'appToken' | 'signingSecret') => settingPath(channelId, account, name);

type WebApi = typeof import('@slack/web-api');

/** Slack's Web API client loaded when a Slack channel starts (bundled, the CommonJS package's exports are its default export). */
async function loadSlack(): Promise<{ webApi: WebApi }> {
  const webApi = await import('@slack/web-api') as WebApi & { default?: WebApi };
  return { webApi: typeof webApi.WebClient === 'function' ? webApi : webApi.default! };
}

/** The SDK's logger interface over the daemon's: warnings and errors only, never the payloads it logs at debug. */
function sdkLogger(logger: PinoLogger) {
  let level = 'warn';
  return {
    debug: () => undefined,
    info: () => undefined,
    warn: (...messages: unknown[]) => logger.warn(messages.map(String).join(' ')),
    error: (...messages: unknown[]) => logger.warn(messages.map(String).join(' ')),
    setLevel: (next: string) => { level = next; },
    getLevel: () => level,
    setName: () => undefined,
  } as never;
}

/** One Slack app: its Socket Mode connection and its Web API client. */
class SlackAccount extends AccountConnection<AccountSettings> {
  private stopped = false;
  private socket?: SlackSocket;
  private web?: WebClientType;
  private botUserId?: string;
  /** With the Events API: the secret Slack signs its requests with. */
  private signingSecret?: string;
  /** The bot token, for Slack's private file addresses. */
  private botToken?: string;
  private botName?: string;
  private readonly names = new Map<string, string>();

  private readonly sdk: { webApi: WebApi };

  constructor(channelId: string, name: string, settings: () => AccountSettings | undefined, context: ChannelContext, sdk: { webApi: WebApi }) {
    super(channelId, name, settings, context);
    this.sdk = sdk;
  }

  get selfName(): string | undefined {
    return this.botName ? `@${this.botName}` : undefined;
  }

  /** Connects; a failure waits with backoff (or, for a refused token, the longest wait) and tries again. */
  async connect(): Promise<void> {
    if (this.stopped) return;
    this.setState('connecting');
    try {
      if (this.settings()?.events === 'http') {
        await this.connectEventsApi();
        return;
      }
      this.signingSecret = undefined;
      const [botToken, appToken] = await Promise.all([
        this.context.secret(secretFor(this.channelId, this.name, 'botToken')),
        this.context.secret(secretFor(this.channelId, this.name, 'appToken')),
      ]);
      const missing = [!botToken && secretFor(this.channelId, this.name, 'botToken'), !appToken && secretFor(this.channelId, this.name, 'appToken')].filter(Boolean);
      if (missing.length) throw new Setup(`no ${missing.length === 2 ? 'tokens' : 'token'}: ${missing.map((name) => `gateway secrets set ${name}`).join('; ')} (the bot token xoxb-..., the app-level token xapp-..., on stdin)`);
      const slackApiUrl = this.apiUrl();
      const logger = sdkLogger(this.log);
      // Rate limits and retries are the outbox's to honour: a refused call comes back at once, with Slack's Retry-After.
      this.web = new this.sdk.webApi.WebClient(botToken!, { slackApiUrl, logger, rejectRateLimitedCalls: true, retryConfig: { retries: 0 }, timeout: 30_000, fetch: channelFetch });
      this.botToken = botToken;
      const identity = await this.web.auth.test();
      this.botUserId = identity.user_id;
      this.botName = identity.user;
      // The account reconnects itself: a new connection address each time, with its own backoff.
      const socket = new SlackSocket({ web: new this.sdk.webApi.WebClient(appToken!, { slackApiUrl, logger, rejectRateLimitedCalls: true, retryConfig: { retries: 0 }, timeout: 30_000, fetch: channelFetch }) });
      socket.on('slack_event', (envelope: SlackEnvelope) => void this.onEnvelope(envelope));
      this.socket = socket;
      await socket.start();
      this.reconnect.succeeded();
      this.setState('connected', this.selfName);
      socket.once('disconnected', () => {
        if (this.stopped || this.socket !== socket) return;
        // Slack recycles connections regularly (a disconnect message, then a new URL): connect again at once. It counts
        // as a try: should the new connection fail, the wait after it is the second one.
        this.setState('connecting', 'Slack closed the connection; connecting again');
        this.reconnect.next();
        this.reconnect.schedule(() => void this.connect(), 0);
      });
    } catch (error) {
      if (this.stopped) return;
      const { state, detail, waitMs } = this.classify(error);
      this.setState(state, detail);
      this.log.warn({ error: detail }, 'slack account not connected; retrying');
      await this.socket?.disconnect().catch(() => undefined);
      this.socket = undefined;
      this.reconnect.schedule(() => void this.connect(), waitMs);
    }
  }

  /**
   * The Events API: Slack posts events to this daemon's
   * /channels/<id>/<account>/webhook, signed with the app's signing secret;
   * only the Web API client is made here.
   */
  private async connectEventsApi(): Promise<void> {
    const [botToken, signingSecret] = await Promise.all([
      this.context.secret(secretFor(this.channelId, this.name, 'botToken')),
      this.context.secret(secretFor(this.channelId, this.name, 'signingSecret')),
    ]);
    const missing = [!botToken && secretFor(this.channelId, this.name, 'botToken'), !signingSecret && secretFor(this.channelId, this.name, 'signingSecret')].filter(Boolean);
    if (missing.length) throw new Setup(`no ${missing.length === 2 ? 'secrets' : 'secret'}: ${missing.map((name) => `gateway secrets set ${name}`).join('; ')} (the bot token xoxb-..., the app's signing secret, on stdin)`);
    const logger = sdkLogger(this.log);
    this.web = new this.sdk.webApi.WebClient(botToken!, { slackApiUrl: this.apiUrl(), logger, rejectRateLimitedCalls: true, retryConfig: { retries: 0 }, timeout: 30_000, fetch: channelFetch });
    this.botToken = botToken;
    const identity = await this.web.auth.test();
    this.botUserId = identity.user_id;
    this.botName = identity.user;
    this.signingSecret = signingSecret;
    this.reconnect.succeeded();
    this.setState('connected', `${this.selfName} (Events API)`);
  }

  /** A request Slack signed with the app's signing secret, within five minutes (signature.ts), checked before receive(). */
  verify(request: ChannelRequest): ChannelResponse | undefined {
    return slackSignatureRefusal(request, this.status.state === 'connected' ? this.signingSecret : undefined);
  }

  /** A request from Slack, verified: the URL check answered, an event stored before the 200 (Slack posts it again otherwise). */
  async receive(request: ChannelRequest): Promise<ChannelResponse> {
    // The interactivity request (a button pressed), signed the same way: a form carrying the interaction (buttons.ts).
    if (request.interaction) return answerInteractivity(request.body, (interaction) => this.interacted(interaction), this.log);
    const read = deliveredJson(request.body);
    if (read.refused) return read.refused;
    const payload = read.value as { type?: string; challenge?: unknown; event?: SlackEvent; event_id?: string } | null;
    if (!payload || typeof payload !== 'object') return refusal(400, 'bad_request', 'The body is not a Slack request.');
    if (payload.type === 'url_verification') return { status: 200, body: { challenge: payload.challenge } };
    if (payload.type !== 'event_callback') return { status: 200, body: {} };
    return storeThenAcknowledge(this.context, this.inbound(payload.event), this.log, 'a Slack event');
  }

  private apiUrl(): string | undefined {
    const root = this.settings()?.apiRoot;
    return root ? `${root.replace(/\/+$/, '')}/api/` : undefined;
  }

  private classify(error: unknown): { state: ChannelState; detail: string; waitMs: number } {
    const backoff = this.reconnect.next();
    const max = this.reconnect.longest;
    if (error instanceof Setup) return { state: 'error', detail: error.message, waitMs: max };
    const code = (error as { data?: { error?: string } })?.data?.error;
    if (code && ['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired', 'not_allowed_token_type'].includes(code)) {
      return { state: 'error', detail: `Slack refused a token (${code}); set valid ones: gateway secrets set ${secretFor(this.channelId, this.name, 'botToken')} and ${secretFor(this.channelId, this.name, 'appToken')}`, waitMs: max };
    }
    if (error instanceof this.sdk.webApi.WebAPIRateLimitedError) return { state: 'disconnected', detail: `Slack asked to wait ${error.retryAfter} s`, waitMs: error.retryAfter * 1000 };
    return { state: 'disconnected', detail: `cannot reach Slack: ${code ?? this.unreachable(error)}`, waitMs: backoff };
  }

  /**
   * An event: stored first, acknowledged after. Slack sends an event again
   * when it was not acknowledged; one stored already is known by its id.
   */
  private async onEnvelope(envelope: SlackEnvelope): Promise<void> {
    try {
      if (envelope.type === 'interactive') await this.interacted(envelope.body as unknown as SlackInteraction);
      const message = envelope.type === 'events_api' ? this.inbound(envelope.body?.event as SlackEvent | undefined) : undefined;
      if (message) await this.context.inbound(message);
      await envelope.ack();
    } catch (error) {
      // Not acknowledged: Slack delivers it again.
      this.log.warn({ err: error }, 'a Slack event could not be stored; left for Slack to send again');
    }
  }

  private interacted(interaction: SlackInteraction): Promise<void> {
    return actOn(interaction, this.name, this.context, this.web, this.log);
  }

  /** An event as the gateway takes it (inbound.ts), read with what the account knows now. */
  private inbound(event: SlackEvent | undefined): InboundMessage | undefined {
    return inboundOf(event, {
      account: this.name, botUserId: this.botUserId, rooms: this.settings()?.rooms ?? [], log: this.log,
      nameOf: (user) => this.names.get(user), learnName: (user) => void this.learnName(user),
      apiRoot: () => this.settings()?.apiRoot, botToken: () => this.botToken,
    });
  }

  /** A user's display name, looked up once and kept, for the next messages and for pairing requests. */
  private async learnName(user: string): Promise<void> {
    if (this.names.has(user) || !this.web) return;
    this.names.set(user, user);
    try {
      const info = await this.web.users.info({ user });
      const profile = info.user?.profile;
      const name = profile?.display_name || profile?.real_name || info.user?.name;
      if (name) this.names.set(user, name);
    } catch {
      this.names.delete(user);
    }
  }

  async send(to: string, text: string, { editOf, buttons }: SendOptions = {}): Promise<SendReceipt> {
    const web = this.web;
    if (!web || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    const [channel, thread] = to.split('/') as [string, string | undefined];
    const mrkdwn = markdownToSlackMrkdwn(text);
    // Buttons in an actions block; an edit with none takes a message's blocks away (Slack keeps them otherwise).
    const blocks = buttons === undefined ? {} : { blocks: buttons.length ? blocksOf(mrkdwn, buttons) : [] };
    try {
      if (editOf !== undefined) {
        try {
          const updated = await web.chat.update({ channel, ts: editOf, text: mrkdwn, ...blocks } as never);
          return { ids: [updated.ts ?? editOf] };
        } catch (error) {
          // A message that is gone (or can no longer be edited) gets the text as a new one.
          const code = (error as { data?: { error?: string } })?.data?.error;
          if (code !== 'message_not_found' && code !== 'cant_update_message' && code !== 'edit_window_closed') throw error;
        }
      }
      const sent = await web.chat.postMessage({ channel, text: mrkdwn, mrkdwn: true, unfurl_links: false, ...(thread ? { thread_ts: thread } : {}), ...(buttons?.length ? blocks : {}) } as never);
      return { ids: sent.ts ? [sent.ts] : [] };
    } catch (error) {
      throw this.sendError(error);
    }
  }

  async react(to: string, reference: string, emoji: string): Promise<void> {
    const web = this.connectedWeb();
    const name = slackReaction(emoji);
    if (!name) throw new ChannelSendError(`Slack names its reactions; give the name of ${emoji} (such as eyes or +1)`, { permanent: true });
    try {
      await web.reactions.add({ channel: to.split('/')[0]!, timestamp: reference, name });
    } catch (error) {
      // Put already (a retry after Slack took it): done.
      if ((error as { data?: { error?: string } })?.data?.error === 'already_reacted') return;
      throw this.sendError(error);
    }
  }

  /** A file, through Slack's upload flow: an address to upload to, the bytes there, then the file shared in the conversation (and thread) with its caption. */
  async sendFile(to: string, file: OutboundFile, caption: string): Promise<SendReceipt> {
    const web = this.connectedWeb();
    const [channel, thread] = to.split('/') as [string, string | undefined];
    try {
      const target = await web.files.getUploadURLExternal({ filename: file.name, length: file.data.length });
      if (!target.upload_url || !target.file_id) throw new ChannelSendError('Slack gave no upload address');
      const uploaded = await globalThis.fetch(target.upload_url, { method: 'POST', body: file.data, headers: { 'content-type': file.mimeType }, signal: AbortSignal.timeout(120_000) });
      await uploaded.body?.cancel().catch(() => undefined);
      if (!uploaded.ok) throw new ChannelSendError(`Slack did not take the upload (${uploaded.status})`);
      await web.files.completeUploadExternal({
        files: [{ id: target.file_id, title: file.name }], channel_id: channel, ...(thread ? { thread_ts: thread } : {}), ...(caption.trim() ? { initial_comment: markdownToSlackMrkdwn(caption) } : {}),
      } as never);
      return { ids: [target.file_id] };
    } catch (error) {
      throw error instanceof ChannelSendError ? error : this.sendError(error);
    }
  }

  private connectedWeb() {
    if (!this.web || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    return this.web;
  }

  private sendError(error: unknown): ChannelSendError {
    if (error instanceof this.sdk.webApi.WebAPIRateLimitedError) return new ChannelSendError(`Slack: rate limited`, { retryAfterMs: error.retryAfter * 1000 });
    const code = (error as { data?: { error?: string } })?.data?.error;
    if (code) {
      // A channel that does not exist, or the bot not in it, a message Slack will never take: trying again cannot help.
      const permanent = ['channel_not_found', 'not_in_channel', 'is_archived', 'msg_too_long', 'no_text', 'user_not_found', 'cannot_dm_bot', 'invalid_auth', 'token_revoked', 'account_inactive'].includes(code);
      return new ChannelSendError(`Slack: ${code}`, { permanent });
    }
    return new ChannelSendError(`cannot reach Slack: ${this.unreachable(error)}`);
  }

  /** Why Slack's Web API could not be reached, with its host and port. */
  private unreachable(error: unknown): string {
    return describeNetworkError(error, this.apiUrl() ?? 'https://slack.com/api/');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.reconnect.stop();
    await this.socket?.disconnect().catch(() => undefined);
    this.setState('disconnected');
  }
}

class Setup extends Error {}

export class SlackChannel extends AccountChannel<SlackAccount, AccountSettings> implements Channel {
  private sdk?: { webApi: WebApi };

  protected accountsOf(settings: ChannelSettings): Map<string, AccountSettings> {
    return slackAccounts(settings);
  }

  protected open(name: string, settings: () => AccountSettings | undefined): SlackAccount {
    const account = new SlackAccount(this.id, name, settings, this.context, this.sdk!);
    void account.connect();
    return account;
  }

  override async start(): Promise<void> {
    this.sdk = await loadSlack();
    await super.start();
  }

  readonly edits = true;
  readonly buttons = true;
  /** Slack takes files of up to 1 GB (the outbox keeps at most MAX_OUTBOUND_FILE_BYTES). */
  readonly fileLimit = 1024 * 1024 * 1024;

  react(account: string, to: string, reference: string, emoji: string): Promise<void> {
    return this.running(account).react(to, reference, emoji);
  }

  sendFile(account: string, to: string, file: OutboundFile, caption: string): Promise<SendReceipt> {
    return this.running(account).sendFile(to, file, caption);
  }

  sendVoice(account: string, to: string, voice: OutboundVoice): Promise<SendReceipt> {
    return this.running(account).sendFile(to, voice, '');
  }

  receive(request: ChannelRequest): Promise<ChannelResponse> {
    return this.handOver(request);
  }

  split(text: string): string[] {
    return splitMessage(text, SLACK_LIMIT);
  }

  normalizePeer(peer: string): string {
    return peer.trim().toUpperCase();
  }

  /** Conversations: C (channels), G (private channels), D (direct messages); a reply may name a thread: C123/1700000000.000100. */
  isRoom(peer: string): boolean {
    return /^[CG]/i.test(peer.trim());
  }

  checkPeer(peer: string): string | undefined {
    return /^[CDGU][A-Z0-9]{2,20}(\/\d{1,12}\.\d{1,9})?$/i.test(peer.trim()) ? undefined : 'is not a Slack conversation id (C…, G…, D…) or user id (U…)';
  }
}
