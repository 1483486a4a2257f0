/**
 * Delta Chat in the channels benchmark: the bot's accounts are mailboxes on
 * the bench's postfix and dovecot, each run by a Delta Chat engine the
 * daemon starts (a process of its own), and the people are Delta Chat
 * engines of their own (test/support/deltachat.ts) who join the bot through
 * its invite link, as the e2e tests' people do: the bot has their keys, and
 * every message goes end-to-end encrypted both ways, through postfix,
 * dovecot and IMAP IDLE on each side.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { DeltaChatPerson } from '../test/support/deltachat.ts';
import type { MailServers } from '../test/support/mail.ts';
import { rssKiB } from './support.ts';

const PASSWORD = 'bench-bot-password';

/** The bot's mailboxes: one for the idle daemons, a second account's, and the one people write to. */
export interface DeltaChatBots { idle: string; idle2: string; latency: string }

export function deltachatBots(mail: MailServers): DeltaChatBots {
  return { idle: mail.addUser('gwdc', PASSWORD), idle2: mail.addUser('gwdc2', PASSWORD), latency: mail.addUser('gwdcl', PASSWORD) };
}

/** Sets up a daemon's Delta Chat account (and a second one, when asked) through its CLI. */
export function configureDeltaChat(options: {
  set: (key: string, value: unknown) => void; secret: (name: string, value: string) => void;
  mail: MailServers; address: string; second?: string; policy: Record<string, unknown>;
}): void {
  const { set, secret, mail } = options;
  set('channels.deltachat', {
    ...options.policy, address: options.address, imap: `imap://127.0.0.1:${mail.imapPort}`, smtp: `smtp://127.0.0.1:${mail.smtpPort}`,
    acceptInvalidCertificates: true, displayName: 'gwbench',
  });
  secret('channels.deltachat.password', PASSWORD);
  if (options.second) {
    set('channels.deltachat.accounts.two', { address: options.second });
    secret('channels.deltachat.accounts.two.password', PASSWORD);
  }
}

/** The resident memory of a process's children (a daemon's Delta Chat engines), in KiB. */
export function childrenRssKiB(pid: number): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) total += rssKiB(Number(entry)) || 0;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** The invite link a connected Delta Chat account shows in its status. */
export function inviteOf(status: { channel: string; detail?: string }[]): string {
  const invite = status.map((entry) => (entry.channel === 'deltachat' ? /https:\/\/i\.delta\.chat\/#\S+/.exec(entry.detail ?? '')?.[0] : undefined)).find(Boolean);
  if (!invite) throw new Error(`no Delta Chat invite link in ${JSON.stringify(status)}`);
  return invite;
}

/** People on Delta Chat engines of their own; each reply dated as their engine tells of it (its IncomingMsg event). */
export class DeltaChatPeople {
  readonly people: DeltaChatPerson[] = [];
  /** When each text came to a person, by the text. */
  private readonly arrivals = new Map<string, number>();

  /** Makes `count` people, one after another (each logs its engine in). */
  static async start(mail: MailServers, count: number): Promise<DeltaChatPeople> {
    const group = new DeltaChatPeople();
    try {
      for (let index = 0; index < count; index++) {
        const person = await DeltaChatPerson.start(mail, `dcperson${index}`);
        group.people.push(person);
        person.onEvent = (event) => {
          if (event.kind !== 'IncomingMsg') return;
          const at = Date.now();
          void person.message(Number(event.msgId)).then((message) => group.arrivals.set(message.text, at), () => undefined);
        };
      }
    } catch (error) {
      await group.stop();
      throw error;
    }
    return group;
  }

  get addresses(): string[] {
    return this.people.map((person) => person.address);
  }

  /** Each person joins the bot through its invite link (keys exchanged both ways). */
  async join(invite: string): Promise<void> {
    for (const person of this.people) await person.join(invite);
  }

  say(sender: number, text: string): void {
    void this.people[sender % this.people.length]!.say(text);
  }

  /** When a text came to its person, once it has. */
  arrived(text: string): number | undefined {
    return this.arrivals.get(text);
  }

  async stop(): Promise<void> {
    await Promise.all(this.people.splice(0).map((person) => person.stop()));
  }
}

/**
 * The gateway's own time for Delta Chat, from a message taken from the bot's engine (stored, noted by the engine's
 * message id) to its reply handed to the engine to send: the message's own date is the sender's, to the second.
 */
export const DELTACHAT_OWN_SQL = `SELECT o.sent_at - s.seen_at AS ms FROM channel_outbox o JOIN session_messages m ON m.id = o.turn_id
  JOIN channel_inbound_seen s ON s.channel = o.channel AND s.account = o.account AND s.platform_id = json_extract(m.data, '$.platformId')
  WHERE o.channel = 'deltachat' AND o.status = 'sent' AND o.id > ?`;
