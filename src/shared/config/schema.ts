/**
 * The JSON Schema of a profile's `config.json`. It names every setting of the
 * gateway with its default, including settings whose features arrive later, so
 * `config set` and `start` can check them all. Nothing secret lives here: secrets
 * go to the secret store.
 */

export interface SchemaNode {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  default?: unknown;
  enum?: readonly unknown[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  anyOf?: SchemaNode[];
  items?: SchemaNode;
  uniqueItems?: boolean;
  properties?: Record<string, SchemaNode>;
  required?: string[];
  additionalProperties?: boolean | SchemaNode;
  propertyNames?: SchemaNode;
}

const object = (properties: Record<string, SchemaNode>, description?: string): SchemaNode => ({
  type: 'object',
  description,
  properties,
  additionalProperties: false,
});
const bool = (defaultValue: boolean, description: string): SchemaNode => ({ type: 'boolean', default: defaultValue, description });
const int = (defaultValue: number | undefined, minimum: number, maximum: number, description: string): SchemaNode => ({
  type: 'integer', default: defaultValue, minimum, maximum, description,
});
const text = (description: string, extra: Partial<SchemaNode> = {}): SchemaNode => ({ type: 'string', minLength: 1, description, ...extra });
const list = (items: SchemaNode, description: string): SchemaNode => ({ type: 'array', items, default: [], description });
const oneOf = <T extends string>(values: readonly T[], defaultValue: T | undefined, description: string): SchemaNode => ({
  type: 'string', enum: values, default: defaultValue, description,
});

export const BIND_MODES = ['loopback', 'lan', 'tailnet', 'auto', 'custom'] as const;
export type BindMode = (typeof BIND_MODES)[number];
export const AUTH_MODES = ['token', 'password', 'trusted-proxy', 'none'] as const;
export type AuthMode = (typeof AUTH_MODES)[number];
export const OVERLAY_MODES = ['off', 'serve', 'funnel'] as const;
export const DM_POLICIES = ['pairing', 'allowlist', 'open', 'disabled'] as const;
export const PROVIDER_KINDS = ['openai-compatible', 'anthropic'] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];
export const QUEUE_MODES = ['followup', 'collect', 'interrupt'] as const;
export const TOOL_PROFILES = ['minimal', 'messaging', 'coding', 'full'] as const;
export const EXEC_APPROVALS = ['off', 'ask', 'allowlist', 'full'] as const;
export const WORKSPACE_IMAGES = ['auto', 'off'] as const;
export const VOICE_KINDS = ['auto', 'openai-compatible', 'command', 'off'] as const;
export type VoiceKind = (typeof VOICE_KINDS)[number];
export const MEMORY_SCOPES = ['person', 'agent'] as const;
export const SEARCH_PROVIDERS = ['searxng', 'brave', 'tavily'] as const;
export type SearchProvider = (typeof SEARCH_PROVIDERS)[number];
export type MemoryScope = (typeof MEMORY_SCOPES)[number];
export type ExecApproval = (typeof EXEC_APPROVALS)[number];
export type ToolProfile = (typeof TOOL_PROFILES)[number];
export type QueueMode = (typeof QUEUE_MODES)[number];
/** A model reference: <provider>/<model>, or an alias (models.aliases). */
export const MODEL_REF = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}(/[^\\s]{1,200})?$';
const ID = '^[a-z0-9][a-z0-9_-]{0,31}$';
export const SECRET_BACKENDS = ['keychain', 'file'] as const;
export type SecretBackendName = (typeof SECRET_BACKENDS)[number];
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const ipAddress: SchemaNode = { type: 'string', anyOf: [{ format: 'ipv4' }, { format: 'ipv6' }] };
const cidr: SchemaNode = {
  type: 'string',
  pattern: '^(?:(?:\\d{1,3}\\.){3}\\d{1,3}(?:/\\d{1,2})?|[0-9A-Fa-f:.]+(?:/\\d{1,3})?)$',
};
const urlPath: SchemaNode = { type: 'string', pattern: '^/[A-Za-z0-9._~!$&\'()*+,;=:@/%-]*$' };
const endpoint = (description: string): SchemaNode => object({ enabled: bool(false, description) });
/** A cap on spending, in models.currency: a day's and a month's (UTC), either or both. */
const budget = (whose: string): SchemaNode => object({
  daily: { type: 'number', minimum: 0, maximum: 1_000_000_000, description: `most ${whose} may spend in a day (UTC), in models.currency` },
  monthly: { type: 'number', minimum: 0, maximum: 1_000_000_000, description: `most ${whose} may spend in a calendar month (UTC), in models.currency` },
}, `a cap on what ${whose} spends on model calls: at it, runs are refused before the model is called; a warning at 80 %`);

/** An object of named entries (a channel's further accounts, providers, agents), each name an id. */
const ids = (item: SchemaNode, description: string): SchemaNode => ({ type: 'object', description, propertyNames: { pattern: ID }, additionalProperties: item });

/** How to reach a server: the top level of a channel is its default account, `accounts` adds more. */
const connection = {
  host: text('server host name or address'),
  port: int(undefined, 1, 65535, 'server port'),
  tls: bool(false, 'connect with TLS'),
  nick: text('nick name'),
  username: text('user name'),
  realname: text('real name'),
  sasl: bool(false, 'authenticate with SASL PLAIN using the secret channels.<id>.password'),
  rooms: list({ type: 'string', minLength: 1 }, 'rooms to join'),
};

const channelAccount: SchemaNode = object({
  enabled: bool(true, 'connect this account'),
  ...connection,
  tls: { type: 'boolean', description: 'connect with TLS (else as the channel\'s default account)' },
  sasl: { type: 'boolean', description: 'authenticate with SASL PLAIN using the secret channels.<id>.accounts.<name>.password' },
  rooms: { type: 'array', items: { type: 'string', minLength: 1 }, description: 'rooms to join (none unless listed)' },
}, 'another account of the channel');

/** Who a channel's message comes from, for routes: all that a route names must hold. */
const routes: SchemaNode = list({
  ...object({
    match: object({
      account: text('the channel account the message reached', { pattern: ID }),
      peer: text('the sender, as allowFrom names them (an IRC nick, a Telegram user id, an address)', { maxLength: 256 }),
      room: text('the room the message was said in (an IRC #room, a chat or channel id); a route with a room never matches a direct message', { maxLength: 256 }),
    }, 'what the message must come from: each field named must hold (at least one)'),
    agent: text('the agent that answers these messages, in sessions of its own', { pattern: ID }),
  }, 'a route'),
  required: ['match', 'agent'],
}, 'routes checked in order before agent: the first whose match holds names the agent that answers (each person or room its own agent, each agent its own sessions)');

const channel: SchemaNode = object({
  enabled: bool(false, 'connect this channel when the daemon starts'),
  agent: text('agent that answers direct messages from approved senders (and the room when addressed by nick)', { pattern: ID }),
  routes,
  dmPolicy: oneOf(DM_POLICIES, 'pairing', 'what happens to direct messages from unknown senders'),
  allowFrom: list({ type: 'string', minLength: 1 }, 'senders allowed without pairing ("*" allows everyone under the open policy)'),
  ...connection,
  reconnectMaxDelayMs: int(60_000, 1000, 3_600_000, 'upper bound of the reconnect backoff'),
  accounts: ids(channelAccount, 'further accounts by name (their password is the secret channels.<id>.accounts.<name>.password)'),
}, 'a messaging channel');

/** What every channel kind takes: whether it runs, who may write to it, which agent answers. */
const channelPolicy = {
  enabled: bool(false, 'connect this channel when the daemon starts'),
  agent: text('agent that answers direct messages from approved senders (and rooms where it is addressed)', { pattern: ID }),
  routes,
  dmPolicy: oneOf(DM_POLICIES, 'pairing', 'what happens to direct messages from unknown senders'),
  allowFrom: list({ type: 'string', minLength: 1 }, 'senders allowed without pairing ("*" allows everyone under the open policy)'),
  reconnectMaxDelayMs: int(60_000, 1000, 3_600_000, 'upper bound of the reconnect backoff'),
  maxAttachmentBytes: int(10 * 1024 * 1024, 0, 100 * 1024 * 1024, 'largest image or file kept from a message for the agent (0: none kept); a larger one is only named to it'),
  streaming: bool(false, 'show a reply as it is written: one message edited as the text grows, then the rest as usual'),
  voiceReplies: oneOf(['off', 'when-spoken-to', 'always'], 'off', 'answers spoken back (voice.speak) as the platform\'s own voice note, with their text: off, when-spoken-to (a voice note is answered with one) or always'),
  ackReaction: { type: 'string' as const, maxLength: 32, pattern: '^\\S*$', default: '👀', description: 'reaction put on a message the agent is to read once it is stored, where the platform has reactions ("" for none)' },
};

const API_ROOT = { format: 'uri', maxLength: 2048 } as const;

const telegramAccount: SchemaNode = object({
  enabled: bool(true, 'connect this bot'),
  apiRoot: text('Bot API server of this bot (else the channel\'s)', API_ROOT),
  webhookUrl: text('public https address of this daemon\'s /channels/<id>/<account>/webhook: Telegram posts this bot\'s updates there (with the secret channels.<id>.accounts.<account>.webhookSecret) instead of being polled', API_ROOT),
  rooms: { type: 'array', items: { type: 'string', pattern: '^(\\*|-?\\d{1,20})$' }, description: 'group chat ids this bot answers in when addressed ("*": any group it is in)' },
}, 'another bot of the channel');

const telegramChannel: SchemaNode = object({
  ...channelPolicy,
  apiRoot: text('the Bot API server, such as a Telegram Bot API server of your own (default https://api.telegram.org)', API_ROOT),
  webhookUrl: text('public https address of this daemon\'s /channels/<id>/default/webhook: Telegram posts updates there (with the secret channels.<id>.webhookSecret) instead of being polled', API_ROOT),
  rooms: list({ type: 'string', pattern: '^(\\*|-?\\d{1,20})$' }, 'group chat ids the agent answers in when addressed: mentioned (@bot) or replied to ("*": any group the bot is in)'),
  accounts: ids(telegramAccount, 'further bots by name (each one\'s token is the secret channels.<id>.accounts.<name>.botToken)'),
}, 'Telegram: the bot whose token is the secret channels.<id>.botToken');

const SLACK_ROOM = { type: 'string', pattern: '^(\\*|[CG][A-Z0-9]{2,20})$' } as const;

const slackAccount: SchemaNode = object({
  enabled: bool(true, 'connect this app'),
  apiRoot: text('Slack API address of this app (else the channel\'s)', API_ROOT),
  events: { type: 'string', enum: ['socket', 'http'], description: 'how Slack delivers this app\'s events (else as the channel\'s)' },
  rooms: { type: 'array', items: SLACK_ROOM, description: 'channel ids this app answers in when mentioned ("*": any channel it is in)' },
}, 'another Slack app of the channel');

const slackChannel: SchemaNode = object({
  ...channelPolicy,
  apiRoot: text('the Slack API address (default https://slack.com; GovSlack: https://slack-gov.com)', API_ROOT),
  events: oneOf(['socket', 'http'], 'socket', 'how Slack delivers events: socket (Socket Mode, with the app token) or http (the Events API posting to this daemon\'s /channels/<id>/<account>/webhook, signed with the secret channels.<id>.signingSecret)'),
  rooms: list(SLACK_ROOM, 'channel ids (C..., G...) the agent answers in when mentioned (@app), in a thread under the mention ("*": any channel the app is in)'),
  accounts: ids(slackAccount, 'further Slack apps by name (their tokens are the secrets channels.<id>.accounts.<name>.botToken and .appToken)'),
}, 'Slack over Socket Mode: the app whose tokens are the secrets channels.<id>.botToken (xoxb-) and channels.<id>.appToken (xapp-)');

const DISCORD_ROOM = { type: 'string', pattern: '^(\\*|\\d{17,20})$' } as const;

const discordAccount: SchemaNode = object({
  enabled: bool(true, 'connect this bot'),
  apiRoot: text('Discord API address of this bot (else the channel\'s)', API_ROOT),
  rooms: { type: 'array', items: DISCORD_ROOM, description: 'channel ids this bot answers in when mentioned ("*": any channel it can read)' },
}, 'another Discord bot of the channel');

const discordChannel: SchemaNode = object({
  ...channelPolicy,
  apiRoot: text('the Discord API address (default https://discord.com)', API_ROOT),
  rooms: list(DISCORD_ROOM, 'channel ids the agent answers in when mentioned (@bot) or replied to, replying to that message ("*": any channel the bot can read)'),
  accounts: ids(discordAccount, 'further bots by name (each one\'s token is the secret channels.<id>.accounts.<name>.botToken)'),
}, 'Discord: the bot whose token is the secret channels.<id>.botToken');

const JID = { type: 'string', pattern: '^[^@/\\s]{1,256}@[^@/\\s]{1,256}$', maxLength: 512 } as const;
const XMPP_SERVICE = { type: 'string', pattern: '^xmpps?://[^/\\s]+/?$', maxLength: 512 } as const;
const XMPP_ROOM = { type: 'string', pattern: '^(\\*|[^@/\\s]{1,256}@[^@/\\s]{1,256})$', maxLength: 512 } as const;

const xmppAccount: SchemaNode = object({
  enabled: bool(true, 'connect this account'),
  jid: { ...JID, description: 'the account\'s JID (name@example.org)' },
  service: { ...XMPP_SERVICE, description: 'its server (else the channel\'s when the domain is the same, else the JID\'s domain on 5222)' },
  allowPlaintext: { type: 'boolean', description: 'allow a stream without TLS (loopback servers only)' },
  nick: text('its nick in rooms (else the JID\'s name)', { maxLength: 64 }),
  rooms: { type: 'array', items: XMPP_ROOM, description: 'MUC rooms this account joins and answers in when mentioned' },
}, 'another XMPP account of the channel');

const xmppChannel: SchemaNode = object({
  ...channelPolicy,
  jid: { ...JID, description: 'the account\'s JID (name@example.org); its password is the secret channels.<id>.password' },
  service: { ...XMPP_SERVICE, description: 'the server: xmpp://host:port (STARTTLS, required) or xmpps://host:port (TLS from the start); default the JID\'s domain on 5222' },
  allowPlaintext: bool(false, 'allow a stream without TLS, for a server on this host only (refused for any other)'),
  nick: text('the nick in rooms (default the JID\'s name); a room message that mentions it is answered', { maxLength: 64 }),
  rooms: list(XMPP_ROOM, 'MUC rooms (room@conference.example.org) to join, answered when the nick is mentioned'),
  accounts: ids(xmppAccount, 'further accounts by name (each one\'s password is the secret channels.<id>.accounts.<name>.password)'),
}, 'XMPP: an account (a JID) on a server of your own or a public one');

const EMAIL = { type: 'string', pattern: '^[^@\\s<>]{1,128}@[^@\\s<>]{1,255}$', maxLength: 384 } as const;
const IMAP_SERVER = { type: 'string', pattern: '^imaps?://[^/\\s]+/?$', maxLength: 512 } as const;
const SMTP_SERVER = { type: 'string', pattern: '^smtps?://[^/\\s]+/?$', maxLength: 512 } as const;

const emailAccount: SchemaNode = object({
  enabled: bool(true, 'connect this mailbox'),
  address: { ...EMAIL, description: 'the mailbox\'s address' },
  user: text('its login (else the address)', { maxLength: 256 }),
  imap: { ...IMAP_SERVER, description: 'its IMAP server (else the channel\'s)' },
  smtp: { ...SMTP_SERVER, description: 'its SMTP server (else the channel\'s)' },
  allowPlaintext: { type: 'boolean', description: 'allow logins without TLS (loopback servers only)' },
  mailbox: text('the folder read (else the channel\'s)', { maxLength: 256 }),
  fromName: text('the name its mail is sent under', { maxLength: 128 }),
}, 'another mailbox of the channel');

const emailChannel: SchemaNode = object({
  ...channelPolicy,
  address: { ...EMAIL, description: 'the mailbox\'s address; its password (IMAP and SMTP) is the secret channels.<id>.password' },
  user: text('the login (default the address)', { maxLength: 256 }),
  imap: { ...IMAP_SERVER, description: 'the IMAP server: imap://host:port (STARTTLS, required) or imaps://host:port (TLS from the start)' },
  smtp: { ...SMTP_SERVER, description: 'the SMTP server: smtp://host:port (STARTTLS, required) or smtps://host:port (TLS from the start)' },
  allowPlaintext: bool(false, 'allow logins without TLS, for servers on this host only (refused for any other)'),
  mailbox: text('the folder read for mail', { default: 'INBOX', maxLength: 256 }),
  fromName: text('the name mail is sent under (default the address alone)', { maxLength: 128 }),
  maxMessageBytes: int(25 * 1024 * 1024, 1024, 100 * 1024 * 1024, 'largest message read whole; of a larger one only the headers are read, and the agent is told'),
  accounts: ids(emailAccount, 'further mailboxes by name (each one\'s password is the secret channels.<id>.accounts.<name>.password)'),
}, 'Email: a mailbox read over IMAP (IDLE) and answered over SMTP, one thread one session');

const MATRIX_USER = { type: 'string', pattern: '^@[^:\\s]{1,255}:[^\\s]{1,255}$', maxLength: 255 } as const;
const MATRIX_ROOM = { type: 'string', pattern: '^(\\*|[!#][^:\\s]{1,255}:[^\\s]{1,255})$', maxLength: 255 } as const;
const HOMESERVER = { type: 'string', pattern: '^https?://[^/\\s]+/?$', maxLength: 512 } as const;

const matrixAccount: SchemaNode = object({
  enabled: bool(true, 'connect this account'),
  homeserver: { ...HOMESERVER, description: 'its homeserver (else the channel\'s)' },
  userId: { ...MATRIX_USER, description: 'its user id, checked against the access token\'s' },
  rooms: { type: 'array', items: MATRIX_ROOM, description: 'rooms this account joins and answers in when mentioned ("*": any room of three or more it is in)' },
  encryption: { type: 'boolean', description: 'read and answer end-to-end encrypted rooms (else the channel\'s)' },
}, 'another Matrix account of the channel');

const matrixChannel: SchemaNode = object({
  ...channelPolicy,
  homeserver: { ...HOMESERVER, description: 'the homeserver\'s client-server API address: https://matrix.example.org (http only for one on this host); the account\'s access token is the secret channels.<id>.accessToken' },
  userId: { ...MATRIX_USER, description: 'the account\'s user id (@bot:example.org), checked against the access token\'s (default: whoever the token belongs to)' },
  rooms: list(MATRIX_ROOM, 'group rooms (!id:example.org or #alias:example.org) to join, answered when the account is mentioned ("*": any room of three or more it is in); a room of two is a direct chat'),
  encryption: bool(true, 'read and answer end-to-end encrypted rooms and direct chats: the account is a device with its own keys, kept in the profile\'s database, locked with the secret channels.<id>.cryptoKey (made on first start when unset); off, encrypted rooms are refused with the reason'),
  accounts: ids(matrixAccount, 'further accounts by name (each one\'s access token is the secret channels.<id>.accounts.<name>.accessToken)'),
}, 'Matrix: an account on a homeserver, over the client-server API, end-to-end encrypted rooms included');

const PHONE_NUMBER_ID = { type: 'string', pattern: '^\\d{1,32}$' } as const;
const GRAPH_VERSION = { type: 'string', pattern: '^v\\d{1,3}\\.\\d{1,2}$' } as const;

const whatsappTemplate = (description: string): SchemaNode => ({
  ...object({
    name: text('the template\'s name, as approved in WhatsApp Manager (it takes no parameters)', { pattern: '^[a-z0-9_]{1,512}$' }),
    language: text('its language code (default en_US)', { pattern: '^[a-z]{2,3}(_[A-Za-z0-9]{2,4})?$' }),
  }, description),
  required: ['name'],
});

const whatsappAccount: SchemaNode = object({
  enabled: bool(true, 'take this number\'s messages'),
  phoneNumberId: { ...PHONE_NUMBER_ID, description: 'its phone number id (WhatsApp Manager, API Setup)' },
  apiRoot: text('Graph API address for this number (else the channel\'s)', API_ROOT),
  apiVersion: { ...GRAPH_VERSION, description: 'Graph API version for this number (else the channel\'s)' },
  template: whatsappTemplate('template inviting a person back once their 24-hour window has shut (else the channel\'s)'),
}, 'another business phone number of the channel');

const whatsappChannel: SchemaNode = object({
  ...channelPolicy,
  phoneNumberId: { ...PHONE_NUMBER_ID, description: 'the business phone number\'s id (WhatsApp Manager, API Setup; not the number itself); Meta posts its messages to /channels/<id>/default/webhook' },
  apiRoot: text('the Graph API address (default https://graph.facebook.com)', API_ROOT),
  apiVersion: { ...GRAPH_VERSION, default: 'v24.0', description: 'the Graph API version' },
  template: whatsappTemplate('an approved template sent to invite a person back when a reply falls outside their 24-hour customer service window; the reply then waits for their answer (without one it is not sent, and the reason recorded)'),
  accounts: ids(whatsappAccount, 'further business phone numbers by name (their secrets under channels.<id>.accounts.<name>, else the channel\'s)'),
}, 'WhatsApp through Meta\'s Cloud API: a business phone number whose access token, app secret and verify token are the secrets channels.<id>.accessToken, .appSecret and .verifyToken');

const SIGNAL_NUMBER = { type: 'string', pattern: '^\\+[1-9]\\d{6,14}$' } as const;
const SIGNAL_RPC_URL = { type: 'string', pattern: '^https?://[^\\s?#]+$', maxLength: 512 } as const;
const SIGNAL_GROUP = { type: 'string', pattern: '^(\\*|[A-Za-z0-9+/]{43}=|[A-Za-z0-9+/]{22}==)$' } as const;

const signalAccount: SchemaNode = object({
  enabled: bool(true, 'connect this account'),
  account: { ...SIGNAL_NUMBER, description: 'its number, as signal-cli has it (+15550100)' },
  rpcUrl: { ...SIGNAL_RPC_URL, description: 'its signal-cli daemon --http (else the channel\'s)' },
  rooms: { type: 'array', items: SIGNAL_GROUP, description: 'group ids this account answers in when mentioned ("*": any group it is in)' },
}, 'another Signal account of the channel');

const signalChannel: SchemaNode = object({
  ...channelPolicy,
  account: { ...SIGNAL_NUMBER, description: 'the account\'s number, as signal-cli has it (registered, or linked to a phone): +15550100' },
  rpcUrl: { ...SIGNAL_RPC_URL, default: 'http://127.0.0.1:8080', description: 'where signal-cli daemon --http listens (http only on this host; start it with --receive-mode=manual, so that nothing is lost while the gateway is away)' },
  rooms: list(SIGNAL_GROUP, 'group ids (base64, as signal-cli listGroups shows them) the agent answers in when mentioned or quoted ("*": any group the account is in)'),
  accounts: ids(signalAccount, 'further Signal accounts by name (each its own number, on the same signal-cli unless it gives its rpcUrl)'),
}, 'Signal: an account of signal-cli\'s HTTP daemon, over its JSON-RPC');

const DELTACHAT_GROUP = { type: 'string', pattern: '^(\\*|group:\\d{1,10})$' } as const;

const deltachatAccount: SchemaNode = object({
  enabled: bool(true, 'connect this account'),
  address: { ...EMAIL, description: 'its e-mail address' },
  user: text('its login (else the address)', { maxLength: 256 }),
  imap: { ...IMAP_SERVER, description: 'its IMAP server (else the channel\'s)' },
  smtp: { ...SMTP_SERVER, description: 'its SMTP server (else the channel\'s)' },
  acceptInvalidCertificates: { type: 'boolean', description: 'accept a certificate that does not check out (servers on this host only)' },
  displayName: text('the name people see it by', { maxLength: 128 }),
  rooms: { type: 'array', items: DELTACHAT_GROUP, description: 'groups this account answers in when addressed ("*": any group it is in)' },
}, 'another Delta Chat account of the channel');

const deltachatChannel: SchemaNode = object({
  ...channelPolicy,
  address: { ...EMAIL, description: 'the account\'s e-mail address; its password (IMAP and SMTP) is the secret channels.<id>.password' },
  user: text('the login (default the address)', { maxLength: 256 }),
  imap: { ...IMAP_SERVER, description: 'the IMAP server: imap://host:port (STARTTLS) or imaps://host:port (TLS from the start); default: found from the address, as Delta Chat\'s apps do' },
  smtp: { ...SMTP_SERVER, description: 'the SMTP server: smtp://host:port (STARTTLS) or smtps://host:port (TLS from the start); default: found from the address' },
  acceptInvalidCertificates: bool(false, 'accept server certificates that do not check out (self-signed), for servers on this host only (refused for any other)'),
  displayName: text('the name people see the account by, and address it by in groups ("name: ..."); default the address\'s name', { maxLength: 128 }),
  rooms: list(DELTACHAT_GROUP, 'groups (group:<id>, as the log names them) the agent answers in when addressed by name or quoted ("*": any group the account is added to)'),
  accounts: ids(deltachatAccount, 'further Delta Chat accounts by name (each one\'s password is the secret channels.<id>.accounts.<name>.password)'),
}, 'Delta Chat: end-to-end encrypted chat over e-mail, through Delta Chat\'s own engine; people write to it through its invite link');

const hookMapping: SchemaNode = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'action'],
  properties: {
    name: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' },
    match: object({ field: text('dotted path into the payload'), equals: {} as SchemaNode }),
    action: oneOf(['job', 'message', 'wake'], undefined, 'what the hook does'),
    kind: text('job kind for the job action'),
    channel: text('channel for the message action'),
    to: text('peer for the message action'),
    sessionKey: text('session the hook targets'),
    text: { type: 'string', description: 'message template, rendered over the payload without code execution' },
  },
};

const modelRef: SchemaNode = { type: 'string', pattern: MODEL_REF };

const provider: SchemaNode = object({
  kind: oneOf(PROVIDER_KINDS, undefined, 'API the provider speaks: openai-compatible (OpenAI, Ollama, llama.cpp, vLLM, most hosted APIs) or anthropic'),
  baseUrl: text('address of the API, such as http://127.0.0.1:11434/v1', { format: 'uri' }),
  headers: { type: 'object', description: 'extra request headers (not secrets: the key is the secret models.providers.<id>.apiKey)', additionalProperties: { type: 'string' } },
  models: list({ type: 'string', minLength: 1, maxLength: 200 }, 'models of this provider offered on GET /v1/models and to model overrides'),
  embeddingModels: list({ type: 'string', minLength: 1, maxLength: 200 }, 'embedding models of this provider offered on POST /v1/embeddings'),
  imageModels: list({ type: 'string', minLength: 1, maxLength: 200 }, 'models of this provider that take images: pictures sent on a channel reach them as images, not only by name ("*": every model)'),
  prices: {
    type: 'object', description: 'prices of this provider\'s models per million tokens, in models.currency, over the bundled table of well-known models\' prices (gateway models prices)',
    propertyNames: { minLength: 1, maxLength: 200 },
    additionalProperties: object({
      input: { type: 'number', minimum: 0, maximum: 1_000_000, description: 'price of a million input tokens' },
      output: { type: 'number', minimum: 0, maximum: 1_000_000, description: 'price of a million output tokens' },
      cachedInput: { type: 'number', minimum: 0, maximum: 1_000_000, description: 'price of a million input tokens read from the provider\'s cache (default: the input price)' },
    }),
  },
  timeouts: object({
    totalMs: int(300_000, 1000, 3_600_000, 'longest a model call may take'),
    firstTokenMs: int(60_000, 100, 3_600_000, 'longest wait for the first token'),
    stallMs: int(60_000, 100, 3_600_000, 'longest silence of a stream (keepalive comments count as activity)'),
  }),
  retries: object({
    max: int(2, 0, 10, 'retries of a call refused with 429 or 5xx before any output'),
    baseDelayMs: int(500, 0, 60_000, 'first retry delay, doubling (Retry-After wins when the server sends it)'),
    maxDelayMs: int(20_000, 0, 600_000, 'longest wait before a retry'),
  }),
  fallbackOn: { type: 'array', items: { type: 'integer', minimum: 400, maximum: 599 }, default: [429, 500, 502, 503, 504], description: 'statuses after which a run moves on to the agent\'s next model' },
}, 'a model provider');

const agent: SchemaNode = object({
  model: { ...modelRef, description: 'the model: <provider>/<model>, or an alias' },
  fallbacks: list(modelRef, 'models tried in order when the model fails with a status in its provider\'s fallbackOn'),
  instructions: { type: 'string', default: '', maxLength: 100_000, description: 'system instructions' },
  tools: list({ type: 'string', minLength: 1, maxLength: 128 }, 'tools the agent may call: names or patterns such as jobs.*'),
  maxSteps: int(8, 1, 100, 'model calls (and tool rounds) a run may take'),
  temperature: { type: 'number', minimum: 0, maximum: 2, description: 'sampling temperature' },
  maxOutputTokens: int(undefined, 1, 1_000_000, 'longest answer in tokens'),
  toolChoice: oneOf(['auto', 'none', 'required'] as const, 'auto', 'whether the model may call tools (auto), must not (none), or must call one at its first step (required)'),
  queue: oneOf(QUEUE_MODES, 'followup', 'a message that arrives during a run: run next (followup), merge into the next turn (collect), or stop the run and answer it (interrupt)'),
  history: int(50, 0, 1000, 'earlier messages of the session the model reads; past them (or past contextTokens), the older ones are summarised into a stored summary message, never dropped'),
  contextTokens: int(24_000, 500, 2_000_000, 'about how many tokens of the session\'s earlier messages the model reads (four characters a token); past them, the older ones are summarised'),
  clientTools: bool(false, 'let inference API clients pass tools of their own, which the client runs'),
  models: list(modelRef, 'backend models an inference API client may choose with the x-gateway-model header'),
  toolProfile: oneOf(TOOL_PROFILES, undefined, 'a shorthand added to tools: minimal (memory), messaging (memory, messages, reminders, web.search), coding (memory, files, web.fetch, web.search, browser.*, exec) or full (every tool); gateway.tools.allow and deny still apply'),
  workspace: text('folder the agent\'s files.* and exec work in (default: workspaces/<agent> in the profile\'s folder, where tools.exec.workspaceMB is enforced by a file system of its own); a folder of the operator\'s is never mounted over (that would hide its files), so there tools.exec.workspaceMB is only watched', { maxLength: 4096 }),
  exec: object({ approval: oneOf(EXEC_APPROVALS, undefined, 'this agent\'s exec approval, over tools.exec.approval') }),
  budget: budget('the agent'),
  skills: list({ type: 'string', pattern: '^(\\*|[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)$' }, 'skills the agent may use (gateway skills list): names, or * for every installed skill; the model sees each one\'s name and description, loads its instructions with skills.load, reads its files under skills/<name>/ and runs its scripts only through exec'),
  delegation: object({
    agents: list({ type: 'string', pattern: ID }, 'agents this one may hand a task to with agents.delegate (none unless listed)'),
    depth: int(2, 1, 8, 'how deep delegations may go below the run that started them: a child of a child of ... this agent\'s run, counted from the first; it holds for everything below this agent\'s runs, whatever the agents further down allow'),
    maxChildren: int(4, 1, 64, 'delegations of one session running at once; more are refused until one ends'),
    timeoutSeconds: int(300, 1, 86_400, 'longest agents.delegate with wait waits for the answer; past it the answer arrives later as a new turn'),
    allowSharedMemory: bool(false, 'let this agent, whose memory keeps each person\'s apart (memory.scope person), hand a task to an agent whose memory all its people share (memory.scope agent): the child acts for the same person, and what it remembers of the task every one of its people may then read (refused unless true; gateway doctor warns while it is)'),
  }, 'handing tasks to other agents (agents.delegate)'),
  memory: object({
    scope: oneOf(MEMORY_SCOPES, 'person', 'whose conversations and notes memory.search, memory.get and memory.note read and keep: each person\'s own (person), or one memory all the agent\'s people share (agent)'),
  }),
}, 'an agent');

/** A duration of `every`: a whole number of seconds, minutes, hours or days. */
export const DURATION = '^[1-9][0-9]{0,6}(s|m|h|d)$';
const HOOK_NAME = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$';
const deliverTo: SchemaNode = {
  ...object({
    channel: text('channel the answer goes to', { pattern: ID }),
    account: text('account of the channel (default: its only one, else default)', { pattern: ID }),
    to: text('recipient as the channel takes it: a nick or #room (IRC), a chat id (Telegram), a channel id (Slack, Discord)', { maxLength: 256 }),
  }),
  required: ['channel', 'to'],
};

const automation: SchemaNode = {
  ...object({
    description: { type: 'string', maxLength: 500, description: 'what it is for' },
    enabled: bool(true, 'fire when the trigger says so'),
    budget: budget('the automation'),
    trigger: object({
      cron: text('cron expression: 5 fields (minute hour day month weekday) or 6 with seconds first, such as "0 9 * * 1-5"', { maxLength: 200 }),
      tz: text('IANA time zone the cron expression is read in, such as Europe/Berlin (default UTC)', { maxLength: 64 }),
      every: text('interval: 30s, 15m, 2h, 1d; firings fall on its multiples counted from 1970-01-01 UTC', { pattern: DURATION }),
      at: text('one moment, in ISO 8601 with an offset (2026-12-24T18:00:00+01:00): fires once', { format: 'date-time' }),
      webhook: {
        ...object({
          event: text('GitHub event, such as push or pull_request', { pattern: '^[a-z_]{1,64}$' }),
          action: text('the payload\'s action, such as opened', { pattern: '^[a-z_]{1,64}$' }),
          repository: text('owner/name of the repository', { pattern: '^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$' }),
          ref: text('the pushed ref, such as refs/heads/main', { maxLength: 256 }),
        }),
        required: ['event'],
      },
      hook: text('name of a hook: fires on each POST <hooks.path>/<name>', { pattern: HOOK_NAME }),
    }, 'when it fires: one of cron (with tz), every, at, webhook, hook'),
    action: object({
      agent: text('agent that runs', { pattern: ID }),
      prompt: { type: 'string', minLength: 1, maxLength: 20_000, description: 'what the agent is asked; {{path}} is filled from the trigger\'s payload, nothing evaluated' },
      session: text('"isolated" (a new session each firing, the default) or the key of a session the run continues', { maxLength: 512 }),
      deliver: { anyOf: [{ type: 'string', enum: ['session'] }, deliverTo], description: 'where the answer goes: {channel, to}, or "session" (the channel and peer of action.session)' },
      message: {
        ...object({
          channel: text('channel the message goes to', { pattern: ID }),
          account: text('account of the channel (default: its only one, else default)', { pattern: ID }),
          to: text('recipient as the channel takes it', { maxLength: 256 }),
          text: { type: 'string', minLength: 1, maxLength: 4000, description: 'the message; {{path}} is filled from the trigger\'s payload' },
        }),
        required: ['channel', 'to', 'text'],
      },
    }, 'what it does: an agent run (agent, prompt, session, deliver) or a message'),
    catchUp: oneOf(['skip', 'last', 'all'] as const, 'last', 'firings missed while no daemon ran: none, the latest, or all of them (at most 100)'),
  }, 'an automation'),
  required: ['trigger', 'action'],
};

/** A header name: what `gateway mcp add --header` accepts. */
export const HEADER_NAME = '^[A-Za-z0-9!#$%&\'*+.^_`|~-]{1,64}$';

const mcpServer: SchemaNode = {
  ...object({
    url: text('streamable HTTP address of the server, such as https://mcp.example.com/mcp', { format: 'uri', maxLength: 2048 }),
    enabled: bool(true, 'connect to the server and offer its tools'),
    headers: list({ type: 'string', pattern: HEADER_NAME }, 'static headers sent with every request; each value is the secret mcp.servers.<name>.header.<Header>'),
    clientId: text('OAuth client id registered for the gateway in advance (a confidential client keeps its secret as mcp.servers.<name>.clientSecret)', { maxLength: 512 }),
    clientMetadataUrl: text('HTTPS address of the gateway\'s Client ID Metadata Document, for authorization servers that accept one', { format: 'uri', maxLength: 2048 }),
    scope: text('OAuth scopes to ask for (default: what the server advertises)', { maxLength: 1024 }),
    timeoutMs: int(60_000, 1000, 600_000, 'longest a tool call may take'),
  }, 'an MCP server'),
  required: ['url'],
};

export const configSchema: SchemaNode = object({
  gateway: object({
    port: int(undefined, 1, 65535, 'listen port (default 18789 for the default profile, derived from the name for others)'),
    bind: oneOf(BIND_MODES, 'loopback', 'which addresses the daemon listens on'),
    customBindHost: { ...ipAddress, description: 'address to listen on when gateway.bind is custom' },
    auth: object({
      mode: oneOf(AUTH_MODES, 'token', 'authentication for every HTTP surface and the WebSocket'),
      allowOverlay: bool(false, 'let identity-bearing private-overlay connections satisfy authentication'),
      trustedProxy: object({
        userHeader: text('header that carries the authenticated user', { default: 'x-forwarded-user' }),
        requiredHeaders: list({ type: 'string', minLength: 1 }, 'headers every proxied request must carry'),
        allowUsers: list({ type: 'string', minLength: 1 }, 'users allowed through the proxy (empty: any)'),
      }),
      rateLimit: object({
        maxFailures: int(10, 1, 10_000, 'failed authentications that lock a client out'),
        windowMs: int(60_000, 1000, 86_400_000, 'window in which failures are counted'),
        lockoutMs: int(300_000, 1000, 86_400_000, 'how long a locked-out client is refused'),
        exemptLoopback: bool(true, 'never lock out loopback clients'),
      }),
    }),
    trustedProxies: list(cidr, 'proxy addresses (CIDR) whose forwarding headers are trusted'),
    overlay: object({ mode: oneOf(OVERLAY_MODES, 'off', 'private-overlay exposure') }),
    controlUi: object({
      enabled: bool(true, 'serve the Control UI'),
      basePath: { ...urlPath, default: '/', description: 'base path of the Control UI' },
      allowedOrigins: list({ type: 'string', minLength: 1 }, 'browser origins allowed beyond loopback'),
    }),
    http: object({
      maxBodyBytes: int(1_048_576, 1024, 104_857_600, 'largest request body on the JSON API'),
      endpoints: object({
        chatCompletions: endpoint('serve POST /v1/chat/completions'),
        responses: endpoint('serve POST /v1/responses'),
        models: endpoint('serve GET /v1/models'),
        embeddings: endpoint('serve POST /v1/embeddings'),
        audio: endpoint('serve POST /v1/audio/transcriptions and POST /v1/audio/speech (on the voice.* engines)'),
      }),
    }),
    rateLimit: object({
      windowMs: int(60_000, 1000, 3_600_000, 'request rate window'),
      max: int(1200, 1, 10_000_000, 'requests per window per credential or address'),
      webhooksMax: int(600_000, 1, 100_000_000, 'webhook deliveries per window per address'),
    }),
    tools: object({
      allow: list({ type: 'string', minLength: 1 }, 'tools allowed over HTTP even when dangerous'),
      deny: list({ type: 'string', minLength: 1 }, 'tools never allowed over HTTP'),
    }),
    nodes: object({
      allowCommands: list({ type: 'string', minLength: 1 }, 'node commands accepted (empty: all not denied)'),
      denyCommands: list({ type: 'string', minLength: 1 }, 'node commands refused'),
    }),
    discovery: object({ mdns: object({ enabled: { type: 'boolean', description: 'announce the gateway on the local network with multicast DNS (default: on when gateway.bind reaches beyond loopback; never on loopback)' } }) }),
    drainTimeoutMs: int(10_000, 0, 600_000, 'how long a stopping daemon waits for running work'),
  }),
  hooks: object({
    enabled: bool(false, 'serve the hooks ingress'),
    path: { ...urlPath, default: '/hooks', description: 'base path of the hooks ingress' },
    maxBodyBytes: int(262_144, 1024, 10_485_760, 'largest hook payload'),
    defaultSessionKey: text('session a hook targets when it names none'),
    allowedSessionKeyPrefixes: list({ type: 'string', minLength: 1 }, 'session key prefixes a hook may target'),
    presets: list({ type: 'string', enum: ['gmail'] }, 'built-in hook mappings to enable'),
    mappings: list(hookMapping, 'named hooks and what they do'),
  }),
  channels: {
    type: 'object',
    description: 'messaging channels by id',
    properties: { irc: channel, telegram: telegramChannel, slack: slackChannel, discord: discordChannel, xmpp: xmppChannel, email: emailChannel, matrix: matrixChannel, whatsapp: whatsappChannel, signal: signalChannel, deltachat: deltachatChannel },
    propertyNames: { pattern: '^[a-z0-9][a-z0-9_-]{0,31}$' },
    additionalProperties: channel,
  },
  secrets: object({ backend: oneOf(SECRET_BACKENDS, undefined, 'where secrets are kept; chosen when the profile is created') }),
  store: object({
    url: text('PostgreSQL database shared by several daemons (postgres://user@host/db), instead of this profile\'s SQLite file; its password is the secret store.password, never part of this URL', {
      pattern: '^(?!.*[?&]password=)postgres(?:ql)?://(?:[^:@/?#\\s]*@)?[^@\\s]+$', maxLength: 2048,
    }),
    synchronous: oneOf(['normal', 'full'] as const, 'normal', 'full extends durability to power loss'),
    retentionDays: int(30, 1, 3650, 'days to keep deliveries and finished jobs'),
    connections: int(10, 1, 200, 'connections to a PostgreSQL store for transactions, each held by one at a time (beside two shared by statements on their own)'),
  }),
  jobs: object({
    concurrency: int(32, 1, 256, 'jobs the daemon runs at once (and claims together)'),
    leaseSeconds: int(30, 5, 3600, 'how long a claimed job stays with its daemon without news from it; with a shared store, another daemon then runs it again'),
  }),
  api: object({
    jwt: object({
      issuer: text('expected JWT issuer'),
      audience: text('expected JWT audience'),
      jwksUrl: text('JWKS address of the issuer', { format: 'uri' }),
    }),
    tokens: object({ defaultExpiryDays: int(90, 1, 3650, 'expiry of a product access token created without one') }),
  }),
  models: object({
    providers: ids(provider, 'model providers by id (API keys are the secrets models.providers.<id>.apiKey)'),
    aliases: { type: 'object', description: 'short names for models', propertyNames: { pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' }, additionalProperties: modelRef },
    currency: text('currency of models.providers.<id>.prices and of budgets, as ISO 4217 (the bundled table of well-known models\' prices is in USD, and is used only when this is USD)', { pattern: '^[A-Z]{3}$', default: 'USD' }),
  }),
  agents: ids(agent, 'agents by id'),
  tools: object({
    web: object({
      allowPrivate: list({ type: 'string', pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:/\\[\\]]+):[0-9]{1,5}$' }, 'host:port pairs web.fetch and the browser may reach although they are loopback, private or link-local (such as an intranet wiki: wiki.internal:443)'),
      maxBytes: int(2 * 1024 * 1024, 1024, 50 * 1024 * 1024, 'most bytes of a page web.fetch reads (once decompressed)'),
      timeoutMs: int(15_000, 1000, 120_000, 'longest a web.fetch may take, redirects included'),
      maxRedirects: int(5, 0, 20, 'redirects web.fetch follows'),
      search: object({
        provider: oneOf(SEARCH_PROVIDERS, undefined, 'who answers web.search: searxng (an instance of your own at tools.web.search.baseUrl, its JSON API, no key), brave (the Brave Search API, its key the secret tools.web.search.brave.apiKey) or tavily (the Tavily API, its key the secret tools.web.search.tavily.apiKey); unset, web.search answers 503'),
        baseUrl: text('address of the search provider: the SearXNG instance (needed for searxng), or another address for the Brave or Tavily API (default: theirs)', API_ROOT),
        count: int(5, 1, 20, 'results web.search answers when the call asks for no number'),
        timeoutMs: int(10_000, 1000, 60_000, 'longest a search may take'),
      }, 'web.search and who answers it'),
    }),
    browser: object({
      executablePath: text('the Chromium to run (default: the first of /usr/lib/chromium/chromium, /usr/bin/chromium, /usr/bin/chromium-browser); gateway doctor says when none is there', { maxLength: 4096 }),
      pages: int(4, 1, 32, 'pages one browser may have open at once (popups count)'),
      browsers: int(4, 1, 64, 'browsers open at once, one per agent and person: past it the one unused longest is closed, or the call is answered 429 while every one is busy'),
      actionTimeoutSeconds: int(30, 1, 300, 'longest one browser action may take: opening a page, a click, typing, a snapshot, a screenshot'),
      idleSeconds: int(300, 10, 86_400, 'a browser unused this long is closed (its profile, logins included, is kept)'),
      memoryMB: int(1024, 256, 65_536, 'memory a browser and all its processes may use together (a control group; where the daemon can make none, no bound holds and gateway doctor says so)'),
      downloadMB: int(50, 1, 4096, 'largest file a page may download (into the workspace\'s downloads/ folder)'),
    }, 'the browser.* tools: a headless Chromium in a sandbox, every request it makes through the address guard'),
    exec: object({
      approval: oneOf(EXEC_APPROVALS, 'off', 'whether exec runs commands: off (refused), ask (an operator approves each: gateway approvals approve <id>), allowlist (commands matching tools.exec.allow run, others ask) or full (every command runs); always in the sandbox'),
      allow: list({ type: 'string', minLength: 1, maxLength: 512 }, 'commands that run without asking under the allowlist approval, matched word by word against what will run: the program exactly, then each argument exactly, * alone for one or more arguments, * inside a word for any characters of one (git status, git log *, ls *, npm run test:*); a * never covers an option that runs another command (git -c, find -exec, ssh -o: docs/security.md), and a command with ; | & $ ` < > ( ) an unquoted glob or a line break always asks'),
      network: bool(false, 'let sandboxed commands reach the network'),
      timeoutSeconds: int(30, 1, 3600, 'wall time a command gets when the call names none'),
      maxTimeoutSeconds: int(300, 1, 3600, 'most wall time a call may ask for'),
      cpuSeconds: int(60, 1, 3600, 'CPU time a command may use'),
      memoryMB: int(1024, 16, 65_536, 'memory a command and everything it starts may use together (one control group per sandbox; where the daemon cannot make one, each process\'s address space: gateway doctor says which)'),
      processes: int(64, 1, 4096, 'processes a command and everything it starts may run at once'),
      outputBytes: int(64 * 1024, 1024, 16 * 1024 * 1024, 'output kept (stdout and stderr together); past it the command is stopped'),
      fileMB: int(100, 1, 65_536, 'largest file a command may write'),
      workspaceMB: int(1024, 1, 1_048_576, 'most an agent\'s workspace takes on disk. With tools.exec.workspaceImage auto and a root daemon, each workspace under the profile is a file system of its own of this size (an ext4 image beside it, workspaces/.<agent>.img, loop-mounted at the folder over an empty read-only guard, so while it is grown offline nothing lands in the bare folder; one file per 16 KiB at most), so any write past it, by commands together or files.write, fails with "no space left" at the bound; raising it grows the file system at once, lowering it is refused by the file system (which keeps its size) and the size is then watched. Elsewhere (a daemon not root, no loop devices, an agent\'s own workspace folder, which is never mounted over) the size is watched, not enforced: a command past it is stopped, one started over it can only remove files; gateway doctor says which holds'),
      workspaceImage: oneOf(WORKSPACE_IMAGES, 'auto', 'whether a workspace under the profile gets a file system of its own, bounding tools.exec.workspaceMB by construction: auto (where the daemon runs as root with loop devices) or off (a plain folder, its size watched); an image made before stays mounted either way'),
      concurrency: int(4, 1, 64, 'commands one agent, and one caller, may run at once; more are answered 429 with Retry-After'),
      tmpMB: int(64, 1, 65_536, 'size of the sandbox\'s private /tmp'),
      approvalTimeoutSeconds: int(300, 5, 86_400, 'how long an asked command waits for an operator before it is refused'),
    }),
    ask: object({
      timeoutSeconds: int(3600, 5, 604_800, 'how long a question an agent asks its person (the ask tool) waits for the answer; then the run resumes with the question\'s stated default, or with no answer'),
    }),
  }, 'the built-in tools: web.fetch, web.search, browser.*, files.*, exec, ask'),
  approvals: object({
    notify: list({
      ...object({
        channel: text('channel the message goes to', { pattern: ID }),
        account: text('account of the channel (default: default)', { pattern: ID }),
        to: text('recipient as the channel takes it: a chat id (Telegram), a channel or user id (Slack, Discord), a nick or #room (IRC), an address (email, XMPP)', { maxLength: 256 }),
      }),
      required: ['channel', 'to'],
    }, 'chats told of each command waiting for approval (with Approve and Reject buttons where the platform has them, else how to answer in words), of its outcome, and of budget warnings and caps reached'),
    approvers: list({ type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}:.{1,256}$' }, 'who may answer approval requests from a chat: <channel>:<sender>, the sender as pairing names them (telegram:1001, slack:U0123ABC, discord:<user id>, irc:alice); everyone else is refused, and told'),
  }, 'approvals in the chat: where requests go and who may answer them (the CLI and the Control UI always may)'),
  automations: ids(automation, 'automations by id: a trigger (a schedule, a webhook, a hook) and an action (an agent run, a message)'),
  runtime: object({
    defaultAgent: text('agent used when none is named (else the agent "default", else the first)', { pattern: ID }),
    concurrency: int(64, 1, 1024, 'runs at once across all sessions (inference requests, agents): the ones past it wait their turn'),
    toolRunConcurrency: int(4, 1, 256, 'of those, runs of agents that have tools (they run commands and call services) at once'),
    senderLimit: object({
      max: int(20, 1, 100_000, 'messages one channel sender may have answered per window'),
      windowMs: int(3_600_000, 1000, 86_400_000, 'window of the per-sender limit'),
    }),
  }),
  voice: object({
    transcribe: object({
      kind: oneOf(VOICE_KINDS, 'auto', 'the speech-to-text engine: auto (a local engine found on this host: pocketsphinx, with its US English model; none found: off), openai-compatible (POST <baseUrl>/audio/transcriptions, as OpenAI, Groq, whisper.cpp\'s server and speaches speak it; its key is the secret voice.transcribe.apiKey), command (an argument list run without a shell, {input} replaced by a 16 kHz mono WAV file, the transcript read from its standard output) or off'),
      baseUrl: text('address of an openai-compatible engine (https://api.openai.com/v1)', { format: 'uri', maxLength: 2048 }),
      model: text('model an openai-compatible engine transcribes with (whisper-1)', { maxLength: 200 }),
      language: text('language of the audio, as ISO 639-1 (en), when the engine should not guess', { pattern: '^[a-z]{2,3}$' }),
      command: list({ type: 'string', minLength: 1, maxLength: 4096 }, 'the command engine: program and arguments, {input} replaced by the WAV file (whisper-cli -m /models/ggml-base.en.bin -nt -np -f {input})'),
      paths: list({ type: 'string', minLength: 1, maxLength: 4096, pattern: '^/' }, 'folders and files a command engine reads besides /usr (its model files), bound read-only into its sandbox'),
      timeoutSeconds: int(120, 1, 3600, 'longest one transcription may take'),
    }),
    speak: object({
      kind: oneOf(VOICE_KINDS, 'auto', 'the text-to-speech engine: auto (a local engine found on this host: espeak-ng; none found: off), openai-compatible (POST <baseUrl>/audio/speech; its key is the secret voice.speak.apiKey), command (an argument list run without a shell, the text on its standard input or as {text}, writing the audio file {output}; espeak-ng and Piper are such engines) or off'),
      baseUrl: text('address of an openai-compatible engine', { format: 'uri', maxLength: 2048 }),
      model: text('model an openai-compatible engine speaks with (tts-1)', { maxLength: 200 }),
      voice: text('voice of the engine (alloy; for espeak-ng a voice name such as en-us)', { maxLength: 200 }),
      command: list({ type: 'string', minLength: 1, maxLength: 4096 }, 'the command engine: program and arguments, {output} replaced by the file it writes (any format ffmpeg reads) and {text} by the text, else given on standard input (piper --model /models/en_US-lessac-medium.onnx --output_file {output})'),
      paths: list({ type: 'string', minLength: 1, maxLength: 4096, pattern: '^/' }, 'folders and files a command engine reads besides /usr (its voice models), bound read-only into its sandbox'),
      timeoutSeconds: int(60, 1, 3600, 'longest one answer may take to speak'),
      maxChars: int(4096, 1, 100_000, 'longest text spoken at once'),
    }),
    maxSeconds: int(300, 1, 7200, 'longest voice note or audio file transcribed (a longer one is answered with why)'),
    maxMB: int(25, 1, 1024, 'largest audio file taken, in MB'),
    concurrency: int(2, 1, 64, 'transcriptions and speech at once; more wait their turn (over HTTP, answered 429 with Retry-After)'),
  }, 'voice: speech to text for voice notes and POST /v1/audio/transcriptions, text to speech for spoken answers and POST /v1/audio/speech'),
  metrics: object({
    enabled: bool(false, 'serve GET /metrics in the Prometheus text format (to the gateway credential, or a token with the scope metrics)'),
    loopbackOpen: bool(false, 'serve GET /metrics without a credential to clients on this host (not through a proxy)'),
  }),
  telemetry: object({
    otlp: object({
      endpoint: text('OTLP/HTTP address of an OpenTelemetry collector (http://collector:4318, or its /v1/traces): agent runs, their model calls and tool calls are sent there as traces; unset, nothing is loaded', { format: 'uri', maxLength: 2048 }),
      serviceName: text('service.name of the traces', { default: 'gateway', maxLength: 128 }),
    }),
  }),
  inference: object({
    limits: object({
      requestsPerMinute: int(120, 1, 1_000_000, 'inference requests per minute per credential'),
      tokensPerMinute: int(200_000, 1, 1_000_000_000, 'tokens (in and out) per minute per credential'),
      monthlyTokens: int(undefined, 1, 1_000_000_000_000, 'tokens per calendar month per credential (none: no budget)'),
    }),
    keepaliveMs: int(15_000, 1000, 600_000, 'keepalive comment interval on idle streams'),
    maxBodyBytes: int(4_194_304, 1024, 104_857_600, 'largest inference request body'),
  }),
  mcp: object({
    servers: ids(mcpServer, 'MCP servers whose tools become the gateway\'s (mcp.<name>.<tool>), by name'),
    callbackUrl: text('where a browser reaches the gateway\'s OAuth callback (default: the gateway\'s own address + /oauth/mcp/callback)', { format: 'uri', maxLength: 2048 }),
  }),
  plugins: object({
    load: list({ type: 'string', minLength: 1 }, 'plugin folders or package names to load'),
    canvas: object({ root: text('folder served at /__gateway__/canvas/') }),
    a2ui: object({ root: text('folder served at /__gateway__/a2ui/') }),
  }),
  log: object({
    level: oneOf(LOG_LEVELS, 'info', 'daemon log level'),
    maxBytes: int(10_485_760, 65_536, 1_073_741_824, 'size at which the log file rotates'),
    maxFiles: int(5, 1, 100, 'rotated log files kept'),
  }),
});

/** Keys the daemon applies as soon as they change; every other change needs a restart. */
export const LIVE_KEYS: readonly string[] = [
  'log.level', 'api.jwt', 'api.tokens', 'gateway.tools', 'hooks.enabled', 'hooks.maxBodyBytes', 'hooks.defaultSessionKey',
  'hooks.allowedSessionKeyPrefixes', 'hooks.presets', 'hooks.mappings', 'models', 'agents', 'automations', 'tools', 'approvals', 'runtime', 'inference', 'gateway.http.endpoints', 'mcp', 'voice', 'gateway.controlUi.allowedOrigins',
  // /metrics reads both settings at each request; turned on, counting starts as the setting is written (metrics/module.ts).
  'metrics',
];

/** Keys that apply at the next `gateway reload` (or SIGHUP), without a restart. */
export const RELOAD_KEYS: readonly string[] = ['plugins'];

/** Live keys under an id of the user's choosing: who may write to a channel applies at once. */
export const LIVE_KEY_PATTERNS: readonly RegExp[] = [/^channels\.[^.]+\.(dmPolicy|allowFrom|agent|routes)(\.|$)/];

/** Keys that only the gateway itself writes. */
export const READ_ONLY_KEYS: Readonly<Record<string, string>> = {
  'secrets.backend': 'the secret store is chosen when the profile is created and is never switched afterwards',
};
