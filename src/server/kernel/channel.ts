import type { Logger } from 'pino';
import type { ChannelState, SessionKind } from '../../shared/channels.ts';

/** The settings of one channel id (`channels.<id>` of the profile's config, defaults filled in). */
export type ChannelSettings = Record<string, unknown> & { enabled: boolean; dmPolicy: string; allowFrom: string[] };

/** A message that reached one of the channel's accounts. */
export interface InboundMessage {
  account: string;
  /** Stable id of the sender on the channel (for IRC the case-folded nick). */
  sender: string;
  /** How the sender shows up (for IRC the nick as typed). */
  senderName: string;
  kind: SessionKind;
  /** For group messages: the room it was said in (normalized like a peer). */
  room?: string;
  /** Where a reply to a direct message goes (a chat id), when not the sender's name (IRC's nick). */
  replyTo?: string;
  /**
   * For a message in a conversation of its own (an email thread, a
   * Telegram forum topic, a Slack, Discord or Matrix thread): its id. The
   * session is then the sender's (or the room's) and the thread's
   * (`<sender>#<thread>`, `<room>#<thread>`); who may talk is unchanged,
   * and replyTo names the thread, so the answer lands in it.
   */
  thread?: string;
  /**
   * The platform's address of the message as its reactions name it
   * (Telegram's message_id, Slack's ts, a Matrix event id), kept with it in
   * the session: an acknowledgement reaction and message.react point there.
   */
  reference?: string;
  /**
   * For a group message meant for the account (it names the bot, or replies
   * to it): the text as an agent reads it, the mention taken out. A channel
   * that leaves it out is answered when the message starts with the
   * account's name ("gw: ...").
   */
  addressed?: { text: string };
  text: string;
  at: number;
  /**
   * The platform's own id of the message (Telegram's update_id, Slack's
   * event_id, a Discord message id): a message seen already under its id is
   * a redelivery, and is dropped.
   */
  platformId?: string;
  /** Images and files that came with the message (its text may then be empty). */
  attachments?: InboundAttachment[];
}

/** An image or file sent with a message: what the platform said of it, and how to fetch its bytes. */
export interface InboundAttachment {
  /** The file's name as sent, or one made from its kind ("photo.jpg"). */
  name: string;
  /** Its media type when the platform said (or the name tells). */
  mimeType?: string;
  /** Its size in bytes when the platform said. */
  size?: number;
  /** A voice note recorded in the app (Telegram's voice, WhatsApp's audio with voice, Matrix's m.audio with its voice mark), as against an audio file sent. */
  voice?: boolean;
  /** Fetches the bytes; rejects when they are more than `maxBytes` (or cannot be had). */
  fetch(maxBytes: number, signal: AbortSignal): Promise<Uint8Array>;
}

/** A request a platform made to the gateway's HTTP surface for one account of a channel (webhook delivery). */
export interface ChannelRequest {
  account: string;
  /** POST for a delivery (when left out); GET for a platform checking the address before it posts there (WhatsApp's subscription handshake). */
  method?: 'GET' | 'POST';
  /** The query string's parameters, each one's first value. */
  query?: Record<string, string>;
  /** Header names in lower case. */
  headers: Record<string, string | string[] | undefined>;
  /** The raw bytes: signatures are checked over them. */
  body: Buffer;
  /** Posted where the platform posts interactions (a button pressed: POST /channels/<id>/<account>/interactivity), not events. */
  interaction?: boolean;
}

/** What the gateway answers the platform: a status (2xx only once what came is stored), and a JSON body. */
export interface ChannelResponse {
  status: number;
  body?: unknown;
}

/** How a message is sent. */
export interface SendOptions {
  /** The same for every try of one message: a platform that dedupes by it (Discord's nonce) posts it once. */
  idempotencyKey?: string;
  /**
   * Puts the text in this message of the account's instead of sending a new
   * one (a streamed reply's message, edited as the text grows). A channel
   * that cannot edit it now (it was deleted) sends the text as a new message.
   */
  editOf?: string;
  /**
   * Buttons under the message (its last part), where the platform has them
   * (Channel.buttons): a press comes back through ChannelContext.pressed with
   * the button's data. With editOf, an empty list takes the buttons away.
   */
  buttons?: ChannelButton[];
}

/** A button under a message: what it says, and what a press of it hands back (at most 64 bytes, Telegram's bound). */
export interface ChannelButton {
  label: string;
  data: string;
}

/** Someone pressed a button under one of the account's messages. */
export interface ButtonPress {
  account: string;
  /** Who pressed it: the platform's stable id, as InboundMessage.sender (and pairing) names people. */
  sender: string;
  senderName: string;
  /** The button's data (ChannelButton.data). */
  data: string;
  /** Where the message is (a chat or conversation id), as a send names it. */
  chat?: string;
  /** The platform's id of the message the button is under. */
  messageId?: string;
  /**
   * The press's own id, where the platform delivers it as a message of its
   * own (WhatsApp's interactive reply) and delivers it again until it is
   * acknowledged: a press seen already is not acted on again.
   */
  platformId?: string;
  /**
   * Where the platform shows the presser nothing of the bot's (no toast, no
   * ephemeral reply: WhatsApp): what they are to be told goes to this
   * recipient as a message, through the outbox.
   */
  answerTo?: string;
}

/** What the person who pressed a button is shown (a toast, an ephemeral message), if anything. */
export interface PressAnswer {
  text?: string;
}

/** A voice note to send: OGG/Opus audio, or AAC where the channel's voiceFormat asks for it. */
export interface OutboundVoice {
  data: Uint8Array;
  mimeType: string;
  /** A file name for platforms that show one. */
  name: string;
}

/** A file a channel sends: read from an agent's workspace, kept with its outbox row until sent. */
export interface OutboundFile {
  name: string;
  mimeType: string;
  data: Uint8Array;
}

/** What a platform answered for a message it took: its ids, kept with the reply. */
export interface SendReceipt {
  ids: string[];
}

/**
 * A send the platform refused. `retryAfterMs`: it asked the account to wait
 * that long (a 429 with retry_after); `permanent`: trying again cannot help
 * (no such recipient, the bot was removed).
 */
export class ChannelSendError extends Error {
  readonly retryAfterMs?: number;
  readonly permanent: boolean;

  constructor(message: string, options: { retryAfterMs?: number; permanent?: boolean } = {}) {
    super(message);
    this.name = 'ChannelSendError';
    this.retryAfterMs = options.retryAfterMs;
    this.permanent = options.permanent ?? false;
  }
}

export interface AccountStatus {
  account: string;
  state: ChannelState;
  /** Why the account is in the error or disconnected state, or where it is connected. */
  detail?: string;
  since: number;
}

/** What the gateway gives a channel when it starts one. */
export interface ChannelContext {
  /** This channel's current settings (they may change while it runs). */
  settings: () => ChannelSettings;
  /** A folder of the profile's for this channel's own files (<profile>/channels/<id>); the channel makes it when it needs it. */
  folder: string;
  /** Reads a secret of this channel, such as `channels.<id>.password`; undefined when unset. */
  secret: (name: string) => Promise<string | undefined>;
  /**
   * Keeps a secret this channel made for itself (a Matrix account's
   * encryption passphrase) in the profile's secret store; only names under
   * `channels.<id>.` are taken.
   */
  keepSecret?: (name: string, value: string) => Promise<void>;
  logger: Logger;
  /**
   * Hands an inbound message to the gateway (policy, pairing, sessions). It
   * resolves once the message is stored (or known to be a redelivery): a
   * channel whose platform redelivers what is not acknowledged acknowledges
   * only then.
   */
  inbound: (message: InboundMessage) => Promise<void>;
  /** Reports a change of an account's connection state. */
  stateChanged: (status: AccountStatus) => void;
  /**
   * Where an account left off with its platform (a Discord session and its
   * sequence number), kept in the profile's database across restarts;
   * undefined clears it.
   */
  cursor: { get(account: string): Promise<string | undefined>; set(account: string, cursor: string | undefined): Promise<void> };
  /**
   * Whether a sender may talk to an account now (allowFrom, approved by
   * pairing, the open policy), for a channel where people ask before they
   * speak (a Matrix invite) and are let in only when they may. With `ask`, a
   * sender who may not gets a pairing request under the pairing policy,
   * listed for the operator ('pending'; no code is sent: the channel cannot
   * reach them yet); 'refused' under the other policies.
   */
  admit: (request: { account: string; sender: string; senderName: string; ask: boolean }) => Promise<'allowed' | 'pending' | 'refused'>;
  /**
   * A button under one of the account's messages was pressed: the gateway
   * acts on it (an approval, an answer to an agent's question) and says what
   * to show the person who pressed it. Rejects when it could not be handled
   * now: a platform that delivers the press again leaves it unacknowledged.
   */
  pressed: (press: ButtonPress) => Promise<PressAnswer>;
}

/**
 * A messaging channel: one connection per account, started and stopped with
 * the daemon. Built-in channels and plugins implement this same interface,
 * and register it with `channels.add({id, label, normalizePeer, create})`.
 */
export interface Channel {
  readonly id: string;
  /** Accounts this channel's settings describe, whether connected or not. */
  accounts(): string[];
  start(): Promise<void>;
  /** Disconnects every account; resolves once they are closed (or the bound passes). */
  stop(): Promise<void>;
  status(): AccountStatus[];
  /**
   * Delivers one message to a peer or room; rejects when the account cannot
   * send now (a ChannelSendError says whether and when to try again).
   */
  send(account: string, to: string, text: string, options?: SendOptions): Promise<SendReceipt | void>;
  /**
   * Takes a platform's webhook delivery for an account (POST
   * /channels/<id>/<account>/webhook), verify() passed: stores what it
   * carries, and only then answers 2xx. Channels that poll or
   * hold a connection leave it out. A GET there (request.method) is a
   * platform checking the address; a string body is answered as text.
   */
  receive?(request: ChannelRequest): Promise<ChannelResponse>;
  /**
   * Checks that a webhook request for an account came from its platform (a
   * signature over the raw bytes, a secret token, the verify token of
   * WhatsApp's handshake), before anything of the body is parsed or stored:
   * the HTTP pipeline runs it, as the route's verifier, before receive(),
   * which then sees only the requests it let through. A refusal (the status
   * and error body the platform is answered), or undefined; secrets are
   * compared in constant time. A channel that leaves it out checks its
   * requests in receive().
   */
  verify?(request: ChannelRequest): ChannelResponse | undefined;
  /**
   * Sends a voice note (OGG/Opus audio) as the platform's own kind (Telegram's
   * sendVoice, WhatsApp's audio, Matrix's m.audio marked as voice, a file
   * elsewhere); channels whose platforms carry no audio leave it out.
   */
  sendVoice?(account: string, to: string, voice: OutboundVoice, options?: SendOptions): Promise<SendReceipt | void>;
  /**
   * The audio sendVoice takes: OGG/Opus (`opus`, when left out), or AAC
   * (`aac`) where the platform's own apps record and play their voice notes
   * as AAC (Signal, Delta Chat).
   */
  readonly voiceFormat?: 'opus' | 'aac';
  /**
   * Puts a reaction (an emoji) on a message of the conversation `to`, named
   * by its InboundMessage.reference. Channels whose platform has no
   * reactions leave it out.
   */
  react?(account: string, to: string, reference: string, emoji: string): Promise<void>;
  /**
   * Sends a file (with the text as its caption, where there is one). The
   * largest file the platform takes is fileLimit (bytes); a channel that
   * cannot carry files leaves both out, or throws a permanent
   * ChannelSendError saying why (an XMPP server without HTTP upload).
   */
  sendFile?(account: string, to: string, file: OutboundFile, caption: string, options?: SendOptions): Promise<SendReceipt | void>;
  readonly fileLimit?: number;
  /** Whether send() takes SendOptions.editOf (the platform edits messages): replies may then stream (channels.<id>.streaming). */
  readonly edits?: boolean;
  /** Whether send() shows SendOptions.buttons (and presses come back through ChannelContext.pressed). */
  readonly buttons?: boolean;
  /** Shows the recipient that a reply is being written (Telegram's "typing…"), for a few seconds. */
  typing?(account: string, to: string): Promise<void>;
  /** Splits a reply into the messages the platform takes (its length limit, code blocks kept whole); one message when absent. */
  split?(text: string): string[];
  /** The stable id for a peer name as people type it (the same folding as InboundMessage.sender). */
  normalizePeer(peer: string): string;
  /** Whether a peer name is a room (a group session) rather than a person. */
  isRoom(peer: string): boolean;
  /** Checks a peer name; returns a reason when it cannot be sent to. */
  checkPeer(peer: string): string | undefined;
  /** The name an account goes by now (an IRC nick), so rooms can address it; undefined while it is not connected. */
  selfName?(account: string): string | undefined;
}

/** Makes a channel for its id and context. */
export type ChannelFactory = (id: string, context: ChannelContext) => Channel | Promise<Channel>;

export interface ChannelKind {
  /** A short description for listings. */
  label: string;
  /**
   * Its messages carry buttons (as Channel.buttons says): known while the
   * channel runs on another daemon, for those that word a message for it (a
   * question's numbered options are left to the others).
   */
  buttons?: boolean;
  /**
   * A message with buttons is edited to say how it ended, its buttons taken
   * away (as Channel.edits says); where it cannot be (WhatsApp: false), a
   * new message says it. Left out, a kind with buttons edits them.
   */
  edits?: boolean;
  /** The channel's peer folding, also needed while the channel is not running. */
  normalizePeer: (peer: string) => string;
  create: ChannelFactory;
}
