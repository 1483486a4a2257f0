import { config, expect } from 'chai';

config.truncateThreshold = 0;
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { TestBrowser } from '../support/browser.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

const TOKEN = 'browser-gateway-token-for-tests';
const root = process.getuid?.() === 0;

const html = (title: string, body: string) => `<!doctype html><html><head><title>${title}</title></head><body>${body}</body></html>`;

/** The Chromium processes of one browser profile: their pids, users and network namespaces. */
function chromiumOf(profileDir: string): { pid: number; uid: number; netns: string; cmdline: string }[] {
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ');
      // Chromium itself, not the sandbox around it (bubblewrap, the relay) whose command lines name it.
      if (!/chromium$/.test(cmdline.split(' ')[0]!) || !cmdline.includes(`--user-data-dir=${profileDir}`)) continue;
      const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${entry}/status`, 'utf8'))![1]);
      found.push({ pid: Number(entry), uid, netns: readlinkSync(`/proc/${entry}/ns/net`), cmdline });
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

describe('browser.* tools: a contained Chromium (e2e)', function () {
  this.timeout(180_000);
  let home: Home;
  let base: string;
  let pages: Server;
  let pagesPort: number;
  let elsewhere: Server;
  let elsewherePort: number;
  let elsewhereHits = 0;
  let bobToken: string;
  let page: string;
  let elsewhereUrl: string;

  const invoke = async (tool: string, args: Record<string, unknown>, token = TOKEN) => {
    const started = Date.now();
    const response = await fetch(`${base}/tools/invoke`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool, args }) });
    return { status: response.status, body: await response.json() as any, ms: Date.now() - started };
  };
  const ok = async (tool: string, args: Record<string, unknown>, token = TOKEN) => {
    const answer = await invoke(tool, args, token);
    expect(answer.status, `${tool} ${JSON.stringify(args)}: ${JSON.stringify(answer.body)}`).to.equal(200);
    return answer.body.result;
  };
  const refOf = (snapshot: string, pattern: RegExp) => {
    const match = new RegExp(`${pattern.source}[^\\n]*\\[ref=([a-z0-9]+)\\]`).exec(snapshot);
    expect(match, `${pattern} in\n${snapshot}`).to.not.equal(null);
    return match![1]!;
  };
  const profile = () => home.profileDir();

  before(async function () {
    if (!TestBrowser.available()) this.skip();
    pagesPort = await freePort();
    elsewherePort = await freePort();
    page = `http://127.0.0.1:${pagesPort}`;
    elsewhereUrl = `127.0.0.1:${elsewherePort}`;
    pages = createServer((req, res) => {
      const url = new URL(req.url!, page);
      const send = (title: string, body: string, headers: Record<string, string> = {}) => void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', ...headers }).end(html(title, body));
      switch (url.pathname) {
        case '/js':
          return send('Made by a script', `<div id="app">Loading...</div><script>setTimeout(() => { document.getElementById('app').innerHTML = '<h1>Built by JavaScript</h1><a href="/next">Next page</a>'; }, 50);</script>`);
        case '/next':
          return send('Next', '<h1>Second page</h1>');
        case '/form':
          return send('Form', '<form method="post" action="/result"><label>Search <input name="q"></label><button type="submit">Go</button></form>');
        case '/result': {
          let body = '';
          req.on('data', (chunk) => (body += chunk));
          req.on('end', () => send('Result', `<p>You searched for: ${new URLSearchParams(body).get('q')?.replace(/</g, '&lt;')}</p>`));
          return;
        }
        case '/to-elsewhere':
          return void res.writeHead(302, { location: `http://${elsewhereUrl}/secret` }).end();
        case '/sneaky':
          return send('Sneaky', `<h1>Harmless</h1><p id="out">waiting</p><iframe src="http://localhost:${elsewherePort}/frame"></iframe><img src="http://${elsewhereUrl}/pixel.png">
            <script>
              fetch('http://${elsewhereUrl}/secret').then(() => { document.getElementById('out').textContent = 'fetch got through'; }, () => { document.getElementById('out').textContent = 'fetch failed'; });
              try { const ws = new WebSocket('ws://${elsewhereUrl}/socket'); ws.onerror = () => {}; } catch {}
            </script>`);
        case '/downloads':
          return send('Downloads', '<a href="/report.txt">Report</a> <a href="/big.bin">Big file</a>');
        case '/report.txt':
          return void res.writeHead(200, { 'content-type': 'text/plain', 'content-disposition': 'attachment; filename="../../report.txt"' }).end('the quarterly report\n');
        case '/big.bin':
          return void res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': 'attachment; filename="big.bin"' }).end(Buffer.alloc(3 * 1024 * 1024, 7));
        case '/login':
          return send('Logged in', `<p>Hello ${url.searchParams.get('user')}</p>`, { 'set-cookie': `session=${url.searchParams.get('user')}; Path=/; Max-Age=3600; HttpOnly` });
        case '/whoami': {
          const session = /session=(\w+)/.exec(req.headers.cookie ?? '')?.[1];
          return send('Who', `<p>Signed in as ${session ?? 'nobody'}</p>`);
        }
        case '/hang':
          return; // never answers
        case '/spin':
          return send('Spin', '<h1>About to spin</h1><script>setTimeout(() => { for (;;) {} }, 1500);</script>');
        default:
          res.writeHead(404).end();
      }
    });
    elsewhere = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('internal secret'));
    // Any connection at all counts, whatever it carried (a request, a tunnel, a WebSocket).
    elsewhere.on('connection', () => elsewhereHits++);
    await Promise.all([new Promise<void>((resolve) => pages.listen(pagesPort, '127.0.0.1', resolve)), new Promise<void>((resolve) => elsewhere.listen(elsewherePort, '127.0.0.1', resolve))]);

    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN });
    await home.set('tools.web.allowPrivate', [`127.0.0.1:${pagesPort}`]);
    await home.set('tools.browser', { actionTimeoutSeconds: 20, downloadMB: 1 });
    await home.set('metrics.enabled', true);
    expect((await home.run(['start'])).code).to.equal(0);
    bobToken = (await home.json(['tokens', 'create', '--name', 'bob', '--scope', 'tools:invoke'])).token;
  });
  after(() => {
    home?.cleanup();
    pages?.closeAllConnections();
    pages?.close();
    elsewhere?.closeAllConnections();
    elsewhere?.close();
  });

  it('opens a page that needs JavaScript, follows a link, fills and submits a form, and takes a screenshot into the workspace', async () => {
    const opened = await ok('browser.open', { url: `${page}/js` });
    expect(opened).to.include({ page: 'p1', url: `${page}/js`, title: 'Made by a script', status: 200 });
    const first = await ok('browser.snapshot', {});
    expect(first.snapshot).to.include('Built by JavaScript').and.not.include('Loading...');

    const followed = await ok('browser.click', { ref: refOf(first.snapshot, /link "Next page"/) });
    expect(followed).to.include({ url: `${page}/next`, title: 'Next', navigated: true });
    expect((await ok('browser.snapshot', {})).snapshot).to.include('Second page');

    await ok('browser.open', { url: `${page}/form` });
    const form = (await ok('browser.snapshot', {})).snapshot;
    const typed = await ok('browser.type', { ref: refOf(form, /textbox "Search"/), text: 'gateway & <tools>' });
    expect(typed.navigated).to.equal(false);
    const submitted = await ok('browser.click', { ref: refOf(form, /button "Go"/) });
    expect(submitted).to.include({ url: `${page}/result`, title: 'Result', navigated: true });
    expect((await ok('browser.snapshot', {})).snapshot).to.include('You searched for: gateway & <tools>');

    // Typing with submit presses Enter in the field.
    await ok('browser.open', { url: `${page}/form` });
    const again = (await ok('browser.snapshot', {})).snapshot;
    expect(await ok('browser.type', { ref: refOf(again, /textbox "Search"/), text: 'by enter', submit: true })).to.include({ url: `${page}/result`, navigated: true });
    expect((await ok('browser.snapshot', {})).snapshot).to.include('You searched for: by enter');

    const shot = await ok('browser.screenshot', {});
    expect(shot).to.include({ width: 1280, height: 800 });
    expect(shot.path).to.match(/^screenshots\/\d{8}-\d{6}-p1\.png$/);
    expect(shot.image).to.include({ mimeType: 'image/png', name: shot.path });
    const file = join(profile(), 'workspace', shot.path);
    const png = readFileSync(file);
    expect(png.subarray(1, 4).toString()).to.equal('PNG');
    expect(png.length).to.equal(shot.bytes);
    const second = await ok('browser.screenshot', { fullPage: true });
    expect(second.path, 'a second screenshot never replaces the first').to.not.equal(shot.path);
  });

  it('refuses a navigation, a redirect, a script\'s fetch, an iframe, an image and a WebSocket toward a loopback address not allowed, before anything reaches it', async () => {
    elsewhereHits = 0;
    const refusals: [string, RegExp][] = [
      [`http://${elsewhereUrl}/secret`, /127\.0\.0\.1 is a loopback address; the browser reaches only public addresses \(allow this one with tools\.web\.allowPrivate \["127\.0\.0\.1:\d+"\]\)/],
      [`http://localhost:${elsewherePort}/`, /localhost resolves to (127\.0\.0\.1|::1), which is a loopback address/],
      [`https://${elsewhereUrl}/`, /127\.0\.0\.1 is a loopback address/],
      [`http://[::1]:${elsewherePort}/`, /::1 is a loopback address/],
      [`http://169.254.169.254/latest/meta-data/`, /a cloud metadata address/],
      [`${page}/to-elsewhere`, /127\.0\.0\.1 is a loopback address/],
    ];
    for (const [url, why] of refusals) {
      const refused = await invoke('browser.open', { url });
      expect(refused.status, `${url}: ${JSON.stringify(refused.body)}`).to.equal(400);
      expect(refused.body.message, url).to.match(why);
    }
    const sneaky = await ok('browser.open', { url: `${page}/sneaky` });
    const refusedUrls = (sneaky.refused ?? []).map((refusal: any) => refusal.url);
    await waitFor(async () => {
      const more = (await ok('browser.snapshot', {}));
      refusedUrls.push(...(more.refused ?? []).map((refusal: any) => refusal.url));
      // The WebSocket goes as a tunnel (CONNECT), named by its host and port.
      return more.snapshot.includes('fetch failed') && refusedUrls.includes(elsewhereUrl) ? true : undefined;
    }, 15_000, 'the page\'s fetch and WebSocket refused');
    expect(refusedUrls).to.include.members([`http://${elsewhereUrl}/secret`, `http://localhost:${elsewherePort}/frame`, `http://${elsewhereUrl}/pixel.png`]);
    const snapshot = (await ok('browser.snapshot', {})).snapshot;
    expect(snapshot).to.include('Harmless').and.include('fetch failed').and.include('The gateway refused this request');
    expect(elsewhereHits, 'nothing reached the loopback server').to.equal(0);
  });

  it('puts a download in the workspace\'s downloads/ folder only, never replacing a file, and drops one larger than tools.browser.downloadMB', async () => {
    await ok('browser.open', { url: `${page}/downloads` });
    const links = (await ok('browser.snapshot', {})).snapshot;
    /** Clicks a link and gathers what the answers say until `done` holds (a download finishes during the click or after it). */
    const clickAndWait = async (ref: string, done: (said: { downloads: any[]; notes: string[] }) => boolean) => {
      const said = { downloads: [] as any[], notes: [] as string[] };
      const gather = (answer: any) => {
        said.downloads.push(...(answer.downloads ?? []));
        said.notes.push(...(answer.notes ?? []));
      };
      gather(await ok('browser.click', { ref }));
      return waitFor(async () => {
        if (!done(said)) gather(await ok('browser.snapshot', {}));
        return done(said) ? said : undefined;
      }, 15_000, 'the download reported');
    };
    const first = await clickAndWait(refOf(links, /link "Report"/), (said) => said.downloads.length > 0);
    expect(first.downloads).to.have.length(1);
    const kept = first.downloads[0];
    // A name with a path in it stays a name in downloads/.
    expect(kept).to.include({ bytes: 21, url: `${page}/report.txt` });
    expect(kept.path).to.match(/^downloads\/[^/]*report\.txt$/);
    expect(readFileSync(join(profile(), 'workspace', kept.path), 'utf8')).to.equal('the quarterly report\n');
    expect(existsSync(join(profile(), 'report.txt'))).to.equal(false);
    // The same name again keeps the first file.
    const second = await clickAndWait(refOf(links, /link "Report"/), (said) => said.downloads.length > 0);
    expect(second.downloads[0].path).to.equal(kept.path.replace(/\.txt$/, '-2.txt'));

    const big = await clickAndWait(refOf(links, /link "Big file"/), (said) => said.notes.some((note) => /big\.bin was (dropped|stopped)/.test(note)));
    expect(big.downloads).to.deep.equal([]);
    expect(big.notes.join(' ')).to.match(/tools\.browser\.downloadMB/);
    expect(readdirSync(join(profile(), 'workspace', 'downloads')).sort()).to.deep.equal([kept.path.slice('downloads/'.length), second.downloads[0].path.slice('downloads/'.length)].sort());
  });

  it('keeps two people\'s browsers apart: cookies, pages and profile folders; Chromium runs unprivileged, without network of its own, over a pipe', async () => {
    await ok('browser.open', { url: `${page}/login?user=alice` });
    expect((await ok('browser.snapshot', {})).snapshot).to.include('Hello alice');
    await ok('browser.open', { url: `${page}/whoami` });
    expect((await ok('browser.snapshot', {})).snapshot).to.include('Signed in as alice');

    const bobs = await ok('browser.open', { url: `${page}/whoami` }, bobToken);
    expect(bobs.page).to.equal('p1');
    expect((await ok('browser.snapshot', {}, bobToken)).snapshot).to.include('Signed in as nobody');
    // Alice's page is still hers.
    expect((await ok('browser.snapshot', {})).snapshot).to.include('Signed in as alice');

    const folders = readdirSync(join(profile(), 'browser'));
    expect(folders).to.have.length(2);
    const daemonNetns = readlinkSync(`/proc/${home.lock().pid}/ns/net`);
    for (const folder of folders) {
      const path = join(profile(), 'browser', folder);
      const info = statSync(path);
      expect(info.mode & 0o777, path).to.equal(0o700);
      if (root) expect(info.uid, 'a root daemon\'s browsers run as nobody').to.equal(65534);
      const processes = chromiumOf(path);
      expect(processes.length, `Chromium of ${folder}`).to.be.greaterThan(0);
      for (const chromium of processes) {
        if (root) expect(chromium.uid, 'Chromium never runs as root').to.equal(65534);
        expect(chromium.netns, 'Chromium has no network of its own').to.not.equal(daemonNetns);
        expect(chromium.cmdline).to.not.match(/--remote-debugging-port/);
      }
      expect(processes.some((chromium) => chromium.cmdline.includes('--remote-debugging-pipe'))).to.equal(true);
    }
    expect(statSync(join(profile(), 'browser')).mode & 0o777).to.equal(0o700);
    expect((await ok('browser.close', {}, bobToken))).to.deep.equal({ closed: 'browser', pages: [] });
    expect((await invoke('browser.snapshot', {}, bobToken)).status).to.equal(404);
    expect((await ok('browser.snapshot', {})).snapshot, 'closing Bob\'s browser left Alice\'s').to.include('Signed in as alice');
    // Bob's login is kept for the next time, and his folder is still his.
    await ok('browser.open', { url: `${page}/login?user=bob` }, bobToken);
    await ok('browser.close', {}, bobToken);
    await ok('browser.open', { url: `${page}/whoami` }, bobToken);
    expect((await ok('browser.snapshot', {}, bobToken)).snapshot).to.include('Signed in as bob');
    await ok('browser.close', {}, bobToken);
  });

  it('bounds a hung page by its time limit, closes a stuck one, and goes on', async () => {
    await home.set('tools.browser.actionTimeoutSeconds', 2);
    try {
      const hung = await invoke('browser.open', { url: `${page}/hang` });
      expect(hung.status, JSON.stringify(hung.body)).to.equal(502);
      expect(hung.body.message).to.match(/did not finish within 2 s \(tools\.browser\.actionTimeoutSeconds\)/);
      expect(hung.ms).to.be.below(8000);

      await ok('browser.open', { url: `${page}/spin` });
      await sleep(1500);
      const stuck = await invoke('browser.snapshot', {});
      expect(stuck.status, JSON.stringify(stuck.body)).to.equal(502);
      expect(stuck.ms).to.be.below(8000);
      const fresh = await ok('browser.open', { url: `${page}/next`, newPage: true });
      expect(fresh.title).to.equal('Next');
    } finally {
      await home.set('tools.browser.actionTimeoutSeconds', 20);
    }
  });

  it('answers bad input with clear errors and the right status, and closes an idle browser', async () => {
    for (const [args, status, why] of [
      [{ url: 'ftp://example.com/' }, 400, /browser\.open takes http and https addresses, not ftp/],
      [{ url: 'file:///etc/passwd' }, 400, /not file/],
      [{ url: 'javascript:alert(1)' }, 400, /not javascript/],
      [{ url: 'not a url' }, 400, /is not an address/],
      [{ url: `${page}/`, extra: 1 }, 400, /Invalid args/],
    ] as [Record<string, unknown>, number, RegExp][]) {
      const answer = await invoke('browser.open', args);
      expect(answer.status, JSON.stringify(args)).to.equal(status);
      expect(answer.body.message).to.match(why);
    }
    await ok('browser.open', { url: `${page}/next` });
    expect((await invoke('browser.click', { ref: 'zz' })).status).to.equal(400);
    const unknown = await invoke('browser.click', { ref: 'e999' });
    expect(unknown.status).to.equal(400);
    expect(unknown.body.message).to.match(/No element e999 .*take a new browser\.snapshot/);
    expect(unknown.ms).to.be.below(5000);
    expect((await invoke('browser.type', { ref: 'e1' })).status).to.equal(400);
    const noPage = await invoke('browser.snapshot', { page: 'p99' });
    expect(noPage.status).to.equal(404);
    expect(noPage.body.message).to.match(/No page p99 is open/);
    expect((await invoke('browser.snapshot', {}, bobToken)).status).to.equal(404);

    const metrics = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    expect(metrics).to.match(/gateway_tool_calls_total\{[^}]*tool="browser\.open"[^}]*\} \d+/);

    await home.set('tools.browser.idleSeconds', 10);
    const folder = join(profile(), 'browser', readdirSync(join(profile(), 'browser')).find((name) => chromiumOf(join(profile(), 'browser', name)).length > 0)!);
    await waitFor(() => (chromiumOf(folder).length === 0 ? true : undefined), 30_000, 'the idle browser closed');
    expect((await invoke('browser.snapshot', {})).status).to.equal(404);
    const left = readdirSync('/tmp').filter((name) => name.startsWith(`gateway-browser-${home.lock().pid}-`));
    expect(left, 'its run folder removed').to.deep.equal([]);
  });

  it('an agent with the coding profile browses, and a model that takes images sees the screenshot', async () => {
    const upstream = await new ScriptedUpstream().start();
    try {
      await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], imageModels: ['m'], retries: { max: 0 } });
      await home.set('agents.browser', { model: 'script/m', toolProfile: 'coding' });
      upstream.enqueue(
        openaiToolCalls([{ name: 'browser_open', args: { url: `${page}/next` } }]),
        openaiToolCalls([{ name: 'browser_screenshot', args: {} }]),
        openaiText('It shows the second page.'),
      );
      const chat = await home.run(['chat', '--agent', 'browser', 'What does the next page show?', '--json']);
      expect(chat.code, chat.stderr).to.equal(0);
      expect(chat.json.text).to.equal('It shows the second page.');
      const names = upstream.requests[0]!.body.tools.map((tool: any) => tool.function.name);
      expect(names).to.include.members(['browser_open', 'browser_snapshot', 'browser_click', 'browser_type', 'browser_screenshot', 'browser_close', 'web_search', 'web_fetch']);
      const last = upstream.requests[2]!.body.messages;
      const pictures = last.filter((message: any) => message.role === 'user' && Array.isArray(message.content));
      expect(pictures, 'the screenshot shown as an image').to.have.length(1);
      expect(pictures[0].content[0].text).to.match(/^The image browser\.screenshot made \(screenshots\/.*\.png\):$/);
      expect(pictures[0].content[1].image_url.url).to.match(/^data:image\/png;base64,iVBOR/);
      expect(existsSync(join(profile(), 'workspaces', 'browser', 'screenshots'))).to.equal(true);
    } finally {
      await upstream.stop();
    }
  });
});
