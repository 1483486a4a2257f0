import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { RawData, WebSocket } from 'ws';
import type { ConnectParams, EventFrame, HelloOk, RequestFrame, ResponseFrame } from '../../shared/protocol/frames.ts';
import { parseFrame } from '../../shared/protocol/frames.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../shared/json.ts';
import { CloseCode, Limits, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '../../shared/protocol/limits.ts';
import { NODE_SCOPE } from '../../shared/protocol/methods.ts';
import { loadProtocolValidators, validatorExport } from '../../shared/protocol/validator-names.ts';
import { queryCarriesCredential } from '../auth/http-auth.ts';
import type { AuthLockout, CredentialKind } from '../auth/throttle.ts';
import type { ConnectionsHub } from '../kernel/connections.ts';
import { DomainError, rateLimited, rpcErrorOf, toDomainError } from '../kernel/errors.ts';
import type { EventBus } from '../kernel/events.ts';
import type { Admission, ConnectionOrigin, RpcClient } from '../kernel/module.ts';
import type { MethodEntry, RegistryTable } from '../kernel/registry.ts';
import { compileSchema, describeProblems, loadSchemaCompiler } from '../kernel/schema.ts';
import { refuseUpgrade } from './refuse-upgrade.ts';
import { lazyUpgrader, SOCKET_OPEN } from './upgrader.ts';

type Validate = ((data: unknown) => boolean) & { errors?: Parameters<typeof describeProblems>[0] };
/** The build-time validators of connect and of each declared method's params (see scripts/build-validators.ts). */
const validators = loadProtocolValidators() as Record<string, Validate | undefined> & { connect: Validate };

/** Where a connection came from, as admission needs it. */
export const originOf = (request: IncomingMessage, nonce: string, proxyUser?: string): ConnectionOrigin => ({
  nonce,
  address: request.socket.remoteAddress ?? 'unknown',
  viaProxy: Boolean(proxyUser || request.headers.forwarded || request.headers['x-forwarded-for'] || request.headers['x-real-ip']),
  proxyUser,
  ...(typeof request.headers.origin === 'string' ? { browserOrigin: request.headers.origin } : {}),
});

export interface ControlPlaneOptions {
  logger: Logger;
  /** The table in force: its methods are what clients may call. */
  table: () => RegistryTable;
  /** Admission (decided by the module that owns pairing) and who is told of clients coming and going. */
  hub: ConnectionsHub;
  events: EventBus;
  /** Failed connects per address and credential kind; a locked-out client is not checked at all. */
  lockout: AuthLockout;
  /** Takes an upgrade on another path (WebSocket routes of modules and plugins); false when nothing serves the path. */
  routeUpgrade?: (request: IncomingMessage, socket: Duplex, head: Buffer) => boolean;
  /** The user a trusted proxy vouches for (trusted-proxy mode); throws a DomainError to refuse the upgrade. */
  proxyUser?: (request: IncomingMessage) => string | undefined;
  audit: (kind: string, fields: { subject?: string; address?: string; detail?: Record<string, unknown> }) => Promise<void>;
  server: { version: string; instanceId: string; profile: string };
  /** Whether the daemon accepts new work (false while stopping). */
  accepting: () => boolean;
  /** Why a browser page may not open the control plane (its Origin is not allowed), or undefined. */
  originRefusal?: (request: IncomingMessage) => string | undefined;
}

interface Connection {
  id: string;
  socket: WebSocket;
  address: string;
  nonce: string;
  origin: ConnectionOrigin;
  deviceId?: string;
  client?: RpcClient;
  /** The connect being decided; frames that arrive meanwhile wait for it. */
  connecting?: Promise<void>;
  inFlight: number;
  missedPongs: number;
  /** Aborted when the socket closes. */
  closed: AbortController;
  handshakeTimer?: NodeJS.Timeout;
}

/** The WebSocket control plane on `/` of the daemon's HTTP server. */
export class ControlPlane {
  private readonly upgrader = lazyUpgrader();
  private readonly connections = new Set<Connection>();
  private readonly heartbeat: NodeJS.Timeout;
  private seq = 0;
  private readonly unsubscribe: () => void;

  private readonly options: ControlPlaneOptions;

  constructor(options: ControlPlaneOptions) {
    this.options = options;
    this.heartbeat = setInterval(() => this.tick(), Limits.tickIntervalMs).unref();
    this.unsubscribe = options.events.subscribe(({ event, payload, scope }) => this.broadcast(event, payload, scope));
    options.hub.attach(this);
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
      refuseUpgrade(socket, request, new DomainError('invalid', 'Credentials are not taken in the query string: send them in the connect frame or the Authorization header.', { code: 'credential_in_query' }));
      return;
    }
    if (path !== '/' && this.options.accepting() && this.options.routeUpgrade?.(request, socket, head)) return;
    if (path !== '/') {
      refuseUpgrade(socket, request, new DomainError('not_found', `No WebSocket endpoint at ${path.slice(0, 200)}: the control plane is at /.`));
      return;
    }
    if (!this.options.accepting()) {
      refuseUpgrade(socket, request, new DomainError('unavailable', 'The gateway is starting or stopping: connect again in a moment.', { headers: { 'retry-after': '1' }, retryable: true }));
      return;
    }
    const refusal = this.options.originRefusal?.(request);
    if (refusal) {
      this.options.logger.info({ address: request.socket.remoteAddress, origin: String(request.headers.origin).slice(0, 200) }, `websocket refused: ${refusal}`);
      refuseUpgrade(socket, request, new DomainError('forbidden', refusal, { code: 'origin_refused' }));
      return;
    }
    let proxyUser: string | undefined;
    try {
      proxyUser = this.options.proxyUser?.(request);
    } catch (thrown) {
      refuseUpgrade(socket, request, toDomainError(thrown).error);
      return;
    }
    this.upgrader(request, socket, head, (ws) => this.open(ws, request, proxyUser));
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
      closed: new AbortController(),
    };
    this.connections.add(connection);
    connection.handshakeTimer = setTimeout(() => {
      this.options.logger.info({ connection: connection.id, address: connection.address }, 'handshake timed out');
      socket.close(CloseCode.policyViolation, 'handshake timeout');
    }, Limits.handshakeTimeoutMs);
    socket.on('pong', () => { connection.missedPongs = 0; });
    socket.on('message', (data, isBinary) => this.receive(connection, data, isBinary));
    socket.on('close', () => {
      connection.closed.abort();
      clearTimeout(connection.handshakeTimer);
      this.connections.delete(connection);
      if (connection.client) for (const listener of this.options.hub.closed) listener(connection.client);
    });
    socket.on('error', (error) => this.options.logger.debug({ connection: connection.id, err: error }, 'websocket error'));
    this.send(connection, { type: 'event', event: 'connect.challenge', payload: { nonce: connection.nonce, ts: Date.now() } });
  }

  private send(connection: Connection, frame: ResponseFrame | EventFrame): void {
    const { socket } = connection;
    if (socket.readyState !== SOCKET_OPEN) return;
    // A client that does not read what it asked for would make the daemon hold it all: past the bound it is cut off.
    if (socket.bufferedAmount > Limits.maxQueuedBytes) {
      this.options.logger.info({ connection: connection.id, address: connection.address, queuedBytes: socket.bufferedAmount }, 'closed a client that does not read its answers');
      socket.terminate();
      return;
    }
    socket.send(JSON.stringify(frame));
  }

  private fail(connection: Connection, id: string, error: DomainError): void {
    this.send(connection, { type: 'res', id, ok: false, error: rpcErrorOf(error) });
  }

  private refuse(connection: Connection, id: string, error: DomainError): void {
    const shape = rpcErrorOf(error);
    this.send(connection, { type: 'res', id, ok: false, error: shape });
    connection.socket.close(CloseCode.policyViolation, shape.code);
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
    const text = isBinary ? undefined : data.toString();
    const frame = text === undefined ? undefined : parseFrame(text);
    if (!connection.client) {
      if (!frame || frame.type !== 'req' || frame.method !== 'connect') {
        const id = frame && 'id' in frame ? frame.id : '';
        this.refuse(connection, id, new DomainError('invalid', `The first frame must be a connect request${frame ? '' : ` (${unreadable(text)})`}.`));
        return;
      }
      connection.connecting = this.connect(connection, frame).finally(() => { connection.connecting = undefined; });
      return;
    }
    if (!frame || frame.type !== 'req') {
      const why = frame ? '' : ` (${unreadable(text)})`;
      this.fail(connection, frame && 'id' in frame ? frame.id : '', new DomainError('invalid', `Expected a request frame {type:"req", id, method, params?}${why}.`));
      return;
    }
    void this.dispatch(connection, frame);
  }

  private async connect(connection: Connection, frame: RequestFrame): Promise<void> {
    const problem = connectProblem(frame.params);
    if (problem) {
      this.refuse(connection, frame.id, new DomainError('invalid', problem));
      return;
    }
    const connect = frame.params as ConnectParams;
    const auth = connect.auth ?? {};
    const kind: CredentialKind = auth.token || auth.password ? 'gateway' : auth.deviceToken ? 'device' : auth.inviteCode ? 'invite' : 'gateway';
    const { lockout, audit, logger, hub } = this.options;
    const retryAfterMs = lockout.retryAfterMs(connection.address, kind);
    if (retryAfterMs > 0) {
      this.refuse(connection, frame.id, rateLimited(retryAfterMs, 'too many failed attempts'));
      return;
    }
    let admission: Admission;
    try {
      if (!hub.admit) throw new DomainError('unavailable', 'This gateway admits no clients (no module decides who connects).');
      admission = await hub.admit(connect, connection.origin);
    } catch (thrown) {
      const { error: refusal, unexpected } = toDomainError(thrown);
      if (unexpected) logger.error({ err: thrown }, 'handshake failed');
      logger.info({ connection: connection.id, address: connection.address, client: connect.client.id, code: rpcErrorOf(refusal).code }, 'connect refused');
      if (refusal.kind === 'unauthorized') {
        const lockedFor = lockout.fail(connection.address, kind);
        await audit(lockedFor ? 'auth.lockout' : 'auth.failure', { address: connection.address, detail: { kind, surface: 'websocket', reason: refusal.message, ...(lockedFor ? { lockoutMs: lockedFor } : {}) } });
      }
      this.refuse(connection, frame.id, refusal);
      return;
    }
    lockout.succeed(connection.address, kind);
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
      closed: connection.closed.signal,
    };
    const push = (event: string, payload: unknown) => this.send(connection, { type: 'event', event, payload, seq: ++this.seq });
    for (const listener of hub.admitted) listener(connection.client, connect, push);
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
    const entry = this.options.table().methods.get(frame.method)?.value;
    if (!entry) {
      this.fail(connection, frame.id, new DomainError('not_found', `Unknown method ${JSON.stringify(frame.method)}.`));
      return;
    }
    if (!client.scopes.has(entry.scope) && !client.scopes.has('operator.admin')) {
      this.fail(connection, frame.id, new DomainError('forbidden', `${frame.method} needs the scope ${entry.scope}.`, { details: { missingScope: entry.scope } }));
      return;
    }
    if (connection.inFlight >= Limits.maxInFlightRequests) {
      this.fail(connection, frame.id, new DomainError('rate_limited', `More than ${Limits.maxInFlightRequests} requests in flight.`, { details: { retryAfterMs: 100 }, retryable: true }));
      return;
    }
    connection.inFlight++;
    try {
      const params = await checkParams(entry, frame.params);
      const payload = await entry.handler(params, client);
      this.send(connection, { type: 'res', id: frame.id, ok: true, payload });
    } catch (thrown) {
      const { error, unexpected } = toDomainError(thrown);
      if (unexpected) {
        this.options.logger.error({ err: thrown, method: frame.method }, 'method failed');
        this.fail(connection, frame.id, new DomainError('internal', `${frame.method} failed unexpectedly; the gateway log has the details.`));
      } else {
        this.fail(connection, frame.id, error);
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
    this.unsubscribe();
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

/** What is wrong with a connect's params, checked against their schema with a bound on every field; undefined when nothing is. */
function connectProblem(params: unknown): string | undefined {
  if (!validators.connect(params)) return `connect: ${describeProblems(validators.connect.errors, 'params').join('; ')}`;
  const { minProtocol, maxProtocol } = params as ConnectParams;
  if (minProtocol > PROTOCOL_VERSION || maxProtocol < MIN_PROTOCOL_VERSION) {
    return `protocol ${minProtocol}-${maxProtocol} is not supported; this gateway speaks ${MIN_PROTOCOL_VERSION}-${PROTOCOL_VERSION}`;
  }
  return undefined;
}

/** Why a frame could not be read: the answer to it carries no id, so the message must say. */
function unreadable(text: string | undefined): string {
  if (text === undefined) return 'frames are JSON text, not binary';
  if (nestsDeeperThan(text)) return `the frame nests deeper than ${MAX_JSON_DEPTH} levels`;
  try {
    JSON.parse(text);
  } catch {
    return 'the frame is not JSON';
  }
  return 'the frame is not an object with type, a string id of 1-128 characters and a method';
}

/** A method's params, checked against its schema (absent params are an empty object): INVALID_REQUEST naming each problem. */
async function checkParams(entry: MethodEntry, params: unknown): Promise<unknown> {
  const value = params === undefined || params === null ? {} : params;
  let validate: Validate | undefined;
  if (entry.declared) validate = validators[validatorExport(entry.name)];
  else if (entry.params) {
    await loadSchemaCompiler();
    validate = compileSchema(entry.params);
  } else {
    return params;
  }
  if (validate && !validate(value)) throw new DomainError('invalid', `${entry.name}: ${describeProblems(validate.errors, 'params').map((p) => `params.${p}`.replace('params.params', 'params')).join('; ')}`);
  return value;
}
