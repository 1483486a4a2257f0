/**
 * Images and files people send with their messages. Those an agent is to read
 * (an approved sender's, a room's message addressed to it) are fetched from
 * the platform before the message is stored, and kept in the profile's
 * database beside it, up to the channel's `maxAttachmentBytes` each; one that
 * is larger, or cannot be fetched, is still named in the session, with why it
 * was not kept. A daemon sharing a PostgreSQL store with others finds them
 * there whichever daemon answers.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { describeAttachment, sizeOf as kib } from '../../shared/attachments.ts';
import type { AttachmentView } from '../../shared/protocol/results.ts';
import type { InboundAttachment } from '../kernel/channel.ts';
import type { Db, Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';
import { describeNetworkError } from './network-errors.ts';

export const ATTACHMENT_MIGRATIONS: readonly Migration[] = [{
  version: 4,
  name: 'images and files sent with messages',
  sql: `
    CREATE TABLE channel_attachments (
      id TEXT PRIMARY KEY,
      channel TEXT NOT NULL,
      account TEXT NOT NULL,
      session_key TEXT NOT NULL,
      name TEXT NOT NULL,
      mime_type TEXT,
      size BIGINT NOT NULL,
      data BLOB NOT NULL,
      created_at BIGINT NOT NULL
    );
    CREATE INDEX channel_attachments_session ON channel_attachments (session_key);
  `,
}];

/** Files fetched from a platform in one message, at most. */
export { describeAttachment };

export const MAX_ATTACHMENTS_PER_MESSAGE = 10;
/** Longest a fetch of one file may take. */
const FETCH_TIMEOUT_MS = 30_000;

/** An attachment fetched (or not) and waiting to be stored with its message. */
export interface Fetched {
  view: AttachmentView;
  data?: Uint8Array;
}

const MEDIA_BY_EXTENSION: Record<string, string> = {
  jpg: 'image/jpeg', jpeg: 'image/jpeg', png: 'image/png', gif: 'image/gif', webp: 'image/webp',
  pdf: 'application/pdf', txt: 'text/plain', md: 'text/markdown', csv: 'text/csv', json: 'application/json',
  ogg: 'audio/ogg', oga: 'audio/ogg', opus: 'audio/ogg', mp3: 'audio/mpeg', m4a: 'audio/mp4', wav: 'audio/wav', flac: 'audio/flac', aac: 'audio/aac', amr: 'audio/amr', weba: 'audio/webm',
};

/** The audio formats a file's first bytes show (a voice note sent without a media type). */
function audioOf(data: Uint8Array): string | undefined {
  const head = String.fromCharCode(...data.subarray(0, 12));
  if (head.startsWith('OggS')) return 'audio/ogg';
  if (head.startsWith('ID3') || (data[0] === 0xff && ((data[1] ?? 0) & 0xe0) === 0xe0)) return 'audio/mpeg';
  if (head.startsWith('RIFF') && head.slice(8, 12) === 'WAVE') return 'audio/wav';
  if (head.startsWith('fLaC')) return 'audio/flac';
  if (head.startsWith('#!AMR')) return 'audio/amr';
  return undefined;
}

/** The media type a file's bytes show (the common image formats), else its name's, else the platform's word. */
export function mediaTypeOf(data: Uint8Array | undefined, name: string, said?: string): string | undefined {
  if (data && data.length >= 12) {
    if (data[0] === 0xff && data[1] === 0xd8 && data[2] === 0xff) return 'image/jpeg';
    if (data[0] === 0x89 && data[1] === 0x50 && data[2] === 0x4e && data[3] === 0x47) return 'image/png';
    if (data[0] === 0x47 && data[1] === 0x49 && data[2] === 0x46) return 'image/gif';
    if (String.fromCharCode(...data.subarray(0, 4)) === 'RIFF' && String.fromCharCode(...data.subarray(8, 12)) === 'WEBP') return 'image/webp';
  }
  const cleanSaid = said?.split(';')[0]?.trim().toLowerCase();
  // An image type the bytes do not bear out is not trusted: the model would be handed something else.
  if (cleanSaid && !(data && cleanSaid.startsWith('image/'))) return cleanSaid;
  const extension = /\.([a-z0-9]{1,5})$/i.exec(name)?.[1]?.toLowerCase();
  const byName = extension ? MEDIA_BY_EXTENSION[extension] : undefined;
  if (byName && !(data && byName.startsWith('image/'))) return byName;
  return data ? audioOf(data) ?? 'application/octet-stream' : cleanSaid ?? byName;
}

/** A file name safe to show and store: no folders, no control characters, not too long. */
export function cleanName(name: string | undefined, fallback: string): string {
  const base = (name ?? '').split(/[\\/]/).pop()!.replace(/[\u0000-\u001f\u007f]/g, '').trim();
  return (base || fallback).slice(0, 200);
}

export class Attachments {
  private readonly store: Store;
  private readonly logger: Logger;

  constructor(store: Store, logger: Logger) {
    this.store = store;
    this.logger = logger;
  }

  /**
   * Fetches what a message brought, each up to `maxBytes` (0: none is kept).
   * Never fails: one that is too large, or that the platform would not hand
   * over, is described with the reason instead.
   */
  async fetch(attachments: readonly InboundAttachment[], maxBytes: number, log: Logger = this.logger): Promise<Fetched[]> {
    const fetched: Fetched[] = [];
    for (const [index, attachment] of attachments.entries()) {
      const name = cleanName(attachment.name, `file-${index + 1}`);
      const base = {
        id: `att_${randomBytes(9).toString('base64url')}`, name, ...(attachment.size !== undefined ? { size: attachment.size } : {}), ...(attachment.voice ? { voice: true } : {}),
      };
      const said = attachment.mimeType;
      if (index >= MAX_ATTACHMENTS_PER_MESSAGE) {
        fetched.push({ view: { ...base, mimeType: mediaTypeOf(undefined, name, said), kept: false, note: `not kept: more than ${MAX_ATTACHMENTS_PER_MESSAGE} files in one message` } });
        continue;
      }
      if (maxBytes === 0 || (attachment.size !== undefined && attachment.size > maxBytes)) {
        const note = maxBytes === 0 ? 'not kept: this channel keeps no files (maxAttachmentBytes is 0)' : `not kept: larger than this channel's limit of ${kib(maxBytes)}`;
        fetched.push({ view: { ...base, mimeType: mediaTypeOf(undefined, name, said), kept: false, note } });
        continue;
      }
      try {
        const data = await attachment.fetch(maxBytes, AbortSignal.timeout(FETCH_TIMEOUT_MS));
        if (data.length > maxBytes) throw new TooLarge(maxBytes);
        fetched.push({ view: { ...base, size: data.length, mimeType: mediaTypeOf(data, name, said), kept: true }, data });
      } catch (error) {
        const reason = describeNetworkError(error);
        const note = error instanceof TooLarge ? `not kept: larger than this channel's limit of ${kib(maxBytes)}` : `not kept: it could not be fetched (${reason})`;
        log.warn({ file: name, error: reason }, 'attachment not kept');
        fetched.push({ view: { ...base, mimeType: mediaTypeOf(undefined, name, said), kept: false, note } });
      }
    }
    return fetched;
  }

  /** Stores the kept ones with their message's session (in its transaction). */
  async save(channel: string, account: string, sessionKey: string, fetched: readonly Fetched[], db: Db, at = Date.now()): Promise<void> {
    for (const { view, data } of fetched) {
      if (!data) continue;
      await db.run(
        'INSERT INTO channel_attachments (id, channel, account, session_key, name, mime_type, size, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
        view.id, channel, account, sessionKey, view.name, view.mimeType ?? null, data.length, data, at,
      );
    }
  }

  /** The bytes of kept attachments of a session, by id (those of other sessions are never given). */
  async load(sessionKey: string, ids: readonly string[]): Promise<Map<string, { name: string; mimeType?: string; data: Uint8Array }>> {
    const found = new Map<string, { name: string; mimeType?: string; data: Uint8Array }>();
    for (const id of ids) {
      const row = await this.store.get('SELECT id, name, mime_type, data FROM channel_attachments WHERE id = ? AND session_key = ?', id, sessionKey) as Record<string, unknown> | undefined;
      if (!row) continue;
      const data = row.data instanceof Uint8Array ? row.data : new Uint8Array(row.data as ArrayBuffer);
      found.set(id, { name: String(row.name), ...(row.mime_type ? { mimeType: String(row.mime_type) } : {}), data });
    }
    return found;
  }
}

/** More bytes than the limit: the fetch stopped there. */
export class TooLarge extends Error {
  constructor(limit: number) {
    super(`larger than ${kib(limit)}`);
    this.name = 'TooLarge';
  }
}

/**
 * Reads a node:http answer's body whole, up to `maxBytes` (TooLarge past it, announced or read, the connection then
 * closed); a connection that closes before the body's end is an error (`closedEarly` says so).
 */
export function readIncoming(response: IncomingMessage, maxBytes: number, closedEarly = 'the connection closed before the answer ended'): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const announced = Number(response.headers['content-length']);
    if (Number.isFinite(announced) && announced > maxBytes) {
      response.destroy();
      reject(new TooLarge(maxBytes));
      return;
    }
    const chunks: Buffer[] = [];
    let total = 0;
    response.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > maxBytes) {
        response.destroy();
        reject(new TooLarge(maxBytes));
        return;
      }
      chunks.push(chunk);
    });
    response.on('end', () => resolve(Buffer.concat(chunks, total)));
    response.on('error', reject);
    response.on('close', () => {
      if (!response.complete) reject(new Error(closedEarly));
    });
  });
}

/** Reads a response's body up to `maxBytes`, stopping (TooLarge) past it; a status other than 2xx is an error. */
export async function readLimited(response: Response, maxBytes: number): Promise<Uint8Array> {
  if (!response.ok) {
    await response.body?.cancel().catch(() => undefined);
    throw new Error(`the platform answered ${response.status}`);
  }
  const announced = Number(response.headers.get('content-length'));
  if (Number.isFinite(announced) && announced > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw new TooLarge(maxBytes);
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  if (!response.body) return new Uint8Array();
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw new TooLarge(maxBytes);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}
