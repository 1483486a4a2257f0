import type { Store } from '../store/database.ts';

export interface JobContext {
  store: Store;
  jobId: string;
  attempt: number;
}

/** Does a job's work and returns its result (stored as JSON); throwing fails the attempt. */
export type JobHandler = (payload: unknown, context: JobContext) => unknown | Promise<unknown>;

/** Job kinds and their handlers: one table, so plugins can add kinds. */
export class JobHandlers {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly prefixes = new Map<string, JobHandler>();
  /** Handlers registered elsewhere (plugins), asked after the gateway's own. */
  fallback?: (kind: string) => JobHandler | undefined;

  handle(kind: string, handler: JobHandler): this {
    if (this.handlers.has(kind)) throw new Error(`a handler for ${kind} is already registered`);
    this.handlers.set(kind, handler);
    return this;
  }

  /** A handler for every kind starting with prefix that has no handler of its own. */
  handlePrefix(prefix: string, handler: JobHandler): this {
    this.prefixes.set(prefix, handler);
    return this;
  }

  /** Whether the gateway itself handles this kind (plugins cannot take it). */
  own(kind: string): boolean {
    return this.handlers.has(kind) || [...this.prefixes.keys()].some((prefix) => kind.startsWith(prefix));
  }

  find(kind: string): JobHandler | undefined {
    const exact = this.handlers.get(kind);
    if (exact) return exact;
    for (const [prefix, handler] of this.prefixes) if (kind.startsWith(prefix)) return handler;
    return this.fallback?.(kind);
  }

  kinds(): string[] {
    return [...this.handlers.keys(), ...[...this.prefixes.keys()].map((prefix) => `${prefix}*`)].sort();
  }
}
