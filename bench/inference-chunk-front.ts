// What the bench's reading fronts share (inference-own-front.ts, inference-sdk-front.ts): a node:http server
// that reads each POST's JSON, opens a chat.completion.chunk stream, lets the front write each text delta and
// the finish, and ends the stream with [DONE] (or drops the connection when the front fails). Prints its port;
// runs until killed.
import { createServer } from 'node:http';

export interface FrontRequest {
  model: string;
  messages: { role: 'user'; content: string }[];
}

export interface ChunkWriter {
  text(content: string): void;
  stop(): void;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

export function serveChunks(answer: (request: FrontRequest, out: ChunkWriter) => Promise<void>): void {
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => { body += chunk; });
    req.on('end', async () => {
      const request = JSON.parse(body) as FrontRequest;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta: Record<string, unknown>, finish: string | null = null) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: request.model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(chunk({ role: 'assistant', content: '' }));
      const gone = new AbortController();
      res.on('close', () => gone.abort());
      try {
        await answer(request, { text: (content) => res.write(chunk({ content })), stop: () => res.write(chunk({}, 'stop')), signal: gone.signal });
        res.end('data: [DONE]\n\n');
      } catch {
        res.destroy();
      }
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`));
  process.on('SIGTERM', () => process.exit(0));
}
