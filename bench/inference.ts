// The inference API beside the upstream it calls, in the same run: the latency it
// adds to the first token, and streamed chunks per second at 50 concurrent streams.
// The upstream is a separate process answering at once, so what is measured is the
// gateway (an agent run, its session records, the SDK) and nothing slower. For
// scale, three fronts of the same upstream through the same hop: a bare proxy, the
// least front that reads the stream itself, and the least front built on the model SDK.
import { spawn, type ChildProcess } from 'node:child_process';
import { median, readyLine, type Figure } from './support.ts';

const UPSTREAM = `
const http = require('node:http');
const CHUNKS = Number(process.argv[1]);
const GAP = Number(process.argv[2]);
// Model 'short': two words, for warming up and for back-to-back streams.
const chunksFor = (body) => { try { return JSON.parse(body).model === 'short' ? 2 : CHUNKS; } catch { return CHUNKS; } };
const head = (id) => ({ id, object: 'chat.completion.chunk', created: 1, model: 'm' });
http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    const chunks = chunksFor(body);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const id = 'c' + Math.random().toString(36).slice(2);
    const event = (value) => 'data: ' + JSON.stringify(value) + '\\n\\n';
    res.write(event({ ...head(id), choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }));
    // Paced like a fast model: the first word at once, then one every GAP ms.
    let sent = 0;
    const next = () => {
      res.write(event({ ...head(id), choices: [{ index: 0, delta: { content: 'word ' }, finish_reason: null }] }));
      if (++sent < chunks) return setTimeout(next, GAP);
      res.write(event({ ...head(id), choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
      res.write(event({ ...head(id), choices: [], usage: { prompt_tokens: 5, completion_tokens: chunks, total_tokens: 5 + chunks } }));
      res.end('data: [DONE]\\n\\n');
    };
    next();
  });
}).listen(0, '127.0.0.1', function () { process.stdout.write('listening ' + this.address().port + '\\n'); });
`;

export async function startStreamingUpstream(chunks: number, gapMs: number): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, ['-e', UPSTREAM, String(chunks), String(gapMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = Number((await readyLine(child, /listening (\d+)/, 'the upstream'))[1]);
  return { url: `http://127.0.0.1:${port}/v1`, stop: () => child.kill('SIGKILL') };
}

/** One streamed request: ms to the first content chunk, and how many chunks came. */
async function streamOnce(url: string, headers: Record<string, string>, model: string): Promise<{ firstMs: number; chunks: number }> {
  const started = performance.now();
  const response = await fetch(`${url}/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'go' }], stream: true }),
  });
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}: ${await response.text()}`);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let firstMs = -1;
  let chunks = 0;
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (event.includes('"content":"word')) {
        chunks++;
        if (firstMs < 0) firstMs = performance.now() - started;
      }
    }
  }
  return { firstMs, chunks };
}

/** A front of the upstream in a process of its own (a bench script given the upstream's URL); its /v1 URL. */
async function startFront(script: string, upstreamUrl: string, what: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [new URL(script, import.meta.url).pathname, upstreamUrl], { stdio: ['ignore', 'pipe', 'inherit'] });
  return { url: `http://127.0.0.1:${(await readyLine(child, /listening (\d+)/, what))[1]}/v1`, child };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

/** Streams with 50 at a time for a while; chunks per second. */
async function throughput(url: string, headers: Record<string, string>, model: string, seconds: number): Promise<number> {
  const until = performance.now() + seconds * 1000;
  let chunks = 0;
  await Promise.all(Array.from({ length: 50 }, async () => {
    while (performance.now() < until) {
      // Read the count first: `chunks += await ...` would add to the total as it was before the wait.
      const received = (await streamOnce(url, headers, model)).chunks;
      chunks += received;
    }
  }));
  return chunks / seconds;
}

/**
 * The agents the bench calls: `bench` answers with the paced upstream's 40
 * words, `short` with its model 'short' (two words, 5 ms apart).
 */
export const BENCH_AGENTS = { paced: 'bench', short: 'bench-short' } as const;

export async function runInferenceBench(gatewayUrl: string, token: string, upstreamUrl: string, rounds: number, seconds: number): Promise<Figure[]> {
  const auth = { authorization: `Bearer ${token}` };
  const gateway = `${gatewayUrl}/v1`;
  const paced = `gateway/${BENCH_AGENTS.paced}`;
  const short = `gateway/${BENCH_AGENTS.short}`;
  // For scale, three fronts through the same hop: a bare proxy that pipes the stream through unread (the least any HTTP
  // front in between adds), the least front that reads the stream itself (each event parsed and its text written as a
  // chunk, no SDK), and the least front built on the model SDK (one model call through the gateway's adapter and fetch,
  // each text delta written as a chunk; no auth, agent, session or records): the floor of a gateway that calls its
  // models through the SDK.
  const children: ChildProcess[] = [];
  const started = async (script: string, what: string) => {
    const { url, child } = await startFront(script, upstreamUrl, what);
    children.push(child);
    return url;
  };
  try {
    const proxy = await started('./inference-proxy.ts', 'the bench proxy');
    const own = await started('./inference-own-front.ts', 'the front without the SDK');
    const front = await started('./inference-sdk-front.ts', 'the SDK front');
    // Warm every path to a daemon's steady state: the first run loads the model SDK, and V8 optimises code run once
    // per request only after a few hundred requests (its invocation counts), as a daemon in service long has.
    for (let i = 0; i < 600; i++) {
      await streamOnce(upstreamUrl, {}, 'short');
      await streamOnce(gateway, auth, short);
      await streamOnce(front, {}, 'short');
      await streamOnce(own, {}, 'short');
      await streamOnce(proxy, {}, 'short');
    }
    for (let i = 0; i < 30; i++) {
      await streamOnce(upstreamUrl, {}, 'm');
      await streamOnce(gateway, auth, paced);
      await streamOnce(front, {}, 'm');
      await streamOnce(own, {}, 'm');
      await streamOnce(proxy, {}, 'm');
    }
    const direct: number[] = [];
    const via: number[] = [];
    const proxied: number[] = [];
    const fronted: number[] = [];
    const parsed: number[] = [];
    // 100 of each per round: a p99 of fewer is one or two outliers.
    for (let i = 0; i < rounds * 100; i++) {
      direct.push((await streamOnce(upstreamUrl, {}, 'm')).firstMs);
      via.push((await streamOnce(gateway, auth, paced)).firstMs);
      proxied.push((await streamOnce(proxy, {}, 'm')).firstMs);
      fronted.push((await streamOnce(front, {}, 'm')).firstMs);
      parsed.push((await streamOnce(own, {}, 'm')).firstMs);
    }
    // For scale: the same with streams of two words back to back, which keep the machine busy. Every process then
    // answers sooner (the direct calls too): what remains is the gateway's own work, without the cost of waking an idle
    // machine between the paced stream's words, which the gateway pays for its code as every process does for its own.
    const busyDirect: number[] = [];
    const busyVia: number[] = [];
    for (let i = 0; i < rounds * 100; i++) {
      busyDirect.push((await streamOnce(upstreamUrl, {}, 'short')).firstMs);
      busyVia.push((await streamOnce(gateway, auth, short)).firstMs);
    }
    const added = (values: number[], p: number) => percentile(values, p) - percentile(direct, p);
    const addedP50 = added(via, 50);
    const addedP99 = added(via, 99);
    // The gateway's own work: what it adds beyond the least front on the SDK.
    const ownP50 = percentile(via, 50) - percentile(fronted, 50);
    const directRates: number[] = [];
    const viaRates: number[] = [];
    const frontRates: number[] = [];
    const ownRates: number[] = [];
    for (let round = 0; round < Math.max(1, Math.min(rounds, 3)); round++) {
      directRates.push(await throughput(upstreamUrl, {}, 'm', seconds));
      viaRates.push(await throughput(gateway, auth, paced, seconds));
      frontRates.push(await throughput(front, {}, 'm', seconds));
      ownRates.push(await throughput(own, {}, 'm', seconds));
    }
    const ratio = median(viaRates) / median(directRates);
    return [
      {
        name: 'first token added by /v1/chat/completions',
        value: `+${addedP50.toFixed(2)} ms p50, +${addedP99.toFixed(2)} ms p99`,
        baseline: `${percentile(direct, 50).toFixed(2)} ms p50 / ${percentile(direct, 99).toFixed(2)} ms p99 direct`,
        comparison: `${percentile(via, 50).toFixed(2)} / ${percentile(via, 99).toFixed(2)} ms via gateway (through the same hop: a bare node:http proxy +${added(proxied, 50).toFixed(2)} ms p50; the least front reading the stream without the SDK +${added(parsed, 50).toFixed(2)} ms p50; the least front on the model SDK +${added(fronted, 50).toFixed(2)} ms p50, +${added(fronted, 99).toFixed(2)} ms p99)`,
        target: '<= +1 ms p50, +5 ms p99', ok: addedP50 <= 1 && addedP99 <= 5,
      },
      {
        name: 'first token added beyond the least front on the model SDK (the gateway\'s own work)',
        value: `+${ownP50.toFixed(2)} ms p50`,
        baseline: `${percentile(fronted, 50).toFixed(2)} ms p50 through the SDK front`,
        comparison: `auth, body, agent run, session records, SSE: ${(ownP50 / Math.max(0.01, addedP50) * 100).toFixed(0)}% of the added p50`,
        target: '(reported)', ok: true,
      },
      {
        name: 'first token added, back-to-back two-word streams (for scale)',
        value: `+${(percentile(busyVia, 50) - percentile(busyDirect, 50)).toFixed(2)} ms p50, +${(percentile(busyVia, 99) - percentile(busyDirect, 99)).toFixed(2)} ms p99`,
        baseline: `${percentile(busyDirect, 50).toFixed(2)} ms p50 / ${percentile(busyDirect, 99).toFixed(2)} ms p99 direct`,
        comparison: `${percentile(busyVia, 50).toFixed(2)} / ${percentile(busyVia, 99).toFixed(2)} ms via gateway`,
        target: '(reported)', ok: true,
      },
      {
        name: 'streamed chunks/s, 50 concurrent streams',
        value: `${median(viaRates).toFixed(0)} chunks/s`,
        baseline: `${median(directRates).toFixed(0)} chunks/s direct`,
        comparison: `${ratio.toFixed(2)}x (the least front without the SDK: ${(median(ownRates) / median(directRates)).toFixed(2)}x; on the model SDK: ${(median(frontRates) / median(directRates)).toFixed(2)}x)`,
        target: '>= 0.9x', ok: ratio >= 0.9,
      },
    ];
  } finally {
    for (const child of children) child.kill('SIGTERM');
  }
}
