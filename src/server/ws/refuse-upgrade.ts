/**
 * An upgrade refused before it became a WebSocket: answered as every HTTP
 * refusal is, with its status, a request id (the caller's when well formed),
 * the error's own headers (Retry-After) and the one error body
 * `{"error", "message", "statusCode"}`; then the connection is closed.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { GatewayError } from '../../shared/errors.ts';
import { answerOf } from '../kernel/errors.ts';
import { requestIds } from '../http/request-id.ts';

const ids = requestIds();
/** What may not be written in a header's value: a line break would start a header of the caller's making. */
const UNSAFE = /[\r\n]/;

export function refuseUpgrade(socket: Duplex, request: IncomingMessage, error: GatewayError): void {
  const { status, body, headers } = answerOf(error);
  const text = JSON.stringify(body);
  const extra = Object.entries(headers).filter(([, value]) => !UNSAFE.test(value)).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nConnection: close\r\nx-request-id: ${ids.of(request)}\r\n${extra}`
    + `Content-Type: application/json; charset=utf-8\r\nCache-Control: no-store\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
}
