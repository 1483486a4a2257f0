/**
 * A message the engine holds, as the gateway takes it: a person's direct
 * message, or a group's in a group the agent may answer in. Only what came
 * end-to-end encrypted from a key the engine knows is taken: a plain mail
 * (anyone can put any address in its From) is refused, as are Delta Chat's
 * own notes (a member added, a key changed) and what the account sent.
 */
import { open, realpath } from 'node:fs/promises';
import { sep } from 'node:path';
import type { T } from '@deltachat/jsonrpc-client';
import type { InboundAttachment, InboundMessage } from '../../kernel/channel.ts';
import { TooLarge } from '../attachments.ts';
import type { Engine } from './engine.ts';

/** The engine's contact ids up to this one are its own (the account itself, the device, info): never a person. */
const LAST_SPECIAL_CONTACT = 9;
/** The ui. keys of the engine's database (kept with its keys) where the first contact seen for an address is noted. */
const PIN_PREFIX = 'ui.gateway.peer.';

/** What becomes of one message: handed in (and marked seen), let go (with why), or waited for (its file is still on the way). */
export type Reading =
  | { message: InboundMessage }
  | { skip: string; refused?: boolean }
  | { wait: true };

export interface ReadContext {
  engine: Engine;
  accountId: number;
  /** The gateway's name of the account. */
  account: string;
  /** Groups answered in (`group:<id>`, or `*`). */
  rooms: readonly string[];
  /** The engine's data folder: files are read from within it only. */
  folder: string;
}

/**
 * The sender's name as the gateway knows them: their address for the first
 * key seen with it (noted in the engine's database), the address and the
 * contact id for any other key.
 */
export async function senderOf({ engine, accountId }: Pick<ReadContext, 'engine' | 'accountId'>, contact: T.Contact): Promise<string> {
  const address = contact.address.trim().toLowerCase();
  const key = `${PIN_PREFIX}${address}`;
  const pinned = await engine.call<string | null>('get_config', [accountId, key]);
  if (pinned === null || pinned === '') {
    await engine.call('set_config', [accountId, key, String(contact.id)]);
    return address;
  }
  return pinned === String(contact.id) ? address : `${address}#${contact.id}`;
}

/** The contact a person's peer name stands for: the one first seen with the address, or the one its #id names (when it has that address). */
export async function contactOf({ engine, accountId }: Pick<ReadContext, 'engine' | 'accountId'>, address: string, contact?: number): Promise<number | undefined> {
  if (contact === undefined) {
    const pinned = await engine.call<string | null>('get_config', [accountId, `${PIN_PREFIX}${address}`]);
    return pinned ? Number(pinned) : undefined;
  }
  const known = await engine.call<T.Contact>('get_contact', [accountId, contact]).catch(() => undefined);
  return known?.address.toLowerCase() === address ? contact : undefined;
}

/** Reads one message of the engine's into what the gateway takes. */
export async function readMessage(context: ReadContext, message: T.Message, waitedMs: number, maxWaitMs: number): Promise<Reading> {
  if (message.fromId <= LAST_SPECIAL_CONTACT) return { skip: message.fromId === 1 ? 'sent by the account' : 'a note of Delta Chat\'s' };
  if (message.isInfo) return { skip: 'a note of Delta Chat\'s' };
  // A large file comes after a short message announcing it: the message is taken once it is whole, or after a while without it.
  if ((message.downloadState === 'Available' || message.downloadState === 'InProgress') && waitedMs < maxWaitMs) return { wait: true };
  if (!message.sender.isKeyContact || !message.showPadlock) return { skip: 'not end-to-end encrypted (a plain mail\'s sender can be anyone)', refused: true };
  const chat = await context.engine.call<T.BasicChat>('get_basic_chat_info', [context.accountId, message.chatId]);
  if (!chat.isEncrypted) return { skip: 'in a chat that is not end-to-end encrypted', refused: true };
  const sender = await senderOf(context, message.sender);
  const senderName = message.overrideSenderName ?? message.sender.displayName ?? sender;
  const text = message.downloadState === 'Done' || !message.fileBytes
    ? message.text
    : `${message.text}${message.text ? '\n' : ''}[a file of ${message.fileBytes} bytes that did not arrive]`;
  const base = {
    account: context.account, sender, senderName, text, at: message.timestamp * 1000, platformId: String(message.id),
    ...(message.file && message.downloadState === 'Done' ? { attachments: [attachmentOf(message, context.folder)] } : {}),
  };
  if (chat.chatType === 'Single') return { message: { ...base, kind: 'direct', replyTo: sender } };
  if (chat.chatType !== 'Group') return { skip: `in a ${chat.chatType} chat` };
  const room = `group:${chat.id}`;
  if (!context.rooms.includes('*') && !context.rooms.includes(room)) return { skip: `in group ${room} (${chat.name}), which channels.<id>.rooms does not list` };
  const quotesAccount = message.quote?.kind === 'WithMessage'
    && (await context.engine.call<T.Message>('get_message', [context.accountId, message.quote.messageId]).catch(() => undefined))?.fromId === 1;
  return { message: { ...base, kind: 'group', room, replyTo: room, ...(quotesAccount ? { addressed: { text: base.text } } : {}) } };
}

/** A file that came with a message, read from the engine's folder (the engine wrote it there) up to the size asked. */
function attachmentOf(message: T.Message, folder: string): InboundAttachment {
  return {
    name: message.fileName ?? 'file', ...(message.fileMime ? { mimeType: message.fileMime } : {}), ...(message.fileBytes ? { size: message.fileBytes } : {}),
    // A voice message recorded in the app (an audio file sent is of viewtype Audio).
    ...(message.viewType === 'Voice' ? { voice: true } : {}),
    fetch: async (maxBytes) => {
      const path = await realpath(message.file!);
      if (!path.startsWith(`${await realpath(folder)}${sep}`)) throw new Error('the engine named a file outside its folder');
      const file = await open(path, 'r');
      try {
        const { size } = await file.stat();
        if (size > maxBytes) throw new TooLarge(maxBytes);
        const bytes = Buffer.alloc(size);
        await file.read(bytes, 0, size, 0);
        return bytes;
      } finally {
        await file.close();
      }
    },
  };
}
