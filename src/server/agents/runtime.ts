/**
 * The agent runtime: one run per session at a time (a lane per session key),
 * a global bound on runs across sessions, and what happens to a message that
 * arrives during a run (the agent's queue mode): it runs next (followup), it
 * is merged with the others waiting into one next turn (collect), or it stops
 * the run and is answered at once (interrupt).
 */
import { randomUUID } from 'node:crypto';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { RunResult } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ToolCallRecord } from '../models/module.ts';

/** A run as the runtime sees it: the work, which knows how to start itself once it holds the lane and a slot. */
export interface RunRequest {
  runId?: string;
  agentId: string;
  sessionKey: string;
  /** Whom the run acts for: only turns of one person are merged into one run. */
  person?: string;
  /** The user's text; collected requests are merged into one turn. */
  text: string;
  /** The turn's messages when they are in the session already (a channel recorded them on arrival). */
  turnIds: number[];
  /** Starts the run (text and turns may have been merged with others waiting). */
  start: (run: { runId: string; text: string; turnIds: number[]; signal: AbortSignal }) => Promise<RunOutcome>;
  /** The caller's own abort (a client that went away). */
  signal?: AbortSignal;
  /** The agent has tools: the run also takes one of runtime.toolRunConcurrency's slots. */
  tools?: boolean;
}

export type RunOutcome = RunResult & { pendingClientCalls?: ToolCallRecord[]; finishReason?: string };

interface Pending {
  request: RunRequest;
  texts: string[];
  turnIds: number[];
  waiters: { resolve: (outcome: RunOutcome) => void; reject: (error: unknown) => void }[];
}

interface Lane {
  running?: { runId: string; controller: AbortController; done: Promise<unknown> };
  queue: Pending[];
}

/** Why a run was stopped: the abort reason the run ends with. */
export class RunStopped extends Error {
  readonly status: 'aborted' | 'interrupted';

  constructor(status: 'aborted' | 'interrupted', message: string) {
    super(message);
    this.status = status;
  }
}

export class AgentRuntime {
  private readonly lanes = new Map<string, Lane>();
  private active = 0;
  private activeWithTools = 0;
  /** Runs waiting for slots, in the order they came. */
  private readonly waiting: { tools: boolean; go: () => void }[] = [];
  private readonly runs = new Map<string, AbortController>();
  /** Run ids callers chose, from submission until the run ends. */
  private readonly chosen = new Set<string>();
  private stopping = false;
  private readonly config: () => GatewayConfig;

  constructor(config: () => GatewayConfig) {
    this.config = config;
  }

  /** Runs now, or after the run of its session (merged with others waiting under collect), or in place of it (interrupt). */
  submit(request: RunRequest, queue: 'followup' | 'collect' | 'interrupt'): Promise<RunOutcome> {
    if (this.stopping) return Promise.reject(new DomainError('unavailable', 'The gateway is stopping; no new runs start.', { retryable: true }));
    let lane = this.lanes.get(request.sessionKey);
    if (!lane) {
      lane = { queue: [] };
      this.lanes.set(request.sessionKey, lane);
    }
    const { runId } = request;
    if (runId) this.chosen.add(runId);
    return new Promise<RunOutcome>((resolve, reject) => {
      const settle = <T>(then: (value: T) => void) => (value: T) => {
        if (runId) this.chosen.delete(runId);
        then(value);
      };
      const waiter = { resolve: settle(resolve), reject: settle(reject) };
      const last = lane.queue.at(-1);
      // In a room, turns of different people are never merged: a run acts for one person, with that person's memory.
      if (queue === 'collect' && last && last.request.agentId === request.agentId && last.request.person === request.person) {
        last.texts.push(request.text);
        last.turnIds.push(...request.turnIds);
        last.waiters.push(waiter);
      } else {
        lane.queue.push({ request, texts: [request.text], turnIds: [...request.turnIds], waiters: [waiter] });
      }
      if (queue === 'interrupt' && lane.running) lane.running.controller.abort(new RunStopped('aborted', 'a newer message interrupted the run'));
      request.signal?.addEventListener('abort', () => this.cancelPending(lane, request), { once: true });
      this.pump(request.sessionKey);
    });
  }

  private cancelPending(lane: Lane, request: RunRequest): void {
    const index = lane.queue.findIndex((pending) => pending.request === request);
    if (index === -1) return;
    const [pending] = lane.queue.splice(index, 1);
    for (const waiter of pending!.waiters) waiter.reject(new RunStopped('aborted', 'the caller went away before the run started'));
  }

  private pump(sessionKey: string): void {
    const lane = this.lanes.get(sessionKey);
    if (!lane || lane.running) return;
    const next = lane.queue.shift();
    if (!next) {
      this.lanes.delete(sessionKey);
      return;
    }
    const runId = next.request.runId ?? `run_${randomUUID()}`;
    const controller = new AbortController();
    const outer = next.request.signal;
    if (outer) {
      if (outer.aborted) controller.abort(new RunStopped('aborted', 'the caller went away'));
      else outer.addEventListener('abort', () => controller.abort(new RunStopped('aborted', 'the caller went away')), { once: true });
    }
    const done = (async () => {
      const tools = next.request.tools === true;
      await this.acquire(tools);
      this.runs.set(runId, controller);
      try {
        if (this.stopping) throw new RunStopped('interrupted', 'the gateway stopped before the run began');
        const outcome = await next.request.start({ runId, text: next.texts.join('\n\n'), turnIds: next.turnIds, signal: controller.signal });
        for (const waiter of next.waiters) waiter.resolve(outcome);
      } catch (error) {
        for (const waiter of next.waiters) waiter.reject(error);
      } finally {
        this.runs.delete(runId);
        this.release(tools);
      }
    })();
    lane.running = { runId, controller, done };
    void done.finally(() => {
      lane.running = undefined;
      this.pump(sessionKey);
    });
  }

  /**
   * Waits for a slot under runtime.concurrency and, for a run of an agent
   * with tools, one under runtime.toolRunConcurrency (both read live). A run
   * without tools is not held up behind tool runs waiting for theirs.
   */
  private acquire(tools: boolean): Promise<void> {
    // Never ahead of a run that came first and fits as well (only tool runs waiting for their own slots are passed).
    if (this.fits(tools) && !this.waiting.some((waiter) => this.fits(waiter.tools))) {
      this.take(tools);
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push({ tools, go: () => { this.take(tools); resolve(); } }));
  }

  private fits(tools: boolean): boolean {
    const { concurrency, toolRunConcurrency } = this.config().runtime;
    return this.active < concurrency && (!tools || this.activeWithTools < toolRunConcurrency);
  }

  private take(tools: boolean): void {
    this.active++;
    if (tools) this.activeWithTools++;
  }

  private release(tools: boolean): void {
    this.active--;
    if (tools) this.activeWithTools--;
    // The first waiting run that fits goes, in the order they came: a tool run waiting for its own slot holds up no other run.
    for (let index = 0; index < this.waiting.length && this.active < this.config().runtime.concurrency;) {
      const waiter = this.waiting[index]!;
      if (this.fits(waiter.tools)) {
        this.waiting.splice(index, 1);
        waiter.go();
      } else {
        index++;
      }
    }
  }

  /** Aborts a run by id, or every run and waiting message of a session; returns how many were stopped. */
  abort(target: { runId?: string; sessionKey?: string }): number {
    let stopped = 0;
    if (target.runId) {
      const controller = this.runs.get(target.runId);
      if (controller) {
        controller.abort(new RunStopped('aborted', 'aborted by an operator'));
        stopped++;
      }
    }
    if (target.sessionKey) {
      const lane = this.lanes.get(target.sessionKey);
      if (lane) {
        for (const pending of lane.queue.splice(0)) {
          for (const waiter of pending.waiters) waiter.reject(new RunStopped('aborted', 'aborted by an operator'));
          stopped++;
        }
        if (lane.running) {
          lane.running.controller.abort(new RunStopped('aborted', 'aborted by an operator'));
          stopped++;
        }
      }
    }
    return stopped;
  }

  /** At shutdown: no new runs; running ones end as interrupted; waits for them up to the deadline. */
  async stop(deadline: number): Promise<void> {
    this.stopping = true;
    const running = [...this.lanes.values()].map((lane) => lane.running?.done).filter(Boolean);
    for (const lane of this.lanes.values()) {
      for (const pending of lane.queue.splice(0)) {
        for (const waiter of pending.waiters) waiter.reject(new RunStopped('interrupted', 'the gateway stopped'));
      }
      lane.running?.controller.abort(new RunStopped('interrupted', 'the gateway stopped during the run'));
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled(running), new Promise((resolve) => { timer = setTimeout(resolve, Math.max(0, deadline - Date.now())); })]);
    clearTimeout(timer);
  }

  /** Whether a run of this id is waiting or running. */
  has(runId: string): boolean {
    return this.chosen.has(runId) || this.runs.has(runId);
  }

  get running(): number {
    return this.runs.size;
  }
}
