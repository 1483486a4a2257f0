/**
 * The browsers of the browser.* tools: one per agent and person, each with a
 * profile folder of its own (<profile>/browser/<hash of agent and person>,
 * kept between runs, so a person's logins stay theirs and reach nobody
 * else's browser), started in its sandbox (browser-sandbox.ts) behind its
 * own proxy (browser-proxy.ts) at its first use, closed when unused for
 * tools.browser.idleSeconds. At most tools.browser.browsers run at once: a
 * new one closes the one unused longest, or is answered 429 while every one
 * is busy. They run in the browsers' own process (browser-host.ts), which
 * loads Playwright with its first browser.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { BrowserType } from 'playwright-core';
import { sandboxGroup, type SandboxGroup } from '../../shared/cgroup.ts';
import { findChromium } from '../../shared/chromium.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';
import { systemResolver, type Resolver } from './address-guard.ts';
import { BrowserProxy } from './browser-proxy.ts';
import { prepareSandbox } from './browser-sandbox.ts';
import { BrowserSession, VIEWPORT } from './browser-session.ts';
import { SANDBOX_USER, sandboxTools } from '../sandbox/sandbox.ts';
import type { Workspace } from './workspace.ts';

const MB = 1024 * 1024;

export const BROWSER_LIMITS = {
  /** Connections one browser may hold open through its proxy at once. */
  connections: 256,
  /** Longest the proxy waits for a server to take a connection. */
  connectTimeoutMs: 15_000,
  /** Tasks (processes and their threads) of one browser together, in its control group. */
  tasks: 2048,
  /** The sandbox's private /tmp, where Chromium keeps its shared memory. */
  tmpBytes: 512 * MB,
  /** The least a browser process may write to one file (its profile's databases, a download under way). */
  fileBytes: 256 * MB,
  /** Longest Chromium may take to start. */
  launchTimeoutMs: 60_000,
} as const;

/** What the browsers are run with: tools.browser, and the private addresses the guard lets through. */
export interface BrowserSettings {
  browser: GatewayConfig['tools']['browser'];
  allowPrivate: readonly string[];
}

export interface BrowsersDeps {
  /** The gateway profile's folder: browser profiles are kept under browser/ in it. */
  profileDir: string;
  settings: () => BrowserSettings;
  logger: Logger;
  /** The workspace of an agent (undefined: the one callers without an agent act in). */
  workspaceOf: (agent: string | undefined) => Workspace;
  resolve?: Resolver;
}

let playwright: Promise<BrowserType> | undefined;
const loadChromium = () => (playwright ??= import('playwright-core').then((loaded) => loaded.chromium ?? (loaded as unknown as { default: typeof loaded }).default.chromium));

/** Where browsers' run folders go: the temporary folder, unless its path would make the proxy's socket path too long for the kernel (108 bytes). */
const runRoot = () => (tmpdir().length <= 60 ? tmpdir() : '/tmp');

const browserUnavailable = (why: string) => new DomainError('unavailable', `The browser is unavailable: ${why}.`, { code: 'browser_unavailable' });

export class Browsers {
  private readonly deps: BrowsersDeps;
  private readonly started = new Map<string, BrowserSession>();
  private readonly starting = new Map<string, Promise<BrowserSession>>();
  private sweeper: NodeJS.Timeout | undefined;
  private swept = false;

  constructor(deps: BrowsersDeps) {
    this.deps = deps;
  }

  /** The key of an agent and a person: the name of their profile folder. */
  static key(agent: string | undefined, person: string): string {
    return createHash('sha256').update(`${agent ?? ''}\n${person}`).digest('hex').slice(0, 32);
  }

  /** Browsers running now. */
  get count(): number {
    return this.started.size;
  }

  /**
   * Runs work on the browser of an agent and a person, after their earlier
   * actions; `start` starts one when none runs (browser.open), else there
   * is no page to act on (404).
   */
  async use<T>(agent: string | undefined, person: string, start: boolean, work: (session: BrowserSession) => Promise<T>): Promise<T> {
    const key = Browsers.key(agent, person);
    let session = this.started.get(key);
    if (!session || session.closed) {
      if (!start) throw new DomainError('not_found', 'No page is open: browser.open {url} opens one.', { code: 'browser_no_page' });
      session = await this.launch(key, agent);
    }
    const chosen = session;
    return chosen.run(() => work(chosen));
  }

  /** The browser of an agent and a person, if one runs. */
  running(agent: string | undefined, person: string): BrowserSession | undefined {
    const session = this.started.get(Browsers.key(agent, person));
    return session && !session.closed ? session : undefined;
  }

  private launch(key: string, agent: string | undefined): Promise<BrowserSession> {
    let starting = this.starting.get(key);
    if (!starting) {
      starting = this.start(key, agent).finally(() => this.starting.delete(key));
      this.starting.set(key, starting);
    }
    return starting;
  }

  /** Closes the browser unused longest while the bound is reached; 429 when every one is busy. */
  private async makeRoom(bound: number): Promise<void> {
    while (this.started.size + this.starting.size >= bound) {
      const idle = [...this.started.values()].filter((session) => session.busy === 0).sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (!idle) throw rateLimited(5000, `${bound} browsers are open and busy (tools.browser.browsers)`);
      await idle.close('room for another browser');
    }
  }

  private async start(key: string, agent: string | undefined): Promise<BrowserSession> {
    // The same person's browser still closing holds the profile: the new one waits for it to be gone.
    await this.started.get(key)?.close();
    const settings = this.deps.settings().browser;
    await this.makeRoom(settings.browsers);
    const tools = sandboxTools({ tool: 'the browser', runs: 'Chromium' });
    if ('missing' in tools) throw browserUnavailable(tools.missing);
    const found = findChromium(settings.executablePath);
    if ('missing' in found) throw browserUnavailable(found.missing);
    const chromium = await loadChromium();
    if (!this.swept) {
      this.swept = true;
      await this.sweepLeftovers();
    }
    const root = process.getuid?.() === 0;
    const browserRoot = join(this.deps.profileDir, 'browser');
    await mkdir(browserRoot, { recursive: true, mode: 0o700 });
    const profileDir = join(browserRoot, key);
    // A browser killed before it could close left its lock (its host name and process id, which the next sandbox's Chromium
    // may well have too): nothing else runs on this profile now.
    await Promise.all(['SingletonLock', 'SingletonSocket', 'SingletonCookie'].map((name) => rm(join(profileDir, name), { force: true })));
    const runDir = await mkdtemp(join(runRoot(), `gateway-browser-${process.pid}-`));
    const downloadsDir = join(runDir, 'downloads');
    let group: SandboxGroup | undefined;
    let proxy: BrowserProxy | undefined;
    const cleanup = async () => {
      await proxy?.close().catch(() => undefined);
      await group?.remove().catch(() => undefined);
      await rm(runDir, { recursive: true, force: true }).catch(() => undefined);
    };
    try {
      group = await sandboxGroup({ memoryBytes: settings.memoryMB * MB, processes: BROWSER_LIMITS.tasks }).catch(() => undefined);
      const plan = await prepareSandbox({
        chromium: found.path, bwrap: tools.bwrap, prlimit: tools.prlimit, ...(tools.setpriv ? { setpriv: tools.setpriv } : {}), runDir, profileDir, downloadsDir,
        fileBytes: Math.max(BROWSER_LIMITS.fileBytes, settings.downloadMB * MB), tmpBytes: BROWSER_LIMITS.tmpBytes, ...(group ? { group } : {}),
      });
      proxy = await BrowserProxy.listen(plan.proxySocket, {
        allowPrivate: () => this.deps.settings().allowPrivate, resolve: this.deps.resolve ?? systemResolver,
        maxConnections: BROWSER_LIMITS.connections, connectTimeoutMs: BROWSER_LIMITS.connectTimeoutMs,
      });
      // The socket is the sandbox user's alone (its folder is the daemon's, 0700: nobody else reaches it).
      if (root) await chown(plan.proxySocket, SANDBOX_USER.uid, SANDBOX_USER.gid);
      await chmod(plan.proxySocket, 0o600);
      const started = Date.now();
      const context = await chromium.launchPersistentContext(profileDir, {
        executablePath: plan.launcher, args: plan.args, headless: true, chromiumSandbox: false,
        handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false, env: { PATH: '/usr/bin:/bin' },
        timeout: BROWSER_LIMITS.launchTimeoutMs, downloadsPath: downloadsDir, acceptDownloads: true, viewport: { ...VIEWPORT }, locale: 'en-US',
      });
      const session: BrowserSession = new BrowserSession({
        context, proxy,
        limits: () => {
          const now = this.deps.settings().browser;
          return { pages: now.pages, actionMs: now.actionTimeoutSeconds * 1000, downloadBytes: now.downloadMB * MB };
        },
        workspace: () => this.deps.workspaceOf(agent), downloadsDir,
        kill: () => {
          try {
            const pid = Number(readFileSync(plan.pidFile, 'utf8').trim());
            if (pid > 1) process.kill(pid, 'SIGKILL');
          } catch {
            // Gone already.
          }
        },
        onClosed: (why) => {
          if (this.started.get(key) === session) this.started.delete(key);
          void (async () => {
            const outOfMemory = await group?.hitMemory().catch(() => false);
            this.deps.logger.info({ browser: key, why: outOfMemory ? 'memory' : why ?? 'exited' }, 'a browser closed');
            await cleanup();
          })();
          if (this.started.size === 0) this.stopSweeping();
        },
      });
      this.started.set(key, session);
      this.deps.logger.info({ browser: key, ms: Date.now() - started, limitsPer: group ? 'browser' : 'none' }, 'a browser started');
      this.sweepIdle();
      return session;
    } catch (error) {
      await cleanup();
      if (error instanceof DomainError) throw error;
      this.deps.logger.error({ err: error }, 'the browser could not start');
      // What Chromium (or the sandbox) said on its way out, else Playwright's own first line.
      const lines = String((error as Error).message ?? error).split('\n');
      const told = lines.filter((line) => /\]\[err\] \S/.test(line)).map((line) => line.replace(/^.*\]\[err\] /, '').trim());
      const said = (told.length > 0 ? told.slice(-3) : lines.slice(0, 1)).join(' ').slice(0, 400);
      throw browserUnavailable(`Chromium could not start (${said}); the gateway log has the details`);
    }
  }

  /** Closes the browsers unused for tools.browser.idleSeconds, looking a few times per that span. */
  private sweepIdle(): void {
    if (this.sweeper) return;
    const every = () => Math.min(30_000, Math.max(1000, this.deps.settings().browser.idleSeconds * 250));
    const look = () => {
      const idleMs = this.deps.settings().browser.idleSeconds * 1000;
      for (const session of this.started.values()) {
        if (session.busy === 0 && Date.now() - session.lastUsed >= idleMs) void session.close('idle');
      }
      this.sweeper = setTimeout(look, every());
      this.sweeper.unref();
    };
    this.sweeper = setTimeout(look, every());
    this.sweeper.unref();
  }

  private stopSweeping(): void {
    clearTimeout(this.sweeper);
    this.sweeper = undefined;
  }

  /** Run folders a daemon that is gone left behind (killed before it could remove them): their names hold its process id. */
  private async sweepLeftovers(): Promise<void> {
    const root = runRoot();
    for (const name of await readdir(root).catch(() => [] as string[])) {
      const match = /^gateway-browser-(\d+)-/.exec(name);
      if (!match || Number(match[1]) === process.pid || existsSync(`/proc/${match[1]}`)) continue;
      await rm(join(root, name), { recursive: true, force: true }).catch(() => undefined);
    }
  }

  /** Closes every browser (the daemon stops). */
  async closeAll(): Promise<void> {
    this.stopSweeping();
    const starting = [...this.starting.values()].map((pending) => pending.then((session) => session.close('the gateway stops'), () => undefined));
    await Promise.all([...[...this.started.values()].map((session) => session.close('the gateway stops')), ...starting]);
  }
}
