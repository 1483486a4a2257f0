import { createServer } from 'node:http';
import WebSocket, { WebSocketServer } from 'ws';
import { median, type Figure } from './support.ts';
import { generateDeviceKey, loadDeviceKey } from '../src/shared/protocol/device-auth.ts';
import { signIdentity } from '../src/cli/device-identity.ts';

/** Opens a socket, waits for the first frame, sends frames and resolves after `replies` answers. */
function roundTrip(url: string, frames: (first: any) => string[], replies: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = new WebSocket(url, { perMessageDeflate: false });
    let seen = 0;
    socket.on('message', (data) => {
      seen++;
      if (seen === 1) for (const frame of frames(JSON.parse(data.toString()))) socket.send(frame);
      if (seen === 1 + replies) {
        const elapsed = performance.now() - started;
        socket.close();
        resolve(elapsed);
      }
    });
    socket.on('error', reject);
    socket.on('close', (code) => { if (seen < 1 + replies) reject(new Error(`closed with ${code} after ${seen} frames`)); });
  });
}

/** Connect plus one status call on the daemon, beside a raw ws connect plus one echo. */
export async function runConnectBench(port: number, token: string, rounds: number): Promise<Figure> {
  const server = createServer();
  const wss = new WebSocketServer({ server });
  wss.on('connection', (socket) => {
    socket.send(JSON.stringify({ type: 'event', event: 'hello' }));
    socket.on('message', (data) => socket.send(data));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const echoPort = (server.address() as { port: number }).port;
  const device = loadDeviceKey(generateDeviceKey());
  // Signing happens inside the measured round trip, as a real client does it.
  const connect = (challenge: any) => JSON.stringify({
    type: 'req', id: 'c', method: 'connect',
    params: {
      minProtocol: 1, maxProtocol: 1, client: { id: 'bench', version: '0', platform: process.platform, mode: 'bench' }, role: 'operator', scopes: [], auth: { token },
      device: signIdentity(device, { nonce: challenge.payload.nonce, role: 'operator', scopes: [], clientId: 'bench' }),
    },
  });
  const status = JSON.stringify({ type: 'req', id: 's', method: 'status' });
  const gateway: number[] = [];
  const raw: number[] = [];
  for (let round = 0; round < rounds; round++) {
    raw.push(await roundTrip(`ws://127.0.0.1:${echoPort}/`, () => ['echo'], 1));
    gateway.push(await roundTrip(`ws://127.0.0.1:${port}/`, (challenge) => [connect(challenge), status], 2));
  }
  wss.close();
  server.close();
  const g = median(gateway);
  const r = median(raw);
  return {
    name: 'WS connect (signed) + first RPC',
    value: `${g.toFixed(2)} ms`,
    baseline: `${r.toFixed(2)} ms raw ws connect + echo`,
    comparison: `${(g / r).toFixed(2)}x`,
    target: '<= 3x',
    ok: g / r <= 3,
  };
}
