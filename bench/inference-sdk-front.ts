// The least HTTP front of a model server built on the model SDK, for scale in the inference benchmark: the one
// model call through the gateway's adapter (the SDK's provider stream over the gateway's upstream fetch), each
// text delta written as a chat.completion.chunk event. No auth, agent, session, records or limits.
import { streamStep } from '../src/server/models/adapter.ts';
import { upstreamFetch } from '../src/server/kernel/upstream-fetch.ts';
import { serveChunks } from './inference-chunk-front.ts';

const baseUrl = process.argv[2]!;
const fetchUpstream = ((input, init) => upstreamFetch(input, init, undefined)) as typeof fetch;
serveChunks(async ({ model, messages }, out) => {
  for await (const event of streamStep({ kind: 'openai-compatible', baseUrl, model, fetch: fetchUpstream }, { messages, signal: out.signal })) {
    if (event.type === 'text') out.text(event.text);
    else if (event.type === 'finish') out.stop();
  }
});
