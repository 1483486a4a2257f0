/**
 * XMPP through @xmpp/client: one connection per account (a JID and its
 * password from the secret store), STARTTLS required (a plaintext stream
 * only with allowPlaintext, and only to a server on loopback), XEP-0198
 * stream management so a dropped stream resumes without losing stanzas,
 * direct chats and MUC rooms (answered when the account's nick is
 * mentioned), chat-state typing notifications. A dropped stream is opened
 * again with the channel's backoff, as every account's connection is.
 */
import { randomUUID } from 'node:crypto';
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelSettings, type InboundMessage, type OutboundFile, type OutboundVoice, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { mentionPattern, withoutMention } from '../formatting.ts';
import { outOfBand } from './oob.ts';
import { discoverUpload, fileStanza, putFile, requestSlot, uploadRefusal, type IqRequest, type UploadService } from './upload.ts';

/** Longest text taken from one inbound message. */
const MAX_INBOUND_CHARS = 16_384;
/** Longest message sent at once; longer replies are split. */
export const XMPP_LIMIT = 10_000;
const RESOURCE = 'gateway';
/** How long a new stream waits for stream management before going on without it (a server that does not offer it). */
const SM_WAIT_MS = 3000;
const NO_STARTTLS = 'the server offered no STARTTLS: nothing was sent (a server on this host may be allowed with allowPlaintext)';

interface XmppAccountSettings {
  enabled: boolean;
  jid?: string;
  service?: string;
  allowPlaintext: boolean;
  nick?: string;
  rooms: string[];
}

/** The accounts of an XMPP channel's settings: the top level (its jid) and each of `accounts`. */
export function xmppAccounts(settings: ChannelSettings): Map<string, XmppAccountSettings> {
  return accountsOf<XmppAccountSettings>(settings, {
    keys: ['jid', 'service', 'allowPlaintext', 'nick', 'rooms'],
    // The channel's server serves another account of the same domain only.
    inherited: { allowPlaintext: true, service: (account, top) => account.jid?.split('@')[1] === top.jid?.split('@')[1] },
    defaults: { allowPlaintext: false, rooms: [] },
    hasDefault: (top) => Boolean(top.jid),
  });
}

const secretFor = (channelId: string, account: string) => settingPath(channelId, account, 'password');
/** A JID without its resource, as a peer: lower case (XMPP's nodeprep folds case for the local part and the domain). */
export const bareJid = (jid: string) => jid.split('/')[0]!.trim().toLowerCase();

type XmppModule = typeof import('@xmpp/client');
type XmppClient = import('@xmpp/client').XmppClient;
type Element = import('@xmpp/client').XmppElement;

/** Where a JID's server is: the service given (xmpp://host:port or xmpps://host:port), else the JID's domain on 5222. */
function serviceOf(settings: XmppAccountSettings): URL {
  const domain = settings.jid!.split('@')[1]!.split('/')[0]!;
  return new URL(settings.service ?? `xmpp://${domain}:5222`);
}

class XmppAccount extends AccountConnection<XmppAccountSettings> {
  private client?: XmppClient;
  private stopped = false;
  private nickname?: string;
  private ownJid?: string;
  /** The full JID the server bound the stream to. */
  private bound?: string;
  /** The server's HTTP upload service as discovery found it since the stream was opened (undefined inside: none). */
  private uploads?: Promise<UploadService | undefined>;

  private readonly xmpp: XmppModule;
  /** Whether a peer is a room an account of the channel joins (a groupchat message, no typing notification). */
  private readonly isRoom: (peer: string) => boolean;

  constructor(channelId: string, name: string, settings: () => XmppAccountSettings | undefined, context: ChannelContext, xmpp: XmppModule, isRoom: (peer: string) => boolean) {
    super(channelId, name, settings, context);
    this.xmpp = xmpp;
    this.isRoom = isRoom;
  }

  get selfName(): string | undefined {
    return this.status.state === 'connected' ? this.nickname : undefined;
  }

  start(): void {
    this.connect().catch((error: unknown) => {
      this.setState('error', (error as Error)?.message ?? String(error));
      this.log.warn({ error: (error as Error)?.message }, 'xmpp account cannot connect');
    });
  }

  private async connect(): Promise<void> {
    const settings = this.settings();
    if (!settings?.jid || !/^[^@/\s]+@[^@/\s]+$/.test(settings.jid)) throw new Error(`set the account's JID: gateway config set ${settingPath(this.channelId, this.name, 'jid')} bot@example.org`);
    const service = serviceOf(settings);
    if (service.protocol !== 'xmpp:' && service.protocol !== 'xmpps:') throw new Error(`the service must be an xmpp:// or xmpps:// address (got ${service.protocol})`);
    const host = service.hostname.replace(/^\[|\]$/g, '');
    if (settings.allowPlaintext && !(isLoopbackAddress(host) || host === 'localhost')) {
      throw new Error('allowPlaintext is refused for a server that is not on this host: passwords would cross the network in the clear');
    }
    const password = await this.context.secret(secretFor(this.channelId, this.name));
    if (!password) throw new Error(`no password: printf %s "$PASSWORD" | gateway secrets set ${secretFor(this.channelId, this.name)}`);
    const [local, domain] = settings.jid.split('@') as [string, string];
    this.nickname = settings.nick ?? local;
    this.ownJid = bareJid(settings.jid);
    this.setState('connecting');
    const client = this.xmpp.client({
      service: `${service.protocol}//${service.host}`, domain, resource: RESOURCE,
      // The password goes only over TLS (STARTTLS done, or xmpps://); a plaintext stream, when allowed (loopback), never takes PLAIN.
      credentials: async (authenticate, mechanisms, _fast, entity) => {
        if (!entity.isSecure() && !settings.allowPlaintext) {
          this.refusePlaintext();
          throw new Error(NO_STARTTLS);
        }
        const mechanism = entity.isSecure() ? mechanisms[0] : mechanisms.find((offered) => offered !== 'PLAIN');
        if (!mechanism) throw new Error(`no login mechanism to use (the server offers ${mechanisms.join(', ') || 'none'})`);
        await authenticate({ username: local, password }, mechanism);
      },
    });
    this.client = client;
    // The account tries again with the channel's backoff (up to reconnectMaxDelayMs), not the library's flat second.
    client.reconnect.stop();
    client.streamManagement?.on('resumed', () => {
      // A dropped stream taken up again where it was (XEP-0198): nothing was lost.
      if (this.stopped || this.client !== client) return;
      this.log.info('XMPP stream resumed');
      this.reconnect.succeeded();
      this.setState('connected', this.bound);
    });
    client.on('error', (error: Error) => {
      if (this.stopped) return;
      this.log.warn({ error: error.message }, 'xmpp error');
      if (/not-authorized|auth/i.test(error.message)) this.setState('error', `the server refused the login: ${error.message}`);
    });
    client.on('offline', () => {
      if (!this.stopped) this.setState('disconnected', 'offline');
    });
    client.on('disconnect', () => {
      if (this.stopped || this.client !== client) return;
      if (this.status.state === 'connected') this.setState('connecting', 'the stream dropped; reconnecting');
      this.retry(client);
    });
    client.on('online', (jid: { toString(): string }) => void this.online(jid.toString(), settings).catch((error: unknown) => this.log.warn({ err: error }, 'xmpp: could not finish connecting')));
    client.on('stanza', (stanza: Element) => {
      try {
        void this.stanza(stanza).catch((error: unknown) => this.log.warn({ err: error }, 'xmpp: a stanza could not be handled'));
      } catch (error) {
        this.log.warn({ err: error }, 'xmpp: a malformed stanza');
      }
    });
    await client.start();
  }

  /**
   * Opens the stream again after the next backoff wait (the channel's
   * reconnectMaxDelayMs at most): a try that fails ends in another
   * disconnect, which waits longer; one that succeeds starts the waits over.
   */
  private retry(client: XmppClient): void {
    const delay = this.reconnect.next();
    this.log.info({ inMs: Math.round(delay) }, 'XMPP reconnect scheduled');
    this.reconnect.schedule(() => {
      if (this.stopped || this.client !== client || client.status !== 'disconnect') return;
      // A failure is told on the client as an error, and its disconnect schedules the next try.
      client.reconnect.reconnect().catch(() => undefined);
    }, delay);
  }

  /** STARTTLS is required: a server that does not offer it gets no password, and the account stops until it is fixed. */
  private refusePlaintext(): void {
    this.setState('error', NO_STARTTLS);
    this.stopped = true;
    void this.client?.stop().catch(() => undefined);
  }

  private async online(jid: string, settings: XmppAccountSettings): Promise<void> {
    const client = this.client!;
    if (!client.isSecure() && !settings.allowPlaintext) {
      this.refusePlaintext();
      return;
    }
    // Stream management is enabled just after 'online': nothing is sent before the server has answered <enabled/>, or both
    // sides would count stanzas from different points (Prosody closes a stream whose client acknowledges more than it sent).
    for (let waited = 0; !client.streamManagement?.enabled && waited < SM_WAIT_MS && !this.stopped; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20));
    await client.send(this.xmpp.xml('presence'));
    for (const room of settings.rooms) {
      if (room === '*') continue;
      // Joining without the room's history: only what is said from now on is answered.
      await client.send(this.xmpp.xml('presence', { to: `${bareJid(room)}/${this.nickname}` },
        this.xmpp.xml('x', { xmlns: 'http://jabber.org/protocol/muc' }, this.xmpp.xml('history', { maxstanzas: '0' }))));
    }
    this.bound = jid;
    this.uploads = undefined;
    this.reconnect.succeeded();
    this.setState('connected', jid);
  }

  private async stanza(stanza: Element): Promise<void> {
    if (!stanza.is('message')) return;
    const type = stanza.attrs.type ?? 'normal';
    const from = stanza.attrs.from;
    const body = stanza.getChildText('body');
    // No text (a chat state, a receipt, an empty or blank body): nothing to answer.
    if (!from || !body?.trim()) return;
    if (type === 'error') {
      this.log.warn({ from: bareJid(from) }, 'xmpp: a message bounced');
      return;
    }
    // A file offered by its URL (a voice message, oob.ts): the body is then the URL, not words.
    const offered = outOfBand(stanza, body, this.settings());
    const text = offered.text.slice(0, MAX_INBOUND_CHARS);
    const id = stanza.attrs.id;
    const message: Omit<InboundMessage, 'sender' | 'senderName' | 'kind'> = {
      account: this.name, text, at: Date.now(), ...(offered.attachments.length ? { attachments: offered.attachments } : {}),
    };
    if (type === 'groupchat') {
      const room = bareJid(from);
      const occupant = from.includes('/') ? from.slice(from.indexOf('/') + 1) : '';
      // Our own messages echoed by the room, and the history a room replays on joining, are not turns.
      if (!occupant || occupant === this.nickname || stanza.getChild('delay', 'urn:xmpp:delay')) return;
      const rooms = this.settings()?.rooms ?? [];
      if (!rooms.includes('*') && !rooms.map(bareJid).includes(room)) return;
      const mention = this.nickname ? mentionPattern([this.nickname]) : undefined;
      const addressed = mention?.test(text) ? { text: withoutMention(text, mention) } : undefined;
      await this.context.inbound({
        ...message, kind: 'group', room, sender: `${room}/${occupant}`, senderName: occupant, replyTo: room,
        ...(addressed ? { addressed } : {}), ...(id ? { platformId: `${room}/${occupant}/${id}` } : {}),
      });
      // Not addressed: the room's message is kept in its session, and not answered.
      return;
    }
    if (type !== 'chat' && type !== 'normal') return;
    const sender = bareJid(from);
    if (sender === this.ownJid) return;
    await this.context.inbound({ ...message, kind: 'direct', sender, senderName: sender, replyTo: sender, ...(id ? { platformId: `${sender}/${id}` } : {}) });
  }

  async send(to: string, text: string, { idempotencyKey }: SendOptions = {}): Promise<SendReceipt> {
    const client = this.client;
    const room = this.isRoom(to);
    if (!client || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    const id = idempotencyKey ? idempotencyKey.replace(/[^A-Za-z0-9_.:-]/g, '').slice(0, 64) || randomUUID() : randomUUID();
    const { xml } = this.xmpp;
    try {
      await client.send(xml('message', { to: bareJid(to), type: room ? 'groupchat' : 'chat', id },
        xml('body', {}, text), ...(room ? [] : [xml('active', { xmlns: 'http://jabber.org/protocol/chatstates' })])));
    } catch (error) {
      throw new ChannelSendError(`the XMPP stream refused the message: ${(error as Error).message}`);
    }
    return { ids: [id] };
  }

  /** Sends a file through the server's HTTP upload service (upload.ts): its caption first, then its address. */
  async sendFile(to: string, file: OutboundFile, caption: string, { idempotencyKey }: SendOptions = {}): Promise<SendReceipt> {
    const client = this.client;
    if (!client || this.status.state !== 'connected' || !this.ownJid) throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the file was not sent`);
    const domain = this.ownJid.split('@')[1]!;
    const request: IqRequest = (stanza, timeoutMs) => client.iqCaller.request(stanza, timeoutMs);
    const uploads = this.uploads ??= discoverUpload(request, this.xmpp.xml, domain);
    const service = await uploads.catch((error: unknown) => {
      if (this.uploads === uploads) this.uploads = undefined;
      throw new ChannelSendError(`XMPP: the server did not say whether it offers HTTP upload: ${(error as Error)?.message ?? String(error)}`);
    });
    const refused = uploadRefusal(service, domain, file);
    if (refused || !service) throw refused;
    const slot = await requestSlot(request, this.xmpp.xml, service, file);
    await putFile(slot, file);
    const said = caption.trim() ? (await this.send(to, caption, { ...(idempotencyKey ? { idempotencyKey: `${idempotencyKey}c` } : {}) })).ids : [];
    const id = idempotencyKey ? idempotencyKey.replace(/[^A-Za-z0-9_.:-]/g, '').slice(0, 64) || randomUUID() : randomUUID();
    const room = this.isRoom(to);
    try {
      await client.send(fileStanza(this.xmpp.xml, { to: bareJid(to), type: room ? 'groupchat' : 'chat', id }, slot.get, room));
    } catch (error) {
      throw new ChannelSendError(`the XMPP stream refused the message: ${(error as Error).message}`);
    }
    return { ids: [...said, id] };
  }

  async typing(to: string): Promise<void> {
    if (!this.client || this.status.state !== 'connected' || this.isRoom(to)) return;
    const { xml } = this.xmpp;
    await this.client.send(xml('message', { to: bareJid(to), type: 'chat' }, xml('composing', { xmlns: 'http://jabber.org/protocol/chatstates' }))).catch(() => undefined);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.reconnect.stop();
    await this.client?.stop().catch(() => undefined);
    this.setState('disconnected');
  }
}

export class XmppChannel extends AccountChannel<XmppAccount, XmppAccountSettings> implements Channel {
  private xmpp?: XmppModule;
  /** The gateway's own bound; the server's upload service says its own, checked as a file goes (upload.ts). */
  readonly fileLimit = 25 * 1024 * 1024;

  sendFile(account: string, to: string, file: OutboundFile, caption: string, options?: SendOptions): Promise<SendReceipt> {
    return this.running(account).sendFile(to, file, caption, options);
  }

  /** A voice note goes as an audio file through HTTP upload, its address out of band (as Conversations sends its own); OGG/Opus. */
  sendVoice(account: string, to: string, voice: OutboundVoice, options?: SendOptions): Promise<SendReceipt> {
    return this.running(account).sendFile(to, { name: voice.name, mimeType: voice.mimeType, data: voice.data }, '', options);
  }

  protected accountsOf(settings: ChannelSettings): Map<string, XmppAccountSettings> {
    return xmppAccounts(settings);
  }

  protected open(name: string, settings: () => XmppAccountSettings | undefined): XmppAccount {
    const account = new XmppAccount(this.id, name, settings, this.context, this.xmpp!, (peer) => this.isRoom(peer));
    account.start();
    return account;
  }

  override async start(): Promise<void> {
    this.xmpp = await import('@xmpp/client');
    await super.start();
  }

  split(text: string): string[] {
    const parts: string[] = [];
    for (let start = 0; start < text.length; start += XMPP_LIMIT) parts.push(text.slice(start, start + XMPP_LIMIT));
    return parts.length ? parts : [''];
  }

  normalizePeer(peer: string): string {
    return bareJid(peer);
  }

  /** A room is one an account of the channel joins. */
  isRoom(peer: string): boolean {
    const jid = bareJid(peer);
    return [...xmppAccounts(this.context.settings()).values()].some((account) => account.rooms.map(bareJid).includes(jid));
  }

  checkPeer(peer: string): string | undefined {
    return /^[^@/\s]+@[^@/\s]+$/.test(bareJid(peer)) ? undefined : 'is not a JID (name@example.org)';
  }
}
