// The least HTTP front of a model server built on the model SDK, for scale in the inference benchmark: a
// node:http server that reads each POST's JSON, makes the one model call through the gateway's adapter (the SDK's
// provider stream over the gateway's upstream fetch) and writes each text delta as a chat.completion.chunk event.
// No auth, agent, session, records or limits. Prints its port; runs until killed.
import { createServer } from 'node:http';
import { streamStep } from '../src/server/models/adapter.ts';
import { upstreamFetch } from '../src/server/kernel/upstream-fetch.ts';

const baseUrl = process.argv[2]!;
const fetchUpstream = ((input, init) => upstreamFetch(input, init, undefined)) as typeof fetch;
const server = createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => { body += chunk; });
  req.on('end', async () => {
    const { model, messages } = JSON.parse(body) as { model: string; messages: { role: 'user'; content: string }[] };
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    res.write(chunk({ role: 'assistant', content: '' }));
    const gone = new AbortController();
    res.on('close', () => gone.abort());
    try {
      for await (const event of streamStep({ kind: 'openai-compatible', baseUrl, model, fetch: fetchUpstream }, { messages, signal: gone.signal })) {
        if (event.type === 'text') res.write(chunk({ content: event.text }));
        else if (event.type === 'finish') res.write(chunk({}, 'stop'));
      }
      res.end('data: [DONE]\n\n');
    } catch {
      res.destroy();
    }
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`));
process.on('SIGTERM', () => process.exit(0));
