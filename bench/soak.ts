// The soak benchmark (not CI): SOAK_MINUTES (default 30) of mixed load on one
// daemon (probes, signed webhook deliveries and the jobs they queue, RPC over
// WebSocket with clients coming and going, tool invocations, tokens created and
// revoked, streamed chat completions), with the daemon's RSS, open descriptors
// and state files sampled every SOAK_SAMPLE_SECONDS (default 5), with the
// process series of its own GET /metrics (JS heap in use, memory outside the
// heap). Reports the slope of each after the first fifth (the warm-up), beside
// its level at the end of the warm-up, and every answer that was not the
// expected one.
// Run with `npm run bench:soak`.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { signIdentity } from '../src/cli/device-identity.ts';
import { generateDeviceKey, loadDeviceKey } from '../src/shared/protocol/device-auth.ts';
import { startStreamingUpstream } from './inference.ts';
import { freePort, printFigures, rssKiB, sleep, step, type Figure } from './support.ts';
import { pushBodies, WEBHOOK_BENCH_SECRET } from './webhooks.ts';

const BIN = new URL('../bin/run.js', import.meta.url).pathname;
const MINUTES = Number(process.env.SOAK_MINUTES ?? 30);
const SAMPLE_MS = Number(process.env.SOAK_SAMPLE_SECONDS ?? 5) * 1000;
const home = mkdtempSync(join(tmpdir(), 'gateway-soak-'));
const env = { ...process.env, GATEWAY_HOME: home, CI: 'true' } as NodeJS.ProcessEnv;
const gateway = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8' });
const profile = join(home, 'profiles/soak');

/** What each stream did: answers as expected, and the others by what they were. */
const tally = new Map<string, { ok: number; other: Map<string, number> }>();
function count(stream: string, ok: boolean, what = ''): void {
  const entry = tally.get(stream) ?? { ok: 0, other: new Map() };
  if (ok) entry.ok++;
  else entry.other.set(what, (entry.other.get(what) ?? 0) + 1);
  tally.set(stream, entry);
}

/** Runs `work` about `perSecond` times a second until the deadline, in `lanes` loops. */
async function paced(stream: string, perSecond: number, lanes: number, until: number, work: () => Promise<boolean | string>): Promise<void> {
  const gap = (1000 * lanes) / perSecond;
  await Promise.all(Array.from({ length: lanes }, async (_, lane) => {
    await sleep((gap / lanes) * lane);
    while (Date.now() < until) {
      const started = Date.now();
      try {
        const outcome = await work();
        count(stream, outcome === true, outcome === true ? '' : String(outcome));
      } catch (error) {
        count(stream, false, (error as Error).message.slice(0, 80));
      }
      await sleep(Math.max(0, gap - (Date.now() - started)));
    }
  }));
}

/** Least-squares slope of y over x. */
function slope(points: [number, number][]): number {
  const n = points.length;
  const mx = points.reduce((sum, [x]) => sum + x, 0) / n;
  const my = points.reduce((sum, [, y]) => sum + y, 0) / n;
  const sxy = points.reduce((sum, [x, y]) => sum + (x - mx) * (y - my), 0);
  const sxx = points.reduce((sum, [x]) => sum + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : sxy / sxx;
}

const fileSize = (path: string) => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

const figures: Figure[] = [];
const upstream = await startStreamingUpstream(20, 5);
try {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  gateway('profiles', 'create', 'soak', '--port', String(port), '--secrets', 'file');
  gateway('profiles', 'use', 'soak');
  spawnSync(process.execPath, [BIN, 'secrets', 'set', 'webhooks.github.secret'], { env, input: WEBHOOK_BENCH_SECRET });
  gateway('config', 'set', 'gateway.rateLimit.max', '10000000');
  gateway('config', 'set', 'models.providers.up', JSON.stringify({ kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'] }));
  gateway('config', 'set', 'agents.soak', JSON.stringify({ model: 'up/m', tools: ['jobs.get'] }));
  gateway('config', 'set', 'gateway.http.endpoints.chatCompletions.enabled', 'true');
  gateway('config', 'set', 'metrics.enabled', 'true');
  const started = gateway('start');
  if (started.status !== 0) throw new Error(`start failed: ${started.stderr}`);
  const pid = JSON.parse(readFileSync(join(profile, 'daemon.json'), 'utf8')).pid as number;
  const token = JSON.parse(readFileSync(join(profile, 'secrets.json'), 'utf8')).secrets['gateway.token'] as string;
  const auth = { authorization: `Bearer ${token}` };
  const bodies = pushBodies(100);
  let delivery = 0;
  const jobIds: string[] = [];

  const until = Date.now() + MINUTES * 60_000;
  step(`${MINUTES} min of mixed load on pid ${pid}, sampled every ${SAMPLE_MS / 1000} s`);
  const samples: { at: number; rssMb: number; anonMb: number; fds: number; storeMb: number; heapMb: number; externalMb: number }[] = [];
  const anonKiB = () => Number(/RssAnon:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  /** The daemon's own process series, as a Prometheus server scrapes them, in MB. */
  const scrape = async () => {
    const text = await (await fetch(`${base}/metrics`, { headers: auth })).text();
    const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text)?.[1] ?? Number.NaN) / 1048576;
    return { heapMb: value('nodejs_heap_size_used_bytes'), externalMb: value('nodejs_external_memory_bytes') };
  };
  const sampler = (async () => {
    const t0 = Date.now();
    while (Date.now() < until) {
      samples.push({
        at: (Date.now() - t0) / 3_600_000,
        rssMb: rssKiB(pid) / 1024,
        anonMb: anonKiB() / 1024,
        fds: readdirSync(`/proc/${pid}/fd`).length,
        storeMb: (fileSize(join(profile, 'state.db')) + fileSize(join(profile, 'state.db-wal'))) / 1048576,
        ...(await scrape()),
      });
      if (samples.length % 12 === 0) {
        const last = samples.at(-1)!;
        step(`${(last.at * 60).toFixed(1)} min: RSS ${last.rssMb.toFixed(1)} MB (${last.anonMb.toFixed(1)} MB anonymous; JS heap ${last.heapMb.toFixed(1)} MB, external ${last.externalMb.toFixed(1)} MB), ${last.fds} fds, state ${last.storeMb.toFixed(1)} MB`);
      }
      await sleep(SAMPLE_MS);
    }
  })();

  const probes = paced('probes', 200, 4, until, async () => {
    const response = await fetch(`${base}/${Math.random() < 0.5 ? 'healthz' : 'readyz'}`);
    await response.arrayBuffer();
    return response.status === 200 || String(response.status);
  });
  const deliveries = paced('deliveries', 50, 4, until, async () => {
    const { body, signature } = bodies[delivery++ % bodies.length]!;
    const response = await fetch(`${base}/webhooks`, {
      method: 'POST', body,
      headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': randomUUID(), 'x-github-hook-id': '1', 'x-hub-signature-256': signature },
    });
    const answer = await response.json() as { jobId?: string };
    if (answer.jobId && jobIds.length < 1000) jobIds.push(answer.jobId);
    return response.status === 200 || String(response.status);
  });
  const tools = paced('tools', 50, 2, until, async () => {
    const id = jobIds[Math.floor(Math.random() * jobIds.length)] ?? 'job_none';
    const response = await fetch(`${base}/tools/invoke`, {
      method: 'POST', headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify(Math.random() < 0.5 ? { tool: 'gateway.status' } : { tool: 'jobs.get', args: { id } }),
    });
    await response.arrayBuffer();
    return response.status === 200 || (response.status === 404 && id === 'job_none') || String(response.status);
  });
  const tokens = paced('tokens', 2, 1, until, async () => {
    const created = await fetch(`${base}/tokens`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'soak', scopes: ['jobs:read'] }) });
    const { id } = await created.json() as { id: string };
    const listed = await fetch(`${base}/jobs?limit=20`, { headers: auth });
    await listed.arrayBuffer();
    const revoked = await fetch(`${base}/tokens/${id}`, { method: 'DELETE', headers: auth });
    await revoked.arrayBuffer();
    return (created.status === 201 && listed.status === 200 && revoked.status === 200) || `${created.status}/${listed.status}/${revoked.status}`;
  });
  const chats = paced('chat completions', 5, 2, until, async () => {
    const response = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gateway/soak', messages: [{ role: 'user', content: 'go' }], stream: true, user: `soak-${Math.floor(Math.random() * 50)}` }),
    });
    const text = await response.text();
    return (response.status === 200 && text.includes('[DONE]')) || String(response.status);
  });
  // RPC: clients that connect, call for a while and leave, one after another.
  const device = loadDeviceKey(generateDeviceKey());
  const rpc = paced('rpc sessions (connect, 50 calls, close)', 1, 1, until, () => new Promise<boolean | string>((resolve) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: false });
    const methods = ['status', 'jobs.list', 'tokens.list', 'channels.status', 'sessions.list', 'health'];
    let calls = 0;
    const timer = setTimeout(() => {
      socket.terminate();
      resolve('timed out');
    }, 30_000);
    const call = () => socket.send(JSON.stringify({ type: 'req', id: `r${calls}`, method: methods[calls % methods.length], params: {} }));
    socket.on('message', (data) => {
      const frame = JSON.parse(data.toString());
      if (frame.event === 'connect.challenge') {
        const scopes = ['operator.read'];
        socket.send(JSON.stringify({
          type: 'req', id: 'c', method: 'connect',
          params: {
            minProtocol: 1, maxProtocol: 1, client: { id: 'soak', version: '1', platform: 'linux', mode: 'bench' }, role: 'operator', scopes, auth: { token },
            device: signIdentity(device, { nonce: frame.payload.nonce, role: 'operator', scopes, clientId: 'soak' }),
          },
        }));
      } else if (frame.type === 'res') {
        if (!frame.ok) {
          clearTimeout(timer);
          socket.close();
          resolve(`${frame.id}: ${frame.error?.code}`);
        } else if (++calls <= 50) {
          call();
        } else {
          clearTimeout(timer);
          socket.close();
          resolve(true);
        }
      }
    });
    socket.on('error', (error) => resolve(error.message));
  }));
  await Promise.all([sampler, probes, deliveries, tools, tokens, chats, rpc]);

  const steady = samples.filter((sample) => sample.at >= (MINUTES / 60) / 5);
  const warm = steady[0] ?? samples[0]!;
  const last = samples.at(-1)!;
  const rssSlope = slope(steady.map((s) => [s.at, s.rssMb]));
  const anonSlope = slope(steady.map((s) => [s.at, s.anonMb]));
  const fdSlope = slope(steady.map((s) => [s.at, s.fds]));
  const storeSlope = slope(steady.map((s) => [s.at, s.storeMb]));
  const peak = Math.max(...samples.map((s) => s.rssMb));
  figures.push({
    name: `RSS over ${MINUTES} min of mixed load`, value: `${rssSlope >= 0 ? '+' : ''}${rssSlope.toFixed(1)} MB/h (end ${last.rssMb.toFixed(0)} MB, peak ${peak.toFixed(0)} MB)`,
    baseline: `${warm.rssMb.toFixed(0)} MB after warm-up`, comparison: `${((rssSlope / warm.rssMb) * 100).toFixed(1)} %/h`, target: '<= 5 %/h', ok: rssSlope / warm.rssMb <= 0.05,
  });
  figures.push({
    name: 'of which anonymous (heap, not file pages)', value: `${anonSlope >= 0 ? '+' : ''}${anonSlope.toFixed(1)} MB/h (end ${last.anonMb.toFixed(0)} MB)`,
    baseline: `${warm.anonMb.toFixed(0)} MB after warm-up`, comparison: `${((anonSlope / warm.anonMb) * 100).toFixed(1)} %/h`, target: '<= 5 %/h', ok: anonSlope / warm.anonMb <= 0.05,
  });
  const heapSlope = slope(steady.map((s) => [s.at, s.heapMb]));
  const externalSlope = slope(steady.map((s) => [s.at, s.externalMb]));
  figures.push({
    name: 'JS heap in use (/metrics nodejs_heap_size_used_bytes)', value: `${heapSlope >= 0 ? '+' : ''}${heapSlope.toFixed(1)} MB/h (end ${last.heapMb.toFixed(1)} MB)`,
    baseline: `${warm.heapMb.toFixed(1)} MB after warm-up`, comparison: `${((heapSlope / warm.heapMb) * 100).toFixed(1)} %/h`, target: '(informational)', ok: true,
  });
  figures.push({
    name: 'memory outside the heap (/metrics nodejs_external_memory_bytes)', value: `${externalSlope >= 0 ? '+' : ''}${externalSlope.toFixed(1)} MB/h (end ${last.externalMb.toFixed(1)} MB)`,
    baseline: `${warm.externalMb.toFixed(1)} MB after warm-up`, comparison: `${((externalSlope / Math.max(0.1, warm.externalMb)) * 100).toFixed(1)} %/h`, target: '(informational)', ok: true,
  });
  figures.push({
    name: 'open descriptors', value: `${fdSlope >= 0 ? '+' : ''}${fdSlope.toFixed(1)} /h (end ${last.fds})`,
    baseline: `${warm.fds} after warm-up`, comparison: `${(last.fds - warm.fds >= 0 ? '+' : '')}${last.fds - warm.fds}`, target: '<= +5 over the run', ok: last.fds - warm.fds <= 5,
  });
  figures.push({
    name: 'state.db + WAL', value: `${storeSlope >= 0 ? '+' : ''}${storeSlope.toFixed(1)} MB/h (end ${last.storeMb.toFixed(1)} MB)`,
    baseline: `${warm.storeMb.toFixed(1)} MB after warm-up`, comparison: 'deliveries and runs are kept (retention)', target: '(informational)', ok: true,
  });
  for (const [stream, { ok, other }] of tally) {
    const wrong = [...other.values()].reduce((sum, n) => sum + n, 0);
    figures.push({
      name: stream, value: `${ok} as expected`, baseline: `${ok + wrong} sent`,
      comparison: wrong === 0 ? 'none other' : [...other].map(([what, n]) => `${n}x ${what}`).join('; ').slice(0, 120), target: 'every one', ok: wrong === 0,
    });
  }
} finally {
  upstream.stop();
  gateway('stop', '--force');
  rmSync(home, { recursive: true, force: true });
}
printFigures(figures);
