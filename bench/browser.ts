/**
 * The browser tools' costs, in one run: `browser.open` of a small page served
 * on loopback through POST /tools/invoke, cold (no browser running: the
 * sandbox, the proxy and Chromium started first) and warm, beside Playwright
 * driving the same Chromium directly (no sandbox, no proxy, no daemon); the
 * memory of the daemon and of the processes it started for the browser (the
 * browsers' own process with Playwright, the sandbox, Chromium: their PSS,
 * shared pages counted once) with one browser open, beside the bare
 * Chromium's; and the daemon's memory once the idle browser closed and the
 * browsers' process ended, beside before the first browser.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { chromium } from 'playwright-core';
import { findChromium } from '../src/shared/chromium.ts';
import { freePort, median, ms, rssKiB, sleep, type Figure } from './support.ts';

const PAGE = '<!doctype html><html><head><title>Bench</title></head><body><h1>A small page</h1><p>Some text and <a href="/">a link</a>.</p></body></html>';

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;
const stats = (values: number[]) => `p50 ${ms(median(values))} ms, p99 ${ms(percentile(values, 99))} ms`;
const mb = (kib: number) => `${(kib / 1024).toFixed(1)} MB`;

/** Every process below a pid (its children, theirs...). */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // Gone meanwhile.
    }
  }
  const found: number[] = [];
  const queue = [...(children.get(root) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    found.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return found;
}

/** Proportional set size of processes together, in KiB (what they take, shared pages split between them). */
function pssKiB(pids: number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      total += Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

export interface BrowserBenchOptions {
  port: number;
  token: string;
  gateway: (...args: string[]) => unknown;
  daemonPid: () => number;
  rounds: number;
}

export async function runBrowserBench(options: BrowserBenchOptions): Promise<Figure[]> {
  const found = findChromium();
  if ('missing' in found) return [{ name: 'browser.open', value: 'skipped', baseline: found.missing, comparison: '-', target: 'reported', ok: true }];
  const pagePort = await freePort();
  const pages = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE));
  await new Promise<void>((resolve) => pages.listen(pagePort, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${pagePort}/`;
  const invoke = async (tool: string, args: Record<string, unknown>) => {
    const started = performance.now();
    const response = await fetch(`http://127.0.0.1:${options.port}/tools/invoke`, {
      method: 'POST', headers: { authorization: `Bearer ${options.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool, args }),
    });
    const body = await response.json() as { ok: boolean; message?: string };
    if (!body.ok) throw new Error(`${tool}: ${body.message}`);
    return performance.now() - started;
  };
  options.gateway('config', 'set', 'tools.web.allowPrivate', JSON.stringify([`127.0.0.1:${pagePort}`]));
  options.gateway('config', 'set', 'tools.browser.idleSeconds', '10');
  const figures: Figure[] = [];
  try {
    // The daemon's tool path warmed first (as many calls of another tool as the browser gets): what the daemon gains from
    // here on is the browser's.
    for (let round = 0; round < options.rounds * 11; round++) await invoke('gateway.status', {});
    await sleep(500);
    const rssBefore = rssKiB(options.daemonPid());
    // Cold: no browser running. The first also loads Playwright into the daemon.
    const cold: number[] = [];
    let first = 0;
    for (let round = 0; round < options.rounds; round++) {
      const took = await invoke('browser.open', { url });
      if (round === 0) first = took;
      else cold.push(took);
      await invoke('browser.close', {});
    }
    await invoke('browser.open', { url });
    const warm: number[] = [];
    for (let round = 0; round < options.rounds * 10; round++) warm.push(await invoke('browser.open', { url }));
    await sleep(500);
    const daemonOpen = rssKiB(options.daemonPid());
    const browserOpen = pssKiB(descendants(options.daemonPid()));

    // The baseline: Playwright and the same Chromium, directly (no sandbox, no proxy, no daemon).
    const bareCold: number[] = [];
    const bareWarm: number[] = [];
    let bareBrowser = 0;
    for (let round = 0; round < options.rounds; round++) {
      const started = performance.now();
      const browser = await chromium.launch({ executablePath: found.path, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
      const page = await (await browser.newContext()).newPage();
      await page.goto(url, { waitUntil: 'domcontentloaded' });
      bareCold.push(performance.now() - started);
      if (round === 0) {
        for (let n = 0; n < options.rounds * 10; n++) {
          const at = performance.now();
          await page.goto(url, { waitUntil: 'domcontentloaded' });
          bareWarm.push(performance.now() - at);
        }
        await sleep(500);
        bareBrowser = pssKiB(descendants(process.pid));
      }
      await browser.close();
    }

    // Idle: the browser closes by itself after tools.browser.idleSeconds, and the browsers' process 30 s after.
    const closedBy = Date.now() + 90_000;
    while (descendants(options.daemonPid()).length > 0 && Date.now() < closedBy) await sleep(500);
    const left = descendants(options.daemonPid()).length;
    await sleep(500);
    const rssAfter = rssKiB(options.daemonPid());

    figures.push({
      name: `browser.open of a small loopback page, cold (the browser started first), ${cold.length} runs`, value: `${stats(cold)} (the first, Playwright loaded too: ${ms(first)} ms)`,
      baseline: `Playwright launching the same Chromium unsandboxed, then goto: ${stats(bareCold)}`, comparison: `+${ms(median(cold) - median(bareCold))} ms`, target: 'reported', ok: true,
    });
    figures.push({
      name: `browser.open of a small loopback page, warm, ${warm.length} runs`, value: stats(warm),
      baseline: `Playwright's goto on the same Chromium directly: ${stats(bareWarm)}`, comparison: `+${ms(median(warm) - median(bareWarm))} ms (HTTP, the proxy, the load and settle waits)`, target: 'reported', ok: true,
    });
    figures.push({
      name: 'memory with one browser open: the processes started for it (PSS) and the daemon (RSS)', value: `browser ${mb(browserOpen)}, daemon ${mb(daemonOpen)}`,
      baseline: `the same Chromium unsandboxed: ${mb(bareBrowser)} (Playwright in this process); the daemon before any browser ${mb(rssBefore)}`,
      comparison: `browser +${mb(browserOpen - bareBrowser)} (the browsers' process with Playwright, the relay, bubblewrap), daemon +${mb(daemonOpen - rssBefore)}`, target: 'reported', ok: true,
    });
    figures.push({
      name: 'daemon RSS once the idle browser closed (tools.browser.idleSeconds 10) and the browsers\' process ended', value: `${mb(rssAfter)}, ${left} processes left`,
      baseline: `${mb(rssBefore)} before the first browser (after as many calls of gateway.status)`, comparison: `${rssAfter >= rssBefore ? '+' : ''}${mb(rssAfter - rssBefore)}`, target: 'no process left', ok: left === 0,
    });
  } finally {
    pages.close();
    options.gateway('config', 'unset', 'tools.browser.idleSeconds');
  }
  return figures;
}
