import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { matchesPattern } from '../../shared/patterns.ts';
import type { ToolAnswer, ToolCatalogEntry } from '../../shared/protocol/results.ts';
import { DomainError, RunSuspended, toDomainError } from '../kernel/errors.ts';
import { observe, observed, type ToolCallObserved } from '../kernel/observe.ts';
import type { ToolDef } from '../kernel/module.ts';
import type { RegistryTable } from '../kernel/registry.ts';
import { compileSchema, describeProblems, loadSchemaCompiler } from '../kernel/schema.ts';
import type { Store } from '../store/database.ts';
import { pruneRows } from '../store/retention.ts';

const invalid = (message: string) => new DomainError('invalid', message);

export interface ToolRequest {
  tool: string;
  args?: Record<string, unknown>;
  sessionKey?: string;
  /** The agent run that calls it, the call's id in it, and where the run's answer goes (never from a request body). */
  runId?: string;
  callId?: string;
  replyTo?: string;
  idempotencyKey?: string;
  dryRun?: boolean;
}

export interface ToolCaller {
  /** Stable name of the caller (idempotency keys are per caller). */
  name: string;
  surface: 'http' | 'ws' | 'agent';
  /** Whether the caller holds the admin grant (dangerous tools over the WebSocket need it). */
  admin: boolean;
  /** The agent whose run calls the tool. */
  agent?: string;
  /** Whom the call acts for, derived by the daemon (src/server/kernel/person.ts). */
  person: string;
  /** Whose spending an agent's run is (a credential, an automation): what it starts spends it too. */
  subject?: string;
}

/** Checks a request's own shape (not the tool's args): 400 naming the field. */
export function parseToolRequest(body: unknown): ToolRequest {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw invalid('The body must be a JSON object with at least "tool".');
  const input = body as Record<string, unknown>;
  const unknown = Object.keys(input).filter((key) => !['tool', 'args', 'sessionKey', 'idempotencyKey', 'dryRun'].includes(key));
  if (unknown.length > 0) throw invalid(`Unknown field${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}.`);
  if (typeof input.tool !== 'string' || input.tool.length === 0 || input.tool.length > 64) throw invalid('tool must be a tool name.');
  if (input.args !== undefined && (input.args === null || typeof input.args !== 'object' || Array.isArray(input.args))) throw invalid('args must be an object.');
  if (input.sessionKey !== undefined && (typeof input.sessionKey !== 'string' || input.sessionKey.length === 0 || input.sessionKey.length > 256)) throw invalid('sessionKey must be a session key.');
  if (input.idempotencyKey !== undefined && (typeof input.idempotencyKey !== 'string' || !/^[\x21-\x7e]{1,128}$/.test(input.idempotencyKey))) throw invalid('idempotencyKey must be 1-128 visible ASCII characters.');
  if (input.dryRun !== undefined && typeof input.dryRun !== 'boolean') throw invalid('dryRun must be true or false.');
  return input as unknown as ToolRequest;
}

/** The answer to a tool call, the same over HTTP and the WebSocket. */
export const toolAnswer = (outcome: { result: unknown; replayed?: boolean; dryRun?: boolean }): ToolAnswer => ({
  ok: true as const, result: outcome.result, ...(outcome.dryRun ? { dryRun: true as const } : {}), ...(outcome.replayed ? { replayed: true as const } : {}),
});

/**
 * Tools that come and go while the daemon runs (an MCP server's), outside the
 * table: the runner lists and resolves them beside the table's, under the
 * same policy. Their names must not collide with the table's.
 */
export interface ToolSource {
  /** Who offers them (shown as the tool's plugin). */
  owner: string;
  tools(): Iterable<ToolDef>;
  get(name: string): ToolDef | undefined;
}

export interface ToolRunnerDeps {
  table: () => RegistryTable;
  config: () => GatewayConfig;
  store: Store;
  logger: Logger;
  now?: () => number;
}

/** How long an idempotency key remembers its result. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60_000;

/** Runs tools under the policy: deny lists, dangerous tools, argument schemas, idempotency keys. */
export class ToolRunner {
  private readonly deps: ToolRunnerDeps;
  private readonly inFlight = new Map<string, { fingerprint: string; work: Promise<unknown> }>();
  private readonly loggers = new Map<string, Logger>();
  private readonly sources: ToolSource[] = [];

  constructor(deps: ToolRunnerDeps) {
    this.deps = deps;
  }

  /** Adds tools that change while the daemon runs; a table tool of the same name wins. */
  addSource(source: ToolSource): void {
    this.sources.push(source);
  }

  private lookup(name: string): { owner: string; value: ToolDef } | undefined {
    const entry = this.deps.table().tools.get(name);
    if (entry) return entry;
    for (const source of this.sources) {
      const value = source.get(name);
      if (value) return { owner: source.owner, value };
    }
    return undefined;
  }

  private *everyTool(): Iterable<{ owner: string; value: ToolDef }> {
    const table = this.deps.table().tools;
    yield* table.values();
    for (const source of this.sources) {
      for (const value of source.tools()) if (!table.has(value.name)) yield { owner: source.owner, value };
    }
  }

  private denied(name: string): boolean {
    return this.deps.config().gateway.tools.deny.some((pattern) => matchesPattern(pattern, name));
  }

  /** Whether a caller without the admin grant (HTTP, an agent) may call it: not denied, and not dangerous unless gateway.tools.allow names it. */
  private allowedOverHttp(tool: ToolDef): boolean {
    if (this.denied(tool.name)) return false;
    return !tool.dangerous || this.deps.config().gateway.tools.allow.some((pattern) => matchesPattern(pattern, tool.name));
  }

  /** The tools a surface may call, with their schemas. */
  catalog(surface: 'http' | 'ws' | 'agent'): ToolCatalogEntry[] {
    return [...this.everyTool()]
      .filter(({ value }) => (surface === 'ws' ? !this.denied(value.name) : this.allowedOverHttp(value)))
      .map(({ owner, value }) => ({
        name: value.name, description: value.description, inputSchema: value.inputSchema ?? { type: 'object' }, dangerous: value.dangerous === true,
        plugin: owner, overHttp: this.allowedOverHttp(value),
      }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /** The tool for a caller, or 404 / 403 saying why not (an unknown and a denied tool look the same over HTTP). */
  private resolve(name: string, caller: ToolCaller): ToolDef {
    const entry = this.lookup(name);
    if (!entry || this.denied(name)) throw new DomainError('not_found', `No tool ${name} is available.`);
    const tool = entry.value;
    const why = tool.external ?? 'it changes the host or the gateway';
    if (caller.surface !== 'ws' && !this.allowedOverHttp(tool)) {
      throw new DomainError('not_found', `No tool ${name} is available ${caller.surface === 'http' ? 'over HTTP' : 'to agents'} (${why}; list it in gateway.tools.allow to allow it).`);
    }
    if (caller.surface === 'ws' && tool.dangerous && !caller.admin) throw new DomainError('forbidden', `Tool ${name} needs the scope operator.admin (${why}).`);
    return tool;
  }

  async invoke(request: ToolRequest, caller: ToolCaller): Promise<{ result: unknown; replayed?: boolean; dryRun?: boolean }> {
    const tool = this.resolve(request.tool, caller);
    const args = request.args ?? {};
    if (tool.inputSchema) {
      await loadSchemaCompiler();
      const validate = compileSchema(tool.inputSchema);
      if (!validate(args)) throw invalid(`Invalid args for ${tool.name}: ${describeProblems(validate.errors, 'args').join('; ')}.`);
    }
    if (request.dryRun) return { result: { tool: tool.name, valid: true }, dryRun: true };
    if (!request.idempotencyKey) return { result: await this.run(tool, args, request, caller) };

    const key = `${caller.name}\n${request.idempotencyKey}`;
    // Whom the call acts for is part of it: one person's result is never replayed to another under the same key.
    const fingerprint = createHash('sha256').update(JSON.stringify([tool.name, args, request.sessionKey ?? null, caller.person])).digest('hex');
    const now = this.deps.now?.() ?? Date.now();
    const earlier = await this.deps.store.get<{ fingerprint: string; result: string }>('SELECT fingerprint, result FROM tool_invocations WHERE caller = ? AND key = ? AND created_at > ?',
      caller.name, request.idempotencyKey, now - IDEMPOTENCY_TTL_MS);
    if (earlier) {
      if (earlier.fingerprint !== fingerprint) throw new DomainError('conflict', 'This idempotencyKey was used for a different call; use a new key.');
      return { result: JSON.parse(earlier.result), replayed: true };
    }
    const running = this.inFlight.get(key);
    if (running) {
      if (running.fingerprint !== fingerprint) throw new DomainError('conflict', 'This idempotencyKey is in use for a different call; use a new key.');
      return { result: await running.work, replayed: true };
    }
    const work = this.run(tool, args, request, caller).then(async (result) => {
      await this.deps.store.run(`
        INSERT INTO tool_invocations (caller, key, tool, fingerprint, result, created_at) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (caller, key) DO UPDATE SET tool = excluded.tool, fingerprint = excluded.fingerprint, result = excluded.result, created_at = excluded.created_at
      `, caller.name, request.idempotencyKey!, tool.name, fingerprint, JSON.stringify(result ?? null), now);
      return result;
    });
    this.inFlight.set(key, { fingerprint, work });
    try {
      return { result: await work };
    } finally {
      this.inFlight.delete(key);
    }
  }

  private async run(tool: ToolDef, args: Record<string, unknown>, request: ToolRequest, caller: ToolCaller): Promise<unknown> {
    let logger = this.loggers.get(tool.name);
    if (!logger) {
      logger = this.deps.logger.child({ tool: tool.name });
      if (this.loggers.size > 1000) this.loggers.clear();
      this.loggers.set(tool.name, logger);
    }
    const startedAt = Date.now();
    const told = (error?: string) => observe(observed.toolCall, (): ToolCallObserved => ({
      tool: tool.name, surface: caller.surface, startedAt, endedAt: Date.now(), ...(request.runId ? { runId: request.runId } : {}), ...(error ? { error } : {}),
    }));
    try {
      const result = await tool.handler(args, {
        caller: caller.name, surface: caller.surface, person: caller.person, sessionKey: request.sessionKey, logger, ...(caller.agent ? { agent: caller.agent } : {}), ...(caller.subject ? { subject: caller.subject } : {}),
        ...(request.runId ? { runId: request.runId } : {}), ...(request.callId ? { callId: request.callId } : {}), ...(request.replyTo ? { replyTo: request.replyTo } : {}),
      });
      told();
      return result === undefined ? null : JSON.parse(JSON.stringify(result));
    } catch (thrown) {
      // The call ends its run for now (ask): no failure, the run's loop takes it.
      if (thrown instanceof RunSuspended) {
        told();
        throw thrown;
      }
      // What a tool says of the call answers as it says: the caller's request refused (a DomainError, an error with a status of
      // 400-499), the server it works against failed (502) or is away (503), the place it writes to is full (507). Only what
      // nobody expected is 500, its inside logged. An outcome of the tool's work (a page's 404, a command's exit code, an MCP
      // tool's isError) is no error: it is the result.
      const { error, unexpected } = toDomainError(thrown);
      told(error.kind);
      if (!unexpected && (error.status < 500 || error.kind === 'upstream' || error.kind === 'unavailable' || error.kind === 'insufficient_storage')) throw error;
      logger.error({ err: thrown, caller: caller.name }, 'tool failed');
      throw new DomainError('internal', `Tool ${tool.name} failed; the gateway log has the details.`);
    }
  }

  async prune(): Promise<number> {
    const cutoff = (this.deps.now?.() ?? Date.now()) - IDEMPOTENCY_TTL_MS;
    return pruneRows(this.deps.store, 'tool_invocations', 'caller, key', 'created_at < ?', cutoff);
  }
}
