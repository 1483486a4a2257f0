/**
 * A WebSocket server for upgrades only (no port of its own), with the `ws`
 * library loaded at the first upgrade: loading it at start-up also loads
 * Node's TLS and zlib, about 10 MB of resident memory for a daemon no client
 * has reached yet.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import { Limits } from '../../shared/protocol/limits.ts';

/** WebSocket.OPEN, without loading the library for a constant. */
export const SOCKET_OPEN = 1;

export type Upgrade = (request: IncomingMessage, socket: Duplex, head: Buffer, done: (socket: WebSocket) => void) => void;

/**
 * Completes upgrades once the library is loaded. Until the socket is handed
 * over nothing reads it, so what the client sends meanwhile waits in the
 * socket; a socket that closed in between is destroyed by the library.
 */
export function lazyUpgrader(): Upgrade {
  let server: Promise<WebSocketServer> | undefined;
  return (request, socket, head, done) => {
    server ??= import('ws').then(({ WebSocketServer: Server }) => new Server({ noServer: true, maxPayload: Limits.maxFrameBytes, clientTracking: false }));
    server.then(
      (wss) => wss.handleUpgrade(request, socket, head, done),
      () => socket.destroy(),
    );
  };
}
