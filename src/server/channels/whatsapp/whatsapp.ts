/**
 * WhatsApp through Meta's official Cloud API. Each account is a business
 * phone number: Meta posts what happens on it (people's messages, the
 * statuses of what it sent) to /channels/<id>/<account>/webhook, signed with
 * the app secret (X-Hub-Signature-256); a delivery is stored before it is
 * answered 200, and Meta posts again what was not. Replies go through the
 * outbox to the Graph API's messages endpoint: text, media by address,
 * reactions; read receipts with the typing indicator while an agent works.
 * A conversation is always one person's (the Cloud API has no groups), and
 * WhatsApp's 24-hour customer service window is kept: a reply that falls
 * outside it waits for the person to answer a configured template, or is
 * given up with the reason.
 */
import type { ChannelState } from '../../../shared/channels.ts';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelRequest, type ChannelResponse, type ChannelSettings, type OutboundFile, type OutboundVoice, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { DEFAULT_ACCOUNT, settingPath } from '../accounts.ts';
import { deliveredJson, refusal } from '../webhook.ts';
import { messageBody, splitReply } from './format.ts';
import { GRAPH_VERSION, GraphApi, GraphError, graphRootOf } from './graph.ts';
import { buttonPress, interactiveBodies } from './interactive.ts';
import { changesOf, inboundOf, type WaChange, type WaStatus } from './notifications.ts';
import { iso, outsideWindow } from './outside-window.ts';
import { ServiceWindows } from './service-window.ts';
import { classifyFailure, REENGAGEMENT, sendFailure, SetupProblem } from './failures.ts';
import { handshake, metaRefusal, normalizeWhatsAppPeer, recipientOf } from './webhook-checks.ts';
import { SECRET_HINTS, SECRET_NAMES, whatsappAccounts, type AccountSettings, type SecretName } from './settings.ts';

/** How often the typing indicator is shown again while an agent works (Meta shows it up to 25 s, or until the reply). */
const TYPING_EVERY_MS = 20_000;
/** People whose last message id is kept for read receipts, at most. */
const MAX_LAST_MESSAGES = 5000;

/** One business phone number: webhook deliveries in, the messages endpoint out. */
class WhatsAppAccount extends AccountConnection<AccountSettings> {
  private stopped = false;
  private api?: GraphApi;
  /** The Graph API's address, for what is said when it cannot be reached. */
  private root?: URL;
  private appSecret?: string;
  private verifyToken?: string;
  /** The number as people see it, and the business's verified name. */
  private profile?: string;
  /** What Meta last said it could not deliver (a status arrives after the send): shown with the account's state. */
  private lastFailure?: string;
  private rateLimitsInRow = 0;
  private windows = new ServiceWindows();
  private readonly windowsRead: Promise<void>;
  /** Each person's last message (its id), for the read receipt, and when the typing indicator last went. */
  private readonly lastMessage = new Map<string, { id: string; shownAt?: number }>();
  private readonly route: (phoneNumberId: string) => WhatsAppAccount | undefined;

  constructor(channelId: string, name: string, settings: () => AccountSettings | undefined, context: ChannelContext, route: (phoneNumberId: string) => WhatsAppAccount | undefined) {
    super(channelId, name, settings, context);
    this.route = route;
    this.windowsRead = context.cursor.get(name).then((cursor) => {
      this.windows = ServiceWindows.fromCursor(cursor);
    }, (error: unknown) => this.log.warn({ err: error }, 'the service windows could not be read; every window counts as shut'));
  }

  get phoneNumberId(): string | undefined {
    return this.settings()?.phoneNumberId;
  }

  get selfName(): string | undefined {
    return this.profile;
  }

  /** A secret of the account's, else (for a named account) the channel's: one Meta app often serves several numbers. */
  private async secretOf(name: SecretName): Promise<string | undefined> {
    const own = await this.context.secret(settingPath(this.channelId, this.name, name));
    if (own || this.name === DEFAULT_ACCOUNT) return own;
    return this.context.secret(settingPath(this.channelId, DEFAULT_ACCOUNT, name));
  }

  /** Connected: the number, and what Meta last said it could not deliver. */
  private showConnected(): void {
    this.setState('connected', [this.profile, this.lastFailure && `last undelivered: ${this.lastFailure}`].filter(Boolean).join('; '));
  }

  /**
   * Reads the account's secrets and checks its number with the Graph API.
   * Deliveries are taken as soon as the app secret is known, whatever the
   * API's state; a failure waits with backoff (a setup problem, the longest
   * wait) and checks again.
   */
  async connect(): Promise<void> {
    if (this.stopped) return;
    this.setState('connecting');
    try {
      const settings = this.settings();
      const [accessToken, appSecret, verifyToken] = await Promise.all(SECRET_NAMES.map((name) => this.secretOf(name)));
      this.appSecret = appSecret;
      this.verifyToken = verifyToken;
      const missing = SECRET_NAMES.filter((_, index) => ![accessToken, appSecret, verifyToken][index]);
      if (missing.length) {
        throw new SetupProblem(`missing ${missing.map((name) => `${name} (${SECRET_HINTS[name]}): gateway secrets set ${settingPath(this.channelId, this.name, name)}`).join('; ')} (values on stdin)`);
      }
      if (!settings?.phoneNumberId) {
        throw new SetupProblem(`set the phone number id (WhatsApp Manager, API Setup; not the number itself): gateway config set ${settingPath(this.channelId, this.name, 'phoneNumberId')} <id>`);
      }
      let root: URL;
      try {
        root = graphRootOf(settings.apiRoot);
      } catch (error) {
        throw new SetupProblem(`${(error as Error).message}: gateway config set ${settingPath(this.channelId, this.name, 'apiRoot')}`);
      }
      await this.windowsRead;
      this.root = root;
      this.api = new GraphApi(root, settings.apiVersion ?? GRAPH_VERSION, accessToken!);
      const number = await this.api.phoneNumber(settings.phoneNumberId);
      if (this.stopped) return;
      this.profile = [number.display_phone_number, number.verified_name && `(${number.verified_name})`].filter(Boolean).join(' ') || settings.phoneNumberId;
      this.reconnect.succeeded();
      this.showConnected();
    } catch (error) {
      if (this.stopped) return;
      const { state, detail, waitMs } = this.classify(error);
      this.setState(state, detail);
      this.log.warn({ error: detail }, 'whatsapp account not ready; checking again');
      this.reconnect.schedule(() => void this.connect(), waitMs);
    }
  }

  private classify(error: unknown): { state: ChannelState; detail: string; waitMs: number } {
    return classifyFailure(error, { backoff: this.reconnect.next(), longest: this.reconnect.longest, channelId: this.channelId, account: this.name, phoneNumberId: this.phoneNumberId, root: this.root });
  }

  /** A send met no answer: the account is down until its number can be checked again (and then what waits goes at once). */
  private lost(reason: string): void {
    if (this.status.state !== 'connected' || this.stopped) return;
    this.setState('disconnected', `cannot reach the Graph API: ${reason}`);
    this.reconnect.schedule(() => void this.connect());
  }

  /** Whether a request came from Meta (webhook-checks.ts), checked by the HTTP pipeline before receive(). */
  verify(request: ChannelRequest): ChannelResponse | undefined {
    return metaRefusal(request, { appSecret: this.appSecret, verifyToken: this.verifyToken }, this.log);
  }

  /**
   * A request Meta made, verified: the subscription handshake (GET, answered
   * with its challenge), or a delivery (POST), stored before the 200.
   */
  async receive(request: ChannelRequest): Promise<ChannelResponse> {
    if (request.method === 'GET') return handshake(request.query ?? {}, this.log);
    const read = deliveredJson(request.body);
    if (read.refused) return read.refused;
    const payload = read.value as { object?: unknown } | null;
    // Another product of the same app (a Page, Instagram): nothing for WhatsApp.
    if (payload && typeof payload === 'object' && payload.object !== undefined && payload.object !== 'whatsapp_business_account') return { status: 200, body: {} };
    const changes = changesOf(payload);
    if (!changes) return refusal(400, 'bad_request', 'The body is not a WhatsApp notification.');
    try {
      for (const change of changes) {
        const account = change.phoneNumberId === undefined ? undefined : this.route(change.phoneNumberId);
        if (!account) {
          this.log.debug({ phoneNumberId: change.phoneNumberId }, 'a notification for a number no account here has; skipped');
          continue;
        }
        await account.take(change);
      }
    } catch (error) {
      this.log.warn({ err: error }, 'a WhatsApp notification could not be stored; left for Meta to post again');
      return refusal(503, 'unavailable', 'The notification could not be stored now.');
    }
    return { status: 200, body: {} };
  }

  /**
   * One change for this number: statuses noted, the windows of those who
   * wrote saved first (a reply after a restart knows them), then each
   * message stored, in order. Throws when one cannot be stored: Meta posts
   * the whole notification again, and what was stored already is dropped
   * by its id.
   */
  async take(change: WaChange): Promise<void> {
    await this.windowsRead;
    let moved = false;
    for (const status of change.statuses) if (this.noteStatus(status)) moved = true;
    for (const error of change.errors) this.log.warn({ code: error.code, error: error.title }, 'Meta reported a problem with a notification');
    for (const message of change.messages) if (message.speaks && this.windows.heard(message.from, message.at)) moved = true;
    if (moved) await this.context.cursor.set(this.name, this.windows.toCursor(Date.now()));
    for (const message of change.messages) {
      // A button pressed: acted on, and answered, as an answer (never a turn); once, however often Meta posts it.
      if (message.press) {
        await this.context.pressed(buttonPress(this.name, { ...message, press: message.press }));
        continue;
      }
      const inbound = inboundOf(this.name, message, () => this.api);
      if (!inbound) {
        this.log.debug({ type: message.type }, 'a WhatsApp message with nothing to answer; skipped');
        continue;
      }
      await this.context.inbound(inbound);
      this.lastMessage.delete(message.from);
      this.lastMessage.set(message.from, { id: message.id });
      if (this.lastMessage.size > MAX_LAST_MESSAGES) this.lastMessage.delete(this.lastMessage.keys().next().value!);
    }
  }

  /**
   * What became of a message sent: a failure told (and kept for the
   * account's state); the others are no news. True when it shut a window
   * the account thought open.
   */
  private noteStatus(status: WaStatus): boolean {
    if (status.status !== 'failed') {
      this.log.debug({ message: status.id, status: status.status }, 'whatsapp message status');
      return false;
    }
    const error = status.errors[0];
    const shut = error?.code === REENGAGEMENT && this.windows.isOpen(status.recipient, Date.now());
    if (shut) this.windows.shut(status.recipient);
    const reason = error ? `${error.code !== undefined ? `error ${error.code}: ` : ''}${error.title}${error.details ? ` (${error.details})` : ''}` : 'no reason given';
    this.lastFailure = `to ${status.recipient} at ${iso(status.at)}: ${reason}`;
    this.log.warn({ to: status.recipient, message: status.id, code: error?.code, error: reason }, 'WhatsApp could not deliver a message');
    if (this.status.state === 'connected') this.showConnected();
    return shut;
  }

  /** A text; with buttons, an interactive message (interactive.ts), which like any free-form message goes only inside the person's window. */
  send(to: string, text: string, { buttons }: SendOptions = {}): Promise<SendReceipt> {
    if (!buttons?.length) return this.deliver(to, 'the message', (api, phoneNumberId, customer, context) => api.messages(phoneNumberId, { recipient_type: 'individual', to: customer, ...messageBody(text, context) }));
    return this.deliver(to, 'the message with buttons', async (api, phoneNumberId, customer, context) => {
      const ids: string[] = [];
      for (const body of interactiveBodies(text, buttons, context)) ids.push(...await api.messages(phoneNumberId, { recipient_type: 'individual', to: customer, ...body }));
      return ids;
    });
  }

  /** A voice note: uploaded to Meta's media store, then sent as audio (OGG/Opus shows as a voice message). */
  sendVoice(to: string, voice: OutboundVoice): Promise<SendReceipt> {
    return this.sendMedia(to, voice, 'audio', (id) => ({ id }), 'the voice note');
  }

  /** A file of an agent's: an image (JPEG or PNG) shown as one, anything else a document under its name, with its caption. */
  sendFile(to: string, file: OutboundFile, caption: string): Promise<SendReceipt> {
    const image = file.mimeType === 'image/jpeg' || file.mimeType === 'image/png';
    const text = caption.slice(0, 1024);
    return this.sendMedia(to, file, image ? 'image' : 'document', (id) => ({ id, ...(text ? { caption: text } : {}), ...(image ? {} : { filename: file.name }) }), 'the file');
  }

  /** A reaction on a person's message (its wamid): a message of its own, inside the person's window as any. */
  react(to: string, reference: string, emoji: string): Promise<SendReceipt> {
    return this.deliver(to, 'the reaction', (api, phoneNumberId, customer) => api.messages(phoneNumberId, {
      recipient_type: 'individual', to: customer, type: 'reaction', reaction: { message_id: reference, emoji },
    }));
  }

  private sendMedia(to: string, file: { data: Uint8Array; mimeType: string; name: string }, type: 'audio' | 'image' | 'document', media: (id: string) => Record<string, unknown>, what: string): Promise<SendReceipt> {
    return this.deliver(to, what, async (api, phoneNumberId, customer, context) => {
      const id = await api.uploadMedia(phoneNumberId, file);
      return api.messages(phoneNumberId, { recipient_type: 'individual', to: customer, type, [type]: media(id), ...(context ? { context: { message_id: context } } : {}) });
    });
  }

  /** Sends through the Graph API once the person's window is known open (else as outsideWindow says); failures as the outbox reads them. */
  private async deliver(to: string, what: string, post: (api: GraphApi, phoneNumberId: string, customer: string, context?: string) => Promise<string[]>): Promise<SendReceipt> {
    const api = this.api;
    const phoneNumberId = this.phoneNumberId;
    if (!api || !phoneNumberId || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; ${what} was not sent`);
    const { customer, context } = recipientOf(to);
    await this.windowsRead;
    if (!this.windows.isOpen(customer, Date.now())) return this.outsideWindow(api, phoneNumberId, customer);
    try {
      const ids = await post(api, phoneNumberId, customer, context);
      this.rateLimitsInRow = 0;
      return { ids };
    } catch (error) {
      // The window shut earlier than the account knew: as any reply outside it.
      if (error instanceof GraphError && error.code === REENGAGEMENT) {
        this.windows.shut(customer);
        return this.outsideWindow(api, phoneNumberId, customer);
      }
      throw this.sendError(error);
    }
  }

  /** A reply to someone whose window has shut: waiting for a template's answer, or given up (outside-window.ts). */
  private outsideWindow(api: GraphApi, phoneNumberId: string, customer: string): Promise<never> {
    return outsideWindow({
      api, phoneNumberId, customer, windows: this.windows, template: this.settings()?.template, templateSetting: settingPath(this.channelId, this.name, 'template'),
      sendError: (error) => this.sendError(error), keep: (at) => this.context.cursor.set(this.name, this.windows.toCursor(at)), log: this.log,
    });
  }

  /** A refused send as the outbox reads it: the account paused (a rate limit), tried again later, or given up. */
  private sendError(error: unknown): ChannelSendError {
    const refused = sendFailure(error, this.rateLimitsInRow, this.root);
    if (refused.rateLimited) this.rateLimitsInRow++;
    if (refused.unreachable) this.lost(refused.unreachable);
    if (refused.token) {
      const { state, detail, waitMs } = this.classify(error);
      this.setState(state, detail);
      this.reconnect.schedule(() => void this.connect(), waitMs);
    }
    return refused.error;
  }

  /** Marks the person's last message read, with the typing indicator, while an agent works on the answer. */
  async typing(to: string): Promise<void> {
    const { customer } = recipientOf(to);
    const last = this.lastMessage.get(customer);
    const api = this.api;
    const phoneNumberId = this.phoneNumberId;
    if (!last || !api || !phoneNumberId || this.status.state !== 'connected') return;
    const now = Date.now();
    if (last.shownAt !== undefined && now - last.shownAt < TYPING_EVERY_MS) return;
    last.shownAt = now;
    await api.messages(phoneNumberId, { status: 'read', message_id: last.id, typing_indicator: { type: 'text' } }).catch((error: unknown) => {
      this.log.debug({ error: (error as Error)?.message }, 'the read receipt could not be sent');
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.reconnect.stop();
    this.setState('disconnected');
  }
}


export class WhatsAppChannel extends AccountChannel<WhatsAppAccount, AccountSettings> implements Channel {
  protected accountsOf(settings: ChannelSettings): Map<string, AccountSettings> {
    return whatsappAccounts(settings);
  }

  protected open(name: string, settings: () => AccountSettings | undefined): WhatsAppAccount {
    const account = new WhatsAppAccount(this.id, name, settings, this.context, (phoneNumberId) => this.byPhoneNumber(phoneNumberId));
    void account.connect();
    return account;
  }

  /** The running account of a phone number id: one Meta app posts every number's notifications to the one address it was given. */
  private byPhoneNumber(phoneNumberId: string): WhatsAppAccount | undefined {
    for (const account of this.live.values()) if (account.phoneNumberId === phoneNumberId) return account;
    return undefined;
  }

  receive(request: ChannelRequest): Promise<ChannelResponse> {
    return this.handOver(request);
  }

  /** A press comes as a message to the webhook: nothing is taken where other platforms post interactions. */
  override verify(request: ChannelRequest): ChannelResponse | undefined {
    return request.interaction ? refusal(404, 'not_found', `Channel ${this.id} takes no interactions.`) : super.verify(request);
  }

  /** Interactive messages carry buttons; a press comes back as a message (and cannot be edited away after). */
  readonly buttons = true;

  split(text: string): string[] {
    return splitReply(text);
  }

  sendVoice(account: string, to: string, voice: OutboundVoice): Promise<SendReceipt | void> {
    return this.voiceThrough(account, to, voice);
  }

  /** What the Cloud API takes: 16 MB of audio or video, 5 MB of image, 100 MB of document; the least of them. */
  readonly fileLimit = 5 * 1024 * 1024;

  async react(account: string, to: string, reference: string, emoji: string): Promise<void> {
    await this.running(account).react(to, reference, emoji);
  }

  sendFile(account: string, to: string, file: OutboundFile, caption: string): Promise<SendReceipt> {
    return this.running(account).sendFile(to, file, caption);
  }

  /** A person is their number in international form, digits only (+49 151 2345-6789 is 4915123456789); `/<message id>` names a message of theirs. */
  normalizePeer(peer: string): string {
    return normalizeWhatsAppPeer(peer);
  }

  /** The Cloud API has no groups: every conversation is one person's. */
  isRoom(): boolean {
    return false;
  }

  checkPeer(peer: string): string | undefined {
    const [number, message] = [peer.split('/')[0]!, peer.includes('/') ? peer.slice(peer.indexOf('/') + 1) : undefined];
    if (!/^\+?\d{6,15}$/.test(number.replace(/[\s().-]/g, ''))) return 'is not a WhatsApp number in international form (such as +4915123456789)';
    if (message !== undefined && !/^wamid\.[A-Za-z0-9+/=_-]{8,256}$/.test(message)) return 'names a message that is not a WhatsApp message id (wamid.…)';
    return undefined;
  }
}

/** A person's WhatsApp id as people type their number: digits only. */
export { normalizeWhatsAppPeer };
