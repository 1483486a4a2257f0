/**
 * files.*: reading and changing files inside one folder, an agent's
 * workspace. A path is resolved with every symlink followed before it is
 * checked, so `..`, absolute paths and links that lead out are refused;
 * writes go to a temporary file beside the target and are renamed over it,
 * so a file is never seen half-written.
 */
import { randomBytes } from 'node:crypto';
import { chown, lstat, mkdir, open, readdir, realpath, rename, rm, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { DomainError } from '../kernel/errors.ts';

export const FILE_LIMITS = {
  /** Largest file read or written whole. */
  maxBytes: 1024 * 1024,
  /** Most entries files.list answers. */
  maxEntries: 1000,
  maxDepth: 5,
} as const;

const outside = (path: string) => new DomainError('forbidden', `${path} is outside the workspace; files.* reach only the agent's workspace folder.`, { code: 'outside_workspace' });
const missing = (path: string) => new DomainError('not_found', `No file ${path} in the workspace.`);

export class Workspace {
  readonly root: string;
  /** Who owns what is made here (a root daemon's sandbox runs commands as an unprivileged user, who must reach the files). */
  private readonly owner?: { uid: number; gid: number };

  constructor(root: string, owner?: { uid: number; gid: number }) {
    this.root = resolve(root);
    this.owner = owner;
  }

  /** The workspace's real path, made (and owned as it should be) if it is not there. */
  async realRoot(): Promise<string> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    if (this.owner) await chown(this.root, this.owner.uid, this.owner.gid);
    return realpath(this.root);
  }

  /** Gives the folders just made (from the first made down to the last) to the owner. */
  private async own(first: string | undefined, last: string): Promise<void> {
    if (!first || !this.owner) return;
    for (let folder = last; ; folder = dirname(folder)) {
      await chown(folder, this.owner.uid, this.owner.gid);
      if (folder === first || folder === dirname(folder)) break;
    }
  }

  /** A path as the workspace shows it: relative to its root, with forward slashes. */
  private shown(root: string, real: string): string {
    return relative(root, real).split(sep).join('/') || '.';
  }

  /**
   * Where a path really is, checked: the path resolved under the root, the
   * longest part of it that exists resolved with its symlinks, and the result
   * inside the root's real path. `exists` says whether the whole path exists.
   */
  async locate(path: string): Promise<{ root: string; real: string; exists: boolean }> {
    if (typeof path !== 'string' || path.length === 0 || path.length > 4096 || path.includes('\0')) throw new DomainError('invalid', 'A path is 1-4096 characters without NUL.');
    const root = await this.realRoot();
    const wanted = isAbsolute(path) ? resolve(path) : resolve(root, path);
    // An absolute path is taken only when it names a place in the workspace (by its given or its real root).
    if (isAbsolute(path) && !within(this.root, wanted) && !within(root, wanted)) throw outside(path);
    const relativePart = within(this.root, wanted) && !within(root, wanted) ? relative(this.root, wanted) : relative(root, wanted);
    if (relativePart.startsWith('..') || isAbsolute(relativePart)) throw outside(path);
    // Resolve from the root down, following each link as it comes; what does not exist yet stays as named.
    let real = root;
    const parts = relativePart.split(sep).filter((part) => part && part !== '.');
    for (let index = 0; index < parts.length; index++) {
      const next = join(real, parts[index]!);
      try {
        real = await realpath(next);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        // A dangling link is not a new file: where it points decides.
        const link = await lstat(next).catch(() => undefined);
        if (link?.isSymbolicLink()) throw outside(path);
        real = join(next, ...parts.slice(index + 1));
        if (!within(root, real)) throw outside(path);
        return { root, real, exists: false };
      }
      if (!within(root, real)) throw outside(path);
    }
    return { root, real, exists: true };
  }

  async read(path: string, maxBytes = FILE_LIMITS.maxBytes): Promise<{ path: string; content: string; bytes: number; truncated: boolean }> {
    const { root, real, exists } = await this.locate(path);
    if (!exists) throw missing(path);
    const info = await stat(real);
    if (info.isDirectory()) throw new DomainError('invalid', `${path} is a folder; files.list lists it.`);
    if (!info.isFile()) throw new DomainError('invalid', `${path} is not a regular file.`);
    const handle = await open(real, 'r');
    try {
      const size = Math.min(info.size, maxBytes);
      const buffer = Buffer.alloc(size);
      const { bytesRead } = await handle.read(buffer, 0, size, 0);
      const body = buffer.subarray(0, bytesRead);
      if (body.includes(0)) throw new DomainError('invalid', `${path} is a binary file; files.read reads text.`);
      return { path: this.shown(root, real), content: body.toString('utf8'), bytes: info.size, truncated: info.size > maxBytes };
    } finally {
      await handle.close();
    }
  }

  /** Writes a whole file atomically: a temporary file beside it, then renamed over it. */
  async write(path: string, content: string, options: { maxBytes?: number } = {}): Promise<{ path: string; bytes: number; created: boolean }> {
    const bytes = Buffer.byteLength(content, 'utf8');
    const maxBytes = options.maxBytes ?? FILE_LIMITS.maxBytes;
    if (bytes > maxBytes) throw new DomainError('too_large', `${bytes} bytes is more than a file may hold here (${maxBytes}).`);
    const { root, real, exists } = await this.locate(path);
    if (exists && (await stat(real)).isDirectory()) throw new DomainError('invalid', `${path} is a folder.`);
    await this.own(await mkdir(dirname(real), { recursive: true, mode: 0o700 }), dirname(real));
    // The folders just made are still inside (nothing could have linked them out in between that locate would not see again).
    if (!within(root, await realpath(dirname(real)))) throw outside(path);
    const temporary = join(dirname(real), `.${randomBytes(6).toString('hex')}.tmp`);
    const handle = await open(temporary, 'wx', 0o600);
    try {
      if (this.owner) await handle.chown(this.owner.uid, this.owner.gid);
      await handle.writeFile(content, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await rename(temporary, real);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
    return { path: this.shown(root, real), bytes, created: !exists };
  }

  /** Replaces text in a file: exactly one match, or every match with all. */
  async edit(path: string, oldText: string, newText: string, all = false): Promise<{ path: string; replacements: number; bytes: number }> {
    if (!oldText) throw new DomainError('invalid', 'oldText must not be empty.');
    const current = await this.read(path);
    if (current.truncated) throw new DomainError('too_large', `${path} is larger than files.edit changes (${FILE_LIMITS.maxBytes} bytes).`);
    const count = current.content.split(oldText).length - 1;
    if (count === 0) throw new DomainError('invalid', `${path} does not contain the text to replace.`);
    if (count > 1 && !all) throw new DomainError('invalid', `${path} contains the text to replace ${count} times; give more of it, or all: true.`);
    const next = all ? current.content.split(oldText).join(newText) : current.content.replace(oldText, () => newText);
    const written = await this.write(path, next);
    return { path: written.path, replacements: all ? count : 1, bytes: written.bytes };
  }

  async list(path = '.', depth = 1): Promise<{ path: string; entries: { path: string; type: 'file' | 'folder' | 'link' | 'other'; bytes: number | null }[]; truncated: boolean }> {
    const { root, real, exists } = await this.locate(path);
    if (!exists) throw missing(path);
    if (!(await stat(real)).isDirectory()) throw new DomainError('invalid', `${path} is a file; files.read reads it.`);
    const entries: { path: string; type: 'file' | 'folder' | 'link' | 'other'; bytes: number | null }[] = [];
    let truncated = false;
    const walk = async (folder: string, level: number): Promise<void> => {
      const names = (await readdir(folder, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
      for (const entry of names) {
        if (entries.length >= FILE_LIMITS.maxEntries) {
          truncated = true;
          return;
        }
        const full = join(folder, entry.name);
        const type = entry.isSymbolicLink() ? 'link' : entry.isDirectory() ? 'folder' : entry.isFile() ? 'file' : 'other';
        entries.push({ path: this.shown(root, full), type, bytes: type === 'file' ? (await stat(full)).size : null });
        // Links are listed, never followed: where they lead may be outside.
        if (type === 'folder' && level < depth) await walk(full, level + 1);
      }
    };
    await walk(real, 1);
    return { path: this.shown(root, real), entries, truncated };
  }
}

/** Whether a path is the folder or inside it. */
function within(folder: string, path: string): boolean {
  const rel = relative(folder, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}
