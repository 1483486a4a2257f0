/**
 * What agents and operators send besides text: a file from an agent's
 * workspace (read through the workspace's own containment, copied into the
 * outbox with its row, so a restart or a later edit of the workspace changes
 * nothing about what goes), and a reaction on a message a session recorded,
 * found by the id the session shows or the platform's own.
 */
import { sizeOf } from '../../shared/attachments.ts';
import type { Channel, OutboundFile } from '../kernel/channel.ts';
import { DomainError } from '../kernel/errors.ts';
import { cleanName, mediaTypeOf } from './attachments.ts';

/** The largest file kept in the outbox, whatever the platform takes. */
export const MAX_OUTBOUND_FILE_BYTES = 25 * 1024 * 1024;

/** An agent's workspace, as far as sending its files goes (src/server/toolbox/workspace.ts). */
export interface FileSource {
  bytes(path: string, maxBytes: number): Promise<{ path: string; data: Uint8Array }>;
}

/** The workspace of an agent (undefined: the default agent's), given by the module that keeps them. */
export type WorkspaceOf = (agent?: string) => FileSource;

/** Reads a workspace file to send on a channel: refused when the channel carries no files, or it is larger than the channel takes. */
export async function workspaceFile(channel: Channel, source: FileSource, path: string): Promise<OutboundFile> {
  if (!channel.sendFile) throw new DomainError('invalid', `Channel ${channel.id} cannot send files.`, { code: 'files_not_supported' });
  const limit = Math.min(channel.fileLimit ?? MAX_OUTBOUND_FILE_BYTES, MAX_OUTBOUND_FILE_BYTES);
  try {
    const read = await source.bytes(path, limit);
    const name = cleanName(read.path.split('/').pop(), 'file');
    return { name, mimeType: mediaTypeOf(read.data, name) ?? 'application/octet-stream', data: read.data };
  } catch (error) {
    if (error instanceof DomainError && error.kind === 'too_large') {
      throw new DomainError('too_large', `${path} is too large to send on ${channel.id}: it takes files up to ${sizeOf(limit)}.`, { code: 'file_too_large' });
    }
    throw error;
  }
}

/** An emoji to react with: one short symbol, no spaces or control characters. */
export function checkEmoji(emoji: string): void {
  if (typeof emoji !== 'string' || emoji.length === 0 || emoji.length > 32 || /[\s\u0000-\u001f\u007f]/.test(emoji)) {
    throw new DomainError('invalid', 'A reaction is one emoji (at most 32 characters, no spaces).');
  }
}

/** A recorded inbound message a reaction can point at: its platform reference and where its conversation's replies go. */
export interface ReactionTarget {
  sessionKey: string;
  reference: string;
  replyTo?: string;
}

/** Inbound messages of a channel account as the sessions keep them (SessionStore.inbound). */
type InboundLookup = (by: { id: number } | { containing: string }) => Promise<{ sessionKey: string; peer: string; data: Record<string, unknown> }[]>;

/**
 * The inbound message `messageId` names in the conversation `to` (its
 * sessions, threads included): the id the session shows (sessions.history,
 * gateway sessions show), else the platform's id or reference kept with it.
 * Not found there: a clear not_found.
 */
export async function reactionTarget(lookup: InboundLookup, input: { channel: string; to: string; peer: string; messageId: string }): Promise<ReactionTarget> {
  const { channel, to, peer, messageId } = input;
  const target = (row: { sessionKey: string; peer: string; data: Record<string, unknown> }): ReactionTarget | undefined => {
    const replyTo = typeof row.data.replyTo === 'string' ? row.data.replyTo : undefined;
    const here = row.peer === peer || row.peer.startsWith(`${peer}#`) || replyTo === to || replyTo?.startsWith(`${to}/`);
    if (!here || typeof row.data.reference !== 'string') return undefined;
    return { sessionKey: row.sessionKey, reference: row.data.reference, ...(replyTo ? { replyTo } : {}) };
  };
  if (/^\d{1,15}$/.test(messageId)) {
    const found = (await lookup({ id: Number(messageId) })).map(target).find(Boolean);
    if (found) return found;
  }
  for (const row of await lookup({ containing: JSON.stringify(messageId) })) {
    if (row.data.platformId !== messageId && row.data.reference !== messageId) continue;
    const found = target(row);
    if (found) return found;
  }
  throw new DomainError('not_found', `No message ${messageId} from ${to} on ${channel} to react to (give the id sessions.history shows, or the platform's).`);
}
