import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { GatewayError } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import { readIdentity } from '../shared/profile-identity.ts';
import { inspectDaemon, sleepSync, type DaemonRecord } from '../shared/daemon-lock.ts';
import type { ConnectAuth, ConnectParams, EventFrame, HelloOk, ResponseFrame } from '../shared/protocol/frames.ts';
import { parseFrame } from '../shared/protocol/frames.ts';
import type { ErrorCode } from '../shared/protocol/error-codes.ts';
import type { MethodName, MethodParamsMap } from '../shared/protocol/methods.ts';
import type { MethodResult } from '../shared/protocol/results.ts';
import { kindOfRpcError } from '../shared/error-kinds.ts';
import { Limits, PROTOCOL_VERSION } from '../shared/protocol/limits.ts';
import { connectHost } from '../shared/listen.ts';
import type { ProfilePaths } from '../shared/profile.ts';
import { openSecretStore, secretFromEnv, type SecretStore } from '../shared/secrets/secret-store.ts';
import type { DeviceKey } from '../shared/protocol/device-auth.ts';
import { deviceKey, signIdentity } from './device-identity.ts';
import { gatewayVersion } from '../shared/version.ts';

/** A failed RPC call, carrying the protocol error code. */
export class RpcCallError extends GatewayError {
  readonly rpcCode: ErrorCode;

  constructor(rpcCode: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message, { kind: kindOfRpcError(rpcCode, details), code: rpcCode, details, hints: hintsFor(rpcCode, details) });
    this.rpcCode = rpcCode;
  }
}

function hintsFor(code: ErrorCode, details?: Record<string, unknown>): string[] {
  if (Array.isArray(details?.hints)) return details.hints as string[];
  if (code === 'UNAUTHORIZED') return ['check GATEWAY_TOKEN / GATEWAY_PASSWORD, or unset them to use the profile\'s stored token'];
  if (code === 'PAIRING_REQUIRED' && typeof details?.hint === 'string') return [`on the gateway host: ${details.hint}`, 'then run this command again'];
  if (code === 'FORBIDDEN' && details?.missingScope) return [`connect with the scope ${String(details.missingScope)}`];
  return [];
}

/** A method's params (optional when it needs none) and a timeout. */
type CallArgs = {
  [M in MethodName]: {} extends MethodParamsMap[M] ? [params?: MethodParamsMap[M], timeoutMs?: number] : [params: MethodParamsMap[M], timeoutMs?: number];
};

type Intersection<U> = (U extends unknown ? (value: U) => void : never) extends (value: infer I) => void ? I : never;

/** One signature per method, told apart by its name: no inference runs over the whole protocol at each call. */
type Call = Intersection<{ [M in MethodName]: (method: M, ...args: CallArgs[M]) => Promise<MethodResult<M>> }[MethodName]>;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

export interface ConnectOptions {
  auth: ConnectAuth;
  /** The device key that signs the connect; the daemon pairs devices, not just credentials. */
  device?: DeviceKey;
  scopes?: string[];
  clientId?: string;
  timeoutMs?: number;
}

/** A connection to a daemon's WebSocket control plane. */
export class RpcClient {
  private readonly pending = new Map<string, Pending>();
  private readonly listeners = new Map<string, Set<(payload: unknown) => void>>();
  hello?: HelloOk;
  private closedError?: Error;

  private readonly socket: WebSocket;
  readonly url: string;

  private constructor(socket: WebSocket, url: string) {
    this.socket = socket;
    this.url = url;
    socket.on('message', (data) => this.receive(data.toString()));
    socket.on('close', (code, reason) => {
      this.closedError = new GatewayError(`The daemon closed the connection (${code}${reason.length ? `: ${reason.toString()}` : ''}).`);
      for (const [id, pending] of this.pending) {
        clearTimeout(pending.timer);
        pending.reject(this.closedError);
        this.pending.delete(id);
      }
    });
  }

  static async connect(url: string, options: ConnectOptions): Promise<RpcClient> {
    const timeoutMs = options.timeoutMs ?? Limits.requestTimeoutMs;
    const socket = new WebSocket(url, { handshakeTimeout: timeoutMs, maxPayload: Limits.maxFrameBytes, perMessageDeflate: false });
    const challenge = await new Promise<EventFrame>((resolve, reject) => {
      const timer = setTimeout(() => { socket.terminate(); reject(new GatewayError(`No answer from the daemon at ${url} within ${timeoutMs} ms.`)); }, timeoutMs);
      socket.once('message', (data) => {
        clearTimeout(timer);
        const frame = parseFrame(data.toString());
        if (frame?.type === 'event' && frame.event === 'connect.challenge') resolve(frame);
        else reject(new GatewayError(`The server at ${url} does not speak the gateway protocol.`));
      });
      socket.once('error', (error: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(new GatewayError(`Cannot reach the daemon at ${url}: ${error.code ?? error.message}.`, { cause: error }));
      });
    });
    const client = new RpcClient(socket, url);
    const clientId = options.clientId ?? 'gateway-cli';
    // No scopes asks for the ones this device holds.
    const scopes = options.scopes ?? [];
    const nonce = (challenge.payload as { nonce?: string } | undefined)?.nonce ?? '';
    const params: ConnectParams = {
      minProtocol: PROTOCOL_VERSION,
      maxProtocol: PROTOCOL_VERSION,
      client: { id: clientId, version: gatewayVersion(), platform: process.platform, mode: 'cli' },
      role: 'operator',
      scopes,
      auth: options.auth,
      ...(options.device ? { device: signIdentity(options.device, { nonce, role: 'operator', scopes, clientId }) } : {}),
    };
    try {
      client.hello = await client.request<HelloOk>('connect', params, timeoutMs);
    } catch (error) {
      // A daemon that does not answer in time is let go of, so the command ends now rather than when it answers.
      client.close();
      throw error;
    }
    return client;
  }

  private receive(text: string): void {
    const frame = parseFrame(text);
    if (!frame) return;
    if (frame.type === 'res') {
      const pending = this.pending.get(frame.id);
      if (!pending) return;
      this.pending.delete(frame.id);
      clearTimeout(pending.timer);
      const response = frame as ResponseFrame;
      if (response.ok) pending.resolve(response.payload);
      else pending.reject(new RpcCallError(response.error?.code ?? 'INTERNAL', response.error?.message ?? 'request failed', response.error?.details));
    } else if (frame.type === 'event') {
      for (const listener of this.listeners.get(frame.event) ?? []) listener(frame.payload);
    }
  }

  /**
   * Calls a method of the protocol: its name, params and result are typed
   * by their one declaration (src/shared/protocol/methods.ts, results.ts).
   */
  readonly call: Call = ((method: MethodName, params?: unknown, timeoutMs?: number) => this.request(method, params, timeoutMs)) as Call;

  /** Sends one request frame and waits for its answer. */
  request<T>(method: string, params?: unknown, timeoutMs: number = Limits.requestTimeoutMs): Promise<T> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = randomUUID();
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new GatewayError(`${method} got no answer within ${timeoutMs} ms.`));
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      this.socket.send(JSON.stringify({ type: 'req', id, method, params }));
    });
  }

  on(event: string, listener: (payload: unknown) => void): void {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event)!.add(listener);
  }

  close(): void {
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING) this.socket.close(1000);
    this.socket.terminate();
  }
}

export const DEVICE_TOKEN_SECRET = 'device.token';

/**
 * The credential the CLI presents to its own profile's daemon: the
 * environment first, then the stored gateway token, then this device's token.
 */
export async function localCredential(paths: ProfilePaths, store: SecretStore | undefined): Promise<ConnectAuth> {
  const token = secretFromEnv('gateway.token');
  if (token) return { token };
  const password = secretFromEnv('gateway.password');
  if (password) return { password };
  // The stored token goes whatever config.json says of the auth mode: a change the daemon has not applied yet
  // (it needs a restart) must not cut the CLI off from it.
  const stored = await store?.get('gateway.token');
  if (stored) return { token: stored };
  const deviceToken = await store?.get(DEVICE_TOKEN_SECRET);
  return deviceToken ? { deviceToken } : {};
}

function profileStore(paths: ProfilePaths): SecretStore | undefined {
  const backend = readIdentity(paths)?.secrets;
  return backend ? openSecretStore(paths, backend) : undefined;
}

export const notRunning = (profile: string, detail = 'is not running'): GatewayError =>
  new GatewayError(`The daemon of profile "${profile}" ${detail}.`, {
    exitCode: ExitCode.notRunning,
    code: 'NOT_RUNNING',
    hints: [`gateway start --profile ${profile}`],
  });

/** Waits briefly for a daemon that is still starting; returns its record once ready. */
export function runningDaemon(paths: ProfilePaths, waitMs = 10_000): DaemonRecord {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const found = inspectDaemon(paths);
    if (found.state === 'running') return found.record;
    if (found.state === 'stopped') throw notRunning(paths.name);
    if (found.state === 'stale') throw notRunning(paths.name, `is not running (stale lock: ${found.reason})`);
    if (Date.now() > deadline) throw new GatewayError(`The daemon of profile "${paths.name}" is still starting after ${waitMs} ms.`, { hints: [`gateway logs --profile ${paths.name}`] });
    sleepSync(50);
  }
}

export async function connectToDaemon(paths: ProfilePaths, options: Partial<ConnectOptions> = {}): Promise<RpcClient> {
  const record = runningDaemon(paths);
  const host = connectHost(record.host);
  const url = `ws://${host.includes(':') ? `[${host}]` : host}:${record.port}/`;
  const store = profileStore(paths);
  if (!store) throw new GatewayError(`Profile "${paths.name}" has no secret store yet.`, { hints: [`gateway start --profile ${paths.name}`] });
  const [auth, device] = await Promise.all([options.auth ?? localCredential(paths, store), options.device ?? deviceKey(store)]);
  const client = await RpcClient.connect(url, { ...options, auth, device });
  // Kept for next time when it can be; a store that cannot take it now (a full disk) costs this CLI nothing today.
  if (client.hello?.deviceToken) await store.set(DEVICE_TOKEN_SECRET, client.hello.deviceToken).catch(() => undefined);
  return client;
}
