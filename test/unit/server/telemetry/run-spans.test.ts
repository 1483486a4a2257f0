import { expect } from 'chai';
import * as api from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { OPEN_RUN_MS, RunSpans } from '../../../../src/server/telemetry/run-spans.ts';
import { tracesUrl } from '../../../../src/server/telemetry/module.ts';

describe('telemetry: the spans of agent runs', () => {
  let exporter: InMemorySpanExporter;
  let spans: RunSpans;
  const now = Date.parse('2026-05-01T10:00:00Z');
  const finished = () => exporter.getFinishedSpans();
  const named = (name: string) => finished().find((span) => span.name === name) as ReadableSpan;
  const parentId = (span: ReadableSpan) => span.parentSpanContext?.spanId;

  beforeEach(() => {
    exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    spans = new RunSpans(api, provider.getTracer('test'), () => now);
  });

  it('a run is a trace of its own: its model and tool calls beneath it, with tokens and status, never a message', () => {
    spans.run({ phase: 'start', runId: 'run_1', agent: 'ops', surface: 'chat', at: now - 5000 });
    spans.modelCall({ provider: 'local', model: 'local/m', agent: 'ops', surface: 'chat', runId: 'run_1', outcome: 'ok', seconds: 2, firstTokenSeconds: 0.5, inputTokens: 10, outputTokens: 4 });
    spans.toolCall({ tool: 'jobs.get', surface: 'agent', runId: 'run_1', startedAt: now - 1000, endedAt: now - 900, error: 'No job x.' });
    spans.run({ phase: 'end', runId: 'run_1', status: 'succeeded', model: 'local/m', steps: 2, inputTokens: 10, outputTokens: 4, at: now });
    const run = named('invoke_agent ops');
    expect(run.attributes).to.deep.include({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'ops', 'gateway.run.status': 'succeeded', 'gateway.run.steps': 2, 'gen_ai.usage.input_tokens': 10 });
    expect(parentId(run)).to.equal(undefined);
    const chat = named('chat local/m');
    expect(parentId(chat)).to.equal(run.spanContext().spanId);
    expect(chat.kind).to.equal(api.SpanKind.CLIENT);
    expect(chat.attributes).to.deep.include({ 'gen_ai.provider.name': 'local', 'gateway.time_to_first_token_seconds': 0.5 });
    const tool = named('execute_tool jobs.get');
    expect(parentId(tool)).to.equal(run.spanContext().spanId);
    expect(tool.status).to.deep.equal({ code: api.SpanStatusCode.ERROR, message: 'No job x.' });
    expect(spans.openRuns).to.equal(0);
  });

  it('a failed run says so; a call outside any run (the inference API) is a trace of its own', () => {
    spans.run({ phase: 'start', runId: 'run_2', agent: 'ops', surface: 'api', at: now });
    spans.run({ phase: 'end', runId: 'run_2', status: 'failed', model: null, steps: 0, error: 'model down', at: now + 10 });
    expect(named('invoke_agent ops').status).to.deep.equal({ code: api.SpanStatusCode.ERROR, message: 'model down' });
    spans.modelCall({ provider: 'p', model: 'p/m', agent: 'none', surface: 'api', outcome: 'timeout', seconds: 1 });
    const bare = named('chat p/m');
    expect(parentId(bare)).to.equal(undefined);
    expect(bare.attributes).to.not.have.property('gen_ai.agent.name');
    expect(bare.status.code).to.equal(api.SpanStatusCode.ERROR);
    spans.run({ phase: 'end', runId: 'never-started', status: 'succeeded', model: null, steps: 0, at: now });
    expect(finished()).to.have.length(2);
  });

  it('closes runs whose end never came once they are an hour old, and every open run at stop', () => {
    spans.run({ phase: 'start', runId: 'old', agent: 'a', surface: 'chat', at: now });
    spans.run({ phase: 'start', runId: 'newer', agent: 'b', surface: 'chat', at: now + 1000 });
    spans.run({ phase: 'start', runId: 'late', agent: 'c', surface: 'chat', at: now + OPEN_RUN_MS });
    expect(finished().map((span) => span.name)).to.deep.equal(['invoke_agent a']);
    expect(spans.openRuns).to.equal(2);
    spans.close();
    expect(spans.openRuns).to.equal(0);
    expect(finished()).to.have.length(3);
  });

  it('posts to /v1/traces of the endpoint, as given when it names it', () => {
    expect(tracesUrl('http://collector:4318')).to.equal('http://collector:4318/v1/traces');
    expect(tracesUrl('http://collector:4318/otlp/')).to.equal('http://collector:4318/otlp/v1/traces');
    expect(tracesUrl('https://c.example.com/v1/traces')).to.equal('https://c.example.com/v1/traces');
  });
});
