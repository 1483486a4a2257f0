import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import type { ConnectParams, EventFrame, HelloOk, RequestFrame, ResponseFrame } from '../../shared/protocol/frames.ts';
import { parseFrame } from '../../shared/protocol/frames.ts';
import { CloseCode, Limits, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '../../shared/protocol/limits.ts';
import { isOperatorScope, ROLES } from '../../shared/protocol/scopes.ts';
import { originOf, type Admission, type Origin } from './handshake.ts';
import { NODE_SCOPE } from '../../shared/protocol/methods.ts';
import { queryCarriesCredential } from '../auth/http-auth.ts';
import type { AuthLockout, CredentialKind } from '../auth/throttle.ts';
import type { MethodTable, RpcClient } from './method-table.ts';
import { RpcError } from './rpc-error.ts';

export interface ControlPlaneOptions {
  logger: Logger;
  methods: MethodTable;
  /** Decides who gets in (credential, device signature, pairing); throws RpcError otherwise. */
  admit: (params: ConnectParams, origin: Origin) => Admission;
  /** Failed connects per address and credential kind; a locked-out client is not checked at all. */
  lockout: AuthLockout;
  /** Takes an upgrade on another path (plugin WebSocket routes); false when nothing serves the path. */
  pluginUpgrade?: (request: IncomingMessage, socket: Duplex, head: Buffer) => boolean;
  /** The user a trusted proxy vouches for (trusted-proxy mode); throws HttpError to refuse the upgrade. */
  proxyUser?: (request: IncomingMessage) => string | undefined;
  /** Told when a client is admitted and when it leaves (nodes register here). */
  onAdmitted?: (client: RpcClient, params: ConnectParams, push: (event: string, payload: unknown) => void) => void;
  onClosed?: (client: RpcClient) => void;
  audit: (kind: string, fields: { subject?: string; address?: string; detail?: Record<string, unknown> }) => void;
  server: { version: string; instanceId: string; profile: string };
  /** Whether the daemon accepts new work (false while stopping). */
  accepting: () => boolean;
}

interface Connection {
  id: string;
  socket: WebSocket;
  address: string;
  nonce: string;
  origin: Origin;
  deviceId?: string;
  client?: RpcClient;
  /** The connect being decided; frames that arrive meanwhile wait for it. */
  connecting?: Promise<void>;
  inFlight: number;
  missedPongs: number;
  handshakeTimer?: NodeJS.Timeout;
}

/** The WebSocket control plane on `/` of the daemon's HTTP server. */
export class ControlPlane {
  private readonly wss: WebSocketServer;
  private readonly connections = new Set<Connection>();
  private readonly heartbeat: NodeJS.Timeout;
  private seq = 0;

  private readonly options: ControlPlaneOptions;

  constructor(options: ControlPlaneOptions) {
    this.options = options;
    this.wss = new WebSocketServer({ noServer: true, maxPayload: Limits.maxFrameBytes, clientTracking: false });
    this.heartbeat = setInterval(() => this.tick(), Limits.tickIntervalMs).unref();
  }

  attach(server: Server): void {
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => this.upgrade(request, socket, head));
  }

  get size(): number {
    return this.connections.size;
  }

  private upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = (request.url ?? '/').split('?')[0];
    if (queryCarriesCredential(request.url)) {
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    if (path !== '/' && this.options.accepting() && this.options.pluginUpgrade?.(request, socket, head)) return;
    if (path !== '/' || !this.options.accepting()) {
      const status = path !== '/' ? '404 Not Found' : '503 Service Unavailable';
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    let proxyUser: string | undefined;
    try {
      proxyUser = this.options.proxyUser?.(request);
    } catch (error) {
      const status = (error as { status?: number }).status ?? 401;
      socket.end(`HTTP/1.1 ${status} ${status === 403 ? 'Forbidden' : 'Unauthorized'}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    this.wss.handleUpgrade(request, socket, head, (ws) => this.open(ws, request, proxyUser));
  }

  private open(socket: WebSocket, request: IncomingMessage, proxyUser: string | undefined): void {
    const nonce = randomBytes(24).toString('base64url');
    const origin = originOf(request, nonce, proxyUser);
    const connection: Connection = {
      id: randomUUID(),
      socket,
      address: origin.address,
      nonce,
      origin,
      inFlight: 0,
      missedPongs: 0,
    };
    this.connections.add(connection);
    connection.handshakeTimer = setTimeout(() => {
      this.options.logger.info({ connection: connection.id, address: connection.address }, 'handshake timed out');
      socket.close(CloseCode.policyViolation, 'handshake timeout');
    }, Limits.handshakeTimeoutMs);
    socket.on('pong', () => { connection.missedPongs = 0; });
    socket.on('message', (data, isBinary) => this.receive(connection, data, isBinary));
    socket.on('close', () => {
      clearTimeout(connection.handshakeTimer);
      this.connections.delete(connection);
      if (connection.client) this.options.onClosed?.(connection.client);
    });
    socket.on('error', (error) => this.options.logger.debug({ connection: connection.id, err: error }, 'websocket error'));
    this.send(connection, { type: 'event', event: 'connect.challenge', payload: { nonce: connection.nonce, ts: Date.now() } });
  }

  private send(connection: Connection, frame: ResponseFrame | EventFrame): void {
    if (connection.socket.readyState === WebSocket.OPEN) connection.socket.send(JSON.stringify(frame));
  }

  private fail(connection: Connection, id: string, error: RpcError): void {
    this.send(connection, { type: 'res', id, ok: false, error: error.toShape() });
  }

  private refuse(connection: Connection, id: string, error: RpcError): void {
    this.fail(connection, id, error);
    connection.socket.close(CloseCode.policyViolation, error.code);
  }

  private receive(connection: Connection, data: RawData, isBinary: boolean): void {
    if (connection.connecting) {
      void connection.connecting.then(() => this.receive(connection, data, isBinary));
      return;
    }
    const size = Array.isArray(data) ? data.reduce((sum, part) => sum + part.length, 0) : (data as Buffer).byteLength;
    if (!connection.client && size > Limits.maxHandshakeFrameBytes) {
      connection.socket.close(CloseCode.tooLarge, 'handshake frame too large');
      return;
    }
    const frame = isBinary ? undefined : parseFrame(data.toString());
    if (!connection.client) {
      if (!frame || frame.type !== 'req' || frame.method !== 'connect') {
        const id = frame && 'id' in frame ? frame.id : '';
        this.refuse(connection, id, new RpcError('INVALID_REQUEST', 'the first frame must be a connect request'));
        return;
      }
      connection.connecting = this.connect(connection, frame).finally(() => { connection.connecting = undefined; });
      return;
    }
    if (!frame || frame.type !== 'req') {
      this.fail(connection, frame && 'id' in frame ? frame.id : '', new RpcError('INVALID_REQUEST', 'expected a request frame {type:"req", id, method, params?}'));
      return;
    }
    void this.dispatch(connection, frame);
  }

  private async connect(connection: Connection, frame: RequestFrame): Promise<void> {
    const params = frame.params as Partial<ConnectParams> | undefined;
    const problem = connectProblem(params);
    if (problem) {
      this.refuse(connection, frame.id, new RpcError('INVALID_REQUEST', problem));
      return;
    }
    const connect = params as ConnectParams;
    const auth = connect.auth ?? {};
    const kind: CredentialKind = auth.token || auth.password ? 'gateway' : auth.deviceToken ? 'device' : auth.inviteCode ? 'invite' : 'gateway';
    const { lockout, audit, logger } = this.options;
    const retryAfterMs = await lockout.retryAfterMs(connection.address, kind);
    if (retryAfterMs > 0) {
      this.refuse(connection, frame.id, new RpcError('RATE_LIMITED', `too many failed attempts; try again in ${Math.ceil(retryAfterMs / 1000)} s`, { retryAfterMs }, true));
      return;
    }
    let admission: Admission;
    try {
      admission = this.options.admit(connect, connection.origin);
    } catch (error) {
      const refusal = error instanceof RpcError ? error : new RpcError('INTERNAL', 'the handshake failed unexpectedly');
      if (!(error instanceof RpcError)) logger.error({ err: error }, 'handshake failed');
      logger.info({ connection: connection.id, address: connection.address, client: connect.client.id, code: refusal.code }, 'connect refused');
      if (refusal.code === 'UNAUTHORIZED') {
        const lockedFor = await lockout.fail(connection.address, kind);
        audit(lockedFor ? 'auth.lockout' : 'auth.failure', { address: connection.address, detail: { kind, surface: 'websocket', reason: refusal.message, ...(lockedFor ? { lockoutMs: lockedFor } : {}) } });
      }
      this.refuse(connection, frame.id, refusal);
      return;
    }
    await lockout.succeed(connection.address, kind);
    clearTimeout(connection.handshakeTimer);
    connection.deviceId = admission.deviceId;
    connection.client = {
      connectionId: connection.id,
      clientId: connect.client.id,
      role: admission.role as HelloOk['role'],
      // Nodes hold the node scope, which no client can ask for.
      scopes: new Set(admission.role === 'node' ? [NODE_SCOPE] : admission.scopes),
      address: connection.address,
      deviceId: admission.deviceId,
    };
    this.options.onAdmitted?.(connection.client, connect, (event, payload) => this.send(connection, { type: 'event', event, payload, seq: ++this.seq }));
    const hello: HelloOk = {
      type: 'hello-ok',
      protocol: PROTOCOL_VERSION,
      server: this.options.server,
      role: admission.role as HelloOk['role'],
      scopes: admission.scopes,
      device: { id: admission.deviceId },
      ...(admission.deviceToken ? { deviceToken: admission.deviceToken } : {}),
      limits: { maxFrameBytes: Limits.maxFrameBytes, tickIntervalMs: Limits.tickIntervalMs },
    };
    this.options.logger.debug({ connection: connection.id, client: connect.client.id, address: connection.address }, 'client connected');
    this.send(connection, { type: 'res', id: frame.id, ok: true, payload: hello });
  }

  private async dispatch(connection: Connection, frame: RequestFrame): Promise<void> {
    const client = connection.client!;
    const entry = this.options.methods.get(frame.method);
    if (!entry) {
      this.fail(connection, frame.id, new RpcError('NOT_FOUND', `unknown method ${JSON.stringify(frame.method)}`));
      return;
    }
    if (!client.scopes.has(entry.scope) && !client.scopes.has('operator.admin')) {
      this.fail(connection, frame.id, new RpcError('FORBIDDEN', `${frame.method} needs the scope ${entry.scope}`, { missingScope: entry.scope }));
      return;
    }
    if (connection.inFlight >= Limits.maxInFlightRequests) {
      this.fail(connection, frame.id, new RpcError('RATE_LIMITED', `more than ${Limits.maxInFlightRequests} requests in flight`, { retryAfterMs: 100 }, true));
      return;
    }
    connection.inFlight++;
    try {
      const payload = await entry.handler(frame.params, client);
      this.send(connection, { type: 'res', id: frame.id, ok: true, payload });
    } catch (error) {
      if (error instanceof RpcError) {
        this.fail(connection, frame.id, error);
      } else {
        this.options.logger.error({ err: error, method: frame.method }, 'method failed');
        this.fail(connection, frame.id, new RpcError('INTERNAL', `${frame.method} failed unexpectedly; the gateway log has the details`));
      }
    } finally {
      connection.inFlight--;
    }
  }

  /** Pushes an event to every connected client holding the scope. */
  broadcast(event: string, payload: unknown, scope = 'operator.read'): void {
    const frame: EventFrame = { type: 'event', event, payload, seq: ++this.seq };
    for (const connection of this.connections) {
      if (connection.client?.scopes.has(scope) || connection.client?.scopes.has('operator.admin')) this.send(connection, frame);
    }
  }

  private tick(): void {
    for (const connection of this.connections) {
      if (connection.missedPongs >= Limits.maxMissedPongs) {
        connection.socket.terminate();
        continue;
      }
      connection.missedPongs++;
      connection.socket.ping();
      if (connection.client) this.send(connection, { type: 'event', event: 'tick', payload: { ts: Date.now() } });
    }
  }

  /** Closes the connections of a device at once (revoked or rotated). */
  closeDevice(deviceId: string, reason: string): number {
    let closed = 0;
    for (const connection of this.connections) {
      if (connection.deviceId !== deviceId) continue;
      this.send(connection, { type: 'event', event: 'device.revoked', payload: { deviceId, reason } });
      connection.socket.close(CloseCode.policyViolation, reason);
      closed++;
    }
    return closed;
  }

  /** Connected clients, for listings. */
  clients(): RpcClient[] {
    return [...this.connections].flatMap((connection) => (connection.client ? [connection.client] : []));
  }

  /** Closes every connection with 1001 and stops the heartbeat. */
  close(reason = 'gateway shutting down'): void {
    clearInterval(this.heartbeat);
    for (const connection of this.connections) {
      this.send(connection, { type: 'event', event: 'shutdown', payload: { reason } });
      connection.socket.close(CloseCode.goingAway, reason);
    }
  }

  /** Ends connections that did not close in time. */
  terminateAll(): void {
    for (const connection of this.connections) connection.socket.terminate();
  }
}

function connectProblem(params: Partial<ConnectParams> | undefined): string | undefined {
  if (!params || typeof params !== 'object') return 'connect needs params';
  if (typeof params.minProtocol !== 'number' || typeof params.maxProtocol !== 'number') return 'connect needs minProtocol and maxProtocol';
  if (params.minProtocol > PROTOCOL_VERSION || params.maxProtocol < MIN_PROTOCOL_VERSION) {
    return `protocol ${params.minProtocol}-${params.maxProtocol} is not supported; this gateway speaks ${MIN_PROTOCOL_VERSION}-${PROTOCOL_VERSION}`;
  }
  const client = params.client;
  if (!client || typeof client.id !== 'string' || typeof client.version !== 'string') return 'connect needs client {id, version, platform, mode}';
  if (!(ROLES as readonly string[]).includes(params.role as string)) return `role must be one of ${ROLES.join(', ')}`;
  if (!Array.isArray(params.scopes)) return 'scopes must be an array';
  const unknown = params.scopes.filter((scope) => !isOperatorScope(scope));
  if (unknown.length > 0) return `unknown scopes: ${unknown.join(', ')}`;
  if (params.auth !== undefined && (params.auth === null || typeof params.auth !== 'object')) return 'auth must be an object';
  for (const field of ['caps', 'commands'] as const) {
    const list = params[field];
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.length > 256 || !list.every((item) => typeof item === 'string' && item.length > 0 && item.length <= 128)) {
      return `${field} must be an array of at most 256 names`;
    }
  }
  if (params.permissions !== undefined && (params.permissions === null || typeof params.permissions !== 'object' || Array.isArray(params.permissions))) {
    return 'permissions must be an object';
  }
  return undefined;
}
