/**
 * An agent's skills as the files tools and exec see them: under skills/<name>/
 * (also ./skills/, /workspace/skills/), read-only, in place of the
 * workspace's own folder of that name, for an agent that has skills.
 */
import { constants } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import { DomainError } from '../kernel/errors.ts';
import type { ToolContext } from '../kernel/module.ts';
import type { Skills } from '../skills/module.ts';
import { Workspace } from './workspace.ts';

export type SkillLookup = Pick<Skills, 'usable' | 'folderOf'>;

/** A path under skills/ of an agent that has skills: the skill named and the rest; undefined for any other path. */
export async function inSkills(skills: SkillLookup, path: string, context: ToolContext): Promise<{ name?: string; rest: string; usable: string[] } | undefined> {
  const match = /^(?:\.\/|\/workspace\/)?skills(?:\/+([^/]+))?(?:\/+(.*))?$/.exec(path);
  if (!match) return undefined;
  const usable = await skills.usable(context.agent);
  if (usable.length === 0) return undefined;
  return { ...(match[1] ? { name: match[1] } : {}), rest: match[2] || '.', usable };
}

/** A skill's own folder as a workspace to read (a skill the agent may not use is not there for it). */
export async function skillPlace(skills: SkillLookup, found: { name?: string; usable: string[] }): Promise<Workspace> {
  const folder = found.name && found.usable.includes(found.name) ? await skills.folderOf(found.name) : undefined;
  if (!folder) throw new DomainError('not_found', `No skill ${found.name ?? ''} is available to this agent under skills/; it may use: ${found.usable.join(', ')}.`, { code: 'skill_not_found' });
  return new Workspace(folder);
}

export const readOnlySkill = () => new DomainError('forbidden', 'Skills are read-only: files under skills/ cannot be written or edited (an agent proposes a skill with skills.write).', { code: 'skill_read_only' });

/**
 * An agent's skills bound read-only into its sandbox at /workspace/skills/<name>, the folder they hang in made in the
 * workspace if it is not there (opened without following a link and opened up through its descriptor: a command may have
 * put a link in its place).
 */
export async function skillBinds(skills: SkillLookup, agentId: string | undefined, root: string): Promise<{ source: string; target: string }[]> {
  const binds: { source: string; target: string }[] = [];
  for (const name of await skills.usable(agentId)) {
    const folder = await skills.folderOf(name);
    if (folder) binds.push({ source: folder, target: `/workspace/skills/${name}` });
  }
  if (binds.length) {
    const hanger = join(root, 'skills');
    if (await mkdir(hanger, { mode: 0o755 }).then(() => true, () => false)) {
      const folder = await open(hanger, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW).catch(() => undefined);
      await folder?.chmod(0o755).finally(() => folder.close());
    }
  }
  return binds;
}
