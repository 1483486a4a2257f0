/** Writing JSON answers on a raw response: for surfaces answered ahead of the HTTP application. */
import type { ServerResponse } from 'node:http';
import { answerOf, toDomainError, type DomainError } from './errors.ts';

/** Sends a JSON answer, unless one was already sent. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  const payload = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': payload.length, 'cache-control': 'no-store', ...headers });
  res.end(payload);
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
