/**
 * The built-in tools that make an agent useful, contained: web.fetch (public
 * addresses only, bounded) and files.* (one workspace folder per agent).
 * Called by an agent, they act in its workspace; over POST /tools/invoke or
 * the WebSocket, in the default agent's (or, with no agent, the profile's own
 * `workspace` folder).
 */
import { join } from 'node:path';
import { gatewayVersion } from '../../shared/version.ts';
import agentsModule from '../agents/module.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule, type ToolContext } from '../kernel/module.ts';
import { systemResolver, type Resolver } from './address-guard.ts';
import { fetchPage } from './web-fetch.ts';
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
    // Tests of the address guard stub the resolver; the daemon resolves for real.
    const resolver: Resolver = systemResolver;

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
    /** The workspace a call acts in: the calling agent's, else the default agent's. */
    const workspace = (context: ToolContext) => new Workspace(workspaceOf(context.surface === 'agent' && context.caller.startsWith('agent:') ? context.caller.slice('agent:'.length) : undefined));

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
        }, resolver);
      },
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
    return { workspaceOf };
  },
});
