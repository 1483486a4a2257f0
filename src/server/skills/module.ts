/**
 * Skills (the Agent Skills format) an operator adds to the profile and an
 * agent may use where `agents.<id>.skills` names them (or `*`). The model is
 * shown each usable skill's name and description; `skills.load` hands it the
 * instructions; the files tools read a skill under `skills/<name>/`
 * (read-only) and exec sees it there too, bound read-only into the sandbox,
 * so its scripts run only as exec runs anything. An agent may write a skill
 * (`skills.write`): it waits as a draft until an operator approves it.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { SKILL_LIMITS, SKILL_NAME, type SkillFile } from '../../shared/skills.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule } from '../kernel/module.ts';
import { SkillLibrary } from './library.ts';

export interface Skills {
  /** Names of the installed skills an agent may use (its agents.<id>.skills, `*` for all). */
  usable(agentId?: string): Promise<string[]>;
  /** Where an installed skill's files are, or undefined. */
  folderOf(name: string): Promise<string | undefined>;
  /** What the model is told of an agent's skills, or '' when it has none. */
  promptFor(agentId?: string): Promise<string>;
}

/** An upload on its way (files sent in parts, each under the frame limit), kept a few minutes. */
interface Upload {
  files: SkillFile[];
  bytes: number;
  expires: number;
  device: string;
}
const UPLOAD_TTL_MS = 10 * 60_000;
const MAX_UPLOADS = 8;
const MAX_DRAFTS = 50;

export default defineModule<Skills>({
  id: 'skills',
  setup(ctx) {
    const library = new SkillLibrary(join(ctx.daemon.paths.dir, 'skills'));
    ctx.onStart(() => library.sweep());
    const uploads = new Map<string, Upload>();

    /** The agent a call acts for: the one named, else the default one (runtime.defaultAgent, else "default", else the first). */
    const agentOf = (agentId?: string): string | undefined => {
      const config = ctx.config();
      if (agentId && Object.hasOwn(config.agents, agentId)) return agentId;
      if (agentId) return undefined;
      const { defaultAgent } = config.runtime;
      if (defaultAgent && Object.hasOwn(config.agents, defaultAgent)) return defaultAgent;
      return Object.hasOwn(config.agents, 'default') ? 'default' : Object.keys(config.agents)[0];
    };
    const usable = async (agentId?: string): Promise<string[]> => {
      const id = agentOf(agentId);
      const wanted = id ? ctx.config().agents[id]!.skills ?? [] : [];
      if (wanted.length === 0) return [];
      const installed = await library.names();
      return wanted.includes('*') ? installed : installed.filter((name) => wanted.includes(name));
    };

    ctx.rpc.method({
      name: 'skills.upload',
      handler: ({ upload, files }, client) => {
        const now = Date.now();
        for (const [id, entry] of uploads) if (entry.expires < now) uploads.delete(id);
        let entry = upload ? uploads.get(upload) : undefined;
        if (upload && (!entry || entry.device !== client.deviceId)) throw new DomainError('not_found', `No upload ${upload} is open (they last ${UPLOAD_TTL_MS / 60_000} minutes): send the skill again.`, { code: 'upload_not_found' });
        if (!entry) {
          if (uploads.size >= MAX_UPLOADS) throw new DomainError('rate_limited', `${MAX_UPLOADS} skill uploads are open already; try again in a few minutes.`, { headers: { 'retry-after': '60' } });
          entry = { files: [], bytes: 0, expires: now + UPLOAD_TTL_MS, device: client.deviceId };
          upload = `up_${randomBytes(12).toString('base64url')}`;
          uploads.set(upload, entry);
        }
        for (const file of files) {
          const data = Buffer.from(file.data, 'base64');
          entry.bytes += data.length;
          if (entry.bytes > SKILL_LIMITS.totalBytes || entry.files.length >= SKILL_LIMITS.files) {
            uploads.delete(upload!);
            throw new DomainError('too_large', `The skill is larger than ${SKILL_LIMITS.totalBytes / 1024 / 1024} MB or ${SKILL_LIMITS.files} files.`, { code: 'bad_skill' });
          }
          entry.files.push({ path: file.path, data, executable: file.executable === true });
        }
        entry.expires = now + UPLOAD_TTL_MS;
        return { upload: upload!, files: entry.files.length, bytes: entry.bytes };
      },
    });
    ctx.rpc.method({
      name: 'skills.install',
      handler: async ({ upload, source, replace }, client) => {
        const entry = uploads.get(upload);
        if (!entry || entry.device !== client.deviceId) throw new DomainError('not_found', `No upload ${upload} is open: send the skill again.`, { code: 'upload_not_found' });
        uploads.delete(upload);
        const manifest = await library.write(entry.files, { draft: false, replace: replace === true, source: source ?? 'uploaded', by: `device:${client.deviceId}` });
        void ctx.store.audit('skill.installed', { actor: client.deviceId, subject: manifest.name, address: client.address, detail: { source: source ?? 'uploaded', files: entry.files.length, bytes: entry.bytes } });
        return (await library.view(manifest.name))!;
      },
    });
    ctx.rpc.method({
      name: 'skills.list',
      handler: async () => {
        const views = async (draft: boolean) => (await Promise.all((await library.names(draft)).map((name) => library.view(name, draft).catch(() => undefined)))).filter((view) => view !== undefined);
        return { skills: await views(false), drafts: await views(true) };
      },
    });
    ctx.rpc.method({
      name: 'skills.show',
      handler: async ({ name, draft }) => {
        const found = await library.read(name, draft === true);
        if (!found) throw new DomainError('not_found', `No skill named ${name}${draft ? ' waits for approval' : ' is installed'}: gateway skills list`, { code: 'skill_not_found' });
        const view = (await library.view(name, draft === true))!;
        const agents = Object.entries(ctx.config().agents).filter(([, settings]) => (settings.skills ?? []).some((wanted) => wanted === '*' || wanted === name)).map(([id]) => id);
        const { manifest } = found;
        return {
          ...view, instructions: manifest.instructions, entries: found.files, agents,
          ...(manifest.license ? { license: manifest.license } : {}), ...(manifest.compatibility ? { compatibility: manifest.compatibility } : {}),
          ...(manifest.allowedTools ? { allowedTools: manifest.allowedTools } : {}),
        };
      },
    });
    ctx.rpc.method({
      name: 'skills.remove',
      handler: async ({ name, draft }, client) => {
        const removed = await library.remove(name, draft === true);
        if (!removed) throw new DomainError('not_found', `No skill named ${name}${draft ? ' waits for approval' : ' is installed'}: gateway skills list`, { code: 'skill_not_found' });
        void ctx.store.audit(draft ? 'skill.rejected' : 'skill.removed', { actor: client.deviceId, subject: name, address: client.address });
        return { name, removed };
      },
    });
    ctx.rpc.method({
      name: 'skills.approve',
      handler: async ({ name }, client) => {
        await library.approve(name, `device:${client.deviceId}`);
        void ctx.store.audit('skill.approved', { actor: client.deviceId, subject: name, address: client.address });
        return (await library.view(name))!;
      },
    });

    ctx.tools.add({
      name: 'skills.load',
      description: 'Load a skill\'s instructions (one of the skills listed for you). Its files are then readable under skills/<name>/ with the files tools, and its scripts run with exec from skills/<name>/.',
      inputSchema: { type: 'object', additionalProperties: false, required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 64 } } },
      handler: async (args, context) => {
        const name = String(args.name);
        const allowed = await usable(context.agent);
        if (!allowed.includes(name)) {
          throw new DomainError('not_found', allowed.length ? `No skill named ${name} is available to this agent; it may use: ${allowed.join(', ')}.` : 'This agent may use no skill (agents.<id>.skills).', { code: 'skill_not_found' });
        }
        const found = await library.read(name);
        if (!found) throw new DomainError('not_found', `The skill ${name} was removed.`, { code: 'skill_not_found' });
        return { name, description: found.manifest.description, location: `skills/${name}/`, files: found.files.map((file) => file.path), instructions: found.manifest.instructions };
      },
    });
    ctx.tools.add({
      name: 'skills.write',
      description: 'Propose a new skill from what you just did: a name, a description of when to use it, Markdown instructions and optional files (scripts/, references/, assets/). It is kept as a draft until an operator approves it (gateway skills approve <name>).',
      external: 'it proposes a skill for an operator to approve',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['name', 'description', 'instructions'],
        properties: {
          name: { type: 'string', minLength: 1, maxLength: 64 },
          description: { type: 'string', minLength: 1, maxLength: SKILL_LIMITS.descriptionChars },
          instructions: { type: 'string', minLength: 1, maxLength: 100_000 },
          files: {
            type: 'array', maxItems: 50,
            items: { type: 'object', additionalProperties: false, required: ['path', 'content'], properties: { path: { type: 'string', minLength: 1, maxLength: 512 }, content: { type: 'string', maxLength: 1_000_000 }, executable: { type: 'boolean' } } },
          },
        },
      },
      handler: async (args, context) => {
        const name = String(args.name);
        if (!SKILL_NAME.test(name)) throw new DomainError('invalid', `${JSON.stringify(name.slice(0, 80))} is not a skill name: lowercase letters, digits and single hyphens.`, { code: 'bad_skill' });
        if ((await library.names(true)).length >= MAX_DRAFTS && !(await library.names(true)).includes(name)) {
          throw new DomainError('conflict', `${MAX_DRAFTS} skills wait for approval already; an operator must approve or reject some first.`, { code: 'too_many_drafts' });
        }
        const front = dump({ name, description: String(args.description) }, { lineWidth: -1 });
        const files: SkillFile[] = [{ path: 'SKILL.md', data: Buffer.from(`---\n${front}---\n\n${String(args.instructions).trim()}\n`), executable: false }];
        for (const file of (args.files ?? []) as { path: string; content: string; executable?: boolean }[]) {
          if (file.path === 'SKILL.md') throw new DomainError('invalid', 'SKILL.md is written from name, description and instructions; give the other files.', { code: 'bad_skill' });
          files.push({ path: file.path, data: Buffer.from(file.content), executable: file.executable === true });
        }
        const by = context.agent ? `agent:${context.agent}` : context.caller;
        // A draft stays as it was written until an operator approves or rejects it: what they read before approving is what they approve.
        await library.write(files, { draft: true, replace: false, source: `written by ${by}`, by });
        void ctx.store.audit('skill.drafted', { actor: by, subject: name, detail: { files: files.length } });
        ctx.log.info({ skill: name, by }, 'an agent proposed a skill; it waits for an operator');
        return { name, status: 'draft', note: `Kept as a draft until an operator approves it: gateway skills approve ${name}` };
      },
    });

    return {
      usable,
      folderOf: (name) => library.folderOf(name),
      async promptFor(agentId) {
        const names = await usable(agentId);
        if (names.length === 0) return '';
        const lines = await Promise.all(names.map(async (name) => {
          const view = await library.view(name).catch(() => undefined);
          return view ? `- ${name}: ${view.description.replace(/\s+/g, ' ')}` : undefined;
        }));
        const listed = lines.filter(Boolean);
        if (listed.length === 0) return '';
        return `Skills you can use (load one with skills.load before you follow it; its files are under skills/<name>/):\n${listed.join('\n')}`;
      },
    };
  },
});
