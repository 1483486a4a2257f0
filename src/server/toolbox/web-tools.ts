/**
 * web.search (the provider the operator chose, its key from the secret
 * store) and browser.* (a headless Chromium in a sandbox whose every request
 * passes the address guard, one per agent and person, run from a process of
 * its own: browser-host-client.ts).
 */
import { DomainError } from '../kernel/errors.ts';
import type { ModuleContext, ToolContext, ToolDef } from '../kernel/module.ts';
import { holdToolImage } from '../kernel/tool-images.ts';
import { type BrowserAction, BrowserHost, SCREENSHOT_BYTES } from './browser-host-client.ts';
import { fetchableUrl } from './web-fetch.ts';
import { MAX_RESULTS, search, secretOfProvider } from './web-search.ts';
import type { Workspaces } from './workspaces.ts';

type WebContext = Pick<ModuleContext, 'config' | 'secrets' | 'watch' | 'log' | 'onStop'>;

/** web.search; the providers' keys are read once and again when `gateway secrets set` changes one. */
export function webSearchTool(ctx: WebContext): ToolDef {
  const searchKeys = new Map<string, Promise<string | undefined>>();
  ctx.watch.secrets(['tools.web.search.*'], () => void searchKeys.clear());
  const searchKey = (provider: 'searxng' | 'brave' | 'tavily') => {
    let key = searchKeys.get(provider);
    if (!key) {
      key = ctx.secrets.get(secretOfProvider(provider));
      searchKeys.set(provider, key);
      key.catch(() => searchKeys.delete(provider));
    }
    return key;
  };
  return {
    name: 'web.search',
    description: 'Search the web: results as title, url and snippet, from the search provider the gateway is set up with. Read a result with web.fetch or browser.open.',
    inputSchema: {
      type: 'object', additionalProperties: false, required: ['query'],
      properties: { query: { type: 'string', minLength: 1, maxLength: 400 }, count: { type: 'integer', minimum: 1, maximum: MAX_RESULTS } },
    },
    handler: (args) => {
      const settings = ctx.config().tools.web.search;
      const query = String(args.query).trim();
      if (!query) throw new DomainError('invalid', 'query must hold words to search for.');
      return search(query, Number(args.count ?? settings.count), settings, searchKey);
    },
  };
}

const PAGE = { type: 'string', pattern: '^p[0-9]{1,6}$', description: 'a page of this browser (default: the current one)' } as const;
const REF = { type: 'string', pattern: '^((f[0-9]{1,6})?e[0-9]{1,7}|[0-9]{1,7})$', description: 'a reference from the latest browser.snapshot, such as e12' } as const;
const page = (args: Record<string, unknown>) => (args.page === undefined ? {} : { page: String(args.page) });

/** browser.*: the browsers run in a process of their own, started at the first call and ended a while after the last browser closed. */
export function browserTools(ctx: WebContext, deps: { profileDir: string; workspaces: Workspaces; owner?: { uid: number; gid: number } }): ToolDef[] {
  const host = new BrowserHost({ profileDir: deps.profileDir, logger: ctx.log });
  ctx.onStop(() => host.stop());
  ctx.watch.config((next, previous) => {
    if (JSON.stringify([next.tools.browser, next.tools.web.allowPrivate]) === JSON.stringify([previous.tools.browser, previous.tools.web.allowPrivate])) return;
    host.settings({ browser: next.tools.browser, allowPrivate: next.tools.web.allowPrivate });
  });
  const browse = async (context: ToolContext, action: BrowserAction) => {
    const { tools } = ctx.config();
    // Downloads land in the workspace: its own file system is mounted first, where it has one.
    const lease = await deps.workspaces.for(context).enter();
    try {
      return await host.call({
        agent: context.agent, person: context.person, action, settings: { browser: tools.browser, allowPrivate: tools.web.allowPrivate },
        workspace: { root: deps.workspaces.of(context.agent), ...(deps.owner ? { owner: deps.owner } : {}) },
      });
    } finally {
      lease.leave();
    }
  };
  return [
    {
      name: 'browser.open',
      description: 'Open a web page (http or https) in a real browser, which runs its JavaScript: in the current page, or a new one with newPage. The browser is yours alone (its logins are kept for you) and reaches public addresses only. Read the page with browser.snapshot.',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['url'],
        properties: { url: { type: 'string', minLength: 1, maxLength: 4096 }, newPage: { type: 'boolean' } },
      },
      handler: (args, context) => browse(context, { op: 'open', url: fetchableUrl(String(args.url), 'browser.open').href, newPage: args.newPage === true }),
    },
    {
      name: 'browser.snapshot',
      description: 'Read the open page as text: its headings, text, links, buttons and fields, each element with a reference (e5) that browser.click and browser.type take.',
      inputSchema: { type: 'object', additionalProperties: false, properties: { page: PAGE } },
      handler: (args, context) => browse(context, { op: 'snapshot', ...page(args) }),
    },
    {
      name: 'browser.click',
      description: 'Click an element of the open page (a link, a button, a box) by its reference from the latest browser.snapshot; says whether the page changed.',
      inputSchema: { type: 'object', additionalProperties: false, required: ['ref'], properties: { ref: REF, page: PAGE } },
      handler: (args, context) => browse(context, { op: 'click', ref: String(args.ref), ...page(args) }),
    },
    {
      name: 'browser.type',
      description: 'Type text into a field of the open page (by its reference from the latest browser.snapshot), replacing what it held; submit: true presses Enter after.',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['ref', 'text'],
        properties: { ref: REF, text: { type: 'string', maxLength: 20_000 }, submit: { type: 'boolean' }, page: PAGE },
      },
      handler: (args, context) => browse(context, { op: 'type', ref: String(args.ref), text: String(args.text), submit: args.submit === true, ...page(args) }),
    },
    {
      name: 'browser.screenshot',
      description: 'Take a screenshot of the open page (the visible part, or the whole page up to 8000 pixels with fullPage): a PNG saved in the workspace under screenshots/, shown to models that take images.',
      inputSchema: { type: 'object', additionalProperties: false, properties: { page: PAGE, fullPage: { type: 'boolean' } } },
      handler: async (args, context) => {
        const { png, ...shot } = await browse(context, { op: 'screenshot', fullPage: args.fullPage === true, maxBytes: SCREENSHOT_BYTES, ...page(args) }) as { png: Uint8Array; path: string };
        return { ...shot, image: holdToolImage(png, 'image/png', shot.path) };
      },
    },
    {
      name: 'browser.close',
      description: 'Close a page of the browser, or (without page) the whole browser; its logins are kept for the next time.',
      inputSchema: { type: 'object', additionalProperties: false, properties: { page: PAGE } },
      handler: (args, context) => browse(context, args.page === undefined ? { op: 'close' } : { op: 'closePage', page: String(args.page) }),
    },
  ];
}
