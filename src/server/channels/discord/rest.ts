/**
 * Discord's REST API (http-fetch.ts) as an account calls it: a refusal as a
 * RestError with Discord's status, message and retry_after, and replies sent
 * (and edited) in the channel or DM they go to, each posted once whatever
 * the retries (Discord enforces the nonce).
 */
import { ChannelSendError, type OutboundFile, type OutboundVoice, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { describeNetworkError } from '../network-errors.ts';
import { channelFetch } from '../http-fetch.ts';
import { componentsOf } from './buttons.ts';

export class RestError extends Error {
  readonly status: number;
  readonly code?: number;
  readonly retryAfterMs?: number;

  constructor(status: number, message: string, code?: number, retryAfterSeconds?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfterMs = status === 429 && retryAfterSeconds !== undefined ? Math.ceil(retryAfterSeconds * 1000) : undefined;
  }
}

/** One bot's REST calls, with its token. */
export class DiscordRest {
  /** The bot token, once read from the secret store. */
  token?: string;
  /** Each person's DM channel, as learned from their messages or opened. */
  private readonly dmChannels = new Map<string, string>();
  private readonly apiRoot: () => string | undefined;

  /** `apiRoot`: where Discord is (channels.<id>.apiRoot, read at each call), https://discord.com by default. */
  constructor(apiRoot: () => string | undefined) {
    this.apiRoot = apiRoot;
  }

  /** Where Discord is: the configured apiRoot, else https://discord.com. */
  get root(): string {
    return (this.apiRoot() ?? 'https://discord.com').replace(/\/+$/, '');
  }

  /** A REST call; a refusal comes back as an error with Discord's status, message and retry_after. */
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    // A message with a file goes as a form (its JSON in payload_json); fetch writes the form's content type.
    const form = body instanceof FormData;
    const response = await channelFetch(`${this.root}/api/v10${path}`, {
      method,
      headers: { authorization: `Bot ${this.token}`, ...(form ? {} : { 'content-type': 'application/json' }), 'user-agent': 'DiscordBot (gateway, 1)' },
      ...(body === undefined ? {} : { body: form ? body : JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
    if (response.status === 204) return undefined as T;
    const payload = await response.json().catch(() => ({})) as { message?: string; code?: number; retry_after?: number };
    if (!response.ok) throw new RestError(response.status, payload.message ?? response.statusText, payload.code, payload.retry_after);
    return payload as T;
  }

  /** The channel each thread is in, by the thread's id (undefined: a channel that is no thread). */
  private readonly parents = new Map<string, string | undefined>();

  /** For a thread (channel types 10-12), the channel it is in; looked up once (GET /channels/{id}), undefined when it is no thread or cannot be told. */
  async threadParent(channel: string): Promise<string | undefined> {
    if (this.parents.has(channel)) return this.parents.get(channel);
    try {
      const found = await this.call<{ type?: number; parent_id?: string | null }>('GET', `/channels/${channel}`);
      const parent = found.type !== undefined && found.type >= 10 && found.type <= 12 && typeof found.parent_id === 'string' ? found.parent_id : undefined;
      this.parents.set(channel, parent);
      return parent;
    } catch {
      return undefined;
    }
  }

  /** A person wrote to the bot in their DM: replies to them go there. */
  noteDm(user: string, channel: string): void {
    this.dmChannels.set(user, channel);
  }

  /** The channel a reply goes to: a channel id (with the message it answers), or a person's DM (@<user id>). */
  private async target(to: string): Promise<{ channel: string; reference?: string }> {
    const [address, reference] = to.split('/') as [string, string | undefined];
    // A person who wrote to the bot is reached in their DM by their id alone (a pairing approval's notice).
    const known = this.dmChannels.get(address.replace(/^@/, ''));
    if (known) return { channel: known };
    if (!address.startsWith('@')) return { channel: address, ...(reference ? { reference } : {}) };
    const user = address.slice(1);
    let channel = this.dmChannels.get(user);
    if (!channel) {
      channel = (await this.call<{ id: string }>('POST', '/users/@me/channels', { recipient_id: user })).id;
      this.dmChannels.set(user, channel);
    }
    return { channel };
  }

  /** Sends (or edits) one message; a refusal as the outbox reads it: when to try again, or not at all. */
  async send(to: string, text: string, options: SendOptions = {}): Promise<SendReceipt> {
    return this.refusing(() => this.post(to, text, options));
  }

  /** A voice note, as a file of its own message (once, whatever the retries: its nonce). */
  async sendVoice(to: string, voice: OutboundVoice, options: SendOptions = {}): Promise<SendReceipt> {
    return this.refusing(async () => {
      const { channel, reference } = await this.target(to);
      const nonce = options.idempotencyKey ? options.idempotencyKey.slice(0, 25) : undefined;
      const form = new FormData();
      form.set('payload_json', JSON.stringify({
        attachments: [{ id: 0, filename: voice.name }], allowed_mentions: { parse: [] },
        ...(reference ? { message_reference: { message_id: reference, fail_if_not_exists: false } } : {}),
        ...(nonce ? { nonce, enforce_nonce: true } : {}),
      }));
      form.set('files[0]', new Blob([new Uint8Array(voice.data)], { type: voice.mimeType }), voice.name);
      const sent = await this.call<{ id: string }>('POST', `/channels/${channel}/messages`, form);
      return { ids: [sent.id] };
    });
  }

  /** A refusal as the outbox reads it: when to try again, or not at all. */
  private async refusing(work: () => Promise<SendReceipt>): Promise<SendReceipt> {
    try {
      return await work();
    } catch (error) {
      throw this.failure(error);
    }
  }

  /** A refusal as the outbox reads it: when to try again, or not at all. */
  private failure(error: unknown): ChannelSendError {
    if (error instanceof ChannelSendError) return error;
    if (error instanceof RestError) {
      if (error.retryAfterMs !== undefined) return new ChannelSendError(`Discord: ${error.message}`, { retryAfterMs: error.retryAfterMs });
      // No such channel, no access, a message Discord will never take: trying again cannot help.
      return new ChannelSendError(`Discord: ${error.message}`, { permanent: error.status === 400 || error.status === 403 || error.status === 404 || error.status === 413 });
    }
    return new ChannelSendError(`cannot reach Discord: ${describeNetworkError(error, this.root)}`);
  }

  /** Puts the bot's reaction on a message (PUT .../reactions/{emoji}/@me; putting it again changes nothing). */
  async react(to: string, message: string, emoji: string): Promise<void> {
    try {
      const { channel } = await this.target(to);
      await this.call('PUT', `/channels/${channel}/messages/${message}/reactions/${encodeURIComponent(emoji)}/@me`);
    } catch (error) {
      throw this.failure(error);
    }
  }

  /** A file as a message's attachment (multipart: payload_json and files[0]), its caption the message's text. */
  async sendFile(to: string, file: OutboundFile, caption: string, options: SendOptions = {}): Promise<SendReceipt> {
    try {
      const { channel, reference } = await this.target(to);
      const nonce = options.idempotencyKey ? options.idempotencyKey.slice(0, 25) : undefined;
      const form = new FormData();
      form.append('payload_json', JSON.stringify({
        content: caption.slice(0, 2000), allowed_mentions: { parse: [] }, attachments: [{ id: 0, filename: file.name }],
        ...(reference ? { message_reference: { message_id: reference, fail_if_not_exists: false } } : {}),
        ...(nonce ? { nonce, enforce_nonce: true } : {}),
      }));
      form.append('files[0]', new Blob([file.data], { type: file.mimeType }), file.name);
      const response = await fetch(`${this.root}/api/v10/channels/${channel}/messages`, {
        method: 'POST', body: form, headers: { authorization: `Bot ${this.token}`, 'user-agent': 'DiscordBot (gateway, 1)' }, signal: AbortSignal.timeout(120_000),
      });
      const payload = await response.json().catch(() => ({})) as { id?: string; message?: string; code?: number; retry_after?: number };
      if (!response.ok) throw new RestError(response.status, payload.message ?? response.statusText, payload.code, payload.retry_after);
      return { ids: payload.id ? [payload.id] : [] };
    } catch (error) {
      throw this.failure(error);
    }
  }

  private async post(to: string, text: string, options: SendOptions): Promise<SendReceipt> {
    const { channel, reference } = await this.target(to);
    // Components listed (none: taken away) only when the send names buttons.
    const components = options.buttons === undefined ? {} : { components: componentsOf(options.buttons) };
    if (options.editOf !== undefined) {
      try {
        const edited = await this.call<{ id: string }>('PATCH', `/channels/${channel}/messages/${options.editOf}`, { content: text, allowed_mentions: { parse: [] }, ...components });
        return { ids: [edited.id] };
      } catch (error) {
        // A message that is gone gets the text as a new one.
        if (!(error instanceof RestError) || error.status !== 404) throw error;
      }
    }
    // A nonce Discord enforces: a retry of a message it took already is not posted twice.
    const nonce = options.idempotencyKey ? options.idempotencyKey.slice(0, 25) : undefined;
    const sent = await this.call<{ id: string }>('POST', `/channels/${channel}/messages`, {
      content: text, allowed_mentions: { parse: [] },
      ...(reference ? { message_reference: { message_id: reference, fail_if_not_exists: false } } : {}),
      ...(nonce ? { nonce, enforce_nonce: true } : {}), ...(options.buttons?.length ? components : {}),
    });
    return { ids: [sent.id] };
  }

  /** Answers an interaction (a button pressed), within the three seconds Discord waits. */
  async respond(interactionId: string, token: string, answer: unknown): Promise<void> {
    await this.call('POST', `/interactions/${interactionId}/${token}/callback`, answer);
  }

  /** Shows the recipient that the bot is writing. */
  async typing(to: string): Promise<void> {
    const { channel } = await this.target(to);
    await this.call('POST', `/channels/${channel}/typing`);
  }
}
