/**
 * Skills in the open Agent Skills format: a folder holding SKILL.md (YAML
 * front matter with `name` and `description`, then Markdown instructions) and
 * optionally scripts/, references/ and assets/. What makes a skill whole, and
 * its bounds, checked by the CLI before it sends one and again by the daemon
 * before it keeps one: nothing in a skill is ever run to install it.
 */
import { load } from 'js-yaml';

export const SKILL_LIMITS = {
  /** Bytes of all its files together. */
  totalBytes: 8 * 1024 * 1024,
  /** Bytes of one file. */
  fileBytes: 4 * 1024 * 1024,
  files: 500,
  /** Folders deep, under the skill's own. */
  depth: 8,
  /** Bytes of SKILL.md. */
  instructionsBytes: 256 * 1024,
  descriptionChars: 1024,
} as const;

/** A skill's name: lowercase letters, digits and single hyphens, at most 64 characters (the format's rule). */
export const SKILL_NAME = /^[a-z0-9](?:[a-z0-9]|-(?!-)){0,62}[a-z0-9]$|^[a-z0-9]$/;

/** One file of a skill, as sent and kept: a relative path of plain names, its bytes, whether it may be run. */
export interface SkillFile {
  path: string;
  data: Buffer;
  executable: boolean;
}

export interface SkillManifest {
  name: string;
  description: string;
  license?: string;
  compatibility?: string;
  /** The tools the skill says it needs (informational: the agent's own tool rules decide). */
  allowedTools?: string;
  metadata?: Record<string, string>;
  /** The Markdown after the front matter: what `skills.load` hands the model. */
  instructions: string;
}

export class SkillProblem extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SkillProblem';
  }
}

/** A path inside a skill: plain names joined by slashes, none of them empty, `.`, `..` or hidden control characters. */
export function checkSkillPath(path: string): string {
  const parts = path.split('/');
  if (path.length === 0 || path.length > 1024 || parts.length > SKILL_LIMITS.depth + 1) throw new SkillProblem(`The path ${JSON.stringify(path.slice(0, 200))} is empty, too long or too deep (at most ${SKILL_LIMITS.depth} folders).`);
  for (const part of parts) {
    // eslint-disable-next-line no-control-regex
    if (part === '' || part === '.' || part === '..' || Buffer.byteLength(part) > 255 || /[\u0000-\u001f\u007f\\]/.test(part)) {
      throw new SkillProblem(`The path ${JSON.stringify(path.slice(0, 200))} is not a plain relative path inside the skill.`);
    }
  }
  return path;
}

/** Reads SKILL.md: its front matter checked, its instructions kept. */
export function parseSkill(text: string, folderName?: string): SkillManifest {
  if (Buffer.byteLength(text) > SKILL_LIMITS.instructionsBytes) throw new SkillProblem(`SKILL.md is larger than ${SKILL_LIMITS.instructionsBytes / 1024} KB.`);
  const match = /^\uFEFF?---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)([\s\S]*)$/.exec(text);
  if (!match) throw new SkillProblem('SKILL.md must start with YAML front matter between --- lines, naming the skill and describing it (name: ..., description: ...).');
  let front: unknown;
  try {
    front = load(match[1]!);
  } catch (error) {
    throw new SkillProblem(`SKILL.md's front matter is not valid YAML: ${(error as Error).message.split('\n')[0]}.`);
  }
  if (!front || typeof front !== 'object' || Array.isArray(front)) throw new SkillProblem('SKILL.md\'s front matter must be a mapping with name and description.');
  const fields = front as Record<string, unknown>;
  const { name, description, license, compatibility, metadata } = fields;
  const allowedTools = fields['allowed-tools'];
  if (typeof name !== 'string' || !SKILL_NAME.test(name)) {
    throw new SkillProblem(`The skill's name ${typeof name === 'string' ? JSON.stringify(name.slice(0, 80)) : '(missing)'} must be 1-64 lowercase letters, digits and single hyphens, not starting or ending with a hyphen.`);
  }
  if (folderName !== undefined && folderName !== name) throw new SkillProblem(`The skill is named ${name} but its folder is ${JSON.stringify(folderName.slice(0, 80))}: the two must match.`);
  if (typeof description !== 'string' || description.trim().length === 0) throw new SkillProblem('The skill needs a description: what it does and when to use it.');
  if (description.length > SKILL_LIMITS.descriptionChars) throw new SkillProblem(`The skill's description is longer than ${SKILL_LIMITS.descriptionChars} characters.`);
  for (const [field, value] of [['license', license], ['compatibility', compatibility], ['allowed-tools', allowedTools]] as const) {
    if (value !== undefined && (typeof value !== 'string' || value.length > 1024)) throw new SkillProblem(`The skill's ${field} must be text of at most 1024 characters.`);
  }
  let kept: Record<string, string> | undefined;
  if (metadata !== undefined) {
    if (!metadata || typeof metadata !== 'object' || Array.isArray(metadata)) throw new SkillProblem('The skill\'s metadata must be a mapping of names to text.');
    kept = {};
    for (const [key, value] of Object.entries(metadata as Record<string, unknown>).slice(0, 50)) {
      // Scalars only: a nested value (aliases can make one vast when written out) is refused, never expanded.
      if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') throw new SkillProblem(`The skill's metadata.${key.slice(0, 100)} must be text.`);
      kept[key.slice(0, 100)] = String(value).slice(0, 1024);
    }
  }
  return {
    name, description: description.trim(), instructions: match[2]!.trim(),
    ...(typeof license === 'string' ? { license } : {}), ...(typeof compatibility === 'string' ? { compatibility } : {}),
    ...(typeof allowedTools === 'string' ? { allowedTools } : {}), ...(kept ? { metadata: kept } : {}),
  };
}

/** Checks a whole skill's files (paths, counts, sizes, SKILL.md at its top); returns its manifest. */
export function checkSkill(files: readonly SkillFile[], folderName?: string): SkillManifest {
  if (files.length > SKILL_LIMITS.files) throw new SkillProblem(`The skill has more than ${SKILL_LIMITS.files} files.`);
  const seen = new Set<string>();
  let total = 0;
  for (const file of files) {
    checkSkillPath(file.path);
    if (seen.has(file.path)) throw new SkillProblem(`The skill holds ${file.path} twice.`);
    seen.add(file.path);
    if (file.data.length > SKILL_LIMITS.fileBytes) throw new SkillProblem(`${file.path} is larger than ${SKILL_LIMITS.fileBytes / 1024 / 1024} MB.`);
    total += file.data.length;
    if (total > SKILL_LIMITS.totalBytes) throw new SkillProblem(`The skill is larger than ${SKILL_LIMITS.totalBytes / 1024 / 1024} MB.`);
  }
  // A file may not also be a folder of others (a/b and a/b/c).
  for (const path of seen) {
    const parts = path.split('/');
    for (let depth = 1; depth < parts.length; depth++) {
      if (seen.has(parts.slice(0, depth).join('/'))) throw new SkillProblem(`${parts.slice(0, depth).join('/')} is both a file and a folder.`);
    }
  }
  const skill = files.find((file) => file.path === 'SKILL.md');
  if (!skill) throw new SkillProblem('The skill has no SKILL.md at its top.');
  return parseSkill(skill.data.toString('utf8'), folderName);
}
