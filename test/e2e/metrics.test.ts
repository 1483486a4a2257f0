import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { deliver, pushPayload, TEST_WEBHOOK_SECRET } from '../support/webhooks.ts';

interface Sample { name: string; labels: Record<string, string>; value: number }
interface Family { name: string; type: string; samples: Sample[] }

/** The Prometheus Python client's own text-format parser (Debian's python3-prometheus-client): families with their samples. */
const PARSE = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
print(json.dumps([{"name": f.name, "type": f.type, "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]} for f in text_string_to_metric_families(sys.stdin.read())]))
`;
const parse = (text: string): Family[] => JSON.parse(execFileSync('/usr/bin/python3', ['-c', PARSE], { input: text, encoding: 'utf8' })) as Family[];

/** GET /metrics, parsed by Prometheus's own client parser. */
describe('GET /metrics (e2e, Prometheus text format)', function () {
  this.timeout(120_000);
  let home: Home;
  let base: string;
  let gateway: string;
  let upstream: ScriptedUpstream;

  const scrape = async (bearer?: string) => {
    const response = await fetch(`${base}/metrics`, { headers: bearer ? { authorization: `Bearer ${bearer}` } : {} });
    return { status: response.status, type: response.headers.get('content-type') ?? '', text: await response.text() };
  };
  const families = async () => {
    const answer = await scrape(gateway);
    expect(answer.status, answer.text).to.equal(200);
    // The parser names a counter's family without its _total.
    return new Map(parse(answer.text).map((family) => [family.type === 'counter' ? `${family.name}_total` : family.name, family]));
  };
  /** The value of a family's sample (of a histogram: its _count) whose labels include these. */
  const sample = (family: Family | undefined, labels: Record<string, string>, suffix = '') =>
    family?.samples.find((entry) => entry.name === `${family.type === 'counter' ? family.name.replace(/_total$/, '') : family.name}${suffix}`
      && Object.entries(labels).every(([key, value]) => entry.labels[key] === value))?.value;

  before(async () => {
    upstream = await new ScriptedUpstream().start();
    upstream.responder = () => openaiText('counted');
    const port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    base = `http://127.0.0.1:${port}`;
    const set = async (key: string, value: unknown) => expect((await home.run(['config', 'set', key, JSON.stringify(value)])).code).to.equal(0);
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.main', { model: 'script/m' });
    await set('gateway.http.endpoints.chatCompletions.enabled', true);
    expect((await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: TEST_WEBHOOK_SECRET })).code).to.equal(0);
    expect((await home.run(['start'])).code).to.equal(0);
    gateway = home.token();
  });
  after(async () => {
    home.cleanup();
    await upstream.stop();
  });

  it('is off until enabled (404), then answers the gateway credential and tokens with the scope metrics only', async () => {
    expect((await scrape(gateway)).status).to.equal(404);
    // Applied at once, and said so: no restart.
    const enabled = await home.run(['config', 'set', 'metrics.enabled', 'true']);
    expect(enabled.code, enabled.stderr).to.equal(0);
    expect(enabled.stdout).to.include('The running daemon applied it.').and.not.include('restart');
    const open = await scrape(gateway);
    expect(open.status).to.equal(200);
    expect(open.type).to.match(/^text\/plain; version=0\.0\.4/);
    expect((await scrape()).status, 'no credential').to.equal(401);
    expect((await scrape('not-a-credential')).status).to.equal(401);

    const token = async (scopes: string[]) => {
      const created = await home.run(['tokens', 'create', '--name', `m-${scopes.join('-')}`, '--scopes', scopes.join(','), '--json']);
      expect(created.code, created.stderr).to.equal(0);
      return String(created.json.token);
    };
    expect((await scrape(await token(['metrics']))).status).to.equal(200);
    expect((await scrape(await token(['jobs:read']))).status).to.equal(403);

    // Open to this host's own clients only when configured so.
    expect((await home.run(['config', 'set', 'metrics.loopbackOpen', 'true'])).code).to.equal(0);
    expect((await scrape()).status).to.equal(200);
    const proxied = await fetch(`${base}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(proxied.status, 'through a proxy on this host, a credential is still needed').to.equal(401);
    const closed = await home.run(['config', 'set', 'metrics.loopbackOpen', 'false', '--json']);
    expect(closed.json).to.include({ restartRequired: false, via: 'daemon' });
    expect((await scrape()).status).to.equal(401);

    // Turned off, it is off at once; turned on again, it answers again.
    const disabled = await home.run(['config', 'set', 'metrics.enabled', 'false', '--json']);
    expect(disabled.json).to.include({ restartRequired: false });
    expect((await scrape(gateway)).status).to.equal(404);
    expect((await home.run(['config', 'set', 'metrics.enabled', 'true'])).code).to.equal(0);
    expect((await scrape(gateway)).status).to.equal(200);
  });

  it('has the series an operator expects, moving with traffic, with bounded labels and no secret', async () => {
    expect((await home.run(['config', 'set', 'metrics.enabled', 'true'])).code).to.equal(0);
    const before = await families();
    for (const name of ['process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'http_server_requests_total', 'gateway_jobs', 'gateway_channel_accounts']) {
      expect(before.has(name), name).to.equal(true);
    }
    const jobsPage = (family: Map<string, Family>) => sample(family.get('http_server_requests_total'), { method: 'GET', route: '/jobs/:id', status: '404' }, '_total') ?? 0;

    // Traffic: a job that is not there (its id in the path), an inference request, a probe.
    expect((await fetch(`${base}/jobs/job_doesnotexist`, { headers: { authorization: `Bearer ${gateway}` } })).status).to.equal(404);
    const completion = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${gateway}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gateway', messages: [{ role: 'user', content: 'count me' }] }),
    });
    expect(completion.status).to.equal(200);
    await fetch(`${base}/healthz`);
    const body = JSON.stringify(pushPayload(512));
    expect((await deliver(base, 'push', body, { deliveryId: 'metrics-1' })).status).to.equal(200);
    expect((await deliver(base, 'push', body, { deliveryId: 'metrics-1' })).body).to.include({ duplicate: true });
    expect((await deliver(base, 'made-up-event-name', body, { signature: 'sha256=00' })).status).to.equal(400);

    const after = await waitFor(async () => {
      const now = await families();
      return now.get('gen_ai_client_operation_duration_seconds') ? now : undefined;
    }, 10_000, 'the model call to be counted');
    expect(jobsPage(after) - jobsPage(before), 'the request is counted under its route template, not its path').to.equal(1);
    expect(sample(after.get('http_server_requests_total'), { route: '/healthz', status: '200' }, '_total')).to.be.at.least(1);
    const calls = sample(after.get('gen_ai_client_operation_duration_seconds'), { gen_ai_provider_name: 'script', gen_ai_request_model: 'm', gateway_agent: 'main', outcome: 'ok' }, '_count');
    expect(calls).to.be.at.least(1);
    expect(sample(after.get('gen_ai_client_token_usage'), { gen_ai_token_type: 'input' }, '_sum')).to.equal(11);
    expect(sample(after.get('gen_ai_client_token_usage'), { gen_ai_token_type: 'output' }, '_sum')).to.equal(7);
    expect(sample(after.get('gen_ai_client_time_to_first_token_seconds'), { outcome: 'ok' }, '_count')).to.be.at.least(1);
    const deliveries = after.get('gateway_webhook_deliveries_total');
    expect([['push', 'accepted'], ['push', 'duplicate'], ['unverified', 'refused']].map(([event, outcome]) => sample(deliveries, { event: event!, outcome: outcome! }, '_total'))).to.deep.equal([1, 1, 1]);
    expect(JSON.stringify(deliveries), 'an unsigned delivery\'s event name is no label').to.not.include('made-up-event-name');
    // The store's statements and transactions, timed: the deliveries and the run wrote, the jobs page read.
    const statements = after.get('gateway_store_statement_duration_seconds');
    const engine = process.env.GATEWAY_STORE_URL ? 'postgres' : 'sqlite';
    for (const operation of ['read', 'transaction']) expect(sample(statements, { engine, operation, outcome: 'ok' }, '_count'), operation).to.be.at.least(1);
    const transactionsBefore = sample(before.get('gateway_store_statement_duration_seconds'), { engine, operation: 'transaction', outcome: 'ok' }, '_count') ?? 0;
    expect(sample(statements, { engine, operation: 'transaction', outcome: 'ok' }, '_count')).to.be.above(transactionsBefore);

    // No secret, no unbounded label value: no ids, session keys or raw paths.
    const text = (await scrape(gateway)).text;
    expect(text).to.not.include(gateway);
    expect(text).to.not.include('job_doesnotexist');
    for (const family of after.values()) {
      for (const metric of family.samples) {
        for (const [label, value] of Object.entries(metric.labels)) {
          expect(value, `${family.name}{${label}}`).to.not.match(/job_|tok_|run_|:dm:|[0-9a-f]{16}/);
          if (label === 'route') expect(value).to.match(/^(\/[A-Za-z0-9._:/-]*|unmatched)$/);
        }
      }
    }
  });
});
