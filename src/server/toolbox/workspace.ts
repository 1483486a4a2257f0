/**
 * files.*: reading and changing files inside one folder, an agent's
 * workspace, which a command in the exec sandbox may be changing at the same
 * moment. So a path is never checked and then opened again by name: it is
 * walked one name at a time from a descriptor held on the workspace's root,
 * each folder opened through the descriptor of the one above it
 * (/proc/self/fd/N/name, the kernel's openat) without following a link. A
 * link met on the way is read and resolved by the walk itself, as if the
 * workspace were the whole file system: a link that leads out of it is
 * refused, and renaming a folder or putting a link in its place meanwhile
 * changes nothing about what the walk holds. Only regular files are read or
 * written: a FIFO, socket or device is refused without opening it for
 * blocking I/O (files are opened non-blocking and checked by their
 * descriptor). Writes go to a temporary file beside the target and are
 * renamed over it, so a file is never seen half-written.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { chown, type FileHandle, link, lstat, mkdir, open, readdir, readlink, realpath, rename, rm } from 'node:fs/promises';
import { isAbsolute, posix, relative, resolve, sep } from 'node:path';
import type { WorkspaceBound } from '../../shared/workspace-image.ts';

import { DomainError, nameTooLong } from '../kernel/errors.ts';

/** A workspace in use: how its size is bounded, held mounted until left. */
export interface WorkspaceLease {
  bound: WorkspaceBound;
  leave(): void;
}

export const FILE_LIMITS = {
  /** Largest file read or written whole. */
  maxBytes: 1024 * 1024,
  /** Most entries files.list answers. */
  maxEntries: 1000,
  maxDepth: 5,
} as const;

/** Where the sandbox shows the workspace: links made by commands name it so. */
export const SANDBOX_WORKSPACE = '/workspace';

/** Links followed in one path at most, as the kernel's own limit (ELOOP). */
const MAX_LINKS = 40;
/** A name in a folder: the kernel's NAME_MAX, in bytes. */
const NAME_MAX = 255;

const FOLDER = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const READ = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
const CREATE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | constants.O_NOCTTY;

const outside = (path: string) => new DomainError('forbidden', `${path} is outside the workspace; files.* reach only the agent's workspace folder.`, { code: 'outside_workspace' });
const missing = (path: string) => new DomainError('not_found', `No file ${path} in the workspace.`);
const notRegular = (path: string) => new DomainError('invalid', `${path} is not a regular file (a FIFO, socket or device); files.* read and write regular files only.`, { code: 'not_regular_file' });

type EntryType = 'file' | 'folder' | 'link' | 'other';

/** A path through a folder held open: the name of an entry in it. */
interface Place {
  /** The folders held from the root down to the one holding the entry (the root first). */
  folders: FileHandle[];
  /** Their names below the root, as the workspace shows them. */
  names: string[];
  /** The entry's name in the last folder ('' for the root itself). */
  name: string;
}

/** What the walk found at the end of a path. */
interface Found extends Place {
  /** What the entry is, or undefined when nothing by that name exists. */
  type: EntryType | undefined;
}

/** The path of an entry in a held folder, resolved by the kernel through the descriptor, never by the folder's name. */
const at = (folder: FileHandle, name = ''): string => (name ? `/proc/self/fd/${folder.fd}/${name}` : `/proc/self/fd/${folder.fd}`);

const typeOf = (info: { isSymbolicLink(): boolean; isDirectory(): boolean; isFile(): boolean }): EntryType =>
  info.isSymbolicLink() ? 'link' : info.isDirectory() ? 'folder' : info.isFile() ? 'file' : 'other';

const code = (error: unknown) => (error as NodeJS.ErrnoException).code;

/** The real path of each workspace root seen (a root is the operator's setting, not something a command can move: the sandbox shows it as a mount point). */
const knownRoots = new Map<string, string>();

export class Workspace {
  readonly root: string;
  /** Who owns what is made here (a root daemon's sandbox runs commands as an unprivileged user, who must reach the files). */
  private readonly owner?: { uid: number; gid: number };
  /** Mounts the workspace's own file system where it has one, and holds it in use until left. */
  private readonly entered?: () => Promise<WorkspaceLease>;

  constructor(root: string, owner?: { uid: number; gid: number }, enter?: () => Promise<WorkspaceLease>) {
    this.root = resolve(root);
    this.owner = owner;
    this.entered = enter;
  }

  /**
   * Enters the workspace: its own file system mounted first where it has one,
   * and kept mounted (never unmounted to be grown) until the lease is left.
   */
  enter(): Promise<WorkspaceLease> {
    return this.entered?.() ?? Promise.resolve({ bound: { by: 'watch', reason: 'workspaces are plain folders here' }, leave: () => undefined });
  }

  /** Runs one files.* operation inside the workspace, a failure of the file system as the caller's error where it is one. */
  private async within<T>(path: string, run: () => Promise<T>): Promise<T> {
    const lease = await this.enter();
    try {
      return await guarded(path, run);
    } finally {
      lease.leave();
    }
  }

  /** The workspace's real path, made (and owned as it should be) if it is not there. */
  async realRoot(): Promise<string> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    if (this.owner) await chown(this.root, this.owner.uid, this.owner.gid);
    const real = await realpath(this.root);
    knownRoots.set(this.root, real);
    return real;
  }

  /** The root held open: by its real path known from before (made again if it went), else found and made now. */
  private async openRoot(): Promise<{ real: string; root: FileHandle }> {
    const known = knownRoots.get(this.root);
    if (known) {
      const root = await open(known, FOLDER).catch(() => undefined);
      if (root) return { real: known, root };
      knownRoots.delete(this.root);
    }
    const real = await this.realRoot();
    return { real, root: await open(real, FOLDER) };
  }

  /**
   * The names of a path below the root, or a refusal: a relative path is
   * taken as it is written (`..` never above the root), an absolute one only
   * when it names a place in the workspace by its given or real root, or by
   * /workspace as the sandbox shows it.
   */
  private parts(path: string, realRoot: string): string[] {
    if (typeof path !== 'string' || path.length === 0 || path.length > 4096 || path.includes('\0')) throw new DomainError('invalid', 'A path is 1-4096 characters without NUL.');
    const bases = [this.root, realRoot];
    let rest: string | undefined = path;
    if (isAbsolute(path)) {
      rest = undefined;
      for (const base of [...bases, SANDBOX_WORKSPACE]) {
        const rel = relative(base, resolve(path));
        if (rel === '' || (!rel.startsWith('..') && !isAbsolute(rel))) {
          rest = rel;
          break;
        }
      }
      if (rest === undefined) throw outside(path);
    }
    const names: string[] = [];
    for (const name of rest.split(sep)) {
      if (!name || name === '.') continue;
      if (name === '..') {
        if (names.length === 0) throw outside(path);
        names.pop();
        continue;
      }
      if (Buffer.byteLength(name) > NAME_MAX) throw nameTooLong();
      names.push(name);
    }
    return names;
  }

  /**
   * Walks a path from the root, holding each folder open, and says what is at
   * its end. Links are read and resolved inside the workspace (the last one
   * too unless `keepLast`); folders that do not exist are made when `make`
   * says so. The caller closes what the place holds (`release`).
   */
  private async walk(path: string, options: { make?: boolean; keepLast?: boolean } = {}): Promise<Found> {
    const { real: realRoot, root } = await this.openRoot();
    const place: Found = { folders: [root], names: [], name: '', type: 'folder' };
    try {
      const queue = this.parts(path, realRoot);
      let links = 0;
      while (queue.length > 0) {
        const name = queue.shift()!;
        if (name === '..') {
          // Only from inside a link's target: up one held folder, never above the root.
          if (place.folders.length === 1) throw outside(path);
          await place.folders.pop()!.close();
          place.names.pop();
          continue;
        }
        const last = queue.length === 0;
        let info = await lstat(at(place.folders.at(-1)!, name)).catch((error) => {
          if (code(error) === 'ENOENT') return undefined;
          if (code(error) === 'ENAMETOOLONG') throw nameTooLong(error);
          throw error;
        });
        if (info?.isSymbolicLink() && !(last && options.keepLast)) {
          if (++links > MAX_LINKS) throw new DomainError('invalid', `${path} goes through more than ${MAX_LINKS} links.`);
          const target = await readlink(at(place.folders.at(-1)!, name));
          if (isAbsolute(target)) {
            // An absolute link is followed only when it names the workspace (as the host or the sandbox sees it).
            const inside = [this.root, realRoot, SANDBOX_WORKSPACE].map((base) => relative(base, posix.normalize(target))).find((rel) => rel === '' || (!rel.startsWith('..') && !isAbsolute(rel)));
            if (inside === undefined) throw outside(path);
            while (place.folders.length > 1) await place.folders.pop()!.close();
            place.names.length = 0;
            queue.unshift(...inside.split('/').filter((part) => part && part !== '.'));
          } else {
            queue.unshift(...target.split('/').filter((part) => part && part !== '.'));
          }
          continue;
        }
        if (last) {
          place.name = name;
          place.type = info ? typeOf(info) : undefined;
          return place;
        }
        let made = false;
        if (!info && options.make) {
          made = await mkdir(at(place.folders.at(-1)!, name), { mode: 0o700 }).then(() => true, (error) => {
            if (code(error) !== 'EEXIST') throw error;
            return false;
          });
          info = await lstat(at(place.folders.at(-1)!, name)).catch(() => undefined);
          // Made (or appeared meanwhile): opened below as any folder, without following a link.
          if (info?.isSymbolicLink()) {
            queue.unshift(name);
            continue;
          }
        }
        if (!info) throw missing(path);
        if (!info.isDirectory()) throw new DomainError('invalid', `${place.names.concat(name).join('/')} is not a folder.`);
        let folder: FileHandle;
        try {
          folder = await open(at(place.folders.at(-1)!, name), FOLDER);
        } catch (error) {
          // Swapped for a link or a file since it was looked at: look again.
          if (code(error) === 'ENOTDIR' || code(error) === 'ELOOP' || code(error) === 'ENOENT') {
            if (++links > MAX_LINKS) throw new DomainError('invalid', `${path} kept changing while it was read; try again.`);
            queue.unshift(name);
            continue;
          }
          throw error;
        }
        // A folder just made is given to the owner through its descriptor: whatever is at its name now is not touched.
        if (made && this.owner) await folder.chown(this.owner.uid, this.owner.gid);
        place.folders.push(folder);
        place.names.push(name);
      }
      return place;
    } catch (error) {
      await release(place);
      throw error;
    }
  }

  /** A path as the workspace shows it: relative to its root, with forward slashes. */
  private shown(place: Place): string {
    return [...place.names, ...(place.name ? [place.name] : [])].join('/') || '.';
  }

  /** Opens the regular file a walk found, non-blocking and without following a link, and proves it regular by its descriptor. */
  private async openFile(place: Found, path: string): Promise<FileHandle> {
    if (place.type === undefined) throw missing(path);
    if (place.type === 'folder') throw new DomainError('invalid', `${path} is a folder; files.list lists it.`);
    if (place.type !== 'file') throw notRegular(path);
    let handle: FileHandle;
    try {
      handle = await open(at(place.folders.at(-1)!, place.name), READ);
    } catch (error) {
      if (code(error) === 'ENOENT') throw missing(path);
      // A link put in its place (ELOOP), a socket (ENXIO): not a file to read.
      if (code(error) === 'ELOOP' || code(error) === 'ENXIO' || code(error) === 'EISDIR') throw notRegular(path);
      throw error;
    }
    const info = await handle.stat().catch(async (error) => {
      await handle.close();
      throw error;
    });
    if (!info.isFile()) {
      await handle.close();
      throw notRegular(path);
    }
    return handle;
  }

  read(path: string, maxBytes = FILE_LIMITS.maxBytes): Promise<{ path: string; content: string; bytes: number; truncated: boolean }> {
    return this.within(path, () => this.readFile(path, maxBytes));
  }

  /**
   * A whole file's bytes, to send it elsewhere (a channel): read from the
   * descriptor the walk opened, never by its name again; one larger than
   * `maxBytes` is refused (`too_large`, its size said) without being read.
   */
  bytes(path: string, maxBytes: number): Promise<{ path: string; data: Uint8Array }> {
    return guarded(path, async () => {
      const place = await this.walk(path);
      try {
        const handle = await this.openFile(place, path);
        try {
          const { size } = await handle.stat();
          if (size > maxBytes) throw new DomainError('too_large', `${path} is ${size} bytes; at most ${maxBytes} can be sent here.`, { code: 'file_too_large' });
          // Read to its end: a file that grew since the stat (a command still writing it) is not sent half-read.
          const buffer = Buffer.alloc(size + 1);
          let total = 0;
          for (;;) {
            const { bytesRead } = await handle.read(buffer, total, buffer.length - total, total);
            if (bytesRead === 0) break;
            total += bytesRead;
            if (total > size) throw new DomainError('conflict', `${path} changed while it was read; try again once it is written.`);
          }
          return { path: this.shown(place), data: new Uint8Array(buffer.subarray(0, total)) };
        } finally {
          await handle.close();
        }
      } finally {
        await release(place);
      }
    });
  }

  /**
   * Writes a whole file atomically: a temporary file beside it, then renamed
   * over it. With `keep`, a file already there is kept and the new one takes
   * the first free name beside it (`name-2.ext`, `name-3.ext`...).
   */
  write(path: string, content: string | Uint8Array | AsyncIterable<Uint8Array>, options: { maxBytes?: number; keep?: boolean } = {}): Promise<{ path: string; bytes: number; created: boolean }> {
    return this.within(path, () => this.writeFile(path, content, options));
  }

  list(path = '.', depth = 1): Promise<{ path: string; entries: { path: string; type: EntryType; bytes: number | null }[]; truncated: boolean }> {
    return this.within(path, () => this.listFolder(path, depth));
  }

  private async readFile(path: string, maxBytes: number): Promise<{ path: string; content: string; bytes: number; truncated: boolean }> {
    const place = await this.walk(path);
    try {
      const handle = await this.openFile(place, path);
      try {
        const info = await handle.stat();
        const size = Math.min(info.size, maxBytes);
        const buffer = Buffer.alloc(size);
        const { bytesRead } = size > 0 ? await handle.read(buffer, 0, size, 0) : { bytesRead: 0 };
        const body = buffer.subarray(0, bytesRead);
        if (body.includes(0)) throw new DomainError('invalid', `${path} is a binary file; files.read reads text.`);
        return { path: this.shown(place), content: body.toString('utf8'), bytes: info.size, truncated: info.size > maxBytes };
      } finally {
        await handle.close();
      }
    } finally {
      await release(place);
    }
  }

  private async writeFile(path: string, content: string | Uint8Array | AsyncIterable<Uint8Array>, options: { maxBytes?: number; keep?: boolean }): Promise<{ path: string; bytes: number; created: boolean }> {
    const whole = typeof content === 'string' || content instanceof Uint8Array;
    let bytes = typeof content === 'string' ? Buffer.byteLength(content, 'utf8') : content instanceof Uint8Array ? content.byteLength : 0;
    const maxBytes = options.maxBytes ?? FILE_LIMITS.maxBytes;
    const tooLarge = () => new DomainError('too_large', whole ? `${bytes} bytes is more than a file may hold here (${maxBytes}).` : `The file is larger than a file may be here (${maxBytes} bytes).`);
    if (bytes > maxBytes) throw tooLarge();
    const place = await this.walk(path, { make: true });
    try {
      if (!place.name) throw new DomainError('invalid', `${path} is a folder.`);
      if (place.type === 'folder') throw new DomainError('invalid', `${path} is a folder.`);
      if (place.type !== undefined && place.type !== 'file') throw notRegular(path);
      const folder = place.folders.at(-1)!;
      const temporary = `.${randomBytes(6).toString('hex')}.tmp`;
      const handle = await open(at(folder, temporary), CREATE, 0o600);
      try {
        try {
          if (this.owner) await handle.chown(this.owner.uid, this.owner.gid);
          if (whole) {
            await handle.writeFile(content);
          } else {
            for await (const chunk of content) {
              bytes += chunk.byteLength;
              if (bytes > maxBytes) throw tooLarge();
              await handle.write(chunk);
            }
          }
          await handle.sync();
        } finally {
          await handle.close();
        }
        if (options.keep) {
          // Linked, never renamed, under the first name nothing holds (link(2) fails on a name taken, whatever took it meanwhile).
          const name = await linkFree(folder, temporary, place.name);
          await rm(at(folder, temporary), { force: true });
          return { path: this.shown({ ...place, name }), bytes, created: true };
        }
        // Renamed within the held folder: whatever was put at that name meanwhile is replaced, nothing outside is touched.
        await rename(at(folder, temporary), at(folder, place.name));
      } catch (error) {
        await rm(at(folder, temporary), { force: true }).catch(() => undefined);
        throw error;
      }
      return { path: this.shown(place), bytes, created: place.type === undefined };
    } finally {
      await release(place);
    }
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
    // Written where it was read (the path as resolved then), not by following the given path again.
    const written = await this.write(current.path, next);
    return { path: written.path, replacements: all ? count : 1, bytes: written.bytes };
  }

  private async listFolder(path: string, depth: number): Promise<{ path: string; entries: { path: string; type: EntryType; bytes: number | null }[]; truncated: boolean }> {
    const place = await this.walk(path);
    const opened: FileHandle[] = [];
    try {
      let start: FileHandle;
      if (place.name) {
        if (place.type === undefined) throw missing(path);
        if (place.type !== 'folder') throw new DomainError('invalid', `${path} is a file; files.read reads it.`);
        try {
          start = await open(at(place.folders.at(-1)!, place.name), FOLDER);
        } catch (error) {
          if (code(error) === 'ENOENT') throw missing(path);
          throw new DomainError('invalid', `${path} changed while it was read; try again.`);
        }
        opened.push(start);
      } else {
        start = place.folders.at(-1)!;
      }
      const prefix = this.shown(place);
      const entries: { path: string; type: EntryType; bytes: number | null }[] = [];
      let truncated = false;
      const walk = async (folder: FileHandle, shown: string, level: number): Promise<void> => {
        const names = (await readdir(at(folder), { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
        for (const entry of names) {
          if (entries.length >= FILE_LIMITS.maxEntries) {
            truncated = true;
            return;
          }
          const entryPath = shown === '.' ? entry.name : `${shown}/${entry.name}`;
          const info = await lstat(at(folder, entry.name)).catch(() => undefined);
          if (!info) continue;
          const type = typeOf(info);
          entries.push({ path: entryPath, type, bytes: type === 'file' ? info.size : null });
          // Links are listed, never followed; a folder is entered through its descriptor only if it still is one.
          if (type === 'folder' && level < depth) {
            const child = await open(at(folder, entry.name), FOLDER).catch(() => undefined);
            if (!child) continue;
            opened.push(child);
            await walk(child, entryPath, level + 1);
            opened.splice(opened.indexOf(child), 1);
            await child.close();
          }
        }
      };
      await walk(start, prefix, 1);
      return { path: prefix, entries, truncated };
    } finally {
      for (const handle of opened) await handle.close().catch(() => undefined);
      await release(place);
    }
  }
}

/** A file system failure on a path as the caller's error where it is one (a folder where a file was meant, a name too long). */
function fsFailure(error: unknown, path: string): unknown {
  switch (code(error)) {
    case 'ENOENT': return missing(path);
    case 'EISDIR': return new DomainError('invalid', `${path} is a folder.`);
    case 'ENOTDIR': return new DomainError('invalid', `A part of ${path} is not a folder.`);
    case 'ENAMETOOLONG': return nameTooLong(error);
    case 'ELOOP': return new DomainError('invalid', `${path} goes through too many links.`);
    case 'ENOSPC':
    case 'EDQUOT': return new DomainError('insufficient_storage', `No room left in the workspace for ${path}: its file system is full (an agent's workspace holds at most tools.exec.workspaceMB). Remove files from the workspace, or raise the bound.`, { code: 'workspace_full', cause: error });
    default: return error;
  }
}

async function guarded<T>(path: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw fsFailure(error, path);
  }
}

/** Names tried for a file that keeps what is there: name, name-2, ... name-100 (the extension kept). */
const FREE_NAMES = 100;

/** Links a file of a held folder under the first free name from `name`; answers the name used. */
async function linkFree(folder: FileHandle, from: string, name: string): Promise<string> {
  const dot = name.lastIndexOf('.');
  const [stem, extension] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
  for (let n = 1; n <= FREE_NAMES; n++) {
    const candidate = n === 1 ? name : `${stem}-${n}${extension}`;
    if (Buffer.byteLength(candidate) > NAME_MAX) throw nameTooLong();
    try {
      await link(at(folder, from), at(folder, candidate));
      return candidate;
    } catch (error) {
      if (code(error) !== 'EEXIST') throw error;
    }
  }
  throw new DomainError('conflict', `${name} and ${FREE_NAMES - 1} names like it are taken in the workspace; remove some.`);
}

/** Closes the folders a walk held. */
async function release(place: Place): Promise<void> {
  for (const folder of place.folders.splice(0)) await folder.close().catch(() => undefined);
}
