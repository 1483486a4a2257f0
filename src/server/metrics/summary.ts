/** The Overview's figures (metrics.summary): the key figures an operator looks at first, from the same registry as GET /metrics. */
import type { MetricsSummary } from '../../shared/protocol/results.ts';

/** A series as prom-client's getMetricsAsJSON gives it. */
export interface MetricJson { name: string; type: string; values: { value: number; labels: Record<string, string | number>; metricName?: string }[] }

/** The key figures from the registry's series: sums over their labels, quantiles from their buckets. */
export function summaryOf(metrics: readonly MetricJson[]): NonNullable<MetricsSummary['figures']> {
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
