/** web.fetch (public addresses only, bounded) and files.* (within the calling agent's workspace). */
import type { GatewayConfig } from '../../shared/config/types.ts';
import { gatewayVersion } from '../../shared/version.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ToolDef } from '../kernel/module.ts';
import { systemResolver } from './address-guard.ts';
import { fetchPage } from './web-fetch.ts';
import { FILE_LIMITS } from './workspace.ts';
import type { Workspaces } from './workspaces.ts';
import { inSkills, readOnlySkill, skillPlace, type SkillLookup } from './skill-files.ts';

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

/** An agent without skills sees its workspace alone. */
const NO_SKILLS: SkillLookup = { usable: async () => [], folderOf: async () => undefined };

export function fileTools(workspaces: Pick<Workspaces, 'for'>, skills: SkillLookup = NO_SKILLS): ToolDef[] {
  return [{
    name: 'files.read',
    description: 'Read a text file of the workspace (up to 1 MB).',
    inputSchema: { type: 'object', additionalProperties: false, required: ['path'], properties: { path: PATH } },
    handler: async (args, context) => {
      const skill = await inSkills(skills, String(args.path), context);
      if (!skill) return workspaces.for(context).read(String(args.path));
      const read = await (await skillPlace(skills, skill)).read(skill.rest);
      return { ...read, path: `skills/${skill.name}/${read.path}` };
    },
  }, {
    name: 'files.list',
    description: 'List a folder of the workspace (default its top), to a depth of 1-5.',
    inputSchema: { type: 'object', additionalProperties: false, properties: { path: PATH, depth: { type: 'integer', minimum: 1, maximum: FILE_LIMITS.maxDepth } } },
    handler: async (args, context) => {
      const path = args.path === undefined ? '.' : String(args.path);
      const skill = await inSkills(skills, path, context);
      if (!skill) return workspaces.for(context).list(path, Number(args.depth ?? 1));
      if (!skill.name) return { path: 'skills', entries: skill.usable.map((name) => ({ path: `skills/${name}`, type: 'folder' as const, bytes: null })), truncated: false };
      const listed = await (await skillPlace(skills, skill)).list(skill.rest, Number(args.depth ?? 1));
      const prefix = (entry: string) => `skills/${skill.name}/${entry}`.replace(/\/\.$/, '');
      return { ...listed, path: prefix(listed.path), entries: listed.entries.map((entry) => ({ ...entry, path: prefix(entry.path) })) };
    },
  }, {
    name: 'files.write',
    description: 'Write a whole text file in the workspace (created with its folders, or replaced), up to 1 MB.',
    dangerous: true, external: 'it writes files in the agent\'s workspace',
    inputSchema: { type: 'object', additionalProperties: false, required: ['path', 'content'], properties: { path: PATH, content: { type: 'string', maxLength: FILE_LIMITS.maxBytes } } },
    handler: async (args, context) => {
      if (await inSkills(skills, String(args.path), context)) throw readOnlySkill();
      return workspaces.for(context).write(String(args.path), String(args.content));
    },
  }, {
    name: 'files.edit',
    description: 'Replace text in a workspace file: oldText must occur exactly once (or give all: true to replace every occurrence).',
    dangerous: true, external: 'it changes files in the agent\'s workspace',
    inputSchema: {
      type: 'object', additionalProperties: false, required: ['path', 'oldText', 'newText'],
      properties: { path: PATH, oldText: { type: 'string', minLength: 1, maxLength: FILE_LIMITS.maxBytes }, newText: { type: 'string', maxLength: FILE_LIMITS.maxBytes }, all: { type: 'boolean' } },
    },
    handler: async (args, context) => {
      if (typeof args.oldText !== 'string' || typeof args.newText !== 'string') throw new DomainError('invalid', 'oldText and newText are text.');
      if (await inSkills(skills, String(args.path), context)) throw readOnlySkill();
      return workspaces.for(context).edit(String(args.path), args.oldText, args.newText, args.all === true);
    },
  }];
}
