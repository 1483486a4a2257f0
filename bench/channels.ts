/**
 * The chat channels beside IRC, in one run, against the stand-ins the tests
 * use (Telegram's Bot API, Slack's Web API and Socket Mode, Discord's Gateway
 * and REST API, a Matrix homeserver's client-server API, Meta's WhatsApp Cloud
 * API and its signed webhooks, signal-cli's HTTP daemon), a real ngircd, a real Prosody (XMPP), and a real postfix and
 * dovecot (email), with a model upstream that answers at once:
 *
 * - what each channel adds to an idle daemon's resident memory, connected
 *   (daemons with none, with each alone, and with all three, alternating
 *   rounds; target: each <= 8 MB);
 * - the gateway's own latency from an inbound message arriving to its reply
 *   leaving (stored, run as a job, answered by the model at once, queued in the
 *   outbox, sent), p50 and p99, at 1 message a second and at 100 a second,
 *   each channel beside IRC.
 *
 * BENCH_CHANNELS=signal,whatsapp measures only those (beside IRC, the baseline),
 * for a host too busy for all of them at 100 messages a second.
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
import { Homeserver, MatrixPerson } from '../test/support/matrix-homeserver.ts';
import { Prosody, XMPP_DOMAIN, XmppUser, trust } from '../test/support/prosody.ts';
import { openaiText, ScriptedUpstream } from '../test/support/scripted-upstream.ts';
import { SignalCli } from '../test/support/signal-cli.ts';
import { SlackApi } from '../test/support/slack-api.ts';
import { TelegramApi } from '../test/support/telegram-api.ts';
import { WhatsAppApi } from '../test/support/whatsapp-api.ts';
import { freePort, median, ms, rssKiB, sleep, step, type Figure } from './support.ts';

const BIN = new URL('../bin/run.js', import.meta.url).pathname;
const TG_TOKEN = '7001234567:AAH-bench-token';
/** The numbers signal-cli has (one daemon serving both, as started without -a). */
const SIGNAL_BOTS = ['+15550000001', '+15550000002'];

type Kind = 'telegram' | 'slack' | 'discord' | 'irc' | 'xmpp' | 'email' | 'matrix' | 'whatsapp' | 'signal';
const ALL_KINDS: Kind[] = ['irc', 'telegram', 'slack', 'discord', 'xmpp', 'email', 'matrix', 'whatsapp', 'signal'];
/** BENCH_CHANNELS=whatsapp,telegram measures only those beside IRC (by default, every channel). */
const CHOSEN = (process.env.BENCH_CHANNELS ?? '').split(',').map((name) => name.trim()).filter(Boolean);
const KINDS: Kind[] = ALL_KINDS.filter((kind) => kind === 'irc' || CHOSEN.length === 0 || CHOSEN.includes(kind));
/** The second business number of the WhatsApp stand-in's app. */
const WA_SECOND_NUMBER = '106540352249999';
const XMPP_BOT = 'gwbench';

interface Parts {
  telegram: TelegramApi; slack: SlackApi; discord: DiscordApi; ircd: IrcServer; upstream: ScriptedUpstream;
  prosody: Prosody; mail: MailServers; mailBot: MailPerson; hs: Homeserver; matrixBot: { userId: string; token: string }; whatsapp: WhatsAppApi; signal: SignalCli;
  /** A second account of the bot's for XMPP, email and Matrix: what one more idle account adds. */
  mailBot2: MailPerson; matrixBot2: { userId: string; token: string };
  /** The XMPP and mail servers' certificates, for the daemon to trust. */
  certificates: string;
}

/** A daemon of its own home with the channels asked for (those in `twice` with a second account), connected. */
async function startDaemon(parts: Parts, kinds: Kind[], senders: Record<Kind, string[]>, twice: Kind[] = []): Promise<{ pid: number; stop: () => void; home: string }> {
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
  if (kinds.includes('matrix')) {
    set('channels.matrix', { ...policy('matrix'), homeserver: parts.hs.url });
    gateway(['secrets', 'set', 'channels.matrix.accessToken'], parts.matrixBot.token);
    if (twice.includes('matrix')) {
      set('channels.matrix.accounts.two', {});
      gateway(['secrets', 'set', 'channels.matrix.accounts.two.accessToken'], parts.matrixBot2.token);
    }
  }
  gateway(['start']);
  const pid = JSON.parse(readFileSync(join(home, 'profiles/default/daemon.json'), 'utf8')).pid as number;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = JSON.parse(gateway(['channels', 'status', '--json'])).channels as { channel: string; state: string }[];
    if (kinds.every((kind) => status.some((entry) => entry.channel === kind) && status.every((entry) => entry.channel !== kind || entry.state === 'connected'))) break;
    if (Date.now() > deadline) throw new Error(`channels did not connect: ${JSON.stringify(status)}`);
    await sleep(200);
  }
  return {
    pid, home,
    stop: () => {
      spawnSync(process.execPath, [BIN, 'stop'], { env });
      rmSync(home, { recursive: true, force: true });
    },
  };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
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
    prosody, mail, mailBot: new MailPerson(mail, 'gwbench', 'bench-bot-password'), certificates, hs, matrixBot: hs.register('gwbench'),
    mailBot2: new MailPerson(mail, 'gwbench2', 'bench-bot-password'), matrixBot2: hs.register('gwbench2'),
    whatsapp: await new WhatsAppApi().start(),
  };
  parts.whatsapp.numbers.set(WA_SECOND_NUMBER, '+1 555-010-0200');
  parts.telegram.addBot(TG_TOKEN, 'gw_bench_bot');
  parts.upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`, undefined, { pieces });
  return parts;
}

export async function runChannelBench(rounds: number): Promise<Figure[]> {
  const parts = await startParts(1);
  const figures: Figure[] = [];
  const senders: Record<Kind, string[]> = { telegram: [], slack: [], discord: [], irc: [], xmpp: [], email: [], matrix: [], whatsapp: [], signal: [] };
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
    return { person, room: await person.directChat(parts.matrixBot.userId) };
  }));
  senders.matrix = matrixPeople.map(({ person }) => person.userId);
  const waPeople = Array.from({ length: SENDERS }, (_, index) => `4915200${String(index).padStart(6, '0')}`);
  senders.whatsapp = waPeople;
  const signalPeople = Array.from({ length: 4 }, (_, index) => parts.signal.person(`person${index}`));
  senders.signal = signalPeople.map((person) => person.number!);

  try {
    step('channels: resident memory of an idle daemon, by channel');
    const alone = KINDS.filter((kind) => kind !== 'irc');
    const second = alone.filter((kind) => ['xmpp', 'email', 'matrix', 'whatsapp', 'signal'].includes(kind));
    const measured = (...kinds: Kind[]) => kinds.every((kind) => KINDS.includes(kind));
    const rss: Record<string, number[]> = { none: [], all: [], tls: [], ...Object.fromEntries([...alone, ...second.map((kind) => `${kind}2`)].map((kind) => [kind, []])) };
    for (let round = 0; round < rounds; round++) {
      const configs = [['none', []], ...alone.map((kind) => [kind, [kind]]), ...second.map((kind) => [`${kind}2`, [kind], [kind]]),
        ...(measured('telegram', 'slack', 'discord') ? [['all', ['telegram', 'slack', 'discord']]] : []), ...(measured('xmpp', 'email') ? [['tls', ['xmpp', 'email']]] : [])] as [string, Kind[], Kind[]?][];
      for (const [name, kinds, twice] of configs) {
        const daemon = await startDaemon(parts, kinds, senders, twice);
        // Long enough for the daemon's memory reducer to give back what connecting left (two idle checks 5 s apart).
        await sleep(16_000);
        rss[name]!.push(rssKiB(daemon.pid) / 1024);
        daemon.stop();
      }
    }
    const none = median(rss.none!);
    for (const kind of alone) {
      const added = median(rss[kind]!) - none;
      figures.push({ name: `idle daemon with ${kind} connected`, value: `${median(rss[kind]!).toFixed(1)} MB RSS`, baseline: `${none.toFixed(1)} MB with no channel`, comparison: `+${added.toFixed(1)} MB`, target: '<= +8 MB', ok: added <= 8 });
    }
    for (const kind of second) {
      const added = median(rss[`${kind}2`]!) - median(rss[kind]!);
      figures.push({ name: `a second idle ${kind} account`, value: `${median(rss[`${kind}2`]!).toFixed(1)} MB RSS`, baseline: `${median(rss[kind]!).toFixed(1)} MB with one`, comparison: `+${added.toFixed(1)} MB`, target: '<= +8 MB', ok: added <= 8 });
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
    const daemon = await startDaemon(parts, kinds, senders);
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
    const own = (kind: Kind, after: number) => recorded<{ ms: number }>(`SELECT o.sent_at - m.at AS ms FROM channel_outbox o JOIN session_messages m ON m.id = o.turn_id
      WHERE o.channel = ? AND o.status = 'sent' AND o.id > ?`, kind, after).map((row) => Number(row.ms));
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
        const user = ircUsers[sender % ircUsers.length]!;
        user.say(`gwbench${process.pid % 1000}`, text);
        arrived = () => user.received.find((message) => message.text === answer)?.at;
      }
      return new Promise((resolve, reject) => {
        const deadline = Date.now() + 60_000;
        const look = () => {
          const at = arrived();
          if (at !== undefined) resolve(at - sent);
          else if (Date.now() > deadline) reject(new Error(`${kind}: no reply to ${text}`));
          else setTimeout(look, kind === 'email' ? 20 : 2);
        };
        look();
      });
    };
    for (const rate of [1, 100]) {
      const latencies = Object.fromEntries(KINDS.map((kind) => [kind, [] as number[]])) as Record<Kind, number[]>;
      const owns = {} as Record<Kind, number[]>;
      for (const kind of kinds) {
        // IRC servers pace a client's lines (about one a second after a short burst): at 100/s, fewer IRC messages keep the run short.
        const count = rate === 1 ? 15 : kind === 'irc' ? 40 : kind === 'email' ? 100 : 300;
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
      }
      // Telegram, Slack and IRC date a message by the platform's clock (to the second, or the server's), so the
      // gateway's own share is measured where it dates arrival itself: XMPP, email and Matrix (the homeserver's dates). Elsewhere the time from the
      // person's message to the answer reaching them stands for it (the stand-ins and ngircd add next to nothing). Signal's
      // messages are dated by the sender's clock, here the stand-in's own, so its share is measured too.
      const irc = `IRC ${ms(percentile(latencies.irc, 50))} / ${ms(percentile(latencies.irc, 99))} ms sent to answer received`;
      for (const kind of kinds) {
        const endToEnd = `${ms(percentile(latencies[kind], 50))} / ${ms(percentile(latencies[kind], 99))} ms`;
        const ownTime = `${ms(percentile(owns[kind], 50))} / ${ms(percentile(owns[kind], 99))} ms`;
        figures.push(kind === 'email'
          ? { name: `email: the gateway's own time, mail read to reply sent, at ${rate}/s, p50 / p99`, value: ownTime, baseline: irc, comparison: `mail sent to reply sent ${endToEnd} (postfix and dovecot included)`, target: '', ok: true }
          : {
            name: `${kind}: sent to answer received, at ${rate}/s, p50 / p99`, value: endToEnd, baseline: kind === 'irc' ? '(the baseline)' : irc,
            comparison: kind === 'xmpp' || kind === 'matrix' || kind === 'signal' ? `the gateway's own time, message in to reply out: ${ownTime}` : `${(percentile(latencies[kind], 50) / Math.max(1, percentile(latencies.irc, 50))).toFixed(2)}x IRC p50`, target: '', ok: true,
          });
      }
    }
    daemon.stop();
  } finally {
    ircUsers.forEach((user) => user.quit());
    await Promise.all(xmppUsers.map((user) => user.quit()));
    await Promise.all(matrixPeople.map(({ person }) => person.quit()));
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
  const senders: Record<Kind, string[]> = { telegram: [String(tg.id)], slack: [slackUser.user], discord: [discordUser.id], irc: [], xmpp: [], email: [], matrix: [], whatsapp: [], signal: [] };
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
