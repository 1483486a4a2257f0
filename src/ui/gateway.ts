/**
 * The page's connection to the gateway: the WebSocket control plane, signed
 * in as this browser's device. It answers the connect challenge, keeps the
 * device token the gateway issues, waits for approval when the device is not
 * paired, reconnects with backoff, and hands out requests and events.
 */
import { canonicalConnectString } from '../shared/protocol/connect-string.ts';
import { loadDevice, type DeviceIdentity } from './device.ts';

export interface Settings {
  basePath: string;
  websocketPath: string;
  profile: string;
  version: string;
  authMode: 'token' | 'password' | 'trusted-proxy' | 'none';
  originAllowed: boolean;
}

export interface Hello {
  server: { version: string; instanceId: string; profile: string };
  role: string;
  scopes: string[];
  device: { id: string };
  deviceToken?: string;
}

/** What a person can type to let this browser in; held for the tab's life only, never stored. */
export interface Credential {
  token?: string;
  password?: string;
  inviteCode?: string;
}

export type ConnectionState =
  | { kind: 'starting' }
  | { kind: 'connecting' }
  | { kind: 'login'; reason?: string }
  | { kind: 'pairing'; requestId: string; expiresAt?: string }
  | { kind: 'connected'; hello: Hello }
  | { kind: 'offline'; reason: string; retryInMs: number }
  | { kind: 'refused'; reason: string };

export class RpcError extends Error {
  readonly code: string;
  readonly details: Record<string, unknown> | undefined;
  constructor(error: { code: string; message: string; details?: Record<string, unknown> }) {
    super(error.message);
    this.code = error.code;
    this.details = error.details;
  }
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

const PROTOCOL = 1;
const PAIRING_RETRY_MS = 5000;

/**
 * The one-time code of the link `gateway dashboard` prints (#invite=CODE), taken
 * out of the address at once: it stays in neither the history nor a bookmark,
 * and a fragment never reaches a server or a Referer.
 */
function takeInviteFromUrl(): string | undefined {
  const match = /^#invite=([A-Za-z0-9-]{4,64})$/.exec(location.hash);
  if (!match) return undefined;
  history.replaceState(null, '', location.pathname + location.search);
  return match[1];
}

export class Gateway extends EventTarget {
  state: ConnectionState = { kind: 'starting' };
  settings!: Settings;
  device!: DeviceIdentity;
  private socket: WebSocket | undefined;
  private credential: Credential | undefined;
  private pending = new Map<string, Pending>();
  private counter = 0;
  private backoffMs = 500;
  private timer: number | undefined;
  private readonly listeners = new Map<string, Set<(payload: unknown) => void>>();

  async start(): Promise<void> {
    const invite = takeInviteFromUrl();
    const response = await fetch('settings.json', { cache: 'no-store' });
    if (!response.ok) throw new Error(`the gateway answered ${response.status} for its settings`);
    this.settings = await response.json() as Settings;
    if (!this.settings.originAllowed) {
      this.set({ kind: 'refused', reason: `This address (${location.origin}) is not an allowed origin of the gateway. On the gateway host: gateway config set gateway.controlUi.allowedOrigins '["${location.origin}"]'` });
      return;
    }
    this.device = await loadDevice();
    // A browser signed in already keeps its device; the link's code is left unused, to expire.
    if (invite && !this.device.deviceToken()) this.credential = { inviteCode: invite };
    this.open();
  }

  /** Connects with what a person typed (the gateway token or password, or an invite code). */
  signIn(credential: Credential): void {
    this.credential = credential;
    this.open();
  }

  /** Forgets this browser's device token and any typed credential. */
  async signOut(): Promise<void> {
    this.credential = undefined;
    await this.device.setDeviceToken(undefined);
    this.close();
    this.set({ kind: 'login' });
  }

  on(event: string, listener: (payload: unknown) => void): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  request<T = unknown>(method: string, params?: Record<string, unknown>): Promise<T> {
    const socket = this.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN || this.state.kind !== 'connected') {
      return Promise.reject(new RpcError({ code: 'UNAVAILABLE', message: 'not connected to the gateway' }));
    }
    const id = `ui-${++this.counter}`;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      socket.send(JSON.stringify({ type: 'req', id, method, params: params ?? {} }));
    });
  }

  has(scope: string): boolean {
    return this.state.kind === 'connected' && (this.state.hello.scopes.includes(scope) || this.state.hello.scopes.includes('operator.admin'));
  }

  private set(state: ConnectionState): void {
    this.state = state;
    this.dispatchEvent(new Event('state'));
  }

  private close(): void {
    clearTimeout(this.timer);
    const socket = this.socket;
    this.socket = undefined;
    if (socket) {
      socket.onclose = null;
      socket.close();
    }
    for (const { reject } of this.pending.values()) reject(new RpcError({ code: 'UNAVAILABLE', message: 'the connection closed' }));
    this.pending.clear();
  }

  private auth(): Record<string, string> | undefined {
    if (this.credential?.token) return { token: this.credential.token };
    if (this.credential?.password) return { password: this.credential.password };
    if (this.credential?.inviteCode) return { inviteCode: this.credential.inviteCode };
    const deviceToken = this.device.deviceToken();
    if (deviceToken) return { deviceToken };
    return undefined;
  }

  private open(): void {
    this.close();
    const auth = this.auth();
    if (!auth && (this.settings.authMode === 'token' || this.settings.authMode === 'password')) {
      this.set({ kind: 'login' });
      return;
    }
    if (this.state.kind !== 'pairing') this.set({ kind: 'connecting' });
    const url = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${this.settings.websocketPath}`;
    const socket = new WebSocket(url);
    this.socket = socket;
    let connectId: string | undefined;
    socket.onmessage = (message) => {
      let frame: { type: string; id?: string; ok?: boolean; payload?: unknown; error?: { code: string; message: string; details?: Record<string, unknown> }; event?: string };
      try {
        frame = JSON.parse(String(message.data));
      } catch {
        return;
      }
      if (frame.type === 'event' && frame.event === 'connect.challenge') {
        void this.answerChallenge(socket, (frame.payload as { nonce: string }).nonce, auth).then((id) => { connectId = id; });
        return;
      }
      if (frame.type === 'res' && frame.id !== undefined && frame.id === connectId) {
        if (frame.ok) void this.admitted(frame.payload as Hello, auth);
        else void this.refusedConnect(frame.error!, auth);
        return;
      }
      if (frame.type === 'res' && frame.id !== undefined) {
        const pending = this.pending.get(frame.id);
        if (!pending) return;
        this.pending.delete(frame.id);
        if (frame.ok) pending.resolve(frame.payload);
        else pending.reject(new RpcError(frame.error!));
        return;
      }
      if (frame.type === 'event' && frame.event) {
        if (frame.event === 'device.revoked') void this.device.setDeviceToken(undefined);
        for (const listener of this.listeners.get(frame.event) ?? []) listener(frame.payload);
      }
    };
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      for (const { reject } of this.pending.values()) reject(new RpcError({ code: 'UNAVAILABLE', message: 'the connection closed' }));
      this.pending.clear();
      if (this.state.kind === 'pairing' || this.state.kind === 'login' || this.state.kind === 'refused') return;
      const revoked = event.code === 1008 && /revoked|rotated/.test(event.reason);
      if (revoked) {
        this.credential = undefined;
        this.set({ kind: 'login', reason: 'This browser was signed out by the gateway (its device was revoked).' });
        return;
      }
      this.retry(event.reason || 'the connection to the gateway was lost');
    };
  }

  private retry(reason: string): void {
    const wait = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, 10_000);
    this.set({ kind: 'offline', reason, retryInMs: wait });
    clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.open(), wait);
  }

  private async answerChallenge(socket: WebSocket, nonce: string, auth: Record<string, string> | undefined): Promise<string> {
    const signedAt = Date.now();
    const clientId = 'control-ui';
    const role = 'operator';
    const scopes: string[] = [];
    const signature = await this.device.sign(canonicalConnectString({ nonce, signedAt, role, scopes, clientId, deviceId: this.device.id }));
    const id = `connect-${++this.counter}`;
    socket.send(JSON.stringify({
      type: 'req', id, method: 'connect',
      params: {
        minProtocol: PROTOCOL, maxProtocol: PROTOCOL,
        client: { id: clientId, version: this.settings.version, platform: 'browser', mode: 'ui', displayName: navigator.userAgent.slice(0, 120) },
        role, scopes,
        ...(auth ? { auth } : {}),
        device: { id: this.device.id, publicKey: this.device.publicKey, signature, signedAt, nonce },
      },
    }));
    return id;
  }

  private async admitted(hello: Hello, auth: Record<string, string> | undefined): Promise<void> {
    if (hello.deviceToken) await this.device.setDeviceToken(hello.deviceToken);
    // The typed credential did its work: later connects use the device token.
    if (this.device.deviceToken() || auth?.inviteCode) this.credential = undefined;
    this.backoffMs = 500;
    this.set({ kind: 'connected', hello });
  }

  private async refusedConnect(error: { code: string; message: string; details?: Record<string, unknown> }, auth: Record<string, string> | undefined): Promise<void> {
    if (error.code === 'PAIRING_REQUIRED') {
      this.set({ kind: 'pairing', requestId: String(error.details?.requestId ?? ''), expiresAt: error.details?.expiresAt as string | undefined });
      clearTimeout(this.timer);
      this.timer = window.setTimeout(() => this.open(), PAIRING_RETRY_MS);
      return;
    }
    if (error.code === 'UNAUTHORIZED' || error.code === 'FORBIDDEN') {
      if (auth?.deviceToken) await this.device.setDeviceToken(undefined);
      this.credential = undefined;
      this.set({ kind: 'login', reason: error.message });
      return;
    }
    if (error.code === 'RATE_LIMITED') {
      const wait = Number(error.details?.retryAfterMs ?? 5000);
      this.set({ kind: 'offline', reason: error.message, retryInMs: wait });
      clearTimeout(this.timer);
      this.timer = window.setTimeout(() => this.open(), wait);
      return;
    }
    this.retry(error.message);
  }
}
