/**
 * Files out on Delta Chat: the bytes (the outbox's own copy of a workspace
 * file) written into a folder of the account's engine, handed to the engine
 * as a message (send_msg, an image as Image, anything else as File, the
 * caption as its text), which copies them into its blob folder and sends
 * them end-to-end encrypted as every message; the copy written for it is
 * removed once it has taken the message. The engine reads only its own
 * folder: never a path of the workspace.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { T } from '@deltachat/jsonrpc-client';
import { ChannelSendError, type OutboundFile } from '../../kernel/channel.ts';
import { EngineError, type Engine } from './engine.ts';
import { contactOf } from './messages.ts';
import { deltachatPeerProblem, peerParts } from './peers.ts';

/** The chat a peer name stands for: a group the account is in, or the person's 1:1 chat (they wrote first, so their key is known). */
export async function chatFor(engine: Engine, accountId: number, to: string): Promise<number> {
  const parts = peerParts(to);
  if (!parts) throw new ChannelSendError(`${to} ${deltachatPeerProblem(to)}`, { permanent: true });
  if ('group' in parts) {
    const chat = await engine.call<T.BasicChat>('get_basic_chat_info', [accountId, parts.group]).catch(() => undefined);
    if (chat?.chatType !== 'Group') throw new ChannelSendError(`the account is in no group ${to}`, { permanent: true });
    if (chat.isContactRequest) await engine.call('accept_chat', [accountId, chat.id]);
    return chat.id;
  }
  const contact = await contactOf({ engine, accountId }, parts.address, parts.contact);
  if (contact === undefined) throw new ChannelSendError(`the account has no key for ${to}: they write to it first, through its invite link (gateway channels status shows it)`, { permanent: true });
  return engine.call<number>('create_chat_by_contact_id', [accountId, contact]);
}

/** Sends a file with its caption into a chat; the engine's id of the message. `folder` is the account's engine folder. */
export async function sendFileMessage(engine: Engine, accountId: number, chatId: number, folder: string, file: OutboundFile, caption: string): Promise<number> {
  const outgoing = join(folder, 'outgoing');
  await mkdir(outgoing, { recursive: true, mode: 0o700 });
  // A name of its own (two files of one name at once never meet) with the file's extension, which the engine reads its type
  // from; the engine shows the file's own name (filename).
  const path = join(outgoing, `${randomUUID()}${/\.[A-Za-z0-9]{1,10}$/.exec(file.name)?.[0] ?? ''}`);
  await writeFile(path, file.data, { mode: 0o600 });
  try {
    const data: T.MessageData = {
      text: caption.trim() ? caption : null, html: null, viewtype: file.mimeType.startsWith('image/') ? 'Image' : 'File', file: path, filename: file.name,
      location: null, overrideSenderName: null, quotedMessageId: null, quotedText: null,
    };
    return await engine.call<number>('send_msg', [accountId, chatId, data]);
  } finally {
    await rm(path, { force: true });
  }
}

/** What a failed send means: the engine refused (no key, not a member), for good; gone or slow, to be tried again. */
export function sendFailure(error: unknown, to: string): ChannelSendError {
  if (error instanceof ChannelSendError) return error;
  if (error instanceof EngineError) return new ChannelSendError(`Delta Chat refused the message to ${to}: ${error.message}`, { permanent: true });
  return new ChannelSendError(`Delta Chat did not take the message to ${to}: ${(error as Error).message}`);
}
