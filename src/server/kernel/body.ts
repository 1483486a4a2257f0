/** Reading request bodies: raw bytes up to a limit, and JSON within bounds. */
import type { IncomingMessage } from 'node:http';
import { JsonTooDeep, MAX_JSON_DEPTH, parseJsonWithin } from '../../shared/json.ts';
import { DomainError } from './errors.ts';

/** The media type of a Content-Type header, lower-cased, without parameters. */
export const mediaType = (header: string | string[] | undefined): string => (Array.isArray(header) ? header[0] ?? '' : header ?? '').split(';')[0]!.trim().toLowerCase();

/**
 * Past the limit, a body is still read and discarded up to this size, so the
 * client finishes sending and reads the 413 instead of a reset connection;
 * a larger one is cut off by closing the connection.
 */
const DRAIN_LIMIT = 64 * 1024 * 1024;

/**
 * Reads a request body as raw bytes up to a limit: 413 past it, announced or
 * streamed. The raw bytes matter: signatures are computed over them, never
 * over re-serialised JSON. `onAbandon` is told when the connection must close.
 */
export function collectBody(req: IncomingMessage, limit: number, onAbandon: () => void): Promise<Buffer> {
  // Made only when needed: an error captures a stack, which costs more than reading a small body.
  const tooLarge = () => new DomainError('too_large', `The body is larger than ${limit} bytes.`);
  const announced = Number(req.headers['content-length']);
  if (announced > DRAIN_LIMIT) {
    onAbandon();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
      } else if (size > DRAIN_LIMIT) {
        onAbandon();
        reject(tooLarge());
        req.destroy();
      }
    });
    // Settling twice is nothing: a promise keeps its first outcome (no once() wrappers to make for each request).
    req.on('end', () => (size > limit ? reject(tooLarge()) : resolve(Buffer.concat(chunks, size))));
    // A client that aborts its upload ends the request quietly: an expected event, never an error of the gateway's.
    req.on('error', () => reject(new DomainError('client_closed', 'The client closed the connection before its request was complete.')));
  });
}

/** Checks the Content-Type against the accepted types (415 naming them). */
export function requireMediaType(header: string | string[] | undefined, types: readonly string[]): string {
  // The common case, a type as it is accepted and nothing more, costs no parsing.
  if (typeof header === 'string' && types.includes(header)) return header;
  const type = mediaType(header);
  if (!types.includes(type)) {
    throw new DomainError('unsupported_media_type', `Send the body as ${types.join(' or ')}${type ? ` (got ${type})` : ''}.`);
  }
  return type;
}

/** Parses JSON text (400 when it does not parse). */
export function parseJson(text: string, what = 'The body'): unknown {
  try {
    return parseJsonWithin(text);
  } catch (error) {
    if (error instanceof JsonTooDeep) throw new DomainError('invalid', `${what} ${error.message}; the gateway takes at most ${MAX_JSON_DEPTH}.`);
    throw new DomainError('invalid', `${what} is not valid JSON.`);
  }
}

/**
 * What a route takes as its body, declared on the route: the HTTP pipeline
 * reads it once, after the route's authentication and before its handler.
 */
export interface RouteBody {
  /** The media types it takes (415 naming them otherwise). */
  types: readonly string[];
  /** The most bytes it takes (413 past them); a function reads the configuration in force. */
  limit: number | (() => number);
  /** The bytes only, left unparsed: for a handler that checks a signature over them or parses them elsewhere. */
  raw?: boolean;
  /** An empty body is taken (its value undefined) instead of refused as not JSON. */
  optional?: boolean;
}

/** A body as the pipeline read it: its media type, its bytes and, unless the route takes it raw, its value (JSON, or a form's fields). */
export interface ReceivedBody {
  type: string;
  raw: Buffer;
  value: unknown;
}

const FORM = 'application/x-www-form-urlencoded';

/** Reads a body as a route declares it: its type checked (415), its size bounded (413), parsed (400 for bad JSON or too deep). */
export function readBody(req: IncomingMessage, body: RouteBody, onAbandon: () => void): Promise<ReceivedBody> {
  let type: string;
  try {
    type = requireMediaType(req.headers['content-type'], body.types);
  } catch (error) {
    return Promise.reject(error);
  }
  return collectBody(req, typeof body.limit === 'function' ? body.limit() : body.limit, onAbandon).then((raw) => {
    if (body.raw || (body.optional && raw.length === 0)) return { type, raw, value: undefined };
    const text = raw.toString('utf8');
    return { type, raw, value: type === FORM ? Object.fromEntries(new URLSearchParams(text)) : parseJson(text) };
  });
}
