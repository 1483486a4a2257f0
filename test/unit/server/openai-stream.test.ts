import { expect } from 'chai';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { streamStep, upstreamFacts, type ModelConnection, type StepEvent, type StepRequest } from '../../../src/server/models/adapter.ts';
import { upstreamFetch } from '../../../src/server/kernel/upstream-fetch.ts';

/** The OpenAI-compatible chat stream as the gateway reads it, against a server writing the wire format by hand. */
describe('an OpenAI-compatible chat stream, read by the gateway', function () {
  let server: Server;
  let baseUrl: string;
  let handler: (req: IncomingMessage, res: ServerResponse, body: string) => void | Promise<void>;
  let received: { headers: IncomingMessage['headers']; body: Record<string, unknown> } | undefined;
  const sockets = new Set<Socket>();

  before(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => { body += chunk; });
      req.on('end', () => {
        received = { headers: req.headers, body: JSON.parse(body) as Record<string, unknown> };
        void handler(req, res, body);
      });
    });
    server.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  const connection = (): ModelConnection => ({
    kind: 'openai-compatible', baseUrl, apiKey: 'sk-test', headers: { 'x-team': 'blue' }, model: 'tiny',
    fetch: (input, init) => upstreamFetch(input as string, init, undefined),
  });
  const request = (extra: Partial<StepRequest> = {}): StepRequest => ({ messages: [{ role: 'user', content: 'hi' }], signal: new AbortController().signal, ...extra });
  const collect = async (step: AsyncGenerator<StepEvent>) => {
    const events: StepEvent[] = [];
    for await (const event of step) events.push(event);
    return events;
  };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'tiny', choices: [{ index: 0, delta, finish_reason: finish }] });
  const sse = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });
  const pause = () => new Promise((resolve) => setTimeout(resolve, 5));

  it('passes text on as it comes, whatever the writes split: mid-line, mid-character, CRLF, comments, event names, multi-line data', async () => {
    handler = async (_req, res) => {
      sse(res);
      const wire = `: ping\r\n\r\nevent: message\r\ndata: ${chunk({ role: 'assistant', content: '' })}\r\n\r\ndata:${chunk({ content: 'Grüße, ' })}\n\n`
        + `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"tiny",\ndata: "choices":[{"index":0,"delta":{"content":"wörld"},"finish_reason":null}]}\n\n`
        + `data: ${chunk({}, 'stop')}\n\ndata: ${JSON.stringify({ id: 'c1', choices: [], usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 } })}\n\ndata: [DONE]\n\n`;
      const bytes = Buffer.from(wire);
      // Cut inside the "ü" of Grüße (two bytes in UTF-8) and inside a CRLF.
      const cuts = [bytes.indexOf('\r\n\r\ndata:', bytes.indexOf('event:')) + 1, bytes.indexOf(Buffer.from('ü')) + 1, bytes.length - 9];
      let from = 0;
      for (const cut of cuts) {
        res.write(bytes.subarray(from, cut));
        from = cut;
        await pause();
      }
      res.end(bytes.subarray(from));
    };
    const events = await collect(streamStep(connection(), request({ system: 'Be brief.', temperature: 0.2, maxOutputTokens: 64 })));
    expect(events).to.deep.equal([
      { type: 'text', text: 'Grüße, ' },
      { type: 'text', text: 'wörld' },
      { type: 'finish', finishReason: 'stop', usage: { inputTokens: 7, outputTokens: 3 } },
    ]);
    expect(received!.headers.authorization).to.equal('Bearer sk-test');
    expect(received!.headers['x-team']).to.equal('blue');
    expect(received!.body).to.deep.equal({
      model: 'tiny', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }],
      temperature: 0.2, max_tokens: 64, stream: true, stream_options: { include_usage: true },
    });
  });

  it('assembles tool calls from their deltas by index, names them back, and sends the conversation in the wire format', async () => {
    handler = async (_req, res) => {
      sse(res);
      const events = [
        chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'files_read', arguments: '' } }] }),
        chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { arguments: '{"q":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"path":"a.txt"' } }] }),
        chunk({ tool_calls: [{ index: 1, function: { name: 'lookup', arguments: '"x"}' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '}' } }] }),
        chunk({}, 'tool_calls'),
      ];
      for (const event of events) {
        res.write(`data: ${event}\n\n`);
        await pause();
      }
      res.end('data: [DONE]\n\n');
    };
    const image = new Uint8Array([0x89, 0x50, 0x4e, 0x47]);
    const events = await collect(streamStep(connection(), request({
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image', name: 'p.png', mimeType: 'image/png', data: image }] },
        { role: 'assistant', content: '', toolCalls: [{ id: 'call_0', name: 'files.read', args: { path: 'b.txt' } }] },
        { role: 'tool', toolCallId: 'call_0', toolName: 'files.read', content: { text: 'B' } },
      ],
      tools: [
        { name: 'files.read', description: 'Read a file', inputSchema: { type: 'object', properties: { path: { type: 'string' } } } },
        { name: 'lookup', description: 'Look up', inputSchema: { type: 'object' } },
      ],
      toolChoice: { name: 'files.read' },
    })));
    expect(events).to.deep.equal([
      { type: 'tool-call', call: { id: 'call_a', name: 'files.read', args: { path: 'a.txt' } } },
      { type: 'tool-call', call: { id: 'call_b', name: 'lookup', args: { q: 'x' } } },
      { type: 'finish', finishReason: 'tool-calls', usage: { inputTokens: undefined, outputTokens: undefined } },
    ]);
    expect(received!.body.messages).to.deep.equal([
      { role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw==' } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'files_read', arguments: '{"path":"b.txt"}' } }] },
      { role: 'tool', tool_call_id: 'call_0', content: '{"text":"B"}' },
    ]);
    expect(received!.body.tools).to.deep.equal([
      { type: 'function', function: { name: 'files_read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
      { type: 'function', function: { name: 'lookup', description: 'Look up', parameters: { type: 'object' } } },
    ]);
    expect(received!.body.tool_choice).to.deep.equal({ type: 'function', function: { name: 'files_read' } });
  });

  it('takes a last event with no blank line after it and a stream with no [DONE]; says nothing of usage the provider did not give', async () => {
    handler = (_req, res) => {
      sse(res);
      res.end(`data: ${chunk({ content: 'one' })}\n\ndata: ${chunk({ content: ' two' }, 'length')}`);
    };
    expect(await collect(streamStep(connection(), request()))).to.deep.equal([
      { type: 'text', text: 'one' },
      { type: 'text', text: ' two' },
      { type: 'finish', finishReason: 'length', usage: { inputTokens: undefined, outputTokens: undefined } },
    ]);
  });

  it('fails with the provider\'s own message and status, Retry-After kept; with the status text when the body says nothing', async () => {
    handler = (_req, res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '7' });
      res.end(JSON.stringify({ error: { message: 'Rate limit reached for tiny', type: 'rate_limit' } }));
    };
    let thrown: unknown;
    try {
      await collect(streamStep(connection(), request()));
    } catch (error) {
      thrown = error;
    }
    expect(upstreamFacts(thrown)).to.deep.equal({ status: 429, retryAfterMs: 7000, message: 'Rate limit reached for tiny' });

    handler = (_req, res) => {
      res.writeHead(503, 'Service Unavailable', { 'content-type': 'text/html' });
      res.end('<html>down</html>');
    };
    thrown = undefined;
    try {
      await collect(streamStep(connection(), request()));
    } catch (error) {
      thrown = error;
    }
    expect(upstreamFacts(thrown)).to.include({ status: 503, message: 'Service Unavailable' });
  });

  it('fails on an error event in the stream and on an event that is not JSON, after the text that came before', async () => {
    for (const [bad, message] of [
      [`data: {"error":{"message":"the model is overloaded","type":"server_error"}}\n\n`, 'the model is overloaded'],
      ['data: {"choices": [\n\n', 'the provider sent an event that is not JSON: {"choices": ['],
    ] as const) {
      handler = (_req, res) => {
        sse(res);
        res.end(`data: ${chunk({ content: 'partial' })}\n\n${bad}data: [DONE]\n\n`);
      };
      const events: StepEvent[] = [];
      let thrown: Error | undefined;
      try {
        for await (const event of streamStep(connection(), request())) events.push(event);
      } catch (error) {
        thrown = error as Error;
      }
      expect(events).to.deep.equal([{ type: 'text', text: 'partial' }]);
      expect(thrown?.message).to.equal(message);
    }
  });

  it('stops with the abort\'s reason mid-stream, and the connection to the provider is closed', async () => {
    let closed!: Promise<void>;
    handler = (req, res) => {
      closed = new Promise((resolve) => res.on('close', () => resolve()));
      sse(res);
      res.write(`data: ${chunk({ content: 'first' })}\n\n`);
      // Nothing more: the call is aborted while it waits.
      void req;
    };
    const controller = new AbortController();
    const events: StepEvent[] = [];
    let thrown: unknown;
    try {
      for await (const event of streamStep(connection(), request({ signal: controller.signal }))) {
        events.push(event);
        controller.abort(new Error('the client went away'));
      }
    } catch (error) {
      thrown = error;
    }
    expect(events).to.deep.equal([{ type: 'text', text: 'first' }]);
    expect((thrown as Error).message).to.equal('the client went away');
    await closed;
  });
});
