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
import type { Db } from '../store/database.ts';
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

interface MessageRow {
  id: number | bigint;
  session_key: string;
  peer: string;
  data: string | null;
}

const dataOf = (row: MessageRow): Record<string, unknown> => {
  try {
    return row.data ? JSON.parse(String(row.data)) as Record<string, unknown> : {};
  } catch {
    return {};
  }
};

/**
 * The inbound message `messageId` names in the conversation `to` (its
 * sessions, threads included): the id the session shows (sessions.history,
 * gateway sessions show), else the platform's id or reference kept with it.
 * Not found there: a clear not_found.
 */
export async function reactionTarget(db: Db, input: { channel: string; account: string; to: string; peer: string; messageId: string }): Promise<ReactionTarget> {
  const { channel, account, to, peer, messageId } = input;
  const target = (row: MessageRow): ReactionTarget | undefined => {
    const data = dataOf(row);
    const replyTo = typeof data.replyTo === 'string' ? data.replyTo : undefined;
    const here = row.peer === peer || row.peer.startsWith(`${peer}#`) || replyTo === to || replyTo?.startsWith(`${to}/`);
    if (!here || typeof data.reference !== 'string') return undefined;
    return { sessionKey: String(row.session_key), reference: data.reference, ...(replyTo ? { replyTo } : {}) };
  };
  const select = `SELECT m.id, m.session_key, s.peer, m.data FROM session_messages m JOIN sessions s ON s.key = m.session_key
    WHERE s.channel = ? AND s.account = ? AND m.direction = 'in'`;
  if (/^\d{1,15}$/.test(messageId)) {
    const row = await db.get<MessageRow>(`${select} AND m.id = ?`, channel, account, Number(messageId));
    const found = row ? target(row) : undefined;
    if (found) return found;
  }
  const like = `%${JSON.stringify(messageId).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const rows = await db.all<MessageRow>(`${select} AND m.data LIKE ? ESCAPE '\\' ORDER BY m.id DESC LIMIT 100`, channel, account, like);
  for (const row of rows) {
    const data = dataOf(row);
    if (data.platformId !== messageId && data.reference !== messageId) continue;
    const found = target(row);
    if (found) return found;
  }
  throw new DomainError('not_found', `No message ${messageId} from ${to} on ${channel} to react to (give the id sessions.history shows, or the platform's).`);
}
