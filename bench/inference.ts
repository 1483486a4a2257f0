// The inference API beside the gateways people run, in one run: the upstream called directly, through a bare
// node:http proxy (the least any HTTP front in between adds), through Portkey's open-source gateway (installed by the
// bench from the npm registry into a folder of its own), and through this gateway (an agent run with its session
// records and usage). The upstream is a separate process pacing a fast model's words, so what is measured is the
// fronts and nothing slower. Interleaved: each request or round goes to the four in turn, so the machine's state
// falls on all of them alike.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, loadFrom, median, readyLine, rssKiB, sleep, step, type Figure } from './support.ts';
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

/** One streamed request: ms to the first content chunk and to [DONE], and how many chunks came. */
async function streamOnce(target: Target, model = target.model): Promise<{ firstMs: number; doneMs: number; chunks: number }> {
  const started = performance.now();
  const response = await fetch(`${target.url}/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...target.headers },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'go' }], stream: true }),
  });
  if (response.status !== 200) throw new Error(`${target.name} answered ${response.status}: ${await response.text()}`);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let firstMs = -1;
  let doneMs = -1;
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
      } else if (event === 'data: [DONE]') doneMs = performance.now() - started;
    }
  }
  if (doneMs < 0) throw new Error(`${target.name} ended its stream without [DONE]`);
  return { firstMs, doneMs, chunks };
}

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** The paced model as this target names it; its two-word model for warming up. */
  model: string;
  short: string;
  /** The front's process, whose CPU and memory are measured (none for the upstream itself). */
  pid?: () => number;
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

/** CPU time a process has used, in ms (user and system, from /proc). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * (1000 / 100);
}

interface Round { chunksPerSecond: number; streams: number; chunks: number; cpuMs?: number }

/** Streams with 50 at a time for a while: chunks per second, and the front's CPU over the round. */
async function throughput(target: Target, seconds: number): Promise<Round> {
  const pid = target.pid?.();
  const cpuBefore = pid ? cpuMs(pid) : 0;
  const until = performance.now() + seconds * 1000;
  let chunks = 0;
  let streams = 0;
  await Promise.all(Array.from({ length: 50 }, async () => {
    while (performance.now() < until) {
      // Read the count first: `chunks += await ...` would add to the total as it was before the wait.
      const received = (await streamOnce(target)).chunks;
      chunks += received;
      streams++;
    }
  }));
  return { chunksPerSecond: chunks / seconds, streams, chunks, cpuMs: pid ? cpuMs(pid) - cpuBefore : undefined };
}

const PORTKEY_VERSION = '1.15.2';

/**
 * Portkey's gateway from the npm registry, in a folder of its own (kept between runs). Its @hono/node-server is
 * held at 1.13.8: with a newer one every streamed answer fails ("TypeError: immutable", Portkey-AI/gateway#1389).
 */
async function startPortkey(): Promise<{ url: string; child: ChildProcess }> {
  const folder = join(tmpdir(), `gateway-bench-portkey-${PORTKEY_VERSION}`);
  const main = join(folder, 'node_modules/@portkey-ai/gateway/build/start-server.js');
  if (!existsSync(main)) {
    step(`installing @portkey-ai/gateway ${PORTKEY_VERSION} into ${folder}`);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'package.json'), JSON.stringify({ private: true, dependencies: { '@portkey-ai/gateway': PORTKEY_VERSION }, overrides: { '@hono/node-server': '1.13.8' } }));
    const npm = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: folder, encoding: 'utf8' });
    if (npm.status !== 0) throw new Error(`installing Portkey failed: ${npm.stderr}`);
  }
  const port = await freePort();
  const child = spawn(process.execPath, [main, `--port=${port}`, '--headless'], { cwd: folder, env: { ...process.env, NODE_ENV: 'production' }, stdio: ['ignore', 'pipe', 'ignore'] });
  await readyLine(child, /Ready for connections/, 'Portkey');
  return { url: `http://127.0.0.1:${port}/v1`, child };
}

/**
 * The agents the bench calls: `bench` answers with the paced upstream's words,
 * `short` with its model 'short' (two words, 5 ms apart).
 */
export const BENCH_AGENTS = { paced: 'bench', short: 'bench-short' } as const;

export interface InferenceBench {
  gatewayUrl: string;
  token: string;
  upstreamUrl: string;
  /** The running daemon's pid. */
  gatewayPid: () => number;
  /** Turns the daemon's metrics on or off (applied while it runs). */
  setMetrics: (on: boolean) => void;
  /** Sequential requests per target. */
  requests: number;
  rounds: number;
  seconds: number;
}

export async function runInferenceBench(options: InferenceBench): Promise<Figure[]> {
  const children: ChildProcess[] = [];
  try {
    const proxy = spawn(process.execPath, [new URL('./inference-proxy.ts', import.meta.url).pathname, options.upstreamUrl], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(proxy);
    const proxyUrl = `http://127.0.0.1:${(await readyLine(proxy, /listening (\d+)/, 'the bench proxy'))[1]}/v1`;
    const portkey = await startPortkey();
    children.push(portkey.child);
    const direct: Target = { name: 'direct', url: options.upstreamUrl, headers: {}, model: 'm', short: 'short' };
    const targets: Target[] = [
      direct,
      { name: 'bare node:http proxy', url: proxyUrl, headers: {}, model: 'm', short: 'short', pid: () => proxy.pid! },
      {
        name: `Portkey ${PORTKEY_VERSION}`, url: portkey.url, model: 'm', short: 'short', pid: () => portkey.child.pid!,
        headers: { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': options.upstreamUrl, authorization: 'Bearer bench' },
      },
      {
        name: 'this gateway', url: `${options.gatewayUrl}/v1`, headers: { authorization: `Bearer ${options.token}` },
        model: `gateway/${BENCH_AGENTS.paced}`, short: `gateway/${BENCH_AGENTS.short}`, pid: options.gatewayPid,
      },
    ];
    const gateway = targets[3]!;
    // Warm every path to a daemon's steady state: V8 optimises code run once per request only after a few hundred
    // requests (its invocation counts), as a front in service long has.
    const warm = async (target: Target, count: number) => {
      for (let i = 0; i < count; i++) await streamOnce(target, target.short);
    };
    for (const target of targets) await warm(target, 500);

    step(`first token and [DONE], ${options.requests} sequential streams per target, interleaved`);
    const first = targets.map(() => [] as number[]);
    const done = targets.map(() => [] as number[]);
    for (let i = 0; i < options.requests; i++) {
      for (const [index, target] of targets.entries()) {
        const result = await streamOnce(target);
        first[index]!.push(result.firstMs);
        done[index]!.push(result.doneMs);
      }
    }

    step(`50 concurrent streams, ${options.rounds} rounds of ${options.seconds} s, interleaved`);
    const rounds = targets.map(() => [] as Round[]);
    for (let round = 0; round < options.rounds; round++) {
      for (const [index, target] of targets.entries()) rounds[index]!.push(await throughput(target, options.seconds));
    }
    const rss = targets.map((target) => (target.pid ? rssKiB(target.pid()) / 1024 : NaN));

    step(`metrics on and off, ${options.rounds} rounds each, interleaved`);
    const metricRounds = { off: [] as number[], on: [] as number[] };
    const probes = { off: [] as number[], on: [] as number[] };
    const healthz = `${options.gatewayUrl}/healthz`;
    for (let round = 0; round < options.rounds; round++) {
      for (const on of [false, true]) {
        options.setMetrics(on);
        await sleep(300);
        await warm(gateway, 100);
        metricRounds[on ? 'on' : 'off'].push((await throughput(gateway, options.seconds)).chunksPerSecond);
        probes[on ? 'on' : 'off'].push((await loadFrom({ url: healthz, connections: 50, duration: 3 })).rps);
      }
    }
    options.setMetrics(false);

    const added = (index: number, values: number[][], p: number) => percentile(values[index]!, p) - percentile(values[0]!, p);
    const addedText = (index: number, values: number[][]) => `+${added(index, values, 50).toFixed(2)} / +${added(index, values, 99).toFixed(2)} ms`;
    const rate = (index: number) => median(rounds[index]!.map((r) => r.chunksPerSecond));
    const versus = (index: number) => median(rounds[index]!.map((r, n) => r.chunksPerSecond / rounds[0]![n]!.chunksPerSecond));
    const perChunk = (index: number) => median(rounds[index]!.map((r) => (r.cpuMs! / r.chunks) * 1000));
    const perStream = (index: number) => median(rounds[index]!.map((r) => r.cpuMs! / r.streams));
    const perRound = (index: number) => median(rounds[index]!.map((r) => r.cpuMs! / 1000));
    const others = (show: (index: number) => string) => [1, 2].map((index) => `${targets[index]!.name} ${show(index)}`).join('; ');
    const firstP50 = added(3, first, 50);
    const firstP99 = added(3, first, 99);
    const ours = versus(3);
    const theirs = versus(2);
    const metricsCost = 1 - median(metricRounds.on) / median(metricRounds.off);
    const probeCost = 1 - median(probes.on) / median(probes.off);
    return [
      {
        name: 'first token added by /v1/chat/completions, p50 / p99',
        value: addedText(3, first),
        baseline: `${percentile(first[0]!, 50).toFixed(2)} / ${percentile(first[0]!, 99).toFixed(2)} ms direct`,
        comparison: others((index) => addedText(index, first)),
        target: '<= +1.5 / +5 ms', ok: firstP50 <= 1.5 && firstP99 <= 5,
      },
      {
        name: 'streamed to [DONE] added, p50 / p99',
        value: addedText(3, done),
        baseline: `${percentile(done[0]!, 50).toFixed(2)} / ${percentile(done[0]!, 99).toFixed(2)} ms direct`,
        comparison: others((index) => addedText(index, done)),
        target: '(reported)', ok: true,
      },
      {
        name: 'streamed chunks/s, 50 concurrent streams, vs direct',
        value: `${ours.toFixed(2)}x (${rate(3).toFixed(0)} chunks/s)`,
        baseline: `${rate(0).toFixed(0)} chunks/s direct`,
        comparison: others((index) => `${versus(index).toFixed(2)}x`),
        target: `>= 0.85x and above Portkey`, ok: ours >= 0.85 && ours > theirs,
      },
      {
        name: 'front\'s CPU per streamed chunk',
        value: `${perChunk(3).toFixed(1)} µs (${perStream(3).toFixed(2)} ms per stream, ${perRound(3).toFixed(1)} s per ${options.seconds} s round)`,
        baseline: `Portkey ${perChunk(2).toFixed(1)} µs (${perStream(2).toFixed(2)} ms per stream, ${perRound(2).toFixed(1)} s per round)`,
        comparison: `bare proxy ${perChunk(1).toFixed(1)} µs (${perStream(1).toFixed(2)} ms per stream, ${perRound(1).toFixed(1)} s per round)`,
        target: 'below Portkey', ok: perChunk(3) < perChunk(2),
      },
      {
        name: 'front\'s RSS after the runs',
        value: `${rss[3]!.toFixed(0)} MB`,
        baseline: `Portkey ${rss[2]!.toFixed(0)} MB`,
        comparison: `bare proxy ${rss[1]!.toFixed(0)} MB`,
        target: 'below Portkey', ok: rss[3]! < rss[2]!,
      },
      {
        name: 'metrics enabled: chunks/s and GET /healthz req/s beside disabled',
        value: `${(-metricsCost * 100).toFixed(1)} % chunks/s, ${(-probeCost * 100).toFixed(1)} % req/s`,
        baseline: `${median(metricRounds.off).toFixed(0)} chunks/s, ${median(probes.off).toFixed(0)} req/s disabled`,
        comparison: `${median(metricRounds.on).toFixed(0)} chunks/s, ${median(probes.on).toFixed(0)} req/s enabled`,
        target: '<= 3 % each', ok: metricsCost <= 0.03 && probeCost <= 0.03,
      },
    ];
  } finally {
    for (const child of children) child.kill('SIGTERM');
  }
}
