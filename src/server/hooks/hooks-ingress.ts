import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { ChannelManager } from '../channels/module.ts';
import type { SessionStore } from '../sessions/module.ts';
import type { JobQueue } from '../jobs/module.ts';
import { sendEmpty, sendJson } from '../kernel/answer.ts';
import type { ReceivedBody } from '../kernel/body.ts';
import { DomainError } from '../kernel/errors.ts';
import type { Store } from '../store/database.ts';
import { hookPathRest, hooksBase } from './hooks-path.ts';
import { type HookMapping, presetMappings } from './presets.ts';
import { renderTemplate, valueAt } from './template.ts';

export interface HooksIngressDeps {
  config: () => GatewayConfig;
  queue: JobQueue;
  /** Whether some handler runs jobs of a kind. */
  handles: (kind: string) => boolean;
  channels: ChannelManager;
  sessions: SessionStore;
  store: Store;
  logger: Logger;
  emit: (event: string, payload: unknown, scope: string) => void;
  /** Other modules' interest in hooks (automations with a hook trigger). */
  followers: () => readonly HookFollower[];
}

/** Another module that acts on a hook's requests (an automation with a hook trigger). */
export interface HookFollower {
  /** Whether a request to this hook interests it now. */
  wants(name: string): boolean;
  /** Acts on a request (its Idempotency-Key, when it has one, keeps a repeat from acting twice); says what it did. */
  fire(name: string, payload: Record<string, unknown>, key: string | undefined): Promise<Record<string, unknown>[]>;
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};
const invalid = (message: string) => new DomainError('invalid', message);
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
 * their own. After the layers every route takes (404 while hooks are off,
 * method 405, a token in the query 400, the request budget 429, the hooks
 * token 401 or 429 once locked out, the body's type 415, size 413 and JSON
 * 400: http/pipeline.ts, hooks-token.ts), checks the hook name (404), then the payload.
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

  async handle(req: IncomingMessage, res: ServerResponse, body: ReceivedBody): Promise<void> {
    const answer = await this.process(req, body);
    if (answer.body !== undefined) return sendJson(res, answer.status, answer.body, answer.headers);
    sendEmpty(res, answer.status, answer.headers);
  }

  private mappings(): HookMapping[] {
    const { hooks } = this.deps.config();
    return [...hooks.mappings, ...presetMappings(hooks.presets)];
  }

  private async process(req: IncomingMessage, body: ReceivedBody): Promise<Answer> {
    const name = decodeName(hookPathRest(this.base, req.url) ?? '');
    const mappings = HOOK_NAME.test(name) ? this.mappings().filter((mapping) => mapping.name === name) : [];
    const followers = HOOK_NAME.test(name) ? this.deps.followers().filter((follower) => follower.wants(name)) : [];
    if (mappings.length === 0 && followers.length === 0) throw new DomainError('not_found', `No hook named ${JSON.stringify(name)}.`);

    const payload = body.value ?? {};
    if (!payload || typeof payload !== 'object' || Array.isArray(payload)) throw invalid('The payload must be a JSON object.');

    const key = header(req, 'idempotency-key');
    if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) throw invalid('Idempotency-Key must be 1-128 visible ASCII characters.');
    if (key !== undefined) {
      const earlier = await this.deps.store.get<{ status: number; body: string | null }>('SELECT status, body FROM hook_requests WHERE hook = ? AND key = ?', name, key);
      if (earlier) {
        return { status: Number(earlier.status), body: earlier.body === null ? undefined : JSON.parse(earlier.body), headers: { 'idempotent-replayed': 'true' } };
      }
    }
    const answer = await this.run(name, mappings, payload as Record<string, unknown>, followers, key);
    if (key !== undefined) {
      await this.deps.store.run('INSERT INTO hook_requests (hook, key, status, body, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (hook, key) DO NOTHING',
        name, key, answer.status, answer.body === undefined ? null : JSON.stringify(answer.body), Date.now());
    }
    return answer;
  }

  /** The session a mapping acts on: the caller's choice within the allowed prefixes, else the mapping's, else the default. */
  private sessionKey(mapping: HookMapping, payload: Record<string, unknown>): string | undefined {
    const { hooks } = this.deps.config();
    const asked = payload.sessionKey;
    if (asked !== undefined) {
      if (typeof asked !== 'string' || asked.length === 0 || asked.length > 256) throw invalid('sessionKey must be a session key.');
      if (!hooks.allowedSessionKeyPrefixes.some((prefix) => asked.startsWith(prefix))) {
        throw invalid(hooks.allowedSessionKeyPrefixes.length === 0
          ? 'This gateway does not let hook callers choose a session (hooks.allowedSessionKeyPrefixes is empty).'
          : `sessionKey must start with one of: ${hooks.allowedSessionKeyPrefixes.join(', ')}.`);
      }
      return asked;
    }
    return mapping.sessionKey ?? hooks.defaultSessionKey;
  }

  private async run(name: string, mappings: HookMapping[], original: Record<string, unknown>, followers: readonly HookFollower[] = [], key?: string): Promise<Answer> {
    // A job nothing would run is never queued: the hook answers that it cannot act, and does nothing.
    const orphan = mappings.find((mapping) => mapping.action === 'job' && !this.deps.handles(mapping.kind ?? `hooks.${name}`));
    if (orphan) {
      throw new DomainError('unavailable', `Hook ${name} queues jobs of kind ${orphan.kind ?? `hooks.${name}`}, which no handler runs (a plugin that is not loaded?); nothing was done.`);
    }
    const results: Record<string, unknown>[] = [];
    for (const mapping of mappings) {
      if (mapping.match && JSON.stringify(valueAt(original, mapping.match.field)) !== JSON.stringify(mapping.match.equals)) continue;
      const payload = mapping.transform ? mapping.transform(original) : original;
      if (mapping.action === 'job') {
        const kind = mapping.kind ?? `hooks.${name}`;
        const sessionKey = this.sessionKey(mapping, original);
        const jobId = await this.deps.queue.enqueue({ kind, payload: { hook: name, payload, ...(sessionKey ? { sessionKey } : {}) }, source: `hook:${name}` });
        results.push({ action: 'job', kind, jobId });
      } else if (mapping.action === 'message') {
        results.push(await this.message(name, mapping, payload));
      } else {
        const key = this.sessionKey(mapping, original);
        if (!key) throw invalid(`Hook ${name} wakes a session but none is named (set the mapping's sessionKey or hooks.defaultSessionKey).`);
        const session = await this.deps.sessions.wake(key);
        if (!session) throw invalid(`There is no session ${key} to wake.`);
        this.deps.emit('session.wake', { sessionKey: key, hook: name, at: new Date().toISOString() }, 'operator.read');
        results.push({ action: 'wake', sessionKey: key });
      }
    }
    for (const follower of followers) results.push(...(await follower.fire(name, original, key)));
    if (results.length === 0) return { status: 204 };
    this.deps.logger.info({ hook: name, actions: results.map((r) => r.action) }, 'hook handled');
    return { status: 200, body: { ok: true, hook: name, results } };
  }

  private async message(name: string, mapping: HookMapping, payload: Record<string, unknown>): Promise<Record<string, unknown>> {
    const text = renderTemplate(mapping.text ?? '', payload);
    if (text.trim().length === 0) throw invalid(`Hook ${name} rendered an empty message.`);
    let target: { channel: string; to: string; account?: string };
    if (mapping.channel && mapping.to) {
      target = { channel: mapping.channel, to: mapping.to };
    } else {
      const key = this.sessionKey(mapping, payload);
      const session = key ? await this.deps.sessions.get(key) : undefined;
      if (!session) throw invalid(key ? `There is no session ${key} to message.` : `Hook ${name} names no channel peer or session.`);
      target = { channel: session.channel, account: session.account, to: session.peerName ?? session.peer };
    }
    const sent = await this.deps.channels.send({ ...target, text, via: `hook:${name}` });
    return { action: 'message', sessionKey: sent.session.key, messageId: sent.message.id, sent: sent.delivery.status === 'sent' };
  }
}
