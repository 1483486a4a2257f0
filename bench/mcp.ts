import { spawn } from 'node:child_process';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { median, readyLine, sleep, type Figure } from './support.ts';

/** A bench script in a process of its own, so no path shares a process with another; resolves with the line it prints. */
async function startServer(script = './mcp-server.ts', args: string[] = []): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, [new URL(script, import.meta.url).pathname, ...args], { stdio: ['ignore', 'pipe', 'ignore'] });
  const url = (await readyLine(child, /^(.*)\n/, 'the MCP bench server'))[1]!.trim();
  return { url, stop: () => child.kill('SIGTERM') };
}

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

async function timed(calls: number, call: () => Promise<void>): Promise<number[]> {
  for (let i = 0; i < 20; i++) await call();
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    await call();
    times.push(performance.now() - started);
  }
  return times;
}

/**
 * A trivial MCP tool invoked through POST /tools/invoke, beside the same call
 * made directly with the MCP client, one call at a time, in the same run.
 */
export async function runMcpBench(port: number, token: string, gateway: (...args: string[]) => { status: number | null; stderr: string }, calls: number): Promise<Figure> {
  const server = await startServer();
  try {
    const added = gateway('mcp', 'add', 'bench', server.url);
    if (added.status !== 0) throw new Error(`mcp add failed: ${added.stderr}`);
    gateway('config', 'set', 'gateway.tools.allow', '["mcp.bench.*"]');
    const base = `http://127.0.0.1:${port}`;
    const invoke = async () => {
      const res = await fetch(`${base}/tools/invoke`, {
        method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tool: 'mcp.bench.echo', args: { text: 'hi' } }),
      });
      if (res.status !== 200) throw new Error(`POST /tools/invoke answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    };
    for (let attempt = 0; ; attempt++) {
      try {
        await invoke();
        break;
      } catch (error) {
        if (attempt > 50) throw error;
        await sleep(100);
      }
    }
    // For scale: a bare proxy that calls through the MCP client's callTool, with no auth, policy or validation.
    const proxy = await startServer('./mcp-proxy.ts', [server.url]);
    const viaProxy = async () => {
      const res = await fetch(`http://127.0.0.1:${proxy.url}/`, { method: 'POST', body: JSON.stringify({ text: 'hi' }) });
      if (res.status !== 200) throw new Error(`the bench proxy answered ${res.status}`);
      await res.arrayBuffer();
    };
    const client = new Client({ name: 'bench', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
    // Alternating rounds, so drift in a noisy machine's speed falls on both paths alike.
    const direct: number[] = [];
    const through: number[] = [];
    const proxied: number[] = [];
    const rounds = 7;
    for (let round = 0; round < rounds; round++) {
      direct.push(...(await timed(Math.ceil(calls / rounds), async () => {
        await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
      })));
      through.push(...(await timed(Math.ceil(calls / rounds), invoke)));
      proxied.push(...(await timed(Math.ceil(calls / rounds), viaProxy)));
    }
    await client.close();
    proxy.stop();
    gateway('mcp', 'remove', 'bench');
    const ratio = median(through) / median(direct);
    return {
      name: `MCP tool via POST /tools/invoke, ${calls} calls one at a time`,
      value: `p50 ${median(through).toFixed(2)} ms (p99 ${percentile(through, 99).toFixed(2)} ms)`,
      baseline: `p50 ${median(direct).toFixed(2)} ms (p99 ${percentile(direct, 99).toFixed(2)} ms) MCP client direct`,
      comparison: `${ratio.toFixed(2)}x (a bare node:http proxy through the MCP client's callTool: p50 ${median(proxied).toFixed(2)} ms, ${(median(proxied) / median(direct)).toFixed(2)}x)`,
      target: '<= 1.5x at p50',
      ok: ratio <= 1.5,
    };
  } finally {
    server.stop();
  }
}
