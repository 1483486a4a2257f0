/**
 * Traces of agent runs, their model calls and tool calls, sent over
 * OTLP/HTTP to an OpenTelemetry collector when telemetry.otlp.endpoint is
 * set; the OpenTelemetry SDK is loaded only then. Spans follow the
 * OpenTelemetry GenAI conventions: `invoke_agent <agent>`, its steps `chat
 * <model>` and `execute_tool <tool>` beneath it (a call of the inference API
 * is a trace of its own). They carry names, models, token counts, outcomes
 * and durations, never a message, a tool's arguments or result, a session key
 * or a secret. Set at start (a change applies at the next restart).
 */
import { defineModule } from '../kernel/module.ts';
import { observed, type AgentRunObserved, type ModelCallObserved, type ToolCallObserved } from '../kernel/observe.ts';

/** Runs whose end never came (a daemon stopping mid-run) are closed after this long, so the map of open ones stays small. */
const OPEN_RUN_MS = 60 * 60_000;

/** Where an OTLP/HTTP exporter posts traces: the address as given when it names /v1/traces, else with it. */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (!url.pathname.endsWith('/v1/traces')) url.pathname = `${url.pathname.replace(/\/$/, '')}/v1/traces`;
  return url.toString();
}

export default defineModule({
  id: 'telemetry',
  async setup(ctx) {
    const { endpoint, serviceName } = ctx.config().telemetry.otlp;
    if (!endpoint) return;
    const [api, { TracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
      import('@opentelemetry/api'), import('@opentelemetry/sdk-trace'), import('@opentelemetry/exporter-trace-otlp-http'), import('@opentelemetry/resources'),
    ]);
    // What the SDK has to say (an export that failed) goes to the daemon's log, at most a warning.
    const sdkLog = ctx.log.child({ sdk: 'opentelemetry' });
    api.diag.setLogger({
      error: (message, ...args) => sdkLog.warn({ detail: args.map(String).join(' ').slice(0, 500) }, message),
      warn: (message, ...args) => sdkLog.warn({ detail: args.map(String).join(' ').slice(0, 500) }, message),
      info: () => undefined, debug: (message) => sdkLog.debug(message), verbose: () => undefined,
    }, api.DiagLogLevel.WARN);
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': serviceName, 'service.version': ctx.daemon.version, 'service.instance.id': ctx.daemon.instanceId, 'gateway.profile': ctx.daemon.profile }),
      spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: tracesUrl(endpoint), timeoutMillis: 10_000 }), scheduledDelayMillis: 1000, maxQueueSize: 4096 })],
    });
    const tracer = provider.getTracer('gateway', ctx.daemon.version);
    const open = new Map<string, { span: import('@opentelemetry/api').Span; at: number }>();
    const parentOf = (runId: string | undefined) => {
      const run = runId ? open.get(runId) : undefined;
      return run ? api.trace.setSpan(api.context.active(), run.span) : api.ROOT_CONTEXT;
    };

    const onRun = (message: unknown) => {
      const run = message as AgentRunObserved;
      if (run.phase === 'start') {
        const span = tracer.startSpan(`invoke_agent ${run.agent}`, {
          kind: api.SpanKind.INTERNAL, startTime: run.at,
          attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': run.agent, 'gateway.run.id': run.runId, 'gateway.surface': run.surface },
        }, api.ROOT_CONTEXT);
        open.set(run.runId, { span, at: run.at });
        // Runs a stopped daemon never ended are closed rather than kept.
        for (const [id, stale] of open) {
          if (run.at - stale.at < OPEN_RUN_MS) break;
          stale.span.end();
          open.delete(id);
        }
        return;
      }
      const entry = open.get(run.runId);
      if (!entry) return;
      open.delete(run.runId);
      entry.span.setAttributes({
        'gateway.run.status': run.status, 'gateway.run.steps': run.steps,
        ...(run.model ? { 'gen_ai.response.model': run.model } : {}),
        ...(run.inputTokens === undefined ? {} : { 'gen_ai.usage.input_tokens': run.inputTokens }),
        ...(run.outputTokens === undefined ? {} : { 'gen_ai.usage.output_tokens': run.outputTokens }),
      });
      if (run.status !== 'succeeded') entry.span.setStatus({ code: api.SpanStatusCode.ERROR, message: run.error ?? run.status });
      entry.span.end(run.at);
    };
    const onModelCall = (message: unknown) => {
      const call = message as ModelCallObserved;
      const endedAt = Date.now();
      const span = tracer.startSpan(`chat ${call.model}`, {
        kind: api.SpanKind.CLIENT, startTime: endedAt - call.seconds * 1000,
        attributes: {
          'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': call.provider, 'gen_ai.request.model': call.model, 'gateway.surface': call.surface,
          ...(call.agent !== 'none' ? { 'gen_ai.agent.name': call.agent } : {}),
          ...(call.inputTokens === undefined ? {} : { 'gen_ai.usage.input_tokens': call.inputTokens }),
          ...(call.outputTokens === undefined ? {} : { 'gen_ai.usage.output_tokens': call.outputTokens }),
          ...(call.firstTokenSeconds === undefined ? {} : { 'gateway.time_to_first_token_seconds': call.firstTokenSeconds }),
        },
      }, parentOf(call.runId));
      if (call.outcome !== 'ok') span.setStatus({ code: api.SpanStatusCode.ERROR, message: call.outcome });
      span.end(endedAt);
    };
    const onToolCall = (message: unknown) => {
      const call = message as ToolCallObserved;
      const span = tracer.startSpan(`execute_tool ${call.tool}`, {
        kind: api.SpanKind.INTERNAL, startTime: call.startedAt,
        attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': call.tool, 'gateway.surface': call.surface },
      }, parentOf(call.runId));
      if (call.error) span.setStatus({ code: api.SpanStatusCode.ERROR, message: call.error });
      span.end(call.endedAt);
    };
    observed.agentRun.subscribe(onRun);
    observed.modelCall.subscribe(onModelCall);
    observed.toolCall.subscribe(onToolCall);
    ctx.log.info({ endpoint: tracesUrl(endpoint) }, 'sending traces of agent runs to an OpenTelemetry collector');
    ctx.onStop(async () => {
      observed.agentRun.unsubscribe(onRun);
      observed.modelCall.unsubscribe(onModelCall);
      observed.toolCall.unsubscribe(onToolCall);
      for (const { span } of open.values()) span.end();
      open.clear();
      // What is batched goes out before the daemon does (bounded by the exporter's timeout).
      await provider.shutdown().catch((error: unknown) => ctx.log.warn({ err: error }, 'the last traces could not be sent'));
    });
  },
});
