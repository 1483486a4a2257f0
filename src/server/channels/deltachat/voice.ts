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
import { chatFor } from './files.ts';

/** Sends a voice note (its file written in the engine's folder for the engine to take); the message's id. */
export async function sendVoiceNote(engine: Engine, accountId: number, folder: string, to: string, voice: OutboundVoice): Promise<number> {
  try {
    const chatId = await chatFor(engine, accountId, to);
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
