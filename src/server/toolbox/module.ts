/**
 * The built-in tools that make an agent useful, contained: web.fetch (public
 * addresses only, bounded), web.search (the provider the operator chose),
 * browser.* (a headless Chromium in a sandbox whose every request passes the
 * same address guard, one per agent and person, run from a process of its
 * own), files.* (one workspace folder per agent) and exec (a command in a
 * bubblewrap sandbox over that folder, run only as the approval setting says).
 * Called by an agent, they act in its workspace; over POST /tools/invoke or
 * the WebSocket, in the default agent's (or, with no agent, the profile's own
 * `workspace` folder).
 */
import { join } from 'node:path';
import { gatewayVersion } from '../../shared/version.ts';
import agentsModule from '../agents/module.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';
import { defineModule, type ToolContext } from '../kernel/module.ts';
import { systemResolver } from './address-guard.ts';
import { allowedCommand, Approvals } from './approvals.ts';
import { runSandboxed, SANDBOX_USER, sandboxTools } from './sandbox.ts';
import { holdToolImage } from '../kernel/tool-images.ts';
import { type BrowserAction, BrowserHost, SCREENSHOT_BYTES } from './browser-host-client.ts';
import { fetchableUrl, fetchPage } from './web-fetch.ts';
import { MAX_RESULTS, search, secretOfProvider } from './web-search.ts';
import { FILE_LIMITS, Workspace } from './workspace.ts';

/** What other modules (and tests) get from this one. */
export interface Toolbox {
  /** The workspace folder of an agent (undefined: the one HTTP callers act in). */
  workspaceOf(agentId?: string): string;
}

const PATH = { type: 'string', minLength: 1, maxLength: 4096 } as const;

export default defineModule<Toolbox>({
  id: 'toolbox',
  needs: [agentsModule],
  setup(ctx) {
    const agents = ctx.use(agentsModule);
    const profileDir = ctx.daemon.paths.dir;

    const workspaceOf = (agentId?: string): string => {
      const configured = ctx.config().agents;
      if (agentId && Object.hasOwn(configured, agentId)) return configured[agentId]!.workspace ?? join(profileDir, 'workspaces', agentId);
      if (Object.keys(configured).length === 0) return join(profileDir, 'workspace');
      try {
        const { id, settings } = agents.resolve();
        return settings.workspace ?? join(profileDir, 'workspaces', id);
      } catch {
        return join(profileDir, 'workspace');
      }
    };
    // A root daemon's sandbox runs commands as an unprivileged user, who owns what is made in the workspaces.
    const owner = process.getuid?.() === 0 ? SANDBOX_USER : undefined;
    /** The workspace a call acts in: the calling agent's, else the default agent's. */
    const workspace = (context: ToolContext) => new Workspace(workspaceOf(context.agent), owner);

    ctx.tools.add({
      name: 'web.fetch',
      description: 'Fetch a public web page (http or https) and read it as Markdown (text and JSON as they are). Private, loopback and link-local addresses are refused.',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['url'],
        properties: { url: { type: 'string', minLength: 1, maxLength: 4096 }, maxBytes: { type: 'integer', minimum: 1024, maximum: 50 * 1024 * 1024 } },
      },
      handler: async (args) => {
        const web = ctx.config().tools.web;
        return fetchPage(String(args.url), {
          maxBytes: Math.min(Number(args.maxBytes ?? web.maxBytes), web.maxBytes), timeoutMs: web.timeoutMs, maxRedirects: web.maxRedirects,
          allowPrivate: web.allowPrivate, userAgent: `gateway/${gatewayVersion()} (web.fetch)`,
        }, systemResolver);
      },
    });

    // Search providers' keys are read once and again when `gateway secrets set` changes one.
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
    ctx.tools.add({
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
    });

    // The browsers run in a process of their own, started at the first call and ended a while after the last browser closed.
    const host = new BrowserHost({ profileDir, logger: ctx.log });
    ctx.onStop(() => host.stop());
    ctx.watch.config((next, previous) => {
      if (JSON.stringify([next.tools.browser, next.tools.web.allowPrivate]) === JSON.stringify([previous.tools.browser, previous.tools.web.allowPrivate])) return;
      host.settings({ browser: next.tools.browser, allowPrivate: next.tools.web.allowPrivate });
    });
    const browse = (context: ToolContext, action: BrowserAction) => {
      const { tools } = ctx.config();
      return host.call({
        agent: context.agent, person: context.person, action, settings: { browser: tools.browser, allowPrivate: tools.web.allowPrivate },
        workspace: { root: workspaceOf(context.agent), ...(owner ? { owner } : {}) },
      });
    };
    const PAGE = { type: 'string', pattern: '^p[0-9]{1,6}$', description: 'a page of this browser (default: the current one)' } as const;
    const REF = { type: 'string', pattern: '^((f[0-9]{1,6})?e[0-9]{1,7}|[0-9]{1,7})$', description: 'a reference from the latest browser.snapshot, such as e12' } as const;
    const page = (args: Record<string, unknown>) => (args.page === undefined ? {} : { page: String(args.page) });
    ctx.tools.add({
      name: 'browser.open',
      description: 'Open a web page (http or https) in a real browser, which runs its JavaScript: in the current page, or a new one with newPage. The browser is yours alone (its logins are kept for you) and reaches public addresses only. Read the page with browser.snapshot.',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['url'],
        properties: { url: { type: 'string', minLength: 1, maxLength: 4096 }, newPage: { type: 'boolean' } },
      },
      handler: (args, context) => browse(context, { op: 'open', url: fetchableUrl(String(args.url), 'browser.open').href, newPage: args.newPage === true }),
    });
    ctx.tools.add({
      name: 'browser.snapshot',
      description: 'Read the open page as text: its headings, text, links, buttons and fields, each element with a reference (e5) that browser.click and browser.type take.',
      inputSchema: { type: 'object', additionalProperties: false, properties: { page: PAGE } },
      handler: (args, context) => browse(context, { op: 'snapshot', ...page(args) }),
    });
    ctx.tools.add({
      name: 'browser.click',
      description: 'Click an element of the open page (a link, a button, a box) by its reference from the latest browser.snapshot; says whether the page changed.',
      inputSchema: { type: 'object', additionalProperties: false, required: ['ref'], properties: { ref: REF, page: PAGE } },
      handler: (args, context) => browse(context, { op: 'click', ref: String(args.ref), ...page(args) }),
    });
    ctx.tools.add({
      name: 'browser.type',
      description: 'Type text into a field of the open page (by its reference from the latest browser.snapshot), replacing what it held; submit: true presses Enter after.',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['ref', 'text'],
        properties: { ref: REF, text: { type: 'string', maxLength: 20_000 }, submit: { type: 'boolean' }, page: PAGE },
      },
      handler: (args, context) => browse(context, { op: 'type', ref: String(args.ref), text: String(args.text), submit: args.submit === true, ...page(args) }),
    });
    ctx.tools.add({
      name: 'browser.screenshot',
      description: 'Take a screenshot of the open page (the visible part, or the whole page up to 8000 pixels with fullPage): a PNG saved in the workspace under screenshots/, shown to models that take images.',
      inputSchema: { type: 'object', additionalProperties: false, properties: { page: PAGE, fullPage: { type: 'boolean' } } },
      handler: async (args, context) => {
        const { png, ...shot } = await browse(context, { op: 'screenshot', fullPage: args.fullPage === true, maxBytes: SCREENSHOT_BYTES, ...page(args) }) as { png: Uint8Array; path: string };
        return { ...shot, image: holdToolImage(png, 'image/png', shot.path) };
      },
    });
    ctx.tools.add({
      name: 'browser.close',
      description: 'Close a page of the browser, or (without page) the whole browser; its logins are kept for the next time.',
      inputSchema: { type: 'object', additionalProperties: false, properties: { page: PAGE } },
      handler: (args, context) => browse(context, args.page === undefined ? { op: 'close' } : { op: 'closePage', page: String(args.page) }),
    });

    ctx.tools.add({
      name: 'files.read',
      description: 'Read a text file of the workspace (up to 1 MB).',
      inputSchema: { type: 'object', additionalProperties: false, required: ['path'], properties: { path: PATH } },
      handler: (args, context) => workspace(context).read(String(args.path)),
    });
    ctx.tools.add({
      name: 'files.list',
      description: 'List a folder of the workspace (default its top), to a depth of 1-5.',
      inputSchema: { type: 'object', additionalProperties: false, properties: { path: PATH, depth: { type: 'integer', minimum: 1, maximum: FILE_LIMITS.maxDepth } } },
      handler: (args, context) => workspace(context).list(args.path === undefined ? '.' : String(args.path), Number(args.depth ?? 1)),
    });
    ctx.tools.add({
      name: 'files.write',
      description: 'Write a whole text file in the workspace (created with its folders, or replaced), up to 1 MB.',
      dangerous: true, external: 'it writes files in the agent\'s workspace',
      inputSchema: { type: 'object', additionalProperties: false, required: ['path', 'content'], properties: { path: PATH, content: { type: 'string', maxLength: FILE_LIMITS.maxBytes } } },
      handler: (args, context) => workspace(context).write(String(args.path), String(args.content)),
    });
    ctx.tools.add({
      name: 'files.edit',
      description: 'Replace text in a workspace file: oldText must occur exactly once (or give all: true to replace every occurrence).',
      dangerous: true, external: 'it changes files in the agent\'s workspace',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['path', 'oldText', 'newText'],
        properties: { path: PATH, oldText: { type: 'string', minLength: 1, maxLength: FILE_LIMITS.maxBytes }, newText: { type: 'string', maxLength: FILE_LIMITS.maxBytes }, all: { type: 'boolean' } },
      },
      handler: (args, context) => {
        if (typeof args.oldText !== 'string' || typeof args.newText !== 'string') throw new DomainError('invalid', 'oldText and newText are text.');
        return workspace(context).edit(String(args.path), args.oldText, args.newText, args.all === true);
      },
    });
    const approvals = new Approvals((event, view) => ctx.events.emit('exec.approval', { event, approval: view }, 'operator.read'));
    ctx.onStop(() => approvals.close());
    ctx.rpc.method({ name: 'approvals.list', handler: () => ({ approvals: approvals.list() }) });
    ctx.rpc.method({
      name: 'approvals.decide',
      handler: ({ id, approve }, client) => {
        const decided = approvals.decide(id, approve, `device:${client.deviceId}`);
        void ctx.store.audit(approve ? 'exec.approved' : 'exec.rejected', { actor: client.deviceId, subject: id, address: client.address, detail: { command: decided.command } });
        return decided;
      },
    });

    /** Commands running now, per agent and per caller: each bounded by tools.exec.concurrency. */
    const running = new Map<string, number>();
    const MB = 1024 * 1024;

    ctx.tools.add({
      name: 'exec',
      description: 'Run a shell command in a sandbox over the workspace (/workspace): the system\'s programs read-only, a private /tmp, no network unless allowed, with CPU, memory, process, time and output limits. Returns exit code, stdout and stderr.',
      dangerous: true, external: 'it runs commands (in a sandbox over the agent\'s workspace)',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['command'],
        properties: { command: { type: 'string', minLength: 1, maxLength: 16_384 }, timeout: { type: 'integer', minimum: 1, maximum: 3600, description: 'seconds of wall time' } },
      },
      handler: async (args, context) => {
        const command = String(args.command);
        const settings = ctx.config().tools.exec;
        const agentId = context.agent;
        const agent = agentId ? ctx.config().agents[agentId] : undefined;
        const approval = agent?.exec.approval ?? settings.approval;
        if (approval === 'off') {
          throw new DomainError('forbidden', `exec is off${agentId ? ` for agent ${agentId}` : ''}: gateway config set ${agentId ? `agents.${agentId}.exec.approval` : 'tools.exec.approval'} ask (or allowlist, or full); commands always run in the sandbox.`, { code: 'exec_off' });
        }
        const tools = sandboxTools();
        if ('missing' in tools) throw new DomainError('unavailable', `exec is unavailable: ${tools.missing}.`, { code: 'sandbox_missing' });
        const timeoutSeconds = Number(args.timeout ?? settings.timeoutSeconds);
        if (timeoutSeconds > settings.maxTimeoutSeconds) throw new DomainError('invalid', `A timeout of ${timeoutSeconds} s is more than tools.exec.maxTimeoutSeconds (${settings.maxTimeoutSeconds}).`);
        const asks = approval === 'ask' || (approval === 'allowlist' && !allowedCommand(command, settings.allow));
        if (asks) {
          const why = approval === 'ask' ? 'every command asks (approval ask)' : 'the command matches no tools.exec.allow pattern';
          const { decision, id } = await approvals.ask({
            command, caller: context.caller, agent: agentId ?? null, sessionKey: context.sessionKey ?? null, why, timeoutMs: settings.approvalTimeoutSeconds * 1000,
          });
          if (decision === 'rejected') throw new DomainError('forbidden', `An operator rejected the command (${id}).`, { code: 'exec_rejected' });
          if (decision === 'expired') throw new DomainError('forbidden', `Nobody approved the command within ${settings.approvalTimeoutSeconds} s (${id}); it did not run.`, { code: 'exec_expired' });
        }
        // Many calls at once add up: an agent, and a caller, run at most tools.exec.concurrency commands together.
        const keys = [`agent:${agentId ?? workspaceOf()}`, `caller:${context.caller}`];
        const busy = keys.find((key) => (running.get(key) ?? 0) >= settings.concurrency);
        if (busy) {
          throw rateLimited(1000, `${settings.concurrency} commands of this ${busy.startsWith('agent:') ? 'agent' : 'caller'} are running already (tools.exec.concurrency)`);
        }
        for (const key of keys) running.set(key, (running.get(key) ?? 0) + 1);
        try {
          const place = workspace(context);
          const root = await place.realRoot();
          const result = await runSandboxed(command, root, {
            timeoutMs: timeoutSeconds * 1000, cpuSeconds: settings.cpuSeconds, memoryBytes: settings.memoryMB * MB, processes: settings.processes,
            fileBytes: settings.fileMB * MB, tmpBytes: settings.tmpMB * MB, outputBytes: settings.outputBytes, network: settings.network, workspaceBytes: settings.workspaceMB * MB,
          });
          context.logger.info({ caller: context.caller, exitCode: result.exitCode, signal: result.signal, timedOut: result.timedOut, stopped: result.stopped, ms: result.durationMs }, 'exec ran a command in the sandbox');
          const note = result.timedOut ? `stopped after ${timeoutSeconds} s of wall time`
            : result.truncated ? `stopped after ${settings.outputBytes} bytes of output`
              : result.stopped === 'workspace' ? `stopped: the workspace holds more than tools.exec.workspaceMB (${settings.workspaceMB} MB); remove files to make room`
                : result.stopped === 'memory' ? `a process was stopped: the command used more than tools.exec.memoryMB (${settings.memoryMB} MB) together`
                  : undefined;
          return { ...result, ...(note ? { note } : {}) };
        } finally {
          for (const key of keys) {
            const left = (running.get(key) ?? 1) - 1;
            if (left > 0) running.set(key, left);
            else running.delete(key);
          }
        }
      },
    });
    return { workspaceOf };
  },
});
