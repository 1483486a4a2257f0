/**
 * The registry of GET /metrics and its series, made when metrics are first
 * enabled: HTTP requests by method, route template and status, with their
 * durations; model calls with the OpenTelemetry GenAI names (operation
 * duration, time to first token, tokens by type) by provider, model, agent
 * and outcome; tool calls by tool, surface and outcome, with their
 * durations; jobs by kind and state, the queue's depth and the age of its
 * oldest job; webhook deliveries by event and outcome; channel accounts by
 * state, messages in and out; store statements and transactions by engine,
 * operation and outcome, with their durations; the process's memory, CPU and
 * event-loop delay. It counts what the daemon publishes (kernel/observe.ts)
 * while it subscribes.
 */
import type { ChannelManager } from '../channels/module.ts';
import type { JobQueue } from '../jobs/module.ts';
import { observed, type ChannelMessageObserved, type HttpObserved, type ModelCallObserved, type ModelCostObserved, type ToolCallObserved, type WebhookDeliveryObserved } from '../kernel/observe.ts';
import { type StatementObserved, statementsObserved } from '../store/database.ts';
import { Tally } from './tally.ts';

export interface MetricSeries {
  registry: import('prom-client').Registry;
  /** Reads the jobs' figures from the store into their gauges (before a scrape). */
  jobCollect: () => Promise<void>;
  /** Subscribes to what the daemon publishes while metrics are on; turned off, the daemon publishes nothing again. */
  count: (on: boolean) => void;
}

export async function metricSeries({ jobs, channels }: { jobs: Pick<JobQueue, 'stats'>; channels: Pick<ChannelManager, 'status'> }): Promise<MetricSeries> {
  // Bundled, the CommonJS package's exports are its default export.
  const loaded = await import('prom-client') as typeof import('prom-client') & { default?: typeof import('prom-client') };
  const client = typeof loaded.Registry === 'function' ? loaded : loaded.default!;
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 20 });
  const seconds = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
  // Every request counts: the tallies of its route, method and status (tally.ts), read at scrape time.
  const http = new Tally(seconds);
  registry.registerMetric(http.counter('http_server_requests_total', 'HTTP requests answered, by method, route template and status') as never);
  registry.registerMetric(http.histogram('http_server_request_duration_seconds', 'Time to answer an HTTP request (to the end of its body)') as never);
  const genAiLabels = ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'gateway_agent', 'gateway_surface', 'outcome'];
  const operation = new client.Histogram({ name: 'gen_ai_client_operation_duration_seconds', help: 'Duration of a model call (gen_ai.client.operation.duration)', labelNames: genAiLabels, buckets: seconds, registers: [registry] });
  const firstToken = new client.Histogram({ name: 'gen_ai_client_time_to_first_token_seconds', help: 'Time from a model call to its first token', labelNames: genAiLabels, buckets: seconds, registers: [registry] });
  const tokens = new client.Histogram({
    name: 'gen_ai_client_token_usage', help: 'Tokens of a model call by type, as the provider counted them (gen_ai.client.token.usage)',
    labelNames: [...genAiLabels.filter((label) => label !== 'outcome'), 'gen_ai_token_type'], buckets: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576], registers: [registry],
  });
  const messages = new client.Counter({ name: 'gateway_channel_messages_total', help: 'Channel messages stored (in) and taken by their platform (out)', labelNames: ['channel', 'direction'], registers: [registry] });
  new client.Gauge({
    name: 'gateway_channel_accounts', help: 'Channel accounts by state', labelNames: ['channel', 'state'], registers: [registry],
    collect() {
      this.reset();
      for (const account of channels.status()) this.inc({ channel: account.channel, state: account.state });
    },
  });
  const jobsByState = new client.Gauge({ name: 'gateway_jobs', help: 'Jobs in the store by kind and state', labelNames: ['kind', 'state'], registers: [registry] });
  const queueAge = new client.Gauge({ name: 'gateway_jobs_oldest_queued_age_seconds', help: 'Age of the oldest queued job, by kind (0 when none waits)', labelNames: ['kind'], registers: [registry] });
  const jobCollect = async () => {
    const stats = await jobs.stats();
    jobsByState.reset();
    queueAge.reset();
    const now = Date.now();
    for (const row of stats) {
      jobsByState.set({ kind: row.kind, state: row.status }, row.count);
      if (row.status === 'queued') queueAge.set({ kind: row.kind }, row.oldestAt === undefined ? 0 : Math.max(0, (now - row.oldestAt) / 1000));
    }
  };
  const onHttp = (message: unknown) => {
    const { method, route, status, seconds: took } = message as HttpObserved;
    http.add(`${method} ${status} ${route}`, () => ({ method, route, status: String(status) }), took);
  };
  const onModelCall = (message: unknown) => {
    const call = message as ModelCallObserved;
    const base = { gen_ai_operation_name: 'chat', gen_ai_provider_name: call.provider, gen_ai_request_model: call.model, gateway_agent: call.agent, gateway_surface: call.surface };
    operation.observe({ ...base, outcome: call.outcome }, call.seconds);
    if (call.firstTokenSeconds !== undefined) firstToken.observe({ ...base, outcome: call.outcome }, call.firstTokenSeconds);
    if (call.inputTokens !== undefined) tokens.observe({ ...base, gen_ai_token_type: 'input' }, call.inputTokens);
    if (call.outputTokens !== undefined) tokens.observe({ ...base, gen_ai_token_type: 'output' }, call.outputTokens);
  };
  const costs = new Tally();
  registry.registerMetric(costs.counter('gateway_model_cost_total', 'What model calls cost, in models.currency (calls of a model with no known price count nothing), by provider, model, agent and currency', 'sum') as never);
  const onModelCost = (message: unknown) => {
    const { provider, model, agent, currency, cost } = message as ModelCostObserved;
    costs.add(`${provider} ${model} ${agent} ${currency}`, () => ({ gen_ai_provider_name: provider, gen_ai_request_model: model, gateway_agent: agent, currency }), cost);
  };
  // Tool calls by tool, surface and outcome (ok, or the kind of error): registered names, a bounded set.
  const toolCalls = new Tally(seconds);
  registry.registerMetric(toolCalls.counter('gateway_tool_calls_total', 'Tool calls answered, by tool, surface (http, ws, agent) and outcome (ok or the error\'s kind)') as never);
  registry.registerMetric(toolCalls.histogram('gateway_tool_call_duration_seconds', 'Time a tool call took') as never);
  const onToolCall = (message: unknown) => {
    const { tool, surface, error, startedAt, endedAt } = message as ToolCallObserved;
    const outcome = error ?? 'ok';
    toolCalls.add(`${tool} ${surface} ${outcome}`, () => ({ tool, surface, outcome }), (endedAt - startedAt) / 1000);
  };
  const deliveries = new Tally();
  registry.registerMetric(deliveries.counter('gateway_webhook_deliveries_total', 'GitHub webhook deliveries answered, by event (once the signature held) and outcome: accepted, duplicate, refused') as never);
  const onDelivery = (message: unknown) => {
    const { event, outcome } = message as WebhookDeliveryObserved;
    deliveries.add(`${event} ${outcome}`, () => ({ event, outcome }));
  };
  // Every statement counts, as every request does: tallies read at scrape time.
  const statements = new Tally([0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]);
  registry.registerMetric(statements.histogram('gateway_store_statement_duration_seconds', 'Time of a store statement on its own (read, write) or of a whole transaction, by engine and outcome') as never);
  const onStatement = (message: unknown) => {
    const { engine, operation, outcome, seconds } = message as StatementObserved;
    statements.add(`${engine} ${operation} ${outcome}`, () => ({ engine, operation, outcome }), seconds);
  };
  const onMessage = (message: unknown) => {
    const { channel, direction } = message as ChannelMessageObserved;
    messages.inc({ channel, direction });
  };
  let counting = false;
  /** Subscribes while metrics are on; turned off, the daemon publishes nothing again. */
  const count = (on: boolean) => {
    if (on === counting) return;
    counting = on;
    const verb = on ? 'subscribe' : 'unsubscribe';
    observed.http[verb](onHttp);
    observed.modelCall[verb](onModelCall);
    observed.modelCost[verb](onModelCost);
    observed.channelMessage[verb](onMessage);
    observed.webhookDelivery[verb](onDelivery);
    observed.toolCall[verb](onToolCall);
    statementsObserved[verb](onStatement);
  };
  count(true);
  return { registry, jobCollect, count };
}
