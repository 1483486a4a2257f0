import WebSocket from 'ws';
import { generateDeviceKey, loadDeviceKey, type DeviceKey } from '../../src/shared/protocol/device-auth.ts';
import { signIdentity } from '../../src/cli/device-identity.ts';

export const newDevice = (): DeviceKey => loadDeviceKey(generateDeviceKey());

/**
 * A device whose id starts with '-', as one in 64 do, followed by a given
 * letter (say that of a short flag): a command line must still take it as an id.
 */
export function dashedDevice(second?: string): DeviceKey {
  for (;;) {
    const device = newDevice();
    if (device.id.startsWith('-') && (second === undefined || device.id[1] === second)) return device;
  }
}

/** A raw WebSocket for protocol tests: records frames and the close code. */
export class RawSocket {
  readonly frames: any[] = [];
  closeCode?: number;
  closeReason?: string;
  readonly closed: Promise<void>;
  readonly socket: WebSocket;

  constructor(url: string, headers: Record<string, string> = {}) {
    this.socket = new WebSocket(url, { headers });
    this.socket.on('message', (data) => this.frames.push(JSON.parse(data.toString())));
    this.closed = new Promise((resolve) => {
      this.socket.on('close', (code, reason) => {
        this.closeCode = code;
        this.closeReason = reason.toString();
        resolve();
      });
      this.socket.on('error', () => undefined);
    });
  }

  opened(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.socket.readyState === WebSocket.OPEN) resolve();
      this.socket.once('open', () => resolve());
      this.socket.once('error', reject);
    });
  }

  /** The first frame, received or to come, that matches (taken out of frames). */
  async next(predicate: (frame: any) => boolean = () => true, timeoutMs = 5000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.frames.findIndex(predicate);
      if (index !== -1) return this.frames.splice(index, 1)[0];
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching frame; got ${JSON.stringify(this.frames)}`);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.socket.off('message', done);
          this.socket.off('close', done);
          // After the frame is recorded by the listener added first.
          setImmediate(resolve);
        };
        const timer = setTimeout(done, left);
        this.socket.on('message', done);
        this.socket.on('close', done);
      });
    }
  }

  send(frame: unknown): void {
    this.socket.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** Completes the connect handshake with a credential, signed by a device key (a new device unless given). */
  async connect(auth: Record<string, string>, scopes: string[] = [], options: { device?: DeviceKey; role?: string; clientId?: string; tamper?: (params: any) => void } = {}): Promise<any> {
    await this.opened();
    const challenge = await this.next((frame) => frame.event === 'connect.challenge');
    const device = options.device ?? newDevice();
    const role = options.role ?? 'operator';
    const clientId = options.clientId ?? 'test';
    const params = {
      minProtocol: 1, maxProtocol: 1, client: { id: clientId, version: '0', platform: 'linux', mode: 'test' }, role, scopes, auth,
      device: signIdentity(device, { nonce: challenge.payload.nonce, role, scopes, clientId }),
    };
    options.tamper?.(params);
    this.send({ type: 'req', id: 'c1', method: 'connect', params });
    // A frame the gateway cannot read is answered without its id.
    return this.next((frame) => frame.type === 'res' && (frame.id === 'c1' || frame.id === ''));
  }

  async call(method: string, params?: unknown): Promise<any> {
    const id = `r${Math.random().toString(36).slice(2)}`;
    this.send({ type: 'req', id, method, params });
    return this.next((frame) => frame.id === id);
  }

  close(): void {
    this.socket.terminate();
  }
}
