/**
 * Traces of agent runs, their model calls and tool calls (run-spans.ts),
 * sent over OTLP/HTTP to an OpenTelemetry collector when
 * telemetry.otlp.endpoint is set; the OpenTelemetry SDK is loaded only then.
 * Set at start (a change applies at the next restart).
 */
import { defineModule } from '../kernel/module.ts';
import { observed, type AgentRunObserved, type ModelCallObserved, type ToolCallObserved } from '../kernel/observe.ts';
import { RunSpans } from './run-spans.ts';

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
    const spans = new RunSpans(api, provider.getTracer('gateway', ctx.daemon.version));
    const onRun = (message: unknown) => spans.run(message as AgentRunObserved);
    const onModelCall = (message: unknown) => spans.modelCall(message as ModelCallObserved);
    const onToolCall = (message: unknown) => spans.toolCall(message as ToolCallObserved);
    observed.agentRun.subscribe(onRun);
    observed.modelCall.subscribe(onModelCall);
    observed.toolCall.subscribe(onToolCall);
    ctx.log.info({ endpoint: tracesUrl(endpoint) }, 'sending traces of agent runs to an OpenTelemetry collector');
    ctx.onStop(async () => {
      observed.agentRun.unsubscribe(onRun);
      observed.modelCall.unsubscribe(onModelCall);
      observed.toolCall.unsubscribe(onToolCall);
      spans.close();
      // What is batched goes out before the daemon does (bounded by the exporter's timeout).
      await provider.shutdown().catch((error: unknown) => ctx.log.warn({ err: error }, 'the last traces could not be sent'));
    });
  },
});
