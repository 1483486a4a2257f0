import { expect } from 'chai';
import { directLoopback } from '../../../../src/server/metrics/route.ts';
import { type MetricJson, summaryOf } from '../../../../src/server/metrics/summary.ts';

const buckets = (name: string, counts: [string, number][], labels: Record<string, string> = {}) =>
  counts.map(([le, value]) => ({ value, labels: { ...labels, le }, metricName: `${name}_bucket` }));

describe('metrics: the Overview\'s figures', () => {
  const metrics: MetricJson[] = [
    { name: 'http_server_requests_total', type: 'counter', values: [{ value: 90, labels: { status: '200' } }, { value: 7, labels: { status: '503' } }, { value: 3, labels: { status: '500' } }] },
    {
      name: 'http_server_request_duration_seconds', type: 'histogram', values: [
        // Two series: their buckets add up (cumulative counts 60, 95, 100 of 100).
        ...buckets('http_server_request_duration_seconds', [['0.01', 50], ['0.1', 80], ['1', 80], ['+Inf', 80]], { route: '/a' }),
        ...buckets('http_server_request_duration_seconds', [['0.01', 10], ['0.1', 15], ['1', 20], ['+Inf', 20]], { route: '/b' }),
        { value: 100, labels: {}, metricName: 'http_server_request_duration_seconds_count' },
      ],
    },
    {
      name: 'gen_ai_client_operation_duration_seconds', type: 'histogram', values: [
        { value: 4, labels: { outcome: 'ok' }, metricName: 'gen_ai_client_operation_duration_seconds_count' },
        { value: 1, labels: { outcome: 'timeout' }, metricName: 'gen_ai_client_operation_duration_seconds_count' },
      ],
    },
    {
      name: 'gen_ai_client_token_usage', type: 'histogram', values: [
        { value: 120, labels: { gen_ai_token_type: 'input' }, metricName: 'gen_ai_client_token_usage_sum' },
        { value: 30, labels: { gen_ai_token_type: 'output' }, metricName: 'gen_ai_client_token_usage_sum' },
        { value: 999, labels: { gen_ai_token_type: 'input' }, metricName: 'gen_ai_client_token_usage_count' },
      ],
    },
    { name: 'gateway_jobs', type: 'gauge', values: [{ value: 3, labels: { kind: 'a', state: 'queued' } }, { value: 2, labels: { kind: 'b', state: 'queued' } }, { value: 1, labels: { kind: 'a', state: 'failed' } }] },
    { name: 'gateway_jobs_oldest_queued_age_seconds', type: 'gauge', values: [{ value: 12, labels: { kind: 'a' } }, { value: 40, labels: { kind: 'b' } }] },
    { name: 'gateway_channel_accounts', type: 'gauge', values: [{ value: 2, labels: { state: 'connected' } }, { value: 1, labels: { state: 'error' } }] },
    { name: 'gateway_channel_messages_total', type: 'counter', values: [{ value: 5, labels: { direction: 'in' } }, { value: 4, labels: { direction: 'out' } }] },
    { name: 'gateway_webhook_deliveries_total', type: 'counter', values: [{ value: 8, labels: { outcome: 'accepted' } }, { value: 2, labels: { outcome: 'refused' } }] },
    { name: 'process_resident_memory_bytes', type: 'gauge', values: [{ value: 5e7, labels: {} }] },
  ];

  it('sums each figure over its labels and reads quantiles from the buckets of every series together', () => {
    const figures = summaryOf(metrics);
    expect(figures.http).to.deep.equal({ requests: 100, serverErrors: 10, p50Seconds: 0.01, p99Seconds: 1 });
    expect(figures.inference).to.deep.equal({ calls: 5, failed: 1, inputTokens: 120, outputTokens: 30, firstTokenP50Seconds: null });
    expect(figures.jobs).to.deep.equal({ queued: 5, running: 0, failed: 1, oldestQueuedAgeSeconds: 40 });
    expect(figures.channels).to.deep.equal({ accounts: 3, connected: 2, messagesIn: 5, messagesOut: 4 });
    expect(figures.webhooks).to.deep.equal({ deliveries: 10, refused: 2 });
    expect(figures.process).to.deep.equal({ residentBytes: 5e7, eventLoopLagP99Seconds: null });
  });

  it('a quantile past the last finite bucket is that bucket\'s bound; no observations, no quantile', () => {
    const slow: MetricJson = { name: 'gateway_store_statement_duration_seconds', type: 'histogram', values: [...buckets('gateway_store_statement_duration_seconds', [['0.001', 1], ['0.01', 2], ['+Inf', 100]]), { value: 100, labels: {}, metricName: 'gateway_store_statement_duration_seconds_count' }] };
    expect(summaryOf([slow]).store).to.deep.equal({ statements: 100, p99Seconds: 0.01 });
    expect(summaryOf([]).store).to.deep.equal({ statements: 0, p99Seconds: null });
    expect(summaryOf([]).jobs.oldestQueuedAgeSeconds).to.equal(0);
  });
});

describe('metrics: who may scrape', () => {
  const request = (remoteAddress: string, headers: Record<string, string> = {}) => ({ socket: { remoteAddress }, headers }) as never;

  it('a client on this host that came straight is on loopback; through a proxy on it, it is not', () => {
    expect(directLoopback(request('127.0.0.1'))).to.equal(true);
    expect(directLoopback(request('::1'))).to.equal(true);
    expect(directLoopback(request('10.0.0.5'))).to.equal(false);
    for (const header of ['forwarded', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-host', 'x-forwarded-proto']) expect(directLoopback(request('127.0.0.1', { [header]: 'x' })), header).to.equal(false);
  });

});
