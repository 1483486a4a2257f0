/**
 * The chat channels beside IRC, in one run, against the stand-ins the tests
 * use (Telegram's Bot API, Slack's Web API and Socket Mode, Discord's Gateway
 * and REST API, a Matrix homeserver's client-server API, Meta's WhatsApp Cloud
 * API and its signed webhooks, signal-cli's HTTP daemon), a real ngircd, a real Prosody (XMPP), and a real postfix and
 * dovecot (email, and Delta Chat with people on Delta Chat engines of their own: channels-deltachat.ts),
 * with a model upstream that answers at once:
 *
 * - what each channel adds to an idle daemon's resident memory, connected
 *   (daemons with none, with each alone, and with all three, alternating
 *   rounds; target: each <= 8 MB); for Delta Chat, the daemon's and its
 *   engines' (one process per account) together;
 * - the gateway's own latency from an inbound message arriving to its reply
 *   leaving (stored, run as a job, answered by the model at once, queued in the
 *   outbox, sent), p50 and p99, at 1 message a second and at 100 a second,
 *   each channel beside IRC. Delta Chat is measured at 1 and at 10 a second,
 *   not 100: each message is a mail encrypted, sent through postfix, delivered
 *   by dovecot and fetched over IMAP by a real engine on each side, and the
 *   people's engines run on the same host as everything else.
 *
 * Matrix is measured twice (channels-matrix.ts): `matrix` with the account's
 * encryption off in unencrypted direct chats, and `matrix-e2e` with it on
 * (the default) in encrypted ones, the people's devices on the same crypto
 * library.
 *
 * BENCH_CHANNELS=signal,whatsapp measures only those (beside IRC, the baseline),
 * for a host too busy for all of them at 100 messages a second; `matrix` there
 * takes in `matrix-e2e`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { writeFileSync } from 'node:fs';
import { DiscordApi, nextId } from '../test/support/discord-api.ts';
import { IrcServer, IrcUser } from '../test/support/irc.ts';
import { MailPerson, MailServers } from '../test/support/mail.ts';
import type { EncryptedPerson } from '../test/support/matrix-crypto.ts';
import { Homeserver, MatrixPerson } from '../test/support/matrix-homeserver.ts';
import { Prosody, XMPP_DOMAIN, XmppUser, trust } from '../test/support/prosody.ts';
import { openaiText, ScriptedUpstream } from '../test/support/scripted-upstream.ts';
import { SignalCli } from '../test/support/signal-cli.ts';
import { SlackApi } from '../test/support/slack-api.ts';
import { TelegramApi } from '../test/support/telegram-api.ts';
import { WhatsAppApi } from '../test/support/whatsapp-api.ts';
import { configureMatrix, encryptedPeople, matrixBots, type MatrixBots } from './channels-matrix.ts';
import { childrenRssKiB, configureDeltaChat, DELTACHAT_OWN_SQL, DeltaChatPeople, deltachatBots, inviteOf, type DeltaChatBots } from './channels-deltachat.ts';
import { freePort, median, ms, rssKiB, sleep, step, type Figure } from './support.ts';

const BIN = new URL('../bin/run.js', import.meta.url).pathname;
const TG_TOKEN = '7001234567:AAH-bench-token';
/** The numbers signal-cli has (one daemon serving both, as started without -a). */
const SIGNAL_BOTS = ['+15550000001', '+15550000002'];

type Kind = 'telegram' | 'slack' | 'discord' | 'irc' | 'xmpp' | 'email' | 'matrix' | 'matrix-e2e' | 'whatsapp' | 'signal' | 'deltachat';
const ALL_KINDS: Kind[] = ['irc', 'telegram', 'slack', 'discord', 'xmpp', 'email', 'matrix', 'matrix-e2e', 'whatsapp', 'signal', 'deltachat'];
/** BENCH_CHANNELS=whatsapp,telegram measures only those beside IRC (by default, every channel; matrix takes in matrix-e2e). */
const CHOSEN = (process.env.BENCH_CHANNELS ?? '').split(',').map((name) => name.trim()).filter(Boolean);
const KINDS: Kind[] = ALL_KINDS.filter((kind) => kind === 'irc' || CHOSEN.length === 0 || CHOSEN.includes(kind) || (kind === 'matrix-e2e' && CHOSEN.includes('matrix')));
/** The channel a kind is measured on (encrypted Matrix is the Matrix channel's, its account's encryption on). */
const channelOf = (kind: Kind): string => (kind === 'matrix-e2e' ? 'matrix' : kind);
const noSenders = (): Record<Kind, string[]> => Object.fromEntries(ALL_KINDS.map((kind) => [kind, []])) as unknown as Record<Kind, string[]>;
/** The second business number of the WhatsApp stand-in's app. */
const WA_SECOND_NUMBER = '106540352249999';
const XMPP_BOT = 'gwbench';

interface Parts {
  telegram: TelegramApi; slack: SlackApi; discord: DiscordApi; ircd: IrcServer; upstream: ScriptedUpstream;
  prosody: Prosody; mail: MailServers; mailBot: MailPerson; hs: Homeserver; matrixBots: MatrixBots; whatsapp: WhatsAppApi; signal: SignalCli;
  /** A second account of the bot's for email: what one more idle account adds. */
  mailBot2: MailPerson;
  /** The XMPP and mail servers' certificates, for the daemon to trust. */
  certificates: string;
  deltachat: DeltaChatBots;
}

/**
 * A daemon of its own home with the channels asked for (those in `twice` with a second account), connected. The
 * daemon that measures latency (`latency`) has the Delta Chat and encrypted Matrix bots people write to.
 */
async function startDaemon(parts: Parts, kinds: Kind[], senders: Record<Kind, string[]>, twice: Kind[] = [], latency = false): Promise<{ pid: number; stop: () => void; home: string; gateway: (args: string[]) => string }> {
  const home = mkdtempSync(join(tmpdir(), 'gateway-bench-channels-'));
  const port = await freePort();
  const env = { ...process.env, GATEWAY_HOME: home, GATEWAY_PORT: String(port), CI: 'true', NODE_EXTRA_CA_CERTS: parts.certificates };
  const gateway = (args: string[], input?: string) => {
    const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', input });
    if (result.status !== 0) throw new Error(`gateway ${args.join(' ')}: ${result.stderr}`);
    return result.stdout;
  };
  const set = (key: string, value: unknown) => gateway(['config', 'set', key, JSON.stringify(value)]);
  set('models.providers.script', { kind: 'openai-compatible', baseUrl: parts.upstream.url, models: ['m'], retries: { max: 0 } });
  set('agents.helper', { model: 'script/m' });
  // The load is many senders at once: nothing waits for a run slot or a per-sender budget.
  set('runtime', { concurrency: 64, senderLimit: { max: 100_000, windowMs: 60_000 } });
  const policy = (kind: Kind) => ({ enabled: true, agent: 'helper', allowFrom: senders[kind] });
  if (kinds.includes('telegram')) {
    set('channels.telegram', { ...policy('telegram'), apiRoot: parts.telegram.apiRoot });
    gateway(['secrets', 'set', 'channels.telegram.botToken'], TG_TOKEN);
  }
  if (kinds.includes('slack')) {
    set('channels.slack', { ...policy('slack'), apiRoot: parts.slack.apiRoot });
    gateway(['secrets', 'set', 'channels.slack.botToken'], parts.slack.botToken);
    gateway(['secrets', 'set', 'channels.slack.appToken'], parts.slack.appToken);
  }
  if (kinds.includes('discord')) {
    set('channels.discord', { ...policy('discord'), apiRoot: parts.discord.apiRoot });
    gateway(['secrets', 'set', 'channels.discord.botToken'], parts.discord.token);
  }
  if (kinds.includes('whatsapp')) {
    set('channels.whatsapp', { ...policy('whatsapp'), apiRoot: parts.whatsapp.apiRoot, phoneNumberId: parts.whatsapp.phoneNumberId });
    gateway(['secrets', 'set', 'channels.whatsapp.accessToken'], parts.whatsapp.accessToken);
    gateway(['secrets', 'set', 'channels.whatsapp.appSecret'], parts.whatsapp.appSecret);
    gateway(['secrets', 'set', 'channels.whatsapp.verifyToken'], 'bench-verify-token');
    if (twice.includes('whatsapp')) set('channels.whatsapp.accounts.two', { phoneNumberId: WA_SECOND_NUMBER });
    // Meta posts to the address the app was given: this daemon's.
    parts.whatsapp.subscribe(`http://127.0.0.1:${port}/channels/whatsapp/default/webhook`);
  }
  if (kinds.includes('irc')) set('channels.irc', { ...policy('irc'), host: '127.0.0.1', port: parts.ircd.port, nick: `gwbench${process.pid % 1000}` });
  if (kinds.includes('xmpp')) {
    set('channels.xmpp', { ...policy('xmpp'), jid: `${XMPP_BOT}@${XMPP_DOMAIN}`, service: `xmpp://127.0.0.1:${parts.prosody.port}` });
    gateway(['secrets', 'set', 'channels.xmpp.password'], 'bench-bot-password');
    if (twice.includes('xmpp')) {
      set('channels.xmpp.accounts.two', { jid: `${XMPP_BOT}2@${XMPP_DOMAIN}` });
      gateway(['secrets', 'set', 'channels.xmpp.accounts.two.password'], 'bench-bot-password');
    }
  }
  if (kinds.includes('email')) {
    set('channels.email', { ...policy('email'), address: parts.mailBot.address, imap: `imap://127.0.0.1:${parts.mail.imapPort}`, smtp: `smtp://127.0.0.1:${parts.mail.smtpPort}` });
    gateway(['secrets', 'set', 'channels.email.password'], 'bench-bot-password');
    if (twice.includes('email')) {
      set('channels.email.accounts.two', { address: parts.mailBot2.address });
      gateway(['secrets', 'set', 'channels.email.accounts.two.password'], 'bench-bot-password');
    }
  }
  if (kinds.includes('signal')) {
    set('channels.signal', { ...policy('signal'), account: SIGNAL_BOTS[0], rpcUrl: parts.signal.url });
    if (twice.includes('signal')) set('channels.signal.accounts.two', { account: SIGNAL_BOTS[1] });
  }
  const plain = kinds.includes('matrix');
  const encrypted = kinds.includes('matrix-e2e');
  if (plain || encrypted) {
    configureMatrix({
      set, secret: (name, value) => gateway(['secrets', 'set', name], value), hs: parts.hs, bots: parts.matrixBots, plain, encrypted, latency,
      second: twice.includes('matrix') || twice.includes('matrix-e2e'), allowFrom: [...(plain ? senders.matrix : []), ...(encrypted ? senders['matrix-e2e'] : [])],
    });
  }
  if (kinds.includes('deltachat')) {
    configureDeltaChat({
      set, secret: (name, value) => gateway(['secrets', 'set', name], value), mail: parts.mail, policy: policy('deltachat'),
      address: latency ? parts.deltachat.latency : parts.deltachat.idle, ...(twice.includes('deltachat') ? { second: parts.deltachat.idle2 } : {}),
    });
  }
  gateway(['start']);
  const pid = JSON.parse(readFileSync(join(home, 'profiles/default/daemon.json'), 'utf8')).pid as number;
  // A Delta Chat account logs in to its mailbox first (its engine finds the servers and makes its keys).
  const deadline = Date.now() + (kinds.includes('deltachat') ? 180_000 : 30_000);
  for (;;) {
    const status = JSON.parse(gateway(['channels', 'status', '--json'])).channels as { channel: string; state: string }[];
    const channels = kinds.map(channelOf);
    if (channels.every((channel) => status.some((entry) => entry.channel === channel) && status.every((entry) => entry.channel !== channel || entry.state === 'connected'))) break;
    if (Date.now() > deadline) {
      spawnSync(process.execPath, [BIN, 'stop'], { env });
      rmSync(home, { recursive: true, force: true });
      throw new Error(`channels did not connect: ${JSON.stringify(status)}`);
    }
    await sleep(200);
  }
  return {
    pid, home, gateway: (args) => gateway(args),
    stop: () => {
      spawnSync(process.execPath, [BIN, 'stop'], { env });
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** A percentile of some values (NaN of none: the report shows it rather than failing). */
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
};

/** The platforms' stand-ins, an ngircd, a Prosody, a postfix and dovecot, and a model that answers each message at once with "Answer: <message>". */
async function startParts(pieces: number): Promise<Parts> {
  const prosody = await Prosody.start();
  prosody.register(XMPP_BOT, 'bench-bot-password');
  prosody.register(`${XMPP_BOT}2`, 'bench-bot-password');
  trust(prosody.certificate);
  const mail = await MailServers.start();
  const certificates = join(mail.dir, 'trusted.pem');
  writeFileSync(certificates, readFileSync(prosody.certificate, 'utf8') + readFileSync(mail.certificate, 'utf8'));
  const hs = await new Homeserver().start();
  const parts: Parts = {
    telegram: await new TelegramApi().start(), slack: await new SlackApi().start(), discord: await new DiscordApi().start(),
    ircd: await IrcServer.start(), upstream: await new ScriptedUpstream().start(), signal: await new SignalCli({ accounts: SIGNAL_BOTS, multiAccount: true }).start(),
    prosody, mail, mailBot: new MailPerson(mail, 'gwbench', 'bench-bot-password'), certificates, hs, matrixBots: matrixBots(hs),
    mailBot2: new MailPerson(mail, 'gwbench2', 'bench-bot-password'),
    whatsapp: await new WhatsAppApi().start(),
    deltachat: KINDS.includes('deltachat') ? deltachatBots(mail) : { idle: '', idle2: '', latency: '' },
  };
  parts.whatsapp.numbers.set(WA_SECOND_NUMBER, '+1 555-010-0200');
  parts.telegram.addBot(TG_TOKEN, 'gw_bench_bot');
  parts.upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`, undefined, { pieces });
  return parts;
}

export async function runChannelBench(rounds: number): Promise<Figure[]> {
  const parts = await startParts(1);
  const figures: Figure[] = [];
  const senders = noSenders();
  const SENDERS = 20;
  const tgUsers = Array.from({ length: SENDERS }, (_, index) => ({ id: 6_000_000 + index, first_name: `T${index}` }));
  const slackUsers = Array.from({ length: SENDERS }, (_, index) => ({ user: parts.slack.user(`U0BENCH${index}`, `S${index}`), dm: `D0BENCH${index}` }));
  const discordUsers = Array.from({ length: SENDERS }, (_, index) => {
    const user = { id: nextId(), username: `d${index}` };
    return { ...user, dm: parts.discord.dmOf(user) };
  });
  senders.telegram = tgUsers.map((user) => String(user.id));
  senders.slack = slackUsers.map((user) => user.user);
  senders.discord = discordUsers.map((user) => user.id);
  const ircUsers = await Promise.all(Array.from({ length: 4 }, (_, index) => IrcUser.connect(parts.ircd.port, `bench${process.pid % 1000}u${index}`)));
  senders.irc = ircUsers.map((user) => user.nick.toLowerCase());
  const xmppUsers = await Promise.all(Array.from({ length: KINDS.includes('xmpp') ? 4 : 0 }, async (_, index) => {
    parts.prosody.register(`person${index}`, 'bench-person');
    return XmppUser.connect(parts.prosody, `person${index}`, 'bench-person');
  }));
  senders.xmpp = xmppUsers.map((user) => user.jid);
  const mailPeople = Array.from({ length: KINDS.includes('email') ? 4 : 0 }, (_, index) => new MailPerson(parts.mail, `person${index}`));
  senders.email = mailPeople.map((person) => person.address);
  // Matrix people, each in a direct chat the bot is invited to (and joins, once a daemon with Matrix syncs).
  const matrixPeople = await Promise.all(Array.from({ length: KINDS.includes('matrix') ? 4 : 0 }, async (_, index) => {
    const person = new MatrixPerson(parts.hs, `person${index}`);
    return { person, room: await person.directChat(parts.matrixBots.plain.userId) };
  }));
  senders.matrix = matrixPeople.map(({ person }) => person.userId);
  const waPeople = Array.from({ length: SENDERS }, (_, index) => `4915200${String(index).padStart(6, '0')}`);
  senders.whatsapp = waPeople;
  const signalPeople = Array.from({ length: 4 }, (_, index) => parts.signal.person(`person${index}`));
  senders.signal = signalPeople.map((person) => person.number!);
  // Encrypted Matrix people (channels-matrix.ts), and Delta Chat's (channels-deltachat.ts).
  const e2ePeople: { person: EncryptedPerson; room: string }[] = [];
  let dcPeople: DeltaChatPeople | undefined;
  let latencyDaemon: { stop: () => void } | undefined;

  try {
    await encryptedPeople(parts.hs, parts.matrixBots, KINDS.includes('matrix-e2e') ? 4 : 0, e2ePeople);
    senders['matrix-e2e'] = e2ePeople.map(({ person }) => person.userId);
    if (KINDS.includes('deltachat')) {
      step('channels: Delta Chat people, each an engine of their own, logging in');
      dcPeople = await DeltaChatPeople.start(parts.mail, 4);
      senders.deltachat = dcPeople.addresses;
    }

    step('channels: resident memory of an idle daemon, by channel');
    const alone = KINDS.filter((kind) => kind !== 'irc');
    const second = alone.filter((kind) => ['xmpp', 'email', 'matrix', 'matrix-e2e', 'whatsapp', 'signal', 'deltachat'].includes(kind));
    const measured = (...kinds: Kind[]) => kinds.every((kind) => KINDS.includes(kind));
    const rss: Record<string, number[]> = { none: [], all: [], tls: [], ...Object.fromEntries([...alone, ...second.map((kind) => `${kind}2`)].map((kind) => [kind, []])) };
    /** The daemon's child processes (Delta Chat's engines, one per account), by configuration. */
    const children: Record<string, number[]> = Object.fromEntries(Object.keys(rss).map((name) => [name, []]));
    for (let round = 0; round < rounds; round++) {
      const configs = [['none', []], ...alone.map((kind) => [kind, [kind]]), ...second.map((kind) => [`${kind}2`, [kind], [kind]]),
        ...(measured('telegram', 'slack', 'discord') ? [['all', ['telegram', 'slack', 'discord']]] : []), ...(measured('xmpp', 'email') ? [['tls', ['xmpp', 'email']]] : [])] as [string, Kind[], Kind[]?][];
      for (const [name, kinds, twice] of configs) {
        const daemon = await startDaemon(parts, kinds, senders, twice);
        try {
          // Long enough for the daemon's memory reducer to give back what connecting left (two idle checks 5 s apart).
          await sleep(16_000);
          rss[name]!.push(rssKiB(daemon.pid) / 1024);
          children[name]!.push(childrenRssKiB(daemon.pid) / 1024);
        } finally {
          daemon.stop();
        }
      }
    }
    const none = median(rss.none!);
    const signed = (mb: number) => `${mb >= 0 ? '+' : ''}${mb.toFixed(1)}`;
    const label = (kind: Kind) => (kind === 'matrix' ? 'matrix (encryption off)' : kind === 'matrix-e2e' ? 'matrix-e2e (encryption on, in encrypted rooms)' : kind);
    for (const kind of alone) {
      if (kind === 'deltachat') continue;
      const added = median(rss[kind]!) - none;
      figures.push({ name: `idle daemon with ${label(kind)} connected`, value: `${median(rss[kind]!).toFixed(1)} MB RSS`, baseline: `${none.toFixed(1)} MB with no channel`, comparison: `+${added.toFixed(1)} MB`, target: '<= +8 MB', ok: added <= 8 });
    }
    for (const kind of second) {
      if (kind === 'deltachat') continue;
      const added = median(rss[`${kind}2`]!) - median(rss[kind]!);
      figures.push({ name: `a second idle ${label(kind)} account`, value: `${median(rss[`${kind}2`]!).toFixed(1)} MB RSS`, baseline: `${median(rss[kind]!).toFixed(1)} MB with one`, comparison: `${signed(added)} MB`, target: '<= +8 MB', ok: added <= 8 });
    }
    if (measured('deltachat')) {
      // Each Delta Chat account is an engine process of the daemon's (Delta Chat's own, in Rust): its memory is the account's, counted with the daemon's.
      const total = (name: string) => median(rss[name]!.map((mb, round) => mb + children[name]![round]!));
      const [one, two] = [total('deltachat'), total('deltachat2')];
      const engine = (name: string) => median(children[name]!);
      figures.push({
        name: 'idle daemon with deltachat connected (the daemon and its engine)', value: `${one.toFixed(1)} MB RSS`, baseline: `${none.toFixed(1)} MB with no channel`,
        comparison: `${signed(one - none)} MB: the daemon ${signed(median(rss.deltachat!) - none)} MB, its engine ${engine('deltachat').toFixed(1)} MB`, target: '<= +8 MB', ok: one - none <= 8,
      });
      figures.push({
        name: 'a second idle deltachat account (a second engine)', value: `${two.toFixed(1)} MB RSS`, baseline: `${one.toFixed(1)} MB with one`,
        comparison: `${signed(two - one)} MB: the daemon ${signed(median(rss.deltachat2!) - median(rss.deltachat!))} MB, its two engines ${engine('deltachat2').toFixed(1)} MB`, target: '<= +8 MB', ok: two - one <= 8,
      });
    }
    if (measured('xmpp', 'email')) {
      // XMPP and email are the channels here that speak TLS: the process's first TLS connection sets up OpenSSL's
      // TLS state once (about 6 MB in a bare Node process that already hashes and signs), which both share.
      const both = median(rss.tls!) - none;
      const apart = median(rss.xmpp!) + median(rss.email!) - 2 * none;
      figures.push({ name: 'idle daemon with XMPP and email connected (both over TLS)', value: `${median(rss.tls!).toFixed(1)} MB RSS`, baseline: `${none.toFixed(1)} MB with no channel`, comparison: `+${both.toFixed(1)} MB together, +${apart.toFixed(1)} MB as the sum of each alone: ${(apart - both).toFixed(1)} MB is what they share`, target: '', ok: true });
    }
    if (measured('telegram', 'slack', 'discord')) {
      const all = median(rss.all!) - none;
      figures.push({ name: 'idle daemon with Telegram, Slack and Discord connected', value: `${median(rss.all!).toFixed(1)} MB RSS`, baseline: `${none.toFixed(1)} MB with no channel`, comparison: `+${all.toFixed(1)} MB`, target: '<= +24 MB', ok: all <= 24 });
    }

    step('channels: inbound to reply, at 1 and 100 messages a second');
    const kinds = KINDS;
    const daemon = await startDaemon(parts, kinds, senders, [], true);
    latencyDaemon = daemon;
    if (dcPeople) {
      step('channels: the Delta Chat people join the bot through its invite link');
      await dcPeople.join(inviteOf(JSON.parse(daemon.gateway(['channels', 'status', '--json'])).channels));
    }
    const db = join(daemon.home, 'profiles/default/state.db');
    /** What the daemon recorded: each reply's leaving (the outbox's sent_at) after the message it answers arrived (its session record's at). */
    const recorded = <T>(sql: string, ...params: (string | number)[]): T[] => {
      const handle = new DatabaseSync(db, { readOnly: true });
      try {
        return handle.prepare(sql).all(...params) as T[];
      } finally {
        handle.close();
      }
    };
    const lastOutbox = () => Number(recorded<{ id: number | null }>('SELECT max(id) AS id FROM channel_outbox')[0]?.id ?? 0);
    const own = (kind: Kind, after: number) => (kind === 'deltachat'
      ? recorded<{ ms: number }>(DELTACHAT_OWN_SQL, after)
      : recorded<{ ms: number }>(`SELECT o.sent_at - m.at AS ms FROM channel_outbox o JOIN session_messages m ON m.id = o.turn_id
      WHERE o.channel = ? AND o.status = 'sent' AND o.id > ?`, channelOf(kind), after)).map((row) => Number(row.ms));
    let serial = 0;
    /** Sends one message on a channel; resolves with the ms from its leaving the person to the reply leaving the gateway (email) or reaching the person. */
    const probe = (kind: Kind, sender: number): Promise<number> => {
      const text = `m${++serial}`;
      const answer = `Answer: ${text}`;
      const sent = Date.now();
      let arrived: () => number | undefined;
      if (kind === 'telegram') {
        const user = tgUsers[sender % SENDERS]!;
        parts.telegram.message(TG_TOKEN, { chat: { id: user.id, type: 'private' }, from: user, text });
        arrived = () => parts.telegram.sent(user.id).find((request) => request.body.text === answer)?.at;
      } else if (kind === 'slack') {
        const user = slackUsers[sender % SENDERS]!;
        parts.slack.message({ user: user.user, channel: user.dm, text });
        arrived = () => parts.slack.posted(user.dm).find((call) => call.body.text === answer)?.at;
      } else if (kind === 'discord') {
        const user = discordUsers[sender % SENDERS]!;
        parts.discord.message({ author: user, channel: user.dm, content: text });
        arrived = () => parts.discord.sent(user.dm).find((call) => call.body.content === answer)?.at;
      } else if (kind === 'xmpp') {
        const user = xmppUsers[sender % xmppUsers.length]!;
        void user.say(`${XMPP_BOT}@${XMPP_DOMAIN}`, text);
        arrived = () => user.received.find((message) => message.text === answer)?.at;
      } else if (kind === 'matrix') {
        const { person, room } = matrixPeople[sender % matrixPeople.length]!;
        void person.say(room, text);
        // The homeserver dates an event as it takes it: the reply's time is when the gateway's send reached it.
        arrived = () => person.received.find((event) => event.room_id === room && event.content?.body === answer)?.origin_server_ts;
      } else if (kind === 'matrix-e2e') {
        // The person's device encrypts the message first (as Element does), and decrypts the answer as it comes.
        const { person, room } = e2ePeople[sender % e2ePeople.length]!;
        void person.sayEncrypted(room, text);
        arrived = () => person.received.find((event) => event.room_id === room && event.content?.body === answer)?.origin_server_ts;
      } else if (kind === 'deltachat') {
        dcPeople!.say(sender, text);
        arrived = () => dcPeople!.arrived(answer);
      } else if (kind === 'signal') {
        const person = signalPeople[sender % signalPeople.length]!;
        parts.signal.say(person, text);
        arrived = () => parts.signal.sentTo(person).find((sent) => sent.text === answer)?.at;
      } else if (kind === 'whatsapp') {
        const from = waPeople[sender % SENDERS]!;
        parts.whatsapp.message(from, { text });
        arrived = () => parts.whatsapp.sent(from).find((call) => call.body.text?.body === answer)?.at;
      } else if (kind === 'email') {
        const person = mailPeople[sender % mailPeople.length]!;
        void person.send({ to: parts.mailBot.address, subject: text, text });
        // A new thread's subject is part of what the agent reads.
        arrived = () => recorded<{ at: number }>("SELECT sent_at AS at FROM channel_outbox WHERE channel = 'email' AND status = 'sent' AND text LIKE ?", `Answer: Subject: ${text}\n%`)[0]?.at;
      } else {
        // Every other kind has its branch above: a kind without one would be measured on IRC.
        if (kind !== 'irc') throw new Error(`the bench has no way to send a ${kind} message`);
        const user = ircUsers[sender % ircUsers.length]!;
        user.say(`gwbench${process.pid % 1000}`, text);
        arrived = () => user.received.find((message) => message.text === answer)?.at;
      }
      return new Promise((resolve, reject) => {
        // Delta Chat's and encrypted Matrix's fast passes build a backlog on a busy host: their answers are waited for longer.
        const deadline = Date.now() + (kind === 'deltachat' || kind === 'matrix-e2e' ? 120_000 : 60_000);
        const look = () => {
          const at = arrived();
          if (at !== undefined) resolve(at - sent);
          else if (Date.now() > deadline) reject(new Error(`${kind}: no reply to ${text}`));
          else setTimeout(look, kind === 'email' ? 20 : 2);
        };
        look();
      });
    };
    // An encrypted Matrix person's first message makes the Olm sessions and room keys, and a Delta Chat person's is their
    // first after joining: one each, answered, before anything is measured.
    for (const kind of kinds.filter((kind) => kind === 'matrix-e2e' || kind === 'deltachat')) {
      await Promise.all(Array.from({ length: 4 }, (_, sender) => probe(kind, sender)));
    }
    for (const pass of [1, 100]) {
      const latencies = Object.fromEntries(KINDS.map((kind) => [kind, [] as number[]])) as Record<Kind, number[]>;
      const owns = {} as Record<Kind, number[]>;
      /** Delta Chat's fast pass is at 10 a second (see the header). */
      const rateOf = (kind: Kind) => (kind === 'deltachat' && pass === 100 ? 10 : pass);
      for (const kind of kinds) {
        const rate = rateOf(kind);
        // IRC servers pace a client's lines (about one a second after a short burst): at 100/s, fewer IRC messages keep the run short.
        const count = rate === 1 ? 15 : kind === 'irc' ? 40 : kind === 'email' ? 100 : kind === 'deltachat' ? 50 : 300;
        const before = lastOutbox();
        const pending: Promise<void>[] = [];
        const started = Date.now();
        for (let index = 0; index < count; index++) {
          const due = started + (index * 1000) / rate;
          const wait = due - Date.now();
          if (wait > 0) await sleep(wait);
          pending.push(probe(kind, index).then((latency) => { latencies[kind].push(latency); }));
        }
        await Promise.all(pending);
        owns[kind] = own(kind, before);
        step(`channels: ${kind} at ${rate}/s: ${latencies[kind].length} of ${count} answered, the gateway's own time of ${owns[kind].length} read from its records`);
      }
      // Telegram, Slack and IRC date a message by the platform's clock (to the second, or the server's), so the
      // gateway's own share is measured where it dates arrival itself: XMPP, email and Matrix (the homeserver's dates). Elsewhere the time from the
      // person's message to the answer reaching them stands for it (the stand-ins and ngircd add next to nothing). Signal's
      // messages are dated by the sender's clock, here the stand-in's own, so its share is measured too; Delta Chat's by
      // the sender's to the second, so its share is from the message taken from the engine to the reply handed to it.
      const irc = `IRC ${ms(percentile(latencies.irc, 50))} / ${ms(percentile(latencies.irc, 99))} ms sent to answer received`;
      for (const kind of kinds) {
        const rate = rateOf(kind);
        const endToEnd = `${ms(percentile(latencies[kind], 50))} / ${ms(percentile(latencies[kind], 99))} ms`;
        const ownTime = `${ms(percentile(owns[kind], 50))} / ${ms(percentile(owns[kind], 99))} ms`;
        figures.push(kind === 'email'
          ? { name: `email: the gateway's own time, mail read to reply sent, at ${rate}/s, p50 / p99`, value: ownTime, baseline: irc, comparison: `mail sent to reply sent ${endToEnd} (postfix and dovecot included)`, target: '', ok: true }
          : {
            name: kind === 'deltachat'
              ? `deltachat: sent to answer received (engine to engine, through postfix and dovecot), at ${rate}/s${rate !== pass ? ` (not ${pass}/s: real engines over mail)` : ''}, p50 / p99`
              : `${label(kind)}: sent to answer received, at ${rate}/s, p50 / p99`,
            value: endToEnd, baseline: kind === 'irc' ? '(the baseline)' : rate !== pass ? irc.replace('IRC', `IRC at ${pass}/s`) : irc,
            comparison: kind === 'deltachat'
              ? `the gateway's own time, message taken from the engine to reply handed to it: ${ownTime}`
              : ['xmpp', 'matrix', 'matrix-e2e', 'signal'].includes(kind) ? `the gateway's own time, message in to reply out: ${ownTime}` : `${(percentile(latencies[kind], 50) / Math.max(1, percentile(latencies.irc, 50))).toFixed(2)}x IRC p50`, target: '', ok: true,
          });
      }
    }
  } finally {
    latencyDaemon?.stop();
    ircUsers.forEach((user) => user.quit());
    await Promise.all(xmppUsers.map((user) => user.quit()));
    await Promise.all([...matrixPeople, ...e2ePeople].map(({ person }) => person.quit()));
    await dcPeople?.stop();
    await Promise.all([parts.telegram.stop(), parts.slack.stop(), parts.discord.stop(), parts.ircd.stop(), parts.upstream.stop(), parts.prosody.stop(), parts.mail.stop(), parts.hs.stop(), parts.whatsapp.stop(), parts.signal.stop()]);
  }
  return figures;
}

/**
 * A soak: one daemon with Telegram, Slack and Discord connected and steady
 * traffic on all three (each channel a message a second, each answered),
 * RSS sampled every 20 s. The slope is fitted over the samples after the
 * first fifth (warm-up), as a share of their mean per hour; target: flat
 * within 5 %/h.
 */
export async function runChannelSoak(minutes: number): Promise<Figure[]> {
  const parts = await startParts(3);
  const tg = { id: 6_100_001, first_name: 'Soak' };
  const slackUser = { user: parts.slack.user('U0SOAK1', 'Soak'), dm: 'D0SOAK1' };
  const discordUser = { id: nextId(), username: 'soak' };
  const discordDm = parts.discord.dmOf(discordUser);
  const senders = { ...noSenders(), telegram: [String(tg.id)], slack: [slackUser.user], discord: [discordUser.id] };
  const daemon = await startDaemon(parts, ['telegram', 'slack', 'discord'], senders);
  const samples: { at: number; mb: number }[] = [];
  let sent = 0;
  try {
    const started = Date.now();
    const end = started + minutes * 60_000;
    let nextSample = started;
    while (Date.now() < end) {
      const text = `soak ${++sent}`;
      parts.telegram.message(TG_TOKEN, { chat: { id: tg.id, type: 'private' }, from: tg, text });
      parts.slack.message({ user: slackUser.user, channel: slackUser.dm, text });
      parts.discord.message({ author: discordUser, channel: discordDm, content: text });
      if (Date.now() >= nextSample) {
        samples.push({ at: (Date.now() - started) / 3_600_000, mb: rssKiB(daemon.pid) / 1024 });
        nextSample += 20_000;
      }
      await sleep(1000);
    }
    await sleep(3000);
    const answered = parts.telegram.sent(tg.id).length + parts.slack.posted(slackUser.dm).length + parts.discord.sent(discordDm).length;
    const steady = samples.slice(Math.floor(samples.length / 5));
    const meanX = steady.reduce((sum, point) => sum + point.at, 0) / steady.length;
    const meanY = steady.reduce((sum, point) => sum + point.mb, 0) / steady.length;
    const slope = steady.reduce((sum, point) => sum + (point.at - meanX) * (point.mb - meanY), 0) / steady.reduce((sum, point) => sum + (point.at - meanX) ** 2, 0);
    const perHour = (slope / meanY) * 100;
    return [{
      name: `RSS slope over a ${minutes}-minute soak, all three at 1 message/s each`, value: `${perHour >= 0 ? '+' : ''}${perHour.toFixed(1)} %/h`,
      baseline: `${meanY.toFixed(1)} MB mean, ${Math.min(...steady.map((p) => p.mb)).toFixed(1)}-${Math.max(...steady.map((p) => p.mb)).toFixed(1)} MB; ${answered}/${sent * 3} answered`,
      comparison: '', target: 'within 5 %/h', ok: Math.abs(perHour) <= 5,
    }];
  } finally {
    daemon.stop();
    await Promise.all([parts.telegram.stop(), parts.slack.stop(), parts.discord.stop(), parts.ircd.stop(), parts.upstream.stop(), parts.prosody.stop(), parts.mail.stop(), parts.hs.stop(), parts.whatsapp.stop(), parts.signal.stop()]);
  }
}
