import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { queryCarriesCredential, tooMany } from '../auth/http-auth.ts';
import type { AuthLockout } from '../auth/throttle.ts';
import { ChannelError, type ChannelManager } from '../channels/manager.ts';
import type { SessionStore } from '../channels/sessions.ts';
import { collectBody, mediaType } from '../http/body.ts';
import { errorBody, HttpError } from '../http/error-body.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Store } from '../store/database.ts';
import { hookPathRest, hooksBase } from './hooks-path.ts';
import { presetMappings } from './presets.ts';
import { renderTemplate, valueAt } from './template.ts';

export interface HookMapping {
  name: string;
  match?: { field: string; equals?: unknown };
  action: 'job' | 'message' | 'wake';
  kind?: string;
  channel?: string;
  to?: string;
  sessionKey?: string;
  text?: string;
  /** A preset's own check and reshaping of the payload (400 when it does not fit). */
  transform?: (payload: Record<string, unknown>) => Record<string, unknown>;
}

export interface HooksIngressDeps {
  config: () => GatewayConfig;
  /** The hooks token; undefined when none is set. */
  token: () => string | undefined;
  lockout: AuthLockout;
  queue: JobQueue;
  channels: ChannelManager;
  sessions: SessionStore;
  store: Store;
  logger: Logger;
  emit: (event: string, payload: unknown, scope: string) => void;
}

const digest = (value: string) => createHash('sha256').update(value).digest();
const header = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,128}$/;
const HOOK_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** A hook name from the path; a malformed escape names no hook (404), it is not a failure. */
const decodeName = (encoded: string): string => {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return '';
  }
};

interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * POST <hooks.path>/<name>: outside systems poke the gateway with a token of
 * their own. Checks, in this order: method (405), a token in the query (400),
 * the token (401, or 429 once locked out), body size (413), hook name (404).
 * Payloads are untrusted: size-bounded, parsed as JSON, read by path, never run.
 */
export class HooksIngress {
  private readonly deps: HooksIngressDeps;

  constructor(deps: HooksIngressDeps) {
    this.deps = deps;
  }

  private get base(): string {
    return hooksBase(this.deps.config().hooks.path);
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.process(req, res).then(
      (answer) => this.send(res, answer),
      (error: unknown) => {
        if (error instanceof HttpError) return this.send(res, { status: error.status, body: errorBody(error.status, error.message), headers: error.headers });
        this.deps.logger.error({ err: error }, 'hook failed');
        this.send(res, { status: 500, body: errorBody(500, 'An unexpected error occurred; the gateway log has the details.') });
      },
    );
  }

  private send(res: ServerResponse, answer: Answer): void {
    if (res.headersSent) return;
    if (answer.body === undefined) {
      res.writeHead(answer.status, { 'cache-control': 'no-store', ...answer.headers }).end();
      return;
    }
    const payload = Buffer.from(JSON.stringify(answer.body));
    res.writeHead(answer.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': payload.length, 'cache-control': 'no-store', ...answer.headers });
    res.end(payload);
  }

  private mappings(): HookMapping[] {
    const { hooks } = this.deps.config();
    return [...hooks.mappings, ...presetMappings(hooks.presets)];
  }

  private async process(req: IncomingMessage, res: ServerResponse): Promise<Answer> {
    const { hooks } = this.deps.config();
    const path = (req.url ?? '/').split('?')[0]!;
    if (!hooks.enabled) throw new HttpError(404, `No route for ${req.method} ${path}.`);
    if (req.method !== 'POST') throw new HttpError(405, `Method ${req.method} is not allowed on hooks; POST to ${this.base}/<name>.`, { allow: 'POST' });
    if (queryCarriesCredential(req.url)) {
      throw new HttpError(400, 'The hooks token never goes in the URL: send it as "Authorization: Bearer <token>" or "x-gateway-token: <token>".');
    }
    await this.authenticate(req);
    const raw = await collectBody(req, hooks.maxBodyBytes, () => res.setHeader('connection', 'close'));
    const name = decodeName(hookPathRest(this.base, req.url) ?? '');
    const mappings = HOOK_NAME.test(name) ? this.mappings().filter((mapping) => mapping.name === name) : [];
    if (mappings.length === 0) throw new HttpError(404, `No hook named ${JSON.stringify(name)}.`);

    if (mediaType(header(req, 'content-type')) !== 'application/json') throw new HttpError(415, 'Send the hook payload as application/json.');
    let payload: unknown;
    try {
      payload = raw.length === 0 ? {} : JSON.parse(raw.toString('utf8'));
    } catch {
      throw new HttpError(400, 'The body is not valid JSON.');
    }
    if (!payload || typeof payload !== 'object' || Array.isArray(payload)) throw new HttpError(400, 'The payload must be a JSON object.');

    const key = header(req, 'idempotency-key');
    if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) throw new HttpError(400, 'Idempotency-Key must be 1-128 visible ASCII characters.');
    if (key !== undefined) {
      const earlier = this.deps.store.prepare('SELECT status, body FROM hook_requests WHERE hook = ? AND key = ?').get(name, key) as { status: number; body: string | null } | undefined;
      if (earlier) {
        return { status: Number(earlier.status), body: earlier.body === null ? undefined : JSON.parse(earlier.body), headers: { 'idempotent-replayed': 'true' } };
      }
    }
    const answer = await this.run(name, mappings, payload as Record<string, unknown>);
    if (key !== undefined) {
      this.deps.store.prepare('INSERT INTO hook_requests (hook, key, status, body, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (hook, key) DO NOTHING')
        .run(name, key, answer.status, answer.body === undefined ? null : JSON.stringify(answer.body), Date.now());
    }
    return answer;
  }

  private async authenticate(req: IncomingMessage): Promise<void> {
    const address = req.socket.remoteAddress ?? 'unknown';
    const wait = await this.deps.lockout.retryAfterMs(address, 'hooks');
    if (wait > 0) throw tooMany(wait);
    const expected = this.deps.token();
    if (!expected) throw new HttpError(503, 'No hooks token is configured: gateway hooks token set');
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header(req, 'authorization') ?? '')?.[1];
    const presented = bearer ?? header(req, 'x-gateway-token');
    if (presented !== undefined && timingSafeEqual(digest(presented), digest(expected))) {
      await this.deps.lockout.succeed(address, 'hooks');
      return;
    }
    const lockedFor = await this.deps.lockout.fail(address, 'hooks');
    this.deps.store.audit(lockedFor ? 'auth.lockout' : 'auth.failure', { address, detail: { kind: 'hooks', ...(lockedFor ? { lockoutMs: lockedFor } : {}) } });
    if (lockedFor) throw tooMany(lockedFor);
    throw new HttpError(401, presented === undefined
      ? 'Hooks need the hooks token: "Authorization: Bearer <token>" or "x-gateway-token: <token>".'
      : 'The hooks token is not valid.', { 'www-authenticate': 'Bearer' });
  }

  /** The session a mapping acts on: the caller's choice within the allowed prefixes, else the mapping's, else the default. */
  private sessionKey(mapping: HookMapping, payload: Record<string, unknown>): string | undefined {
    const { hooks } = this.deps.config();
    const asked = payload.sessionKey;
    if (asked !== undefined) {
      if (typeof asked !== 'string' || asked.length === 0 || asked.length > 256) throw new HttpError(400, 'sessionKey must be a session key.');
      if (!hooks.allowedSessionKeyPrefixes.some((prefix) => asked.startsWith(prefix))) {
        throw new HttpError(400, hooks.allowedSessionKeyPrefixes.length === 0
          ? 'This gateway does not let hook callers choose a session (hooks.allowedSessionKeyPrefixes is empty).'
          : `sessionKey must start with one of: ${hooks.allowedSessionKeyPrefixes.join(', ')}.`);
      }
      return asked;
    }
    return mapping.sessionKey ?? hooks.defaultSessionKey;
  }

  private async run(name: string, mappings: HookMapping[], original: Record<string, unknown>): Promise<Answer> {
    const results: Record<string, unknown>[] = [];
    for (const mapping of mappings) {
      if (mapping.match && JSON.stringify(valueAt(original, mapping.match.field)) !== JSON.stringify(mapping.match.equals)) continue;
      const payload = mapping.transform ? mapping.transform(original) : original;
      if (mapping.action === 'job') {
        const kind = mapping.kind ?? `hooks.${name}`;
        const sessionKey = this.sessionKey(mapping, original);
        const jobId = this.deps.queue.enqueue(kind, { hook: name, payload, ...(sessionKey ? { sessionKey } : {}) }, { source: `hook:${name}` });
        results.push({ action: 'job', kind, jobId });
      } else if (mapping.action === 'message') {
        results.push(await this.message(name, mapping, payload));
      } else {
        const key = this.sessionKey(mapping, original);
        if (!key) throw new HttpError(400, `Hook ${name} wakes a session but none is named (set the mapping's sessionKey or hooks.defaultSessionKey).`);
        const session = this.deps.sessions.wake(key);
        if (!session) throw new HttpError(400, `There is no session ${key} to wake.`);
        this.deps.emit('session.wake', { sessionKey: key, hook: name, at: new Date().toISOString() }, 'operator.read');
        results.push({ action: 'wake', sessionKey: key });
      }
    }
    if (results.length === 0) return { status: 204 };
    this.deps.logger.info({ hook: name, actions: results.map((r) => r.action) }, 'hook handled');
    return { status: 200, body: { ok: true, hook: name, results } };
  }

  private async message(name: string, mapping: HookMapping, payload: Record<string, unknown>): Promise<Record<string, unknown>> {
    const text = renderTemplate(mapping.text ?? '', payload);
    if (text.trim().length === 0) throw new HttpError(400, `Hook ${name} rendered an empty message.`);
    let target: { channel: string; to: string; account?: string };
    if (mapping.channel && mapping.to) {
      target = { channel: mapping.channel, to: mapping.to };
    } else {
      const key = this.sessionKey(mapping, payload);
      const session = key ? this.deps.sessions.get(key) : undefined;
      if (!session) throw new HttpError(400, key ? `There is no session ${key} to message.` : `Hook ${name} names no channel peer or session.`);
      target = { channel: session.channel, account: session.account, to: session.peerName ?? session.peer };
    }
    try {
      const sent = await this.deps.channels.send({ ...target, text, via: `hook:${name}` });
      return { action: 'message', sessionKey: sent.session.key, messageId: sent.message.id };
    } catch (error) {
      if (error instanceof ChannelError) throw new HttpError(error.kind === 'unavailable' ? 503 : 400, error.message);
      throw error;
    }
  }
}
