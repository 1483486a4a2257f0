/**
 * A person on Delta Chat for the tests: a Delta Chat engine of their own (the
 * same deltachat-rpc-server the gateway runs), with a mailbox on the test
 * mail servers, driven as Delta Chat's apps drive it: they join the bot
 * through its invite link, write to it, make groups, and read what comes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, enginePath } from '../../src/server/channels/deltachat/engine.ts';
import { waitFor } from './cli.ts';
import type { MailServers } from './mail.ts';

interface Message {
  id: number; chatId: number; fromId: number; text: string; isInfo: boolean; fileName: string | null;
  /** Where the engine keeps the file that came (its blob folder), its type and kind, and whether it came end-to-end encrypted. */
  file: string | null; fileMime: string | null; viewType: string; showPadlock: boolean;
}

export class DeltaChatPerson {
  readonly address: string;
  private readonly engine: Engine;
  private readonly folder: string;
  private readonly id: number;
  /** The 1:1 chat with the bot, once joined. */
  chat = 0;
  private readonly events: { kind: string; [key: string]: unknown }[] = [];
  /** Told of each event of the engine's as it comes (the benchmark dates a reply's arrival by its IncomingMsg). */
  onEvent?: (event: { kind: string; [key: string]: unknown }) => void;

  private constructor(address: string, engine: Engine, folder: string, id: number) {
    this.address = address;
    this.engine = engine;
    this.folder = folder;
    this.id = id;
  }

  /** A person with a new mailbox, or (`mailbox`: an address a person has already) a second engine, with a key of its own, on that one. */
  static async start(servers: MailServers, name: string, mailbox?: string): Promise<DeltaChatPerson> {
    const password = `pw-of-${mailbox ? mailbox.split('@')[0] : name}`;
    const address = mailbox ?? servers.addUser(name, password);
    const folder = mkdtempSync(join(tmpdir(), 'deltachat-person-'));
    const engine = new Engine(enginePath(), folder, () => undefined);
    const id = await engine.call<number>('add_account');
    await engine.call('set_config', [id, 'displayname', name]);
    await engine.call('add_or_update_transport', [id, {
      addr: address, password, imapServer: '127.0.0.1', imapPort: servers.imapPort, imapSecurity: 'starttls', smtpServer: '127.0.0.1', smtpPort: servers.smtpPort, smtpSecurity: 'starttls',
      certificateChecks: 'acceptInvalidCertificates',
    }], 120_000);
    await engine.call('start_io', [id]);
    const person = new DeltaChatPerson(address, engine, folder, id);
    void person.pump();
    return person;
  }

  private async pump(): Promise<void> {
    for (;;) {
      try {
        const batch = await this.engine.call<{ event: { kind: string } }[]>('get_next_event_batch', [], 0);
        this.events.push(...batch.map((entry) => entry.event));
        if (this.onEvent) for (const entry of batch) this.onEvent(entry.event);
      } catch {
        return;
      }
    }
  }

  /** Joins the bot through its invite link, as scanning its QR code does; resolves once keys are exchanged both ways. */
  async join(invite: string): Promise<number> {
    const before = this.events.length;
    this.chat = await this.engine.call<number>('secure_join', [this.id, invite]);
    await waitFor(() => (this.events.slice(before).some((event) => event.kind === 'SecurejoinJoinerProgress' && event.progress === 1000) ? true : undefined), 60_000, `${this.address} to join the bot`);
    return this.chat;
  }

  /** Sends a text (with a file, or quoting a message) in a chat (by default the one with the bot); the message's id. */
  async say(text: string, options: { chat?: number; file?: { name: string; content: string | Buffer }; quote?: number } = {}): Promise<number> {
    let path: string | null = null;
    if (options.file) {
      path = join(this.folder, options.file.name);
      writeFileSync(path, options.file.content);
    }
    return this.engine.call<number>('misc_send_msg', [this.id, options.chat ?? this.chat, text, path, options.file?.name ?? null, null, options.quote ?? null]);
  }

  /** A group with the bot (and the others given, whose keys this person has). */
  async group(name: string, members: number[]): Promise<number> {
    const group = await this.engine.call<number>('create_group_chat', [this.id, name, false]);
    for (const contact of members) await this.engine.call('add_contact_to_chat', [this.id, group, contact]);
    return group;
  }

  /** The bot's contact id, as this person's engine knows it. */
  async botContact(): Promise<number> {
    const contacts = await this.engine.call<number[]>('get_chat_contacts', [this.id, this.chat]);
    return contacts.find((contact) => contact !== 1)!;
  }

  /** What others wrote in a chat (by default the one with the bot), oldest first. */
  async received(chat = this.chat): Promise<Message[]> {
    const ids = await this.engine.call<number[]>('get_message_ids', [this.id, chat, false, false]);
    const loaded = await this.engine.call<Record<string, { kind: string } & Message>>('get_messages', [this.id, ids]);
    return ids.map((id) => loaded[id]!).filter((message) => message.kind === 'message' && message.fromId !== 1 && !message.isInfo);
  }

  /** One message this person's engine holds, by its id. */
  message(id: number): Promise<Message> {
    return this.engine.call<Message>('get_message', [this.id, id]);
  }

  async texts(chat = this.chat): Promise<string[]> {
    return (await this.received(chat)).map((message) => message.text);
  }

  /** The first text after the `after`-th in a chat that matches. */
  waitFor(pattern: RegExp, options: { after?: number; chat?: number; timeoutMs?: number } = {}): Promise<string> {
    return waitFor(async () => (await this.texts(options.chat)).slice(options.after ?? 0).find((text) => pattern.test(text)), options.timeoutMs ?? 40_000, `a Delta Chat message to ${this.address} matching ${pattern}`);
  }

  /** Sends a voice message (viewtype Voice, as the apps record one) with this audio in the chat with the bot; the message's id. */
  async sendVoice(audio: Buffer, name = 'voice-message.aac'): Promise<number> {
    const path = join(this.folder, name);
    writeFileSync(path, audio);
    return this.engine.call<number>('send_msg', [this.id, this.chat, {
      text: null, html: null, viewtype: 'Voice', file: path, filename: name, location: null, overrideSenderName: null, quotedMessageId: null, quotedText: null,
    }]);
  }

  /** The messages with a file others sent in a chat (by default the one with the bot): their kind, the file's path in this person's engine, and its type. */
  async files(chat = this.chat): Promise<{ viewType: string; file: string; fileMime: string | null; fileName: string | null }[]> {
    const ids = await this.engine.call<number[]>('get_message_ids', [this.id, chat, false, false]);
    const loaded = await this.engine.call<Record<string, any>>('get_messages', [this.id, ids]);
    return ids.map((id) => loaded[id]).filter((message) => message?.kind === 'message' && message.fromId !== 1 && message.file)
      .map((message) => ({ viewType: message.viewType, file: message.file, fileMime: message.fileMime, fileName: message.fileName }));
  }

  async stop(): Promise<void> {
    await this.engine.stop();
    rmSync(this.folder, { recursive: true, force: true });
  }
}
