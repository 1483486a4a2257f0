/**
 * The profile's skills on disk: `skills/<name>/` for those installed,
 * `skills/.drafts/<name>/` for those an agent wrote and an operator has not
 * yet approved, `skills/.meta/<name>.json` for where each came from. A skill
 * is written whole into a folder of its own and renamed into place, so a
 * reader sees the old one or the new one, never half of either. Files are
 * readable by everyone (0644, scripts 0755) and folders 0755: the sandbox's
 * user reads them, bound read-only; nothing here is ever run.
 */
import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { checkSkill, parseSkill, SKILL_NAME, SkillProblem, type SkillFile, type SkillManifest } from '../../shared/skills.ts';
import type { SkillView } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';

interface Meta {
  source: string;
  installedAt: string;
  by?: string;
}

const problem = (error: unknown): never => {
  if (error instanceof SkillProblem) throw new DomainError('invalid', error.message, { code: 'bad_skill' });
  throw error;
};

export class SkillLibrary {
  readonly root: string;

  constructor(root: string) {
    this.root = root;
  }

  private place(name: string, draft: boolean): string {
    if (!SKILL_NAME.test(name)) throw new DomainError('invalid', `${JSON.stringify(name.slice(0, 80))} is not a skill name: lowercase letters, digits and single hyphens.`, { code: 'bad_skill' });
    return draft ? join(this.root, '.drafts', name) : join(this.root, name);
  }

  /** Where an installed skill's files are (for binding them read-only into a sandbox), or undefined. */
  async folderOf(name: string): Promise<string | undefined> {
    if (!SKILL_NAME.test(name)) return undefined;
    const folder = join(this.root, name);
    const info = await lstat(folder).catch(() => undefined);
    return info?.isDirectory() ? folder : undefined;
  }

  /** Checks a skill and writes it whole, in place of any of its name (when replace says so). */
  async write(files: readonly SkillFile[], options: { draft: boolean; replace: boolean; source: string; by?: string }): Promise<SkillManifest> {
    let manifest: SkillManifest;
    try {
      manifest = checkSkill(files);
    } catch (error) {
      return problem(error);
    }
    const target = this.place(manifest.name, options.draft);
    const exists = await lstat(target).then(() => true, () => false);
    if (exists && !options.replace) {
      throw new DomainError('conflict', options.draft
        ? `A skill named ${manifest.name} waits for approval already, kept as it was written until an operator approves it (gateway skills approve ${manifest.name}) or rejects it (gateway skills remove ${manifest.name} --draft); propose another under a new name.`
        : `A skill named ${manifest.name} is installed already: add it with --replace to replace it, or gateway skills remove ${manifest.name}.`, { code: 'skill_exists' });
    }
    const staging = join(this.root, `.staging-${randomBytes(6).toString('hex')}`);
    await mkdir(staging, { recursive: true, mode: 0o755 });
    try {
      const folders = new Set<string>();
      for (const file of files) {
        const path = join(staging, ...file.path.split('/'));
        for (let folder = dirname(path); folder !== staging && !folders.has(folder); folder = dirname(folder)) folders.add(folder);
        await mkdir(dirname(path), { recursive: true, mode: 0o755 });
        await writeFile(path, file.data, { flag: 'wx' });
        await chmod(path, file.executable ? 0o755 : 0o644);
      }
      // Open to the sandbox's user whatever the daemon's umask made of them.
      for (const folder of [staging, ...folders]) await chmod(folder, 0o755);
      await mkdir(dirname(target), { recursive: true, mode: 0o755 });
      if (exists) {
        const old = join(this.root, `.old-${randomBytes(6).toString('hex')}`);
        await rename(target, old);
        await rename(staging, target);
        await rm(old, { recursive: true, force: true });
      } else {
        await rename(staging, target);
      }
    } catch (error) {
      await rm(staging, { recursive: true, force: true });
      throw error;
    }
    await this.writeMeta(manifest.name, options.draft, { source: options.source, installedAt: new Date().toISOString(), ...(options.by ? { by: options.by } : {}) });
    return manifest;
  }

  private async writeMeta(name: string, draft: boolean, meta: Meta): Promise<void> {
    const folder = join(this.root, '.meta');
    await mkdir(folder, { recursive: true, mode: 0o700 });
    await writeFile(join(folder, `${draft ? 'draft.' : ''}${name}.json`), JSON.stringify(meta));
  }

  private async meta(name: string, draft: boolean): Promise<Meta | undefined> {
    try {
      return JSON.parse(await readFile(join(this.root, '.meta', `${draft ? 'draft.' : ''}${name}.json`), 'utf8')) as Meta;
    } catch {
      return undefined;
    }
  }

  /** A skill's manifest and files, or undefined when there is none of that name. */
  async read(name: string, draft = false): Promise<{ manifest: SkillManifest; files: { path: string; size: number; executable: boolean }[]; meta?: Meta } | undefined> {
    const folder = this.place(name, draft);
    let text: string;
    try {
      text = await readFile(join(folder, 'SKILL.md'), 'utf8');
    } catch {
      return undefined;
    }
    const files: { path: string; size: number; executable: boolean }[] = [];
    const walk = async (dir: string, prefix: string): Promise<void> => {
      for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
        const path = prefix ? `${prefix}/${entry.name}` : entry.name;
        if (entry.isDirectory()) await walk(join(dir, entry.name), path);
        else if (entry.isFile()) {
          const info = await lstat(join(dir, entry.name));
          files.push({ path, size: info.size, executable: (info.mode & 0o111) !== 0 });
        }
      }
    };
    await walk(folder, '');
    let manifest: SkillManifest;
    try {
      manifest = parseSkill(text);
    } catch (error) {
      return problem(error);
    }
    return { manifest, files, meta: await this.meta(name, draft) };
  }

  async view(name: string, draft = false): Promise<SkillView | undefined> {
    const found = await this.read(name, draft);
    if (!found) return undefined;
    return {
      name, description: found.manifest.description, status: draft ? 'draft' : 'installed', files: found.files.length,
      bytes: found.files.reduce((sum, file) => sum + file.size, 0), source: found.meta?.source ?? 'unknown', installedAt: found.meta?.installedAt ?? null,
      ...(found.meta?.by ? { by: found.meta.by } : {}),
    };
  }

  /** Names of the skills installed (or waiting as drafts), in order. */
  async names(draft = false): Promise<string[]> {
    const folder = draft ? join(this.root, '.drafts') : this.root;
    try {
      return (await readdir(folder, { withFileTypes: true })).filter((entry) => entry.isDirectory() && SKILL_NAME.test(entry.name)).map((entry) => entry.name).sort();
    } catch {
      return [];
    }
  }

  async remove(name: string, draft = false): Promise<boolean> {
    const folder = this.place(name, draft);
    const exists = await lstat(folder).then(() => true, () => false);
    if (!exists) return false;
    // Renamed away first: a reader sees the skill whole or not at all.
    const gone = join(this.root, `.old-${randomBytes(6).toString('hex')}`);
    await rename(folder, gone);
    await rm(gone, { recursive: true, force: true });
    await rm(join(this.root, '.meta', `${draft ? 'draft.' : ''}${name}.json`), { force: true });
    return true;
  }

  /** Moves a draft into the installed skills (replacing one of its name). */
  async approve(name: string, by: string): Promise<SkillManifest> {
    const draft = this.place(name, true);
    const found = await this.read(name, true);
    if (!found) throw new DomainError('not_found', `No skill named ${name} waits for approval: gateway skills list`, { code: 'skill_not_found' });
    const target = this.place(name, false);
    const exists = await lstat(target).then(() => true, () => false);
    if (exists) {
      const old = join(this.root, `.old-${randomBytes(6).toString('hex')}`);
      await rename(target, old);
      await rename(draft, target);
      await rm(old, { recursive: true, force: true });
    } else {
      await rename(draft, target);
    }
    await rm(join(this.root, '.meta', `draft.${name}.json`), { force: true });
    await this.writeMeta(name, false, { source: found.meta?.source ?? 'written by an agent', installedAt: new Date().toISOString(), by });
    return found.manifest;
  }

  /** Sweeps what an interrupted write left (staging folders, replaced skills). */
  async sweep(): Promise<void> {
    const entries = await readdir(this.root).catch(() => [] as string[]);
    await Promise.all(entries.filter((name) => name.startsWith('.staging-') || name.startsWith('.old-')).map((name) => rm(join(this.root, name), { recursive: true, force: true })));
  }
}
