/** web.fetch (public addresses only, bounded) and files.* (within the calling agent's workspace). */
import type { GatewayConfig } from '../../shared/config/types.ts';
import { gatewayVersion } from '../../shared/version.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ToolDef } from '../kernel/module.ts';
import { systemResolver } from './address-guard.ts';
import { fetchPage } from './web-fetch.ts';
import { FILE_LIMITS } from './workspace.ts';
import type { Workspaces } from './workspaces.ts';

const PATH = { type: 'string', minLength: 1, maxLength: 4096 } as const;

export function webFetchTool(config: () => GatewayConfig): ToolDef {
  return {
    name: 'web.fetch',
    description: 'Fetch a public web page (http or https) and read it as Markdown (text and JSON as they are). Private, loopback and link-local addresses are refused.',
    inputSchema: {
      type: 'object', additionalProperties: false, required: ['url'],
      properties: { url: { type: 'string', minLength: 1, maxLength: 4096 }, maxBytes: { type: 'integer', minimum: 1024, maximum: 50 * 1024 * 1024 } },
    },
    handler: async (args) => {
      const web = config().tools.web;
      return fetchPage(String(args.url), {
        maxBytes: Math.min(Number(args.maxBytes ?? web.maxBytes), web.maxBytes), timeoutMs: web.timeoutMs, maxRedirects: web.maxRedirects,
        allowPrivate: web.allowPrivate, userAgent: `gateway/${gatewayVersion()} (web.fetch)`,
      }, systemResolver);
    },
  };
}

export function fileTools(workspaces: Pick<Workspaces, 'for'>): ToolDef[] {
  return [{
    name: 'files.read',
    description: 'Read a text file of the workspace (up to 1 MB).',
    inputSchema: { type: 'object', additionalProperties: false, required: ['path'], properties: { path: PATH } },
    handler: (args, context) => workspaces.for(context).read(String(args.path)),
  }, {
    name: 'files.list',
    description: 'List a folder of the workspace (default its top), to a depth of 1-5.',
    inputSchema: { type: 'object', additionalProperties: false, properties: { path: PATH, depth: { type: 'integer', minimum: 1, maximum: FILE_LIMITS.maxDepth } } },
    handler: (args, context) => workspaces.for(context).list(args.path === undefined ? '.' : String(args.path), Number(args.depth ?? 1)),
  }, {
    name: 'files.write',
    description: 'Write a whole text file in the workspace (created with its folders, or replaced), up to 1 MB.',
    dangerous: true, external: 'it writes files in the agent\'s workspace',
    inputSchema: { type: 'object', additionalProperties: false, required: ['path', 'content'], properties: { path: PATH, content: { type: 'string', maxLength: FILE_LIMITS.maxBytes } } },
    handler: (args, context) => workspaces.for(context).write(String(args.path), String(args.content)),
  }, {
    name: 'files.edit',
    description: 'Replace text in a workspace file: oldText must occur exactly once (or give all: true to replace every occurrence).',
    dangerous: true, external: 'it changes files in the agent\'s workspace',
    inputSchema: {
      type: 'object', additionalProperties: false, required: ['path', 'oldText', 'newText'],
      properties: { path: PATH, oldText: { type: 'string', minLength: 1, maxLength: FILE_LIMITS.maxBytes }, newText: { type: 'string', maxLength: FILE_LIMITS.maxBytes }, all: { type: 'boolean' } },
    },
    handler: (args, context) => {
      if (typeof args.oldText !== 'string' || typeof args.newText !== 'string') throw new DomainError('invalid', 'oldText and newText are text.');
      return workspaces.for(context).edit(String(args.path), args.oldText, args.newText, args.all === true);
    },
  }];
}
