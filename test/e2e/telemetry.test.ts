import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

interface Span { traceId: string; spanId: string; parentSpanId?: string; name: string; attributes: Record<string, unknown>; status?: { code?: number }; start: number; end: number }

/**
 * A stand-in of an OpenTelemetry collector's OTLP/HTTP receiver (JSON): it
 * keeps the spans posted to /v1/traces and their resource.
 */
class Collector {
  readonly spans: Span[] = [];
  readonly resources: Record<string, unknown>[] = [];
  readonly bodies: string[] = [];
  private server?: Server;
  port = 0;

  async start(): Promise<this> {
    this.port = await freePort();
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => { body += chunk; });
      req.on('end', () => {
        if (req.url !== '/v1/traces' || req.method !== 'POST') return void res.writeHead(404).end();
        this.bodies.push(body);
        const value = (v: Record<string, unknown>) => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.doubleValue ?? v.boolValue);
        const attributes = (list: { key: string; value: Record<string, unknown> }[] = []) => Object.fromEntries(list.map((a) => [a.key, value(a.value)]));
        for (const resourceSpans of JSON.parse(body).resourceSpans ?? []) {
          this.resources.push(attributes(resourceSpans.resource?.attributes));
          for (const scope of resourceSpans.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              this.spans.push({
                traceId: span.traceId, spanId: span.spanId, parentSpanId: span.parentSpanId || undefined, name: span.name, attributes: attributes(span.attributes),
                status: span.status, start: Number(BigInt(span.startTimeUnixNano) / 1_000_000n), end: Number(BigInt(span.endTimeUnixNano) / 1_000_000n),
              });
            }
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    return this;
  }

  stop(): void {
    this.server?.close();
  }
}

describe('traces of agent runs over OTLP (e2e, an OTLP/HTTP receiver stand-in)', function () {
  this.timeout(60_000);
  let home: Home;
  let upstream: ScriptedUpstream;
  let collector: Collector;
  const set = async (key: string, value: unknown) => expect((await home.run(['config', 'set', key, JSON.stringify(value)])).code).to.equal(0);

  beforeEach(async () => {
    [upstream, collector] = await Promise.all([new ScriptedUpstream().start(), new Collector().start()]);
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m', tools: ['gateway.status'] });
  });
  afterEach(async () => {
    home.cleanup();
    collector.stop();
    await upstream.stop();
  });

  it('sends a run as invoke_agent with its model calls and tool call beneath it, without messages or session keys; off, nothing is sent', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    upstream.enqueue(openaiText('untraced'));
    expect((await home.run(['chat', '--agent', 'helper', 'secret question one', '--json'])).code).to.equal(0);
    expect((await home.run(['stop'])).code).to.equal(0);
    expect(collector.bodies, 'without telemetry.otlp.endpoint nothing is sent').to.have.length(0);

    await set('telemetry.otlp.endpoint', `http://127.0.0.1:${collector.port}`);
    expect((await home.run(['start'])).code).to.equal(0);
    upstream.enqueue(openaiToolCalls([{ name: 'gateway_status', args: {} }]), openaiText('All is well.'));
    const chat = await home.run(['chat', '--agent', 'helper', 'secret question two', '--json']);
    expect(chat.code, chat.stderr).to.equal(0);
    const spans = await waitFor(async () => (collector.spans.some((span) => span.name === 'invoke_agent helper') ? collector.spans : undefined), 15_000, 'the run\'s spans');
    const run = spans.find((span) => span.name === 'invoke_agent helper')!;
    expect(run.attributes).to.include({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'helper', 'gateway.run.status': 'succeeded', 'gateway.run.steps': 2, 'gateway.run.id': chat.json.runId });
    expect(run.parentSpanId).to.equal(undefined);
    const calls = spans.filter((span) => span.name === 'chat m');
    expect(calls).to.have.length(2);
    for (const call of calls) {
      expect(call.traceId).to.equal(run.traceId);
      expect(call.parentSpanId).to.equal(run.spanId);
      expect(call.attributes).to.include({ 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'script', 'gen_ai.request.model': 'm' });
      expect(call.start).to.be.at.least(run.start).and.to.be.at.most(call.end);
    }
    expect(calls.map((call) => call.attributes['gen_ai.usage.input_tokens'])).to.deep.equal([20, 11]);
    const tool = spans.find((span) => span.name === 'execute_tool gateway.status')!;
    expect(tool.parentSpanId).to.equal(run.spanId);
    expect(tool.attributes).to.include({ 'gen_ai.tool.name': 'gateway.status' });
    expect(collector.resources[0]).to.include({ 'service.name': 'gateway' });
    const sent = collector.bodies.join('\n');
    expect(sent).to.not.include('secret question').and.to.not.include(':dm:');

    // A stop sends what is still batched.
    upstream.enqueue(openaiText('last words'));
    expect((await home.run(['chat', '--agent', 'helper', 'one more', '--json'])).code).to.equal(0);
    const before = collector.spans.filter((span) => span.name === 'invoke_agent helper').length;
    expect((await home.run(['stop'])).code).to.equal(0);
    expect(collector.spans.filter((span) => span.name === 'invoke_agent helper').length).to.be.at.least(Math.max(before, 2));
  });
});
