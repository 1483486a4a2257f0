import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { Page } from 'playwright-core';
import { DESKTOP, PHONE, screenshot, TestBrowser } from '../support/browser.ts';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { startGateway } from '../support/harness.ts';
import { codeIn, IrcServer, IrcUser } from '../support/irc.ts';
import { startExampleServer } from '../support/mcp.ts';
import { startModelServer, type ModelServer } from '../support/model-server.ts';
import { TestHost } from '../support/netns.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { deliver, pushPayload, TEST_WEBHOOK_SECRET } from '../support/webhooks.ts';
import { RawSocket } from '../support/ws-client.ts';

const PAGES = ['overview', 'chat', 'sessions', 'pairing', 'tokens', 'jobs', 'automations', 'skills', 'logs', 'config', 'tools'];

/** The status and headers of a raw WebSocket upgrade (what a browser's page sends, Origin included). */
function upgrade(port: number, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1', port, path: '/',
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
    });
    req.on('upgrade', (response, socket) => {
      socket.destroy();
      resolve({ status: response.statusCode ?? 0, body: '' });
    });
    req.on('response', (response) => {
      let body = '';
      response.on('data', (chunk) => { body += chunk; });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the Control UI and WebChat (e2e, in Chromium)', function () {
  this.timeout(120_000);
  let browser: TestBrowser;
  let home: Home;
  let port: number;
  let base: string;
  let model: ModelServer;
  let ircd: IrcServer;
  let script: ScriptedUpstream;
  const users: IrcUser[] = [];

  before(async function () {
    if (!TestBrowser.available()) {
      if (process.env.CI) throw new Error('the Control UI tests need Chromium at /usr/bin/chromium (apt-get install chromium)');
      this.skip();
    }
    [browser, model, ircd, script] = await Promise.all([TestBrowser.launch(), startModelServer(), IrcServer.start(), new ScriptedUpstream().start()]);
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    const set = async (key: string, value: unknown) => {
      const result = await home.run(['config', 'set', key, JSON.stringify(value)]);
      expect(result.code, result.stderr).to.equal(0);
    };
    await set('models.providers', {
      local: { kind: 'openai-compatible', baseUrl: model.url, models: ['stories'] },
      script: { kind: 'openai-compatible', baseUrl: script.url, models: ['m'], retries: { max: 0 } },
    });
    await set('agents', { story: { model: 'local/stories', maxOutputTokens: 16 }, ops: { model: 'script/m', tools: ['jobs.get'] } });
    await set('runtime.defaultAgent', 'story');
    await set('channels.irc', { enabled: true, host: '127.0.0.1', port: ircd.port, nick: `gwui${process.pid % 1000}`, reconnectMaxDelayMs: 2000 });
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    expect((await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: TEST_WEBHOOK_SECRET })).code).to.equal(0);
  });
  after(async () => {
    users.splice(0).forEach((user) => user.quit());
    await browser?.close();
    home?.cleanup();
    model?.stop();
    await ircd?.stop();
    await script?.stop();
  });

  /** A new browser (a new device) opened on the link `gateway dashboard` prints, which signs it in. */
  async function signedIn(viewport = DESKTOP, colorScheme: 'light' | 'dark' = 'light') {
    const dashboard = await home.run(['dashboard', '--invite', '--no-browser', '--json']);
    expect(dashboard.code, dashboard.stderr).to.equal(0);
    expect(dashboard.json.url).to.equal(`${base}/`);
    expect(dashboard.json.invite.url).to.equal(`${base}/#invite=${dashboard.json.invite.code}`);
    const opened = await browser.page(viewport, colorScheme);
    await opened.page.goto(dashboard.json.invite.url);
    await opened.page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
    return opened;
  }
  const go = async (page: Page, section: string) => {
    await page.goto(`${base}/#/${section}`);
    await page.getByRole('heading', { level: 1 }).waitFor();
  };

  it('serves the page and its assets with strict headers, compressed copies and long caching; refuses bad requests', async () => {
    const page = await fetch(`${base}/`, { headers: { 'accept-encoding': 'br, gzip' } });
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.match(/^text\/html/);
    expect(page.headers.get('cache-control')).to.equal('no-cache');
    const csp = page.headers.get('content-security-policy')!;
    for (const directive of ["default-src 'self'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "object-src 'none'"]) {
      expect(csp).to.include(directive);
    }
    expect(csp).to.not.include('unsafe-inline');
    expect(page.headers.get('x-frame-options')).to.equal('DENY');
    expect(page.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(page.headers.get('referrer-policy')).to.equal('no-referrer');
    const html = await page.text();
    expect(html).to.not.match(/<script>|<script [^>]*>[^<]/);
    const script = html.match(/src="(assets\/app-[A-Z0-9]{8}\.js)"/)![1]!;
    const style = html.match(/href="(assets\/style-[A-Z0-9]{8}\.css)"/)![1]!;
    // fetch undoes the encoding; curl shows what went over the wire.
    const head = (path: string, encoding: string) => spawnSync('curl', ['-s', '-D', '-', '-o', '/dev/null', '-H', `accept-encoding: ${encoding}`, `${base}/${path}`], { encoding: 'utf8' }).stdout.toLowerCase();
    expect(head(script, 'br, gzip')).to.include('content-encoding: br').and.include('cache-control: public, max-age=31536000, immutable');
    expect(head(script, 'gzip')).to.include('content-encoding: gzip');
    expect(head(style, 'identity')).to.not.include('content-encoding');
    const etag = (await fetch(`${base}/${script}`)).headers.get('etag')!;
    expect((await fetch(`${base}/${script}`, { headers: { 'if-none-match': etag } })).status).to.equal(304);
    expect((await fetch(`${base}/${script}`, { method: 'HEAD' })).status).to.equal(200);

    for (const method of ['POST', 'PUT', 'DELETE']) {
      const refused = await fetch(`${base}/`, { method });
      expect(refused.status, method).to.equal(405);
      expect(refused.headers.get('allow')).to.include('GET');
      expect((await fetch(`${base}/${script}`, { method })).status).to.equal(405);
    }
    for (const path of ['/assets/..%2f..%2fpackage.json', '/assets/%2e%2e/%2e%2e/package.json', '/assets/..%5c..%5cpackage.json', '/assets/missing-AAAAAAAA.js', '/assets/%00']) {
      const refused = spawnSync('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--path-as-is', `${base}${path}`], { encoding: 'utf8' }).stdout;
      expect(refused, path).to.equal('404');
    }
    // A page of another site may not read the settings, nor open the WebSocket.
    expect((await fetch(`${base}/settings.json`, { headers: { origin: 'http://evil.example' } })).status).to.equal(403);
    const settings = await (await fetch(`${base}/settings.json`)).json() as Record<string, unknown>;
    expect(settings).to.include({ basePath: '/', websocketPath: '/', authMode: 'token', originAllowed: true });
    expect(JSON.stringify(settings)).to.not.include(home.token());
    expect((await upgrade(port, { origin: 'http://evil.example' })).status).to.equal(403);
    expect((await upgrade(port, { origin: `http://localhost:${await freePort()}` })).status).to.equal(403);
    expect((await upgrade(port, { origin: base })).status).to.equal(101);
    expect((await upgrade(port, {})).status).to.equal(101);
  });

  it('a broken install answers 503 naming the fix; the base path without its slash redirects', async () => {
    // Run from the sources, the gateway has no bundle beside it: the install is broken in just this way.
    const gateway = await startGateway({ config: { gateway: { controlUi: { basePath: '/ui/' } } } });
    try {
      const broken = await gateway.request('/ui/');
      expect(broken.status).to.equal(503);
      expect(broken.body.message).to.include('npm run build');
      const redirect = await fetch(`${gateway.url}/ui`, { redirect: 'manual' });
      expect(redirect.status).to.equal(308);
      expect(redirect.headers.get('location')).to.equal('/ui/');
      expect((await gateway.request('/ui/settings.json')).body.basePath).to.equal('/ui/');
    } finally {
      await gateway.stop();
    }
  });

  it('gateway dashboard opens the UI signed in: the link\'s one-time code works once, leaves the address at once and never reaches a log; over SSH the link comes with its tunnel', async () => {
    const text = await home.run(['dashboard', '--no-browser']);
    expect(text.code, text.stderr).to.equal(0);
    const link = /^(http:\S+#invite=([A-Z0-9-]+))$/m.exec(text.stdout);
    expect(link, text.stdout).to.not.equal(null);
    const [, url, code] = link!;
    expect(url!.startsWith(`${base}/#invite=`)).to.equal(true);
    expect(text.stdout).to.include('once, within 10 minutes');

    const first = await browser.page(DESKTOP);
    await first.page.goto(url!);
    await first.page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
    expect(first.page.url(), 'the code left the address').to.equal(`${base}/`);
    // Back and reload: the code is in neither the history nor the page; the device token signs in.
    await first.page.reload();
    await first.page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
    expect(first.problems).to.deep.equal({ console: [], csp: [], page: [] });
    await first.context.close();

    // The same link in another browser: used already, so it asks to sign in, saying why.
    const second = await browser.page(DESKTOP);
    await second.page.goto(url!);
    await second.page.getByRole('status').filter({ hasText: 'Signed out' }).waitFor();
    expect(await second.page.getByRole('alert').textContent()).to.match(/invite/i);
    expect(second.page.url()).to.equal(`${base}/`);
    await second.context.close();

    // --no-invite: the bare URL; the page then asks for the token or a code.
    const bare = await home.run(['dashboard', '--no-browser', '--no-invite']);
    expect(bare.stdout.trim()).to.equal(`${base}/`);

    // Over SSH: the tunnel first, then the link to open on the computer with the browser.
    const ssh = await home.run(['dashboard', '--no-browser'], { env: { SSH_CONNECTION: '192.0.2.7 50000 192.0.2.1 22', USER: 'ops' } });
    expect(ssh.stdout).to.include(`ssh -N -L ${port}:127.0.0.1:${port} ops@192.0.2.1`);
    expect(ssh.stdout.indexOf('ssh -N -L')).to.be.below(ssh.stdout.indexOf('#invite='));

    // No log holds a code: not the daemon's, whose access lines never see a fragment.
    const log = readFileSync(home.file('gateway.log'), 'utf8');
    expect(log).to.not.include(code!);
  });

  it('signs a browser in with a typed code as well, with zero console errors and CSP violations; every page at desktop and phone widths', async () => {
    const typed = await home.run(['devices', 'invite', '--json']);
    expect(typed.code, typed.stderr).to.equal(0);
    const fresh = await browser.page(DESKTOP);
    await fresh.page.goto(`${base}/`);
    await fresh.page.getByLabel('or a one-time invite code').fill(typed.json.code);
    await fresh.page.getByRole('button', { name: 'Sign in' }).click();
    await fresh.page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
    await fresh.context.close();
    const { page, problems, context } = await signedIn();
    await page.getByTestId('readiness').filter({ hasText: 'ready' }).waitFor();
    // The device token is kept: a reload signs in by itself.
    await page.reload();
    await page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
    for (const [width, viewport] of [['desktop', DESKTOP], ['phone', PHONE]] as const) {
      await page.setViewportSize(viewport);
      for (const section of PAGES) {
        await go(page, section);
        await page.waitForLoadState('networkidle');
        // Every section of the page has loaded (a page may show several "Loading…" at once).
        const loading = page.locator('p.muted', { hasText: 'Loading…' });
        await waitFor(async () => ((await loading.count()) === 0 ? true : undefined), 15_000, `${section} to finish loading`);
        await screenshot(page, `${section}-${width}`);
        if (section === 'overview' && width === 'desktop') {
          // The three cards share the row and fill it, as wide as the card below them (no empty column beside them).
          const edges = await page.evaluate(`[...document.querySelectorAll('gw-overview section.card')].map((card) => Math.round(card.getBoundingClientRect().right))`) as number[];
          expect(edges, 'daemon, readiness, channels, recent errors, spend, figures').to.have.length(6);
          expect(new Set(edges.slice(0, 3)).size, 'cards in one row').to.equal(3);
          expect(Math.abs(edges[2]! - edges[3]!), 'the row ends where the card below ends').to.be.at.most(1);
          expect(edges[4], 'spend as wide as the cards above').to.equal(edges[3]);
          expect(edges[5], 'figures as wide as the cards above').to.equal(edges[3]);
        }
      }
    }
    // Keyboard: the skip link comes first, and the sections are reachable by Tab.
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.textContent')).to.equal('Skip to content');
    expect(problems).to.deep.equal({ console: [], csp: [], page: [] });
    const dark = await signedIn(PHONE, 'dark');
    await screenshot(dark.page, 'overview-phone-dark');
    await dark.context.close();
    await context.close();
  });

  it('a token created in the UI is shown once and works with curl', async () => {
    const { page, context, problems } = await signedIn();
    await go(page, 'tokens');
    await page.getByLabel('Name').fill('ui-made');
    await page.getByLabel('jobs:read').check();
    await page.getByRole('button', { name: 'Create' }).click();
    const value = await page.getByTestId('new-token').inputValue();
    expect(value).to.match(/^gwt_/);
    const curl = spawnSync('curl', ['-s', '-w', '\n%{http_code}', '-H', `authorization: Bearer ${value}`, `${base}/jobs`], { encoding: 'utf8' }).stdout.split('\n');
    expect(curl.at(-1)).to.equal('200');
    expect(JSON.parse(curl.slice(0, -1).join('\n'))).to.have.property('jobs');
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('cell', { name: 'ui-made', exact: true }).waitFor();
    // Listed masked; the value is nowhere on the page any more.
    expect(await page.content()).to.not.include(value);
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Revoke ui-made' }).click();
    await page.getByText('Revoked ui-made.').waitFor();
    expect(spawnSync('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '-H', `authorization: Bearer ${value}`, `${base}/jobs`], { encoding: 'utf8' }).stdout).to.equal('401');
    expect(problems.console).to.deep.equal([]);
    await context.close();
  });

  it('a signed webhook makes its job appear on the Jobs page without a reload', async () => {
    const { page, context } = await signedIn();
    await go(page, 'jobs');
    await page.getByTestId('jobs').or(page.getByText('No jobs match.')).first().waitFor();
    const deliveryId = randomUUID();
    const accepted = await deliver(base, 'push', JSON.stringify(pushPayload(2048)), { deliveryId });
    expect(accepted.status).to.equal(200);
    await page.getByRole('button', { name: accepted.body.jobId }).waitFor({ timeout: 10_000 });
    await page.getByRole('button', { name: accepted.body.jobId }).click();
    await page.getByRole('heading', { name: `Job ${accepted.body.jobId}` }).waitFor();
    await page.getByText(deliveryId).waitFor();
    await context.close();
  });

  it('the Automations page lists each with its next firing and last result, and runs one now', async () => {
    const added = await home.run(['automations', 'add', 'digest', '--every', '1d', '--description', 'daily digest', '--agent', 'ops', '--prompt', 'Summarise the day']);
    expect(added.code, added.stderr).to.equal(0);
    const { page, context, problems } = await signedIn();
    await go(page, 'automations');
    const row = page.getByTestId('automations').locator('tr', { hasText: 'digest' });
    await row.getByText('every 1d').waitFor();
    await row.getByText('agent ops').waitFor();
    await row.getByText('daily digest').waitFor();
    await page.getByRole('button', { name: 'Run digest now' }).click();
    await page.getByText(/Automation digest fired \(job job_/).waitFor();
    const runs = page.getByTestId('automation-runs');
    await runs.locator('tr', { hasText: 'manual' }).locator('.badge', { hasText: 'succeeded' }).waitFor({ timeout: 20_000 });
    await runs.getByText(/\S/).first().waitFor();
    const listed = (await home.run(['automations', 'runs', 'digest', '--json'])).json.runs;
    expect(listed).to.have.length(1);
    await runs.getByText(listed[0].text).waitFor();
    // The list's last result follows.
    await row.locator('.badge', { hasText: 'succeeded' }).waitFor({ timeout: 10_000 });
    await screenshot(page, 'automations-runs-desktop');
    expect(problems.console).to.deep.equal([]);
    expect((await home.run(['automations', 'remove', 'digest'])).code).to.equal(0);
    await context.close();
  });

  it('the Overview shows the key figures from the metrics once they are on', async () => {
    const { page, context, problems } = await signedIn();
    await go(page, 'overview');
    await page.getByText('Metrics are off.').waitFor();
    expect((await home.run(['config', 'set', 'metrics.enabled', 'true'])).code).to.equal(0);
    await fetch(`${base}/healthz`);
    await page.reload();
    await page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
    const figures = page.getByTestId('figures');
    await figures.waitFor();
    const text = await figures.textContent() ?? '';
    expect(text).to.match(/HTTP requests\s*[1-9][\d,]* \(0 server errors\), p50 ≤ [\d.]+ ms/);
    expect(text).to.match(/Store\s*[1-9][\d,]* statements/);
    expect(text).to.match(/Process\s*\d+ MB resident/);
    await screenshot(page, 'overview-figures-desktop');
    expect(problems.console).to.deep.equal([]);
    expect((await home.run(['config', 'set', 'metrics.enabled', 'false'])).code).to.equal(0);
    await context.close();
  });

  it('the Overview shows what model calls cost today and this month; the Skills page shows a draft whole and approves it', async () => {
    expect((await home.run(['config', 'set', 'models.providers.script.prices', JSON.stringify({ m: { input: 2, output: 10 } })])).code).to.equal(0);
    expect((await home.run(['config', 'set', 'agents.writer', JSON.stringify({ model: 'script/m', tools: ['skills.*'] })])).code).to.equal(0);
    script.enqueue(
      openaiToolCalls([{ name: 'skills_write', args: { name: 'tidy-notes', description: 'Tidies notes.\u0007 Use for notes.', instructions: '# Tidy\nSort the notes.' } }], { prompt_tokens: 200_000, completion_tokens: 10_000 }),
      openaiText('Done.', { prompt_tokens: 100_000, completion_tokens: 5_000 }),
    );
    const chat = await home.run(['chat', '--agent', 'writer', 'keep this as a skill', '--json']);
    expect(chat.code, chat.stderr).to.equal(0);
    const { page, context, problems } = await signedIn();
    await go(page, 'overview');
    // 300,000 tokens in at 2 USD a million, 15,000 out at 10: 0.75 USD.
    await page.getByTestId('spend-today').filter({ hasText: '0.75 USD' }).waitFor();
    expect(await page.getByTestId('spend-month').textContent()).to.equal('0.75 USD');
    await go(page, 'skills');
    const draft = page.getByTestId('draft').filter({ hasText: 'tidy-notes' });
    await draft.waitFor();
    expect(await draft.textContent()).to.include('Tidies notes.\\x07 Use for notes.');
    await page.getByRole('button', { name: 'Show tidy-notes' }).click();
    expect(await page.getByTestId('skill-instructions').textContent()).to.equal('# Tidy\nSort the notes.');
    await page.getByRole('button', { name: 'Approve tidy-notes' }).click();
    await page.getByText('Approved tidy-notes: installed.').waitFor();
    await page.getByTestId('skill').filter({ hasText: 'tidy-notes' }).waitFor();
    expect((await home.json(['skills', 'list'])).skills.map((skill: any) => skill.name)).to.include('tidy-notes');
    expect(problems.console).to.deep.equal([]);
    await context.close();
  });

  it('a command exec waits to run shows on the Overview whole, its hidden characters escaped, and Approve there runs it', async () => {
    expect((await home.run(['config', 'set', 'tools.exec.approval', 'ask'])).code).to.equal(0);
    const { page, context, problems } = await signedIn();
    await go(page, 'overview');
    await page.getByTestId('readiness').waitFor();
    const invoked = home.run(['tools', 'invoke', 'exec', '--args', JSON.stringify({ command: 'echo approved in the browser' }), '--json']);
    const card = page.getByTestId('approvals');
    await card.getByText('echo approved in the browser').waitFor({ timeout: 10_000 });
    await screenshot(page, 'overview-approval-desktop');
    const pending = (await home.run(['approvals', 'list', '--json'])).json.approvals;
    expect(pending).to.have.length(1);
    await page.getByRole('button', { name: `Approve ${pending[0].id}` }).click();
    const result = await invoked;
    expect(result.code, result.stderr).to.equal(0);
    expect(result.json.result.stdout).to.equal('approved in the browser\n');
    await page.getByText('Approved: echo approved in the browser').waitFor();
    expect(await card.count(), 'the card leaves once nothing waits').to.equal(0);

    // A command that hides its tail (a line break, a terminal escape, a right-to-left override) is shown whole, escaped.
    const hiding = `echo harmless${' '.repeat(60)}\ntouch hidden \x1b[8m\u202eexe.txt`;
    const hidden = home.run(['tools', 'invoke', 'exec', '--args', JSON.stringify({ command: hiding }), '--json']);
    const shown = page.getByTestId('approval-command');
    await shown.waitFor({ timeout: 10_000 });
    expect(await shown.textContent()).to.equal(`echo harmless${' '.repeat(60)}\\ntouch hidden \\x1b[8m\\u202eexe.txt`);
    await page.getByRole('button', { name: /^Reject / }).click();
    expect((await hidden).code).to.not.equal(0);
    expect(problems.console).to.deep.equal([]);
    expect((await home.run(['config', 'unset', 'tools.exec.approval'])).code).to.equal(0);
    await context.close();
  });

  it('an invalid config value is refused beside its field and config.json is unchanged; a valid one applies', async () => {
    const file = home.file('config.json');
    const before = readFileSync(file);
    const { page, context, problems } = await signedIn();
    await go(page, 'config');
    await page.locator('summary', { hasText: /^log$/ }).click();
    await page.getByLabel('maxFiles').fill('0');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText(/Nothing was written/).waitFor();
    const field = page.getByLabel('maxFiles');
    expect(await field.getAttribute('aria-invalid')).to.equal('true');
    const problem = await page.locator(`#${await field.getAttribute('id')}-problem`).textContent();
    expect(problem).to.match(/log\.maxFiles/);
    expect(readFileSync(file).equals(before)).to.equal(true);
    // A type the form can tell at once is refused before anything is sent.
    await field.fill('two');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('log.maxFiles: must be a whole number').waitFor();
    expect(readFileSync(file).equals(before)).to.equal(true);

    await field.fill('5');
    await page.getByLabel('level', { exact: true }).selectOption('debug');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByTestId('config-outcome').filter({ hasText: 'Applied' }).waitFor({ timeout: 10_000 }).catch(async (error: Error) => {
      throw new Error(`${error.message}; the page says: ${await page.locator('.alert').allTextContents()}`);
    });
    expect((await home.run(['config', 'get', 'log.level', '--json'])).json.value).to.equal('debug');
    // Only what was changed is written: the values the form showed at their defaults stay unset.
    expect(JSON.parse(readFileSync(file, 'utf8')).log).to.deep.equal({ level: 'debug' });
    expect(problems.page).to.deep.equal([]);
    await context.close();
  });

  it('WebChat: a message to an agent streams its reply, then it is in the session history', async () => {
    const { page, context } = await signedIn();
    await go(page, 'chat');
    await page.getByLabel('Message', { exact: true }).fill('Once upon a time');
    await page.getByRole('button', { name: 'Send' }).click();
    // The reply streams in while the run lasts, then the history holds both turns.
    await page.getByTestId('conversation').locator('.msg.assistant').first().waitFor({ timeout: 60_000 });
    // The run is over when Send is back in place of Stop: its agent.run call answered, after the reply was recorded.
    await page.getByRole('button', { name: 'Send' }).waitFor({ timeout: 60_000 });
    const reply = await page.getByTestId('conversation').locator('.msg.assistant .text').last().textContent();
    expect(reply!.trim().length).to.be.greaterThan(0);
    const sessions = await home.run(['sessions', 'list', '--json']);
    const chat = sessions.json.sessions.find((s: { channel: string }) => s.channel === 'chat');
    expect(chat.messageCount).to.be.at.least(2);
    await context.close();
  });

  it('WebChat: a slow reply appears part by part with its tool call as it happens, and Stop aborts a run', async () => {
    const answer = 'The job is not there. Nothing more to say about it.';
    script.enqueue(openaiToolCalls([{ name: 'jobs_get', args: { id: 'job_zzz' } }]), openaiText(answer, undefined, { pieces: 3, gapMs: 1500 }));
    const { page, context, problems } = await signedIn();
    await go(page, 'chat');
    await page.getByLabel('Agent').selectOption('ops');
    await page.getByLabel('Message', { exact: true }).fill('is job_zzz done?');
    await page.getByRole('button', { name: 'Send' }).click();
    const streaming = page.getByTestId('streaming');
    // The tool call shows while the run goes on, then the first piece of the answer, before the rest has been written upstream.
    await streaming.locator('.tool').filter({ hasText: 'jobs.get' }).filter({ hasText: 'job_zzz' }).waitFor({ timeout: 20_000 });
    await streaming.locator('.text').filter({ hasText: 'The job is' }).waitFor({ timeout: 20_000 });
    const partial = (await streaming.locator('.text').textContent())!;
    expect(partial).to.not.equal(answer);
    expect(answer.startsWith(partial.trim())).to.equal(true);
    await screenshot(page, 'chat-streaming-desktop');
    expect(await page.getByRole('button', { name: 'Stop' }).isVisible()).to.equal(true);
    // Done: the whole answer is in the history, the run's live view is gone.
    await page.getByTestId('conversation').getByText(answer).waitFor({ timeout: 20_000 });
    await streaming.waitFor({ state: 'detached' });

    // An answer that stops coming: Stop ends the run, and the session records it as aborted.
    script.enqueue({ sse: [
      { data: { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { role: 'assistant', content: 'Let me think' }, finish_reason: null }] } },
      { data: { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: ' forever' }, finish_reason: null }] }, delayMs: 20_000 },
    ] });
    await page.getByLabel('Message', { exact: true }).fill('think hard');
    await page.getByRole('button', { name: 'Send' }).click();
    await streaming.locator('.text').filter({ hasText: 'Let me think' }).waitFor({ timeout: 20_000 });
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.getByRole('alert').filter({ hasText: 'aborted' }).waitFor({ timeout: 10_000 });
    await page.getByRole('button', { name: 'Send' }).waitFor();
    const sessions = await home.run(['sessions', 'list', '--json']);
    const chat = sessions.json.sessions.find((s: { channel: string; account: string }) => s.channel === 'chat' && s.account === 'ops');
    const shown = await home.run(['sessions', 'show', chat.key, '--json']);
    expect(JSON.stringify(shown.json.messages)).to.include('aborted');
    expect(problems.csp).to.deep.equal([]);
    expect(problems.page).to.deep.equal([]);
    await context.close();
  });

  it('refuses a browser\'s signed connect replayed or re-aimed at another challenge, and its device token once revoked', async () => {
    const { page, context } = await signedIn();
    // The connect frame the page sends on its next visit: signed by its device key, with its device token.
    const sent: any[] = [];
    page.on('websocket', (socket) => socket.on('framesent', (frame) => {
      try {
        const parsed = JSON.parse(String(frame.payload));
        if (parsed.method === 'connect') sent.push(parsed);
      } catch { /* not JSON */ }
    }));
    await page.reload();
    await page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
    const connect = sent.at(-1);
    expect(connect.params.auth).to.have.property('deviceToken');
    const answer = async (frame: any) => {
      const socket = new RawSocket(`ws://127.0.0.1:${port}/`, { origin: base });
      try {
        await socket.opened();
        const challenge = await socket.next((f) => f.event === 'connect.challenge');
        socket.send(frame(challenge.payload.nonce));
        return await socket.next((f) => f.type === 'res');
      } finally {
        socket.close();
      }
    };
    // Replayed as it was: the signature is over another connection's challenge.
    const replayed = await answer(() => connect);
    expect(replayed.ok).to.equal(false);
    expect(replayed.error).to.include({ code: 'UNAUTHORIZED' });
    expect(replayed.error.message).to.include('challenge');
    // The new challenge put in place of the old under the old signature: forged.
    const forged = await answer((nonce: string) => ({ ...connect, params: { ...connect.params, device: { ...connect.params.device, nonce } } }));
    expect(forged.ok).to.equal(false);
    expect(forged.error.message).to.include('signature is invalid');
    expect(JSON.stringify([replayed, forged])).to.not.include(connect.params.auth.deviceToken);

    // Revoked while no page was open: the next visit's old device token is refused and the page asks to sign in again.
    await page.close();
    expect((await home.run(['devices', 'revoke', '--', connect.params.device.id])).code).to.equal(0);
    const again = await context.newPage();
    await again.goto(`${base}/`);
    await again.getByRole('heading', { name: 'Sign in to this gateway' }).waitFor();
    await again.getByRole('alert').filter({ hasText: 'revoked' }).waitFor();
    await context.close();
  });

  it('a DM pairing code from IRC is approved on the Pairing page, and the sender\'s next message appears in Sessions', async () => {
    await waitFor(async () => (await home.run(['channels', 'status', '--json'])).json.channels.find((c: { state: string }) => c.state === 'connected'), 20_000, 'the IRC channel');
    const { page, context } = await signedIn();
    await go(page, 'pairing');
    const nick = `stranger${process.pid % 1000}`;
    const stranger = await IrcUser.connect(ircd.port, nick);
    users.push(stranger);
    const gatewayNick = (await home.run(['config', 'get', 'channels.irc.nick', '--json'])).json.value;
    stranger.say(gatewayNick, 'hello there');
    const code = codeIn((await stranger.waitFor(/pairing code is/)).text);
    // The request appears live, and one click approves it.
    await page.getByRole('button', { name: `Approve ${code} from ${nick}` }).click({ timeout: 15_000 });
    await page.getByText(`Approved ${nick} on irc.`).waitFor();
    await go(page, 'sessions');
    await page.getByTestId('sessions').or(page.getByText('No sessions yet.')).first().waitFor();
    stranger.say(gatewayNick, 'now approved, hi');
    await page.getByRole('button', { name: nick }).click({ timeout: 15_000 });
    await page.getByText('now approved, hi').first().waitFor();
    await context.close();
  });

  it('logs the gateway in to an MCP server from the Tools page: its state and tools change live, and it logs out', async () => {
    const example = await startExampleServer();
    try {
      expect((await home.run(['mcp', 'add', 'demo', example.url])).code).to.equal(0);
      const { page, context, problems } = await signedIn();
      await go(page, 'tools');
      const row = page.getByTestId('mcp-servers').getByRole('row').filter({ hasText: 'demo' });
      await row.getByText('needs-login', { exact: true }).waitFor();
      await page.getByRole('button', { name: 'Log in to demo' }).click();
      // The authorization server opens in a tab of its own; it approves by itself and sends that tab to the gateway's callback page.
      const [login] = await Promise.all([context.waitForEvent('page'), page.getByRole('link', { name: 'Open the authorization server for demo' }).click()]);
      await login.getByText(/MCP server demo is connected with \d+ tools?/).waitFor({ timeout: 30_000 });
      await login.close();
      // This page heard it over the WebSocket: no reload.
      await page.getByRole('status').filter({ hasText: /MCP server demo is connected with \d+ tool/ }).waitFor({ timeout: 10_000 });
      await row.getByText('connected', { exact: true }).waitFor();
      await page.getByLabel('Tool', { exact: true }).locator('option', { hasText: 'mcp.demo.greet' }).waitFor({ state: 'attached' });
      await screenshot(page, 'tools-mcp-desktop');
      expect((await home.run(['mcp', 'list', '--json'])).json.servers.find((s: { name: string }) => s.name === 'demo')).to.include({ state: 'connected', auth: 'oauth' });

      await page.getByRole('button', { name: 'Log out of demo' }).click();
      await row.getByText('needs-login', { exact: true }).waitFor({ timeout: 10_000 });
      expect(problems.csp).to.deep.equal([]);
      expect(problems.page).to.deep.equal([]);
      await context.close();
    } finally {
      await home.run(['mcp', 'remove', 'demo']);
      example.stop();
    }
  });

  it('a page from a foreign origin cannot open the WebSocket', async () => {
    const foreignPort = await freePort();
    const foreign: Server = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><script>
        const ws = new WebSocket('ws://127.0.0.1:${port}/');
        ws.onopen = () => { document.title = 'opened'; };
        ws.onclose = (e) => { document.title = 'closed ' + e.code; };
      </script>`);
    });
    await new Promise<void>((resolve) => foreign.listen(foreignPort, '127.0.0.1', resolve));
    try {
      const { page, context } = await browser.page();
      await page.goto(`http://127.0.0.1:${foreignPort}/`);
      await page.waitForFunction("document.title.startsWith('closed') || document.title === 'opened'");
      expect(await page.title()).to.equal('closed 1006');
      await context.close();
    } finally {
      foreign.close();
    }
  });

  it('a change that needs a restart offers one; the page is back on the new daemon by itself', async () => {
    const before = (await home.run(['status', '--json'])).json.pid;
    const { page, context, problems } = await signedIn();
    await go(page, 'config');
    await page.locator('summary', { hasText: /^store$/ }).click();
    await page.getByLabel('synchronous', { exact: true }).selectOption('full');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByTestId('config-outcome').filter({ hasText: 'needs a restart' }).waitFor({ timeout: 10_000 });
    await page.getByRole('button', { name: 'Restart now' }).click();
    await page.getByRole('status').filter({ hasText: 'Restarting (gateway restart)' }).waitFor();
    const after = await waitFor(async () => {
      const status = await home.run(['status', '--json']);
      return status.json?.state === 'running' && status.json.pid !== before ? status.json : undefined;
    }, 30_000, 'a new daemon');
    expect(after.port).to.equal(port);
    const audit = await home.run(['audit', '--json']);
    expect(JSON.stringify(audit.json)).to.include('gateway.restart');
    // The page reconnects to the new daemon with its device token, no sign-in.
    await page.getByRole('status').filter({ hasText: 'Connected' }).waitFor({ timeout: 20_000 });
    await go(page, 'overview');
    await page.getByTestId('readiness').waitFor();
    expect((await home.run(['config', 'get', 'store.synchronous', '--json'])).json.value).to.equal('full');
    expect(problems.page).to.deep.equal([]);
    await context.close();
  });
});

describe('the Control UI from another host (e2e, Chromium in a network namespace)', function () {
  this.timeout(120_000);
  const host = TestHost.perTest();
  let home: Home | undefined;
  before(function () {
    if (!TestBrowser.available()) {
      if (process.env.CI) throw new Error('the Control UI tests need Chromium at /usr/bin/chromium');
      this.skip();
    }
  });
  afterEach(() => home?.cleanup());

  it('waits for approval, gateway devices approve lets it in, gateway devices revoke throws it out', async () => {
    const remote = host();
    const port = await freePort();
    const origin = `http://${remote.hostAddress}:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.run(['config', 'set', 'gateway.discovery.mdns.enabled', 'false']);
    expect((await home.run(['config', 'set', 'gateway.controlUi.allowedOrigins', JSON.stringify([origin])])).code).to.equal(0);
    const started = await home.run(['start', '--bind', 'lan']);
    expect(started.code, started.stderr).to.equal(0);
    const browser = await TestBrowser.launch({ netns: remote.name });
    try {
      const { page, problems } = await browser.page();
      await page.goto(`${origin}/`);
      // Plain http on a LAN address is not a secure context: the device key lives in the page's own Ed25519.
      expect(await page.evaluate('globalThis.isSecureContext')).to.equal(false);
      await page.getByLabel('Gateway token').fill(home.token());
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Waiting for approval' }).waitFor();
      const code = (await page.locator('strong.code').textContent())!;
      const pending = await home.run(['devices', 'list', '--pending', '--json']);
      const request = pending.json.pending.find((r: { requestId: string }) => r.requestId === code);
      expect(request).to.include({ address: remote.address, clientId: 'control-ui' });
      await screenshot(page, 'remote-waiting-desktop');
      expect((await home.run(['devices', 'approve', code])).code).to.equal(0);
      await page.getByRole('status').filter({ hasText: 'Connected' }).waitFor({ timeout: 20_000 });
      await page.getByTestId('readiness').waitFor();

      expect((await home.run(['devices', 'revoke', '--', request.deviceId])).code).to.equal(0);
      await page.getByText(/signed out by the gateway/).waitFor({ timeout: 10_000 });
      await page.getByRole('heading', { name: 'Sign in to this gateway' }).waitFor();
      expect(problems.csp).to.deep.equal([]);
      expect(problems.page).to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });

  it('a page at an address that is not an allowed origin is told so, and its WebSocket is refused', async () => {
    const remote = host();
    const port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.run(['config', 'set', 'gateway.discovery.mdns.enabled', 'false']);
    expect((await home.run(['start', '--bind', 'lan'])).code).to.equal(0);
    const browser = await TestBrowser.launch({ netns: remote.name });
    try {
      const { page } = await browser.page();
      await page.goto(`http://${remote.hostAddress}:${port}/`);
      await page.getByRole('heading', { name: 'Not allowed' }).waitFor();
      await page.getByText('gateway.controlUi.allowedOrigins').waitFor();
    } finally {
      await browser.close();
    }
  });
});
