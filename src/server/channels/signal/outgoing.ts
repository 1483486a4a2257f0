/**
 * What a Signal account sends besides text, as signal-cli's JSON-RPC takes
 * it: a reaction (sendReaction, naming the message by its author and
 * timestamp, as InboundMessage.reference keeps them), and a file (send with
 * the file as a data: URI among its attachments).
 */
import type { OutboundFile } from '../../kernel/channel.ts';

/** Signal takes attachments of up to 100 MB. */
export const SIGNAL_FILE_LIMIT = 100 * 1024 * 1024;

/** A message's reference is \"<author>:<timestamp>\". */
export function reactionParams(reference: string, emoji: string): Record<string, unknown> {
  const split = reference.lastIndexOf(':');
  return { emoji, targetAuthor: reference.slice(0, split), targetTimestamp: Number(reference.slice(split + 1)) };
}

export function attachmentParams(file: OutboundFile): Record<string, unknown> {
  const name = file.name.replace(/[;,]/g, '_');
  return { attachments: [`data:${file.mimeType};filename=${name};base64,${Buffer.from(file.data).toString('base64')}`] };
}
