// The least HTTP front of a model server that reads the model's stream itself, without the model SDK, for scale in
// the inference benchmark: a node:http server that reads each POST's JSON, calls the upstream over a kept-alive
// connection, splits its answer into SSE events, parses each, and writes each text delta as a chat.completion.chunk.
// Tool-call deltas, usage and errors are not handled: it measures what reading a stream costs, nothing more. No auth,
// agent, session, records or limits. Prints its port; runs until killed.
import { Agent, createServer, request } from 'node:http';

const upstream = new URL(process.argv[2]!);
const agent = new Agent({ keepAlive: true });
const server = createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => { body += chunk; });
  req.on('end', () => {
    const { model, messages } = JSON.parse(body) as { model: string; messages: { role: string; content: string }[] };
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    res.write(chunk({ role: 'assistant', content: '' }));
    const payload = JSON.stringify({ model, messages, stream: true, stream_options: { include_usage: true } });
    const call = request({
      host: upstream.hostname, port: upstream.port, path: `${upstream.pathname.replace(/\/$/, '')}/chat/completions`, method: 'POST', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
    }, (answer) => {
      answer.setEncoding('utf8');
      let buffer = '';
      answer.on('data', (text: string) => {
        buffer += text;
        let end;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const data = buffer.slice(buffer.startsWith('data: ') ? 6 : 0, end);
          buffer = buffer.slice(end + 2);
          if (data === '[DONE]') continue;
          const choice = (JSON.parse(data) as { choices: { delta?: { content?: string }; finish_reason?: string | null }[] }).choices[0];
          if (choice?.delta?.content) res.write(chunk({ content: choice.delta.content }));
          else if (choice?.finish_reason) res.write(chunk({}, 'stop'));
        }
      });
      answer.on('end', () => res.end('data: [DONE]\n\n'));
    });
    call.on('error', () => res.destroy());
    res.on('close', () => call.destroy());
    call.end(payload);
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`));
process.on('SIGTERM', () => process.exit(0));
