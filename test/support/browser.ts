/**
 * A real browser for tests: Debian's Chromium driven by playwright-core,
 * headless, with a fresh profile each time. Every console error, page error
 * and Content-Security-Policy violation is collected, so a test can say there
 * were none.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { ROOT } from './cli.ts';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const SCREENSHOTS = join(ROOT, 'test-output', 'screenshots');

export const PHONE = { width: 375, height: 740 };
export const DESKTOP = { width: 1280, height: 860 };

export interface Problems { console: string[]; csp: string[]; page: string[] }

export class TestBrowser {
  readonly browser: Browser;

  private constructor(browser: Browser) {
    this.browser = browser;
  }

  static available(): boolean {
    return existsSync(CHROMIUM);
  }

  /** Launches Chromium; the command line runs it inside a network namespace when `prefix` is given. */
  static async launch(options: { netns?: string } = {}): Promise<TestBrowser> {
    const args = ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'];
    const executablePath = options.netns ? join(ROOT, 'test/support/chromium-in-netns.sh') : CHROMIUM;
    const browser = await chromium.launch({
      executablePath, args, headless: true, timeout: 30_000,
      env: { ...process.env, ...(options.netns ? { GATEWAY_TEST_NETNS: options.netns, CHROMIUM_PATH: CHROMIUM } : {}) },
    });
    return new TestBrowser(browser);
  }

  /** A fresh context (its own storage: a new device) and a page whose problems are recorded. */
  async page(viewport = DESKTOP, colorScheme: 'light' | 'dark' = 'light'): Promise<{ context: BrowserContext; page: Page; problems: Problems }> {
    const context = await this.browser.newContext({ viewport, colorScheme });
    const page = await context.newPage();
    const problems: Problems = { console: [], csp: [], page: [] };
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      (/Content Security Policy|Refused to/.test(message.text()) ? problems.csp : problems.console).push(message.text());
    });
    page.on('pageerror', (error) => problems.page.push(error.message));
    return { context, page, problems };
  }

  async close(): Promise<void> {
    await this.browser.close();
  }
}

/** Saves a screenshot under test-output/screenshots (kept as the test's output). */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
