/**
 * A voice note out on Delta Chat: the answer's audio (AAC, as Delta Chat's
 * apps record theirs) sent as a message of viewtype Voice into the chat the
 * answer went to. The engine copies the file into its blob folder; the copy
 * the gateway wrote for it is removed at once.
 */
import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { T } from '@deltachat/jsonrpc-client';
import { ChannelSendError, type OutboundVoice } from '../../kernel/channel.ts';
import { EngineError, type Engine } from './engine.ts';
import { contactOf } from './messages.ts';
import { deltachatPeerProblem, peerParts } from './peers.ts';

/** The chat a peer names: a group the account is in, or the 1:1 chat with a person whose key it has. */
async function chatOf(engine: Engine, accountId: number, to: string): Promise<number> {
  const parts = peerParts(to);
  if (!parts) throw new ChannelSendError(`${to} ${deltachatPeerProblem(to)}`, { permanent: true });
  if ('group' in parts) {
    const chat = await engine.call<T.BasicChat>('get_basic_chat_info', [accountId, parts.group]).catch(() => undefined);
    if (chat?.chatType !== 'Group') throw new ChannelSendError(`the account is in no group ${to}`, { permanent: true });
    return chat.id;
  }
  const contact = await contactOf({ engine, accountId }, parts.address, parts.contact);
  if (contact === undefined) throw new ChannelSendError(`the account has no key for ${to}: they write to it first, through its invite link (gateway channels status shows it)`, { permanent: true });
  return engine.call<number>('create_chat_by_contact_id', [accountId, contact]);
}

/** Sends a voice note (its file written in the engine's folder for the engine to take); the message's id. */
export async function sendVoiceNote(engine: Engine, accountId: number, folder: string, to: string, voice: OutboundVoice): Promise<number> {
  try {
    const chatId = await chatOf(engine, accountId, to);
    const path = join(folder, `outgoing-voice-${randomBytes(8).toString('hex')}.${voice.name.split('.').pop() ?? 'aac'}`);
    await writeFile(path, voice.data, { mode: 0o600 });
    try {
      return await engine.call<number>('send_msg', [accountId, chatId, {
        text: null, html: null, viewtype: 'Voice', file: path, filename: voice.name, location: null, overrideSenderName: null, quotedMessageId: null, quotedText: null,
      } satisfies T.MessageData]);
    } finally {
      await rm(path, { force: true });
    }
  } catch (error) {
    if (error instanceof ChannelSendError) throw error;
    // The engine refused (no key, not a member): trying again cannot help. Gone or slow: it can.
    if (error instanceof EngineError) throw new ChannelSendError(`Delta Chat refused the voice note to ${to}: ${error.message}`, { permanent: true });
    throw new ChannelSendError(`Delta Chat did not take the voice note to ${to}: ${(error as Error).message}`);
  }
}
