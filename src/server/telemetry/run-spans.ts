/**
 * The spans of agent runs, following the OpenTelemetry GenAI conventions:
 * `invoke_agent <agent>`, its steps `chat <model>` and `execute_tool <tool>`
 * beneath it (a call of the inference API is a trace of its own). They carry
 * names, models, token counts, outcomes and durations, never a message, a
 * tool's arguments or result, a session key or a secret.
 */
import type { Span, Tracer } from '@opentelemetry/api';
import type { AgentRunObserved, ModelCallObserved, ToolCallObserved } from '../kernel/observe.ts';

type Api = typeof import('@opentelemetry/api');

/** Runs whose end never came (a daemon stopping mid-run) are closed after this long, so the map of open ones stays small. */
export const OPEN_RUN_MS = 60 * 60_000;

export class RunSpans {
  private readonly api: Api;
  private readonly tracer: Tracer;
  private readonly now: () => number;
  /** The runs begun and not ended, oldest first. */
  private readonly open = new Map<string, { span: Span; at: number }>();

  constructor(api: Api, tracer: Tracer, now: () => number = Date.now) {
    this.api = api;
    this.tracer = tracer;
    this.now = now;
  }

  get openRuns(): number {
    return this.open.size;
  }

  private parentOf(runId: string | undefined) {
    const run = runId ? this.open.get(runId) : undefined;
    return run ? this.api.trace.setSpan(this.api.context.active(), run.span) : this.api.ROOT_CONTEXT;
  }

  run(run: AgentRunObserved): void {
    const { api } = this;
    if (run.phase === 'start') {
      const span = this.tracer.startSpan(`invoke_agent ${run.agent}`, {
        kind: api.SpanKind.INTERNAL, startTime: run.at,
        attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': run.agent, 'gateway.run.id': run.runId, 'gateway.surface': run.surface },
      }, api.ROOT_CONTEXT);
      this.open.set(run.runId, { span, at: run.at });
      // Runs a stopped daemon never ended are closed rather than kept.
      for (const [id, stale] of this.open) {
        if (run.at - stale.at < OPEN_RUN_MS) break;
        stale.span.end();
        this.open.delete(id);
      }
      return;
    }
    const entry = this.open.get(run.runId);
    if (!entry) return;
    this.open.delete(run.runId);
    entry.span.setAttributes({
      'gateway.run.status': run.status, 'gateway.run.steps': run.steps,
      ...(run.model ? { 'gen_ai.response.model': run.model } : {}),
      ...(run.inputTokens === undefined ? {} : { 'gen_ai.usage.input_tokens': run.inputTokens }),
      ...(run.outputTokens === undefined ? {} : { 'gen_ai.usage.output_tokens': run.outputTokens }),
    });
    if (run.status !== 'succeeded') entry.span.setStatus({ code: api.SpanStatusCode.ERROR, message: run.error ?? run.status });
    entry.span.end(run.at);
  }

  modelCall(call: ModelCallObserved): void {
    const { api } = this;
    const endedAt = this.now();
    const span = this.tracer.startSpan(`chat ${call.model}`, {
      kind: api.SpanKind.CLIENT, startTime: endedAt - call.seconds * 1000,
      attributes: {
        'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': call.provider, 'gen_ai.request.model': call.model, 'gateway.surface': call.surface,
        ...(call.agent !== 'none' ? { 'gen_ai.agent.name': call.agent } : {}),
        ...(call.inputTokens === undefined ? {} : { 'gen_ai.usage.input_tokens': call.inputTokens }),
        ...(call.outputTokens === undefined ? {} : { 'gen_ai.usage.output_tokens': call.outputTokens }),
        ...(call.firstTokenSeconds === undefined ? {} : { 'gateway.time_to_first_token_seconds': call.firstTokenSeconds }),
      },
    }, this.parentOf(call.runId));
    if (call.outcome !== 'ok') span.setStatus({ code: api.SpanStatusCode.ERROR, message: call.outcome });
    span.end(endedAt);
  }

  toolCall(call: ToolCallObserved): void {
    const { api } = this;
    const span = this.tracer.startSpan(`execute_tool ${call.tool}`, {
      kind: api.SpanKind.INTERNAL, startTime: call.startedAt,
      attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': call.tool, 'gateway.surface': call.surface },
    }, this.parentOf(call.runId));
    if (call.error) span.setStatus({ code: api.SpanStatusCode.ERROR, message: call.error });
    span.end(call.endedAt);
  }

  /** Ends every run still open (the daemon stops). */
  close(): void {
    for (const { span } of this.open.values()) span.end();
    this.open.clear();
  }
}
