/**
 * GET /metrics in the Prometheus text format, when metrics.enabled is on: to
 * the gateway credential or a token with the scope `metrics` (and, with
 * metrics.loopbackOpen, to clients on this host without one). prom-client
 * is loaded when metrics are first enabled; until then nothing subscribes to
 * what the daemon publishes (kernel/observe.ts), and that costs nothing.
 *
 * Series: HTTP requests by method, route template and status, with their
 * durations; model calls with the OpenTelemetry GenAI names (operation
 * duration, time to first token, tokens by type) by provider, model, agent
 * and outcome; tool calls by tool, surface and outcome, with their
 * durations; jobs by kind and state, the queue's depth and the age of its
 * oldest job; webhook deliveries by event and outcome; channel accounts by
 * state, messages in and out; store statements and transactions by engine,
 * operation and outcome, with their durations; the process's memory, CPU and
 * event-loop delay.
 */
import type { IncomingMessage } from 'node:http';
import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule } from '../kernel/module.ts';
import { observed, type ChannelMessageObserved, type HttpObserved, type ModelCallObserved, type ToolCallObserved, type WebhookDeliveryObserved } from '../kernel/observe.ts';
import channelsModule from '../channels/module.ts';
import jobsModule from '../jobs/module.ts';
import { type StatementObserved, statementsObserved } from '../store/database.ts';
import { Tally } from './tally.ts';
import type { MetricsSummary } from '../../shared/protocol/results.ts';

const FORWARDING = ['forwarded', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-host', 'x-forwarded-proto'];
/** A client on this host that came straight, not through a proxy on it. */
const directLoopback = (req: IncomingMessage) =>
  isLoopbackAddress(req.socket.remoteAddress ?? '') && FORWARDING.every((header) => req.headers[header] === undefined);

const holdsMetrics = (scopes: ReadonlySet<string> | 'all') => scopes === 'all' || scopes.has('metrics') || scopes.has('admin');

export default defineModule({
  id: 'metrics',
  needs: [jobsModule, channelsModule],
  setup(ctx) {
    const jobs = ctx.use(jobsModule).queue;
    const { channels } = ctx.use(channelsModule);
    let registry: Promise<{ registry: import('prom-client').Registry; jobCollect: () => Promise<void>; count: (on: boolean) => void }> | undefined;

    /** The registry and its series, made once, when metrics are first on. */
    const load = () => (registry ??= (async () => {
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
        observed.channelMessage[verb](onMessage);
        observed.webhookDelivery[verb](onDelivery);
        observed.toolCall[verb](onToolCall);
        statementsObserved[verb](onStatement);
      };
      count(true);
      return { registry, jobCollect, count };
    })().catch((error: unknown) => {
      registry = undefined;
      throw error;
    }));

    // Counting starts when metrics are on: at start, or when the setting is turned on while the daemon runs.
    ctx.onStart(async () => {
      if (ctx.config().metrics.enabled) await load();
    });
    // Turned on while the daemon runs: counting starts as the setting is written (the check sees every new configuration).
    ctx.configCheck((next) => {
      if (next.metrics.enabled) void load().then((loaded) => loaded.count(true), (error: unknown) => ctx.log.error({ err: error }, 'metrics could not be loaded'));
      else void registry?.then((loaded) => loaded.count(false), () => undefined);
      return [];
    });
    ctx.onStop(() => registry?.then((loaded) => loaded.count(false), () => undefined));

    // The Overview's figures, from the same registry: what an operator looks at first.
    ctx.rpc.method({
      name: 'metrics.summary',
      handler: async () => {
        if (!ctx.config().metrics.enabled) return { enabled: false };
        const loaded = await load();
        loaded.count(true);
        await loaded.jobCollect();
        return { enabled: true, figures: summaryOf(await loaded.registry.getMetricsAsJSON() as unknown as MetricJson[]) };
      },
    });

    ctx.http.route({
      method: 'GET', path: '/metrics', auth: 'plugin',
      handler: async (http) => {
        const { metrics } = ctx.config();
        if (!metrics.enabled) throw new DomainError('not_found', 'Metrics are off: gateway config set metrics.enabled true');
        if (!(metrics.loopbackOpen && directLoopback(http.req))) {
          const principal = await ctx.http.authenticate(http.req);
          if (!holdsMetrics(principal.scopes)) throw new DomainError('forbidden', 'This route needs the scope metrics.');
        }
        const loaded = await load();
        loaded.count(true);
        await loaded.jobCollect();
        http.type = loaded.registry.contentType;
        http.body = await loaded.registry.metrics();
      },
    });
    ctx.http.document({
      paths: {
        '/metrics': {
          get: {
            summary: 'the daemon\'s metrics in the Prometheus text format (metrics.enabled); the gateway credential or a token with the scope metrics',
            responses: {
              200: { description: 'Prometheus text format 0.0.4' },
              401: { description: 'no credential, or one that is not valid', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
              403: { description: 'a token without the scope metrics', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
              404: { description: 'metrics are off', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
              429: { description: 'too many requests or failed attempts; see Retry-After', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
            },
          },
        },
      },
    });
  },
});

interface MetricJson { name: string; type: string; values: { value: number; labels: Record<string, string | number>; metricName?: string }[] }

/** The key figures from the registry's series: sums over their labels, quantiles from their buckets. */
function summaryOf(metrics: readonly MetricJson[]): NonNullable<MetricsSummary['figures']> {
  const byName = new Map(metrics.map((metric) => [metric.name, metric]));
  const values = (name: string, suffix = '') => (byName.get(name)?.values ?? []).filter((value) => (value.metricName ?? name) === `${name}${suffix}`);
  const sum = (name: string, suffix = '', where: (labels: Record<string, string | number>) => boolean = () => true) =>
    values(name, suffix).filter((value) => where(value.labels)).reduce((total, value) => total + Number(value.value), 0);
  /** A quantile from a histogram's cumulative buckets, summed over every series: the upper bound of the bucket it falls in. */
  const quantile = (name: string, q: number): number | null => {
    const buckets = new Map<number, number>();
    for (const value of values(name, '_bucket')) {
      const bound = value.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(value.labels.le);
      buckets.set(bound, (buckets.get(bound) ?? 0) + Number(value.value));
    }
    const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
    const total = sorted.at(-1)?.[1] ?? 0;
    if (total === 0) return null;
    const found = sorted.find(([, count]) => count >= q * total);
    return found && Number.isFinite(found[0]) ? found[0] : (sorted.filter(([bound]) => Number.isFinite(bound)).at(-1)?.[0] ?? null);
  };
  const gauge = (name: string, where: (labels: Record<string, string | number>) => boolean = () => true) =>
    values(name).filter((value) => where(value.labels)).reduce((total, value) => total + Number(value.value), 0);
  return {
    http: {
      requests: sum('http_server_requests_total'), serverErrors: sum('http_server_requests_total', '', (labels) => String(labels.status).startsWith('5')),
      p50Seconds: quantile('http_server_request_duration_seconds', 0.5), p99Seconds: quantile('http_server_request_duration_seconds', 0.99),
    },
    inference: {
      calls: sum('gen_ai_client_operation_duration_seconds', '_count'), failed: sum('gen_ai_client_operation_duration_seconds', '_count', (labels) => labels.outcome !== 'ok'),
      inputTokens: sum('gen_ai_client_token_usage', '_sum', (labels) => labels.gen_ai_token_type === 'input'),
      outputTokens: sum('gen_ai_client_token_usage', '_sum', (labels) => labels.gen_ai_token_type === 'output'),
      firstTokenP50Seconds: quantile('gen_ai_client_time_to_first_token_seconds', 0.5),
    },
    jobs: {
      queued: gauge('gateway_jobs', (labels) => labels.state === 'queued'), running: gauge('gateway_jobs', (labels) => labels.state === 'running'),
      failed: gauge('gateway_jobs', (labels) => labels.state === 'failed'), oldestQueuedAgeSeconds: Math.max(0, ...values('gateway_jobs_oldest_queued_age_seconds').map((value) => Number(value.value))),
    },
    webhooks: { deliveries: sum('gateway_webhook_deliveries_total'), refused: sum('gateway_webhook_deliveries_total', '', (labels) => labels.outcome === 'refused') },
    channels: {
      accounts: gauge('gateway_channel_accounts'), connected: gauge('gateway_channel_accounts', (labels) => labels.state === 'connected'),
      messagesIn: sum('gateway_channel_messages_total', '', (labels) => labels.direction === 'in'), messagesOut: sum('gateway_channel_messages_total', '', (labels) => labels.direction === 'out'),
    },
    store: { statements: sum('gateway_store_statement_duration_seconds', '_count'), p99Seconds: quantile('gateway_store_statement_duration_seconds', 0.99) },
    process: { residentBytes: gauge('process_resident_memory_bytes'), eventLoopLagP99Seconds: values('nodejs_eventloop_lag_p99_seconds')[0]?.value ?? null },
  };
}
