// The least HTTP front of a model server that reads the model's stream itself, without the model SDK, for scale in
// the inference benchmark: the upstream called over a kept-alive connection, its answer split into SSE events,
// each parsed and its text delta written as a chat.completion.chunk. Tool-call deltas, usage and errors are not
// handled: it measures what reading a stream costs, nothing more. No auth, agent, session, records or limits.
import { Agent, request } from 'node:http';
import { serveChunks } from './inference-chunk-front.ts';

const upstream = new URL(process.argv[2]!);
const agent = new Agent({ keepAlive: true });
serveChunks(({ model, messages }, out) => new Promise<void>((resolve, reject) => {
  const payload = JSON.stringify({ model, messages, stream: true, stream_options: { include_usage: true } });
  const call = request({
    host: upstream.hostname, port: upstream.port, path: `${upstream.pathname.replace(/\/$/, '')}/chat/completions`, method: 'POST', agent, signal: out.signal,
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
        if (choice?.delta?.content) out.text(choice.delta.content);
        else if (choice?.finish_reason) out.stop();
      }
    });
    answer.on('end', resolve);
    answer.on('error', reject);
  });
  call.on('error', reject);
  call.end(payload);
}));
