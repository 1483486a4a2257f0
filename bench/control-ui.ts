import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { chromium } from 'playwright-core';
import { freePort, median, type Figure } from './support.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HELLO = '<!doctype html><html><head><title>hello</title></head><body><h1>hello</h1></body></html>';

/**
 * The Control UI in headless Chromium: the bytes of script and style the first
 * load transfers (as sent, compressed), and the time from navigation to the
 * Overview showing live data for a signed-in browser, beside the time to load a
 * static hello page from a bare node:http server, in the same run.
 */
export async function runControlUiBench(port: number, gateway: (...args: string[]) => { status: number | null; stdout: string; stderr: string }, rounds: number): Promise<Figure[]> {
  if (!existsSync(CHROMIUM)) {
    return [{ name: 'Control UI', value: 'not measured', baseline: `no Chromium at ${CHROMIUM}`, comparison: '-', target: '-', ok: false }];
  }
  const barePort = await freePort();
  const bare = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(HELLO);
  });
  await new Promise<void>((resolve) => bare.listen(barePort, '127.0.0.1', resolve));
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'], headless: true });
  try {
    const dashboard = gateway('dashboard', '--invite', '--no-browser', '--json');
    if (dashboard.status !== 0) throw new Error(`gateway dashboard failed: ${dashboard.stderr}`);
    const { url, invite } = JSON.parse(dashboard.stdout) as { url: string; invite: { code: string } };

    // The first load of a new browser: every script and style as it went over the wire.
    const context = await browser.newContext();
    const first = await context.newPage();
    const sizes: Promise<number>[] = [];
    first.on('requestfinished', (request) => {
      if (['script', 'stylesheet'].includes(request.resourceType())) sizes.push(request.sizes().then((size) => size.responseBodySize + size.responseHeadersSize));
    });
    await first.goto(url);
    await first.getByLabel('or a one-time invite code').fill(invite.code);
    await first.getByRole('button', { name: 'Sign in' }).click();
    await first.getByTestId('readiness').waitFor();
    const bytes = (await Promise.all(sizes)).reduce((sum, size) => sum + size, 0);
    await first.close();

    const uiTimes: number[] = [];
    const bareTimes: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const hello = await context.newPage();
      let started = performance.now();
      await hello.goto(`http://127.0.0.1:${barePort}/`, { waitUntil: 'load' });
      bareTimes.push(performance.now() - started);
      await hello.close();
      const page = await context.newPage();
      started = performance.now();
      await page.goto(url);
      await page.getByTestId('readiness').waitFor();
      uiTimes.push(performance.now() - started);
      await page.close();
    }
    await context.close();
    const ui = median(uiTimes);
    const base = median(bareTimes);
    return [
      {
        name: 'Control UI first load, script and style transferred', value: `${(bytes / 1024).toFixed(1)} KB`, baseline: `${(HELLO.length / 1024).toFixed(1)} KB static hello page`,
        comparison: '-', target: '<= 60 KB', ok: bytes <= 60 * 1024,
      },
      {
        name: 'Control UI, navigation to live Overview (signed-in browser)', value: `${ui.toFixed(0)} ms`, baseline: `${base.toFixed(0)} ms static hello page from bare node:http`,
        comparison: `${(ui / base).toFixed(1)}x, +${(ui - base).toFixed(0)} ms`, target: 'reported', ok: true,
      },
    ];
  } finally {
    await browser.close();
    bare.close();
  }
}
