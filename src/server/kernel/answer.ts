/**
 * Writing answers on a raw response: for the routes answered before the HTTP
 * application. The request id the server gave the request rides on the
 * response (IdentifiedResponse) and is written with the answer's other
 * headers in its one writeHead: a header set beforehand would send every
 * answer down Node's slower way of merging headers.
 */
import type { ServerResponse } from 'node:http';
import { answerOf, toDomainError, type DomainError } from './errors.ts';

/** A response with the id of its request, for the answer to carry (x-request-id). */
export type IdentifiedResponse = ServerResponse & { requestId?: string };

/** Sends a JSON answer, unless one was already sent. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  const payload = Buffer.from(JSON.stringify(body));
  const id = (res as IdentifiedResponse).requestId;
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': payload.length, 'cache-control': 'no-store', ...(id === undefined ? {} : { 'x-request-id': id }), ...headers });
  res.end(payload);
}

/** Sends an answer without a body (204), unless one was already sent. */
export function sendEmpty(res: ServerResponse, status: number, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  const id = (res as IdentifiedResponse).requestId;
  res.writeHead(status, { 'cache-control': 'no-store', ...(id === undefined ? {} : { 'x-request-id': id }), ...headers });
  res.end();
}

/**
 * Sends the error body for any thrown value; unexpected failures answer a
 * generic message (or `unexpectedMessage`) and are handed to `onUnexpected` to log.
 */
export function sendError(res: ServerResponse, thrown: unknown, onUnexpected: (error: unknown) => void, unexpectedMessage?: string): void {
  const { error, unexpected } = toDomainError(thrown);
  if (unexpected) onUnexpected(thrown);
  const answer = answerOf(error);
  sendJson(res, answer.status, unexpected && unexpectedMessage ? { ...answer.body, message: unexpectedMessage } : answer.body, answer.headers);
}

export type { DomainError };
