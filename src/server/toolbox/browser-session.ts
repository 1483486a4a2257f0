/**
 * One browser, of one agent and one person: its pages, and what each
 * browser.* tool does to them. Actions run one at a time, each bounded by
 * tools.browser.actionTimeoutSeconds (Playwright's own timeouts, and a
 * deadline past which the page is closed). A page is read as Playwright's
 * accessibility snapshot, whose numbered references (e1, e2, and f1e3 inside
 * frames) name what browser.click and browser.type act on. Each answer says
 * what the proxy refused meanwhile, which downloads reached the workspace
 * and what else happened (a dialog dismissed, a popup opened or closed).
 */
import { constants } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { BrowserContext, Download, Locator, Page, Response } from 'playwright-core';
import { DomainError } from '../kernel/errors.ts';
import { REFUSED_HEADER, type BrowserProxy, type Refusal } from './browser-proxy.ts';
import type { Workspace } from './workspace.ts';

export interface SessionLimits {
  /** Pages open at once. */
  pages: number;
  /** Longest one action may take. */
  actionMs: number;
  /** Largest download kept. */
  downloadBytes: number;
}

/** What every answer may add: what happened around the action. */
export interface ActionNotes {
  refused?: Refusal[];
  downloads?: { path: string; bytes: number; url: string }[];
  notes?: string[];
}

export interface PageView {
  page: string;
  url: string;
  title: string;
}

/** The bounds and waits of one browser: what an answer holds, how long an action waits for what. */
export const SESSION_LIMITS = {
  /** Characters of a snapshot answered (the rest cut, and said). */
  chars: 40_000,
  /** Notes kept between two answers (the latest; a page can dismiss dialogs all day long). */
  notes: 50,
  /** Downloads one browser keeps in the workspace before it stops taking any. */
  downloads: 100,
  /** Tallest full-page screenshot, in CSS pixels. */
  screenshotHeight: 8000,
  /** How long after a click or a submit a navigation it started is waited for. */
  navigationStartMs: 400,
  /** How long an action waits for a page's load event and for its requests to settle, once its document is there. */
  loadMs: 5000,
  settleMs: 1500,
  /** How long without a request under way counts as settled. */
  quietMs: 100,
  /** Past the action's own bound, how long before its page is closed. */
  graceMs: 3000,
  /** How long a page's title is waited for. */
  titleMs: 1000,
  /** How long a failed navigation's error page is waited for. */
  errorPageMs: 2000,
  /** How long a browser asked to close may take before it is killed. */
  closeMs: 15_000,
} as const;

/** The viewport pages are shown in (and screenshots taken at). */
export const VIEWPORT = { width: 1280, height: 800 } as const;

const firstLine = (error: unknown) => String((error as Error)?.message ?? error).split('\n')[0]!.replace(/^[a-zA-Z.]+: /, '').slice(0, 300);
const isTimeout = (error: unknown) => (error as Error)?.name === 'TimeoutError';
const isClosed = (error: unknown) => /Target page, context or browser has been closed|Target closed|Browser has been closed|browser has disconnected/i.test(String((error as Error)?.message));

/** A file name a download may take in the workspace: its last part, without controls or a leading dot, 1-200 bytes. */
function downloadName(suggested: string): string {
  const base = suggested.split(/[\\/]/).pop() ?? '';
  let name = base.replace(/[\u0000-\u001f\u007f]/g, '').replace(/^\.+/, '').trim();
  while (Buffer.byteLength(name) > 200) name = name.slice(0, -1);
  return name || 'download';
}

/** The host and port an address goes to (its scheme's port when it names none); a tunnel's name is one already. */
const endpointOf = (url: string) => {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || (parsed.protocol === 'https:' || parsed.protocol === 'wss:' ? 443 : 80)}`;
  } catch {
    return url.toLowerCase();
  }
};

/** Width and height of a PNG, from its header. */
const pngSize = (png: Uint8Array) => {
  const view = Buffer.from(png.buffer, png.byteOffset, png.byteLength);
  return { width: view.readUInt32BE(16), height: view.readUInt32BE(20) };
};

const pad = (n: number) => String(n).padStart(2, '0');
const stamp = (at = new Date()) => `${at.getUTCFullYear()}${pad(at.getUTCMonth() + 1)}${pad(at.getUTCDate())}-${pad(at.getUTCHours())}${pad(at.getUTCMinutes())}${pad(at.getUTCSeconds())}`;

export interface SessionParts {
  context: BrowserContext;
  proxy: BrowserProxy;
  limits: () => SessionLimits;
  /** The agent's workspace, where downloads and screenshots go. */
  workspace: () => Workspace;
  /** Where the browser's downloads land before they are moved into the workspace (watched for their size). */
  downloadsDir: string;
  /** Called once the browser is gone, whatever closed it. */
  onClosed: (why: string | undefined) => void;
  /** Kills the browser's sandbox outright. */
  kill: () => void;
}

export class BrowserSession {
  private readonly parts: SessionParts;
  private readonly pages = new Map<string, Page>();
  private readonly ids = new WeakMap<Page, string>();
  private current: string | undefined;
  private nextId = 1;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly notes: string[] = [];
  private readonly downloaded: NonNullable<ActionNotes['downloads']> = [];
  private readonly downloading = new Set<Download>();
  /** Requests under way, per page. */
  private readonly inflight = new WeakMap<Page, number>();
  /** Downloads this browser was offered. */
  private downloadsTaken = 0;
  /** Downloads stopped for their size (their cancellation is no failure to report again). */
  private readonly stopped = new WeakSet<Download>();
  private downloadWatch: NodeJS.Timeout | undefined;
  /** Actions running or waiting. */
  busy = 0;
  lastUsed = Date.now();
  closed = false;
  private closing: Promise<void> | undefined;
  private goneCalled = false;
  /** Where the last answer's report of refusals ended. */
  private readonly told = { refused: 0 };

  constructor(parts: SessionParts) {
    this.parts = parts;
    parts.context.on('page', (page) => this.adopt(page, true));
    // Closed from elsewhere (Chromium gone, killed for its memory): what is left is cleaned up once the process has ended, not
    // while its last processes still write (the sandbox's control group is killed whole after).
    parts.context.on('close', () => void this.close());
    for (const page of parts.context.pages()) this.adopt(page, false);
  }

  /** Runs an action after those before it, counted busy while it waits and runs. */
  run<T>(work: () => Promise<T>): Promise<T> {
    this.busy++;
    this.lastUsed = Date.now();
    const next = this.queue.then(() => {
      if (this.closed) throw new DomainError('unavailable', 'The browser was closed; call browser.open again.', { code: 'browser_closed' });
      return work();
    });
    this.queue = next.catch(() => undefined);
    return next.finally(() => {
      this.busy--;
      this.lastUsed = Date.now();
    });
  }

  /** The pages open, as the answers list them. */
  views(): { page: string; url: string }[] {
    return [...this.pages].map(([id, page]) => ({ page: id, url: page.url() }));
  }

  private adopt(page: Page, opened: boolean): void {
    if (this.ids.has(page)) return;
    const limits = this.parts.limits();
    if (this.pages.size >= limits.pages) {
      this.note(`a page it opened (${page.url() || 'a popup'}) was closed at once: ${limits.pages} pages are open already (tools.browser.pages)`);
      void page.close({ runBeforeUnload: false }).catch(() => undefined);
      return;
    }
    const id = `p${this.nextId++}`;
    this.pages.set(id, page);
    this.ids.set(page, id);
    if (opened && this.current !== undefined) this.note(`a new page ${id} opened; it is the current page now`);
    this.current = id;
    page.on('close', () => {
      this.pages.delete(id);
      if (this.current === id) this.current = [...this.pages.keys()].at(-1);
    });
    page.on('dialog', (dialog) => {
      this.note(`a ${dialog.type()} dialog was dismissed: ${JSON.stringify(dialog.message().slice(0, 200))}`);
      void dialog.dismiss().catch(() => undefined);
    });
    page.on('crash', () => this.note(`page ${id} crashed (it may have used more memory than tools.browser.memoryMB allows)`));
    page.on('download', (download) => this.take(download));
    const count = (by: number) => () => this.inflight.set(page, Math.max(0, (this.inflight.get(page) ?? 0) + by));
    page.on('request', count(1));
    page.on('requestfinished', count(-1));
    page.on('requestfailed', count(-1));
  }

  private note(text: string): void {
    this.notes.push(text);
    if (this.notes.length > SESSION_LIMITS.notes) this.notes.shift();
  }

  /** A download: moved into the workspace's downloads/ once whole, unless larger than the bound (then stopped and removed). */
  private take(download: Download): void {
    if (++this.downloadsTaken > SESSION_LIMITS.downloads) {
      this.note(`the download of ${download.suggestedFilename()} was refused: this browser has kept ${SESSION_LIMITS.downloads} downloads already (close it to start again)`);
      void download.cancel().catch(() => undefined);
      return;
    }
    this.downloading.add(download);
    this.watchDownloads();
    const limits = this.parts.limits();
    void (async () => {
      const failure = await download.failure();
      if (failure) {
        if (!this.stopped.has(download)) this.note(`the download of ${download.suggestedFilename()} failed: ${failure}`);
        return;
      }
      // The file is read as what the sandbox left in its downloads folder, which Chromium could have made a link to anything
      // the daemon may read: opened without following a link, and only if it is a regular file there.
      const path = await download.path();
      if (dirname(path) !== this.parts.downloadsDir) throw new Error('the download is not in the browser\'s downloads folder');
      const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      try {
        const info = await handle.stat();
        if (!info.isFile()) throw new Error('the download is not a regular file');
        if (info.size > limits.downloadBytes) {
          this.note(`the download of ${download.suggestedFilename()} was dropped: ${info.size} bytes is more than tools.browser.downloadMB`);
          return;
        }
        const written = await this.parts.workspace().write(`downloads/${downloadName(download.suggestedFilename())}`, handle.createReadStream({ autoClose: false }), { maxBytes: limits.downloadBytes, keep: true });
        this.downloaded.push({ path: written.path, bytes: written.bytes, url: download.url() });
      } finally {
        await handle.close();
      }
    })().catch((error: unknown) => {
      this.note(`the download of ${download.suggestedFilename()} could not be kept: ${firstLine(error)}`);
    }).finally(() => {
      this.downloading.delete(download);
      void download.delete().catch(() => undefined);
    });
  }

  /** While downloads run, their folder is measured: one growing past the bound is stopped, not left to fill the disk. */
  private watchDownloads(): void {
    if (this.downloadWatch) return;
    this.downloadWatch = setInterval(() => {
      if (this.downloading.size === 0) {
        clearInterval(this.downloadWatch);
        this.downloadWatch = undefined;
        return;
      }
      void (async () => {
        const limit = this.parts.limits().downloadBytes;
        for (const name of await readdir(this.parts.downloadsDir).catch(() => [] as string[])) {
          const size = (await lstat(join(this.parts.downloadsDir, name)).catch(() => undefined))?.size ?? 0;
          if (size <= limit) continue;
          for (const download of this.downloading) {
            if (this.stopped.has(download)) continue;
            this.stopped.add(download);
            this.note(`the download of ${download.suggestedFilename()} was stopped: it grew past tools.browser.downloadMB`);
            void download.cancel().catch(() => undefined);
          }
        }
      })();
    }, 250);
    this.downloadWatch.unref();
  }

  /** The page named, else the current one; 404 when there is none. */
  private page(id?: string): { id: string; page: Page } {
    const chosen = id ?? this.current;
    const page = chosen === undefined ? undefined : this.pages.get(chosen);
    if (!page) {
      throw new DomainError('not_found', id ? `No page ${id} is open (open: ${[...this.pages.keys()].join(', ') || 'none'}).` : 'No page is open: browser.open {url} opens one.', { code: 'browser_no_page' });
    }
    return { id: chosen!, page };
  }

  /**
   * One action: bounded, its failures said as the caller can act on them,
   * its answer with what happened meanwhile.
   */
  private async act<T extends object>(what: string, work: (deadline: number) => Promise<T>, page?: Page): Promise<T & ActionNotes> {
    const mark = this.parts.proxy.mark();
    const { actionMs } = this.parts.limits();
    const deadline = Date.now() + actionMs;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        // Past its bound and Playwright's own: the page is stuck (a renderer in a loop); it is closed, and so the action ends.
        if (page) {
          this.note('the page did not answer and was closed');
          void page.close({ runBeforeUnload: false }).catch(() => undefined);
        }
        reject(Object.assign(new Error(`Timeout ${actionMs}ms exceeded.`), { name: 'TimeoutError' }));
      }, actionMs + SESSION_LIMITS.graceMs);
    });
    try {
      const result = await Promise.race([work(deadline), expired]);
      return { ...result, ...this.untold() };
    } catch (error) {
      throw this.explain(error, what, actionMs, mark);
    } finally {
      clearTimeout(timer);
    }
  }

  /** What happened since the last answer said (between actions too: a page's own requests, a download that finished). */
  private untold(): ActionNotes {
    const refused = this.parts.proxy.refusedSince(this.told.refused);
    this.told.refused = this.parts.proxy.mark();
    const downloads = this.downloaded.splice(0);
    const notes = this.notes.splice(0);
    if (this.downloading.size > 0) notes.push(`${this.downloading.size} download(s) still running; a later answer says where they went`);
    return { ...(refused.length ? { refused } : {}), ...(downloads.length ? { downloads } : {}), ...(notes.length ? { notes } : {}) };
  }

  private explain(error: unknown, what: string, actionMs: number, mark: number): unknown {
    if (error instanceof DomainError) return error;
    if (this.closed || isClosed(error)) {
      return new DomainError('unavailable', `The browser closed during ${what} (it may have used more memory than tools.browser.memoryMB allows); call browser.open again.`, { code: 'browser_closed' });
    }
    if (isTimeout(error)) {
      return new DomainError('upstream', `${what} did not finish within ${actionMs / 1000} s (tools.browser.actionTimeoutSeconds): the page is slow or stuck.`, { code: 'browser_timeout' });
    }
    const message = firstLine(error);
    // The refusal of what failed (Playwright names it: "net::ERR_... at <url>"), else the latest (a redirect's target).
    const refused = this.parts.proxy.refusedSince(mark);
    const failedAt = / at (\S+)$/.exec(message)?.[1];
    const refusal = refused.filter((candidate) => failedAt !== undefined && endpointOf(candidate.url) === endpointOf(failedAt)).at(-1) ?? refused.at(-1);
    if (/net::ERR_/.test(message) && refusal) {
      return new DomainError('invalid', `${what} was refused: ${refusal.reason}`, { code: 'browser_refused' });
    }
    const failure = this.parts.proxy.failedSince(mark);
    if (/net::ERR_/.test(message)) return new DomainError('upstream', `${what} failed: ${failure ? failure.reason : message}`, { code: 'browser_failed' });
    return new DomainError('invalid', `${what} failed: ${message}`, { code: 'browser_failed' });
  }

  /**
   * Until the page has had no request under way for a moment (what its
   * scripts fetched to draw it has come), or the time given is up.
   */
  private async quiet(page: Page, until: number): Promise<void> {
    let quietSince = Date.now();
    while (Date.now() < until) {
      if ((this.inflight.get(page) ?? 0) > 0) quietSince = Date.now();
      else if (Date.now() - quietSince >= SESSION_LIMITS.quietMs) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** After an action: waits for a navigation it started to begin and its page to load, then for its requests, within the action's bound. */
  private async settle(page: Page, navigated: () => boolean, deadline: number): Promise<void> {
    const left = () => Math.max(1, deadline - Date.now());
    const startBy = Date.now() + SESSION_LIMITS.navigationStartMs;
    while (!navigated() && Date.now() < startBy) await new Promise((resolve) => setTimeout(resolve, 25));
    if (navigated()) {
      await page.waitForLoadState('domcontentloaded', { timeout: left() });
      await page.waitForLoadState('load', { timeout: Math.min(left(), SESSION_LIMITS.loadMs) }).catch(() => undefined);
    }
    // What the action set going (a page's script fetching what a click asked for) has a moment to arrive.
    await this.quiet(page, Math.min(deadline, Date.now() + SESSION_LIMITS.settleMs));
  }

  /** A navigation the proxy refused answers with its refusal, not with the page it shows. */
  private refusedAnswer(response: Response | null, mark: number): Refusal | undefined {
    if (!response || response.headers()[REFUSED_HEADER] !== '1') return undefined;
    const endpoint = endpointOf(response.url());
    return this.parts.proxy.refusedSince(mark).find((refusal) => refusal.url === response.url() || endpointOf(refusal.url) === endpoint);
  }

  /** A page's address and title; the title not waited for past a moment (a page stuck in a loop answers nothing). */
  private async view(id: string, page: Page): Promise<PageView> {
    let timer: NodeJS.Timeout | undefined;
    const title = await Promise.race([
      page.title().catch(() => ''),
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve(''), SESSION_LIMITS.titleMs);
      }),
    ]);
    clearTimeout(timer);
    return { page: id, url: page.url(), title };
  }

  async open(url: URL, newPage: boolean): Promise<PageView & { status: number | null } & ActionNotes> {
    let target = newPage || this.current === undefined ? undefined : this.page();
    if (!target) {
      const limits = this.parts.limits();
      if (this.pages.size >= limits.pages) {
        throw new DomainError('invalid', `${limits.pages} pages are open already (tools.browser.pages); close one with browser.close {page}.`, { code: 'browser_pages' });
      }
      const page = await this.parts.context.newPage();
      target = { id: this.ids.get(page)!, page };
    }
    const { id, page } = target;
    this.current = id;
    const mark = this.parts.proxy.mark();
    return this.act(`Opening ${url.href}`, async (deadline) => {
      // A navigation that fails goes on to Chromium's error page a moment later: the answer waits for it, or it would
      // interrupt the next navigation.
      const errorPage = page.waitForEvent('framenavigated', {
        predicate: (frame) => frame === page.mainFrame() && frame.url().startsWith('chrome-error:'), timeout: Math.max(1, deadline - Date.now()),
      });
      errorPage.catch(() => undefined);
      const response = await page.goto(url.href, { waitUntil: 'domcontentloaded', timeout: Math.max(1, deadline - Date.now()) }).catch(async (error: unknown) => {
        if (/net::ERR_/.test(firstLine(error))) await Promise.race([errorPage, new Promise((resolve) => setTimeout(resolve, SESSION_LIMITS.errorPageMs))]).catch(() => undefined);
        throw error;
      });
      const refusal = this.refusedAnswer(response, mark);
      if (refusal) throw new DomainError('invalid', `Opening ${url.href} was refused: ${refusal.reason}`, { code: 'browser_refused' });
      await page.waitForLoadState('load', { timeout: Math.max(1, Math.min(deadline - Date.now(), SESSION_LIMITS.loadMs)) }).catch(() => undefined);
      await this.quiet(page, Math.min(deadline, Date.now() + SESSION_LIMITS.settleMs));
      return { ...(await this.view(id, page)), status: response?.status() ?? null };
    }, page);
  }

  async snapshot(pageId?: string): Promise<PageView & { snapshot: string; truncated: boolean } & ActionNotes> {
    const { id, page } = this.page(pageId);
    return this.act('Reading the page', async (deadline) => {
      const text = await page.ariaSnapshot({ mode: 'ai', timeout: Math.max(1, deadline - Date.now()) });
      const truncated = text.length > SESSION_LIMITS.chars;
      return { ...(await this.view(id, page)), snapshot: truncated ? `${text.slice(0, SESSION_LIMITS.chars)}\n[cut at ${SESSION_LIMITS.chars} characters]` : text, truncated };
    }, page);
  }

  /** The element a reference of the latest snapshot names (`e5`, `f1e2`; a bare number is taken as `e<number>`). */
  private element(page: Page, ref: string): Locator {
    return page.getByRef(/^\d+$/.test(ref) ? `e${ref}` : ref);
  }

  /** Runs an action on an element, then waits for a navigation it started. */
  private async onElement(what: string, pageId: string | undefined, ref: string, work: (element: Locator, timeout: number) => Promise<void>): Promise<PageView & { navigated: boolean } & ActionNotes> {
    const { id, page } = this.page(pageId);
    let navigated = false;
    const onNavigation = (frame: unknown) => {
      if (frame === page.mainFrame()) navigated = true;
    };
    page.on('framenavigated', onNavigation);
    try {
      return await this.act(what, async (deadline) => {
        const element = this.element(page, ref);
        // A reference no snapshot of this page gave (or one of a page since left) is the caller's to fix, at once: not waited for.
        const found = await element.count().catch((error: unknown) => {
          if (isTimeout(error) || isClosed(error)) throw error;
          return 0;
        });
        if (found === 0) {
          throw new DomainError('invalid', `No element ${ref} on page ${id}: take a new browser.snapshot and use a reference from it.`, { code: 'browser_no_element' });
        }
        await work(element, Math.max(1, deadline - Date.now()));
        await this.settle(page, () => navigated, deadline);
        // A click may have opened a page: the answer is about the page now current.
        const now = this.current !== undefined && this.current !== id ? this.page() : { id, page };
        return { ...(await this.view(now.id, now.page)), navigated };
      }, page);
    } finally {
      page.off('framenavigated', onNavigation);
    }
  }

  click(ref: string, pageId?: string): Promise<PageView & { navigated: boolean } & ActionNotes> {
    return this.onElement(`Clicking ${ref}`, pageId, ref, (element, timeout) => element.click({ timeout }));
  }

  type(ref: string, text: string, submit: boolean, pageId?: string): Promise<PageView & { navigated: boolean } & ActionNotes> {
    return this.onElement(`Typing into ${ref}`, pageId, ref, async (element, timeout) => {
      const started = Date.now();
      await element.fill(text, { timeout });
      if (submit) await element.press('Enter', { timeout: Math.max(1, timeout - (Date.now() - started)) });
    });
  }

  /** A screenshot saved in the workspace; the answer carries the PNG too, for a model that takes images. */
  async screenshot(pageId: string | undefined, fullPage: boolean, maxBytes: number): Promise<PageView & { path: string; bytes: number; width: number; height: number; png: Uint8Array } & ActionNotes> {
    const { id, page } = this.page(pageId);
    return this.act('Taking a screenshot', async (deadline) => {
      const png = await page.screenshot({
        type: 'png', timeout: Math.max(1, deadline - Date.now()), animations: 'disabled', caret: 'hide',
        ...(fullPage ? { fullPage: true, clip: { x: 0, y: 0, width: VIEWPORT.width, height: SESSION_LIMITS.screenshotHeight } } : {}),
      });
      const written = await this.parts.workspace().write(`screenshots/${stamp()}-${id}.png`, png, { maxBytes, keep: true });
      const size = pngSize(png);
      return { ...(await this.view(id, page)), path: written.path, bytes: written.bytes, ...size, png };
    }, page);
  }

  /** Closes one page (the browser stays), or the whole browser. */
  async closePage(pageId: string): Promise<{ closed: string; pages: { page: string; url: string }[] }> {
    const { page } = this.page(pageId);
    await page.close({ runBeforeUnload: false }).catch(() => undefined);
    return { closed: pageId, pages: this.views() };
  }

  /** Closes the browser (its profile stays); resolves once Chromium is gone or killed. */
  close(why?: string): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      clearInterval(this.downloadWatch);
      // Chromium that does not close when asked (a browser stuck with its pages) is killed, sandbox and all.
      let timer: NodeJS.Timeout | undefined;
      const stuck = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.parts.kill();
          resolve();
        }, SESSION_LIMITS.closeMs);
      });
      await Promise.race([this.parts.context.close({ reason: why }).catch(() => undefined), stuck]);
      clearTimeout(timer);
      this.gone(why);
    })();
    return this.closing;
  }

  private gone(why: string | undefined): void {
    if (this.goneCalled) return;
    this.goneCalled = true;
    this.closed = true;
    clearInterval(this.downloadWatch);
    this.parts.onClosed(why);
  }
}
