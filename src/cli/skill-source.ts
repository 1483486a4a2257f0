/**
 * Where `gateway skills add` takes a skill from: a folder, a .tar.gz/.tgz or
 * .zip archive, or a git repository (cloned shallow, its hooks never run).
 * Every source becomes the same list of plain files, read here and never
 * run: archives are parsed in this process (no tar or unzip), a link is kept
 * only when it names a file inside the skill (as a copy of that file), and
 * anything else (a link leaving the skill, a device, a path with `..`) is
 * refused with its name. Bounds are checked while reading, so a huge file or
 * an archive bomb is refused before it is read whole.
 */
import { execFile } from 'node:child_process';
import { lstat, mkdtemp, open, readdir, readFile, readlink, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, posix, relative, resolve, sep } from 'node:path';
import { createGunzip, inflateRawSync } from 'node:zlib';
import { checkSkillPath, SKILL_LIMITS, SkillProblem, type SkillFile } from '../shared/skills.ts';

/** Bytes an archive may unpack to: the skill's bound, plus room for what is skipped (folders, headers). */
const UNPACKED_LIMIT = SKILL_LIMITS.totalBytes * 2 + 1024 * 1024;

/** A file as found, before links are settled: a link is its target's path inside the skill. */
type Found = { path: string; data: Buffer; executable: boolean } | { path: string; link: string };

function budget() {
  let files = 0;
  let bytes = 0;
  return (path: string, size: number) => {
    if (++files > SKILL_LIMITS.files) throw new SkillProblem(`The skill has more than ${SKILL_LIMITS.files} files.`);
    if (size > SKILL_LIMITS.fileBytes) throw new SkillProblem(`${path} is larger than ${SKILL_LIMITS.fileBytes / 1024 / 1024} MB.`);
    bytes += size;
    if (bytes > SKILL_LIMITS.totalBytes) throw new SkillProblem(`The skill is larger than ${SKILL_LIMITS.totalBytes / 1024 / 1024} MB.`);
  };
}

/** Links settled: each becomes a copy of the file it names inside the skill, or the skill is refused. */
function settle(found: readonly Found[]): SkillFile[] {
  const files = new Map<string, SkillFile>();
  for (const entry of found) if ('data' in entry) files.set(entry.path, { path: entry.path, data: entry.data, executable: entry.executable });
  for (const entry of found) {
    if ('data' in entry) continue;
    const target = posix.normalize(posix.join(posix.dirname(entry.path), entry.link));
    if (entry.link.startsWith('/') || target === '..' || target.startsWith('../')) throw new SkillProblem(`${entry.path} is a link leaving the skill (to ${entry.link}).`);
    const file = files.get(target);
    if (!file) throw new SkillProblem(`${entry.path} is a link to ${entry.link}, which is no file of the skill.`);
    files.set(entry.path, { ...file, path: entry.path });
  }
  return [...files.values()];
}

/** With no SKILL.md at the top but one folder holding everything, that folder is the skill (as archives and repositories often are). */
function unwrap(files: SkillFile[]): SkillFile[] {
  if (files.some((file) => file.path === 'SKILL.md')) return files;
  const tops = new Set(files.map((file) => file.path.split('/')[0]));
  if (tops.size !== 1) return files;
  const [top] = tops;
  if (!files.every((file) => file.path.startsWith(`${top}/`))) return files;
  return unwrap(files.map((file) => ({ ...file, path: file.path.slice(top!.length + 1) })));
}

/** A folder's files, walked without following links (a link inside to a file is kept as a copy; .git is skipped). */
export async function readSkillFolder(folder: string): Promise<SkillFile[]> {
  const root = await realpath(folder);
  const count = budget();
  const found: Found[] = [];
  const walk = async (dir: string, depth: number): Promise<void> => {
    if (depth > SKILL_LIMITS.depth) throw new SkillProblem(`${relative(root, dir)} is deeper than ${SKILL_LIMITS.depth} folders.`);
    for (const name of (await readdir(dir)).sort()) {
      if (depth === 0 && name === '.git') continue;
      const full = join(dir, name);
      const path = checkSkillPath(relative(root, full).split(sep).join('/'));
      const info = await lstat(full);
      if (info.isSymbolicLink()) {
        const target = await readlink(full);
        // Resolved on the host too, so a link through a link that leaves is caught.
        const real = await realpath(full).catch(() => undefined);
        if (!real || (real !== root && !real.startsWith(`${root}${sep}`))) throw new SkillProblem(`${path} is a link leaving the skill (to ${target}).`);
        if (!(await stat(real)).isFile()) throw new SkillProblem(`${path} is a link to a folder; copy the folder instead.`);
        found.push({ path, link: relative(dirname(full), real).split(sep).join('/') });
        count(path, 0);
      } else if (info.isDirectory()) {
        await walk(full, depth + 1);
      } else if (info.isFile()) {
        count(path, info.size);
        const handle = await open(full, 'r');
        try {
          const data = Buffer.alloc(info.size);
          await handle.read(data, 0, info.size, 0);
          found.push({ path, data, executable: (info.mode & 0o111) !== 0 });
        } finally {
          await handle.close();
        }
      } else {
        throw new SkillProblem(`${path} is not a file or a folder (a device, socket or pipe).`);
      }
    }
  };
  await walk(root, 0);
  return settle(found);
}

/** Reads a gzip stream to its end, refusing one that unpacks past the bound. */
async function gunzip(file: string): Promise<Buffer> {
  const { createReadStream } = await import('node:fs');
  const chunks: Buffer[] = [];
  let size = 0;
  const stream = createReadStream(file).pipe(createGunzip());
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > UNPACKED_LIMIT) throw new SkillProblem(`The archive unpacks to more than ${Math.round(UNPACKED_LIMIT / 1024 / 1024)} MB.`);
      chunks.push(chunk);
    }
  } catch (error) {
    stream.destroy();
    if (error instanceof SkillProblem) throw error;
    throw new SkillProblem(`The archive is not a gzip-compressed tar: ${(error as Error).message}.`);
  }
  return Buffer.concat(chunks);
}

const text = (block: Buffer, start: number, length: number) => {
  const field = block.subarray(start, start + length);
  const end = field.indexOf(0);
  return field.subarray(0, end === -1 ? length : end).toString('utf8');
};
const octal = (block: Buffer, start: number, length: number) => Number.parseInt(text(block, start, length).trim() || '0', 8);

/** The files of a tar archive (ustar, with PAX and GNU long names), links settled. */
export function readTar(archive: Buffer): SkillFile[] {
  const count = budget();
  const found: Found[] = [];
  let offset = 0;
  let longName: string | undefined;
  let paxPath: string | undefined;
  let paxLink: string | undefined;
  while (offset + 512 <= archive.length) {
    const header = archive.subarray(offset, offset + 512);
    if (header.every((byte) => byte === 0)) break;
    const size = octal(header, 124, 12);
    const type = String.fromCharCode(header[156]!);
    if (!Number.isFinite(size) || size < 0 || offset + 512 + size > archive.length) throw new SkillProblem('The archive is cut short or not a tar archive.');
    const body = archive.subarray(offset + 512, offset + 512 + size);
    offset += 512 + Math.ceil(size / 512) * 512;
    if (type === 'x' || type === 'g') {
      // PAX records: "<length> key=value\n".
      for (const record of body.toString('utf8').split('\n')) {
        const match = /^\d+ ([^=]+)=(.*)$/.exec(record);
        if (match?.[1] === 'path' && type === 'x') paxPath = match[2];
        if (match?.[1] === 'linkpath' && type === 'x') paxLink = match[2];
      }
      continue;
    }
    if (type === 'L') {
      longName = text(body, 0, body.length);
      continue;
    }
    const prefix = text(header, 345, 155);
    const raw = paxPath ?? longName ?? (prefix ? `${prefix}/${text(header, 0, 100)}` : text(header, 0, 100));
    const link = paxLink ?? text(header, 157, 100);
    paxPath = undefined;
    paxLink = undefined;
    longName = undefined;
    const path = raw.replace(/^\.\//, '').replace(/\/+$/, '');
    if (path === '' || path === '.') continue;
    if (path.startsWith('/')) throw new SkillProblem(`The archive names an absolute path (${path.slice(0, 200)}).`);
    if (type === '5') {
      checkSkillPath(path);
      continue;
    }
    checkSkillPath(path);
    if (type === '0' || type === '\0' || type === '7') {
      count(path, size);
      found.push({ path, data: Buffer.from(body), executable: (octal(header, 100, 8) & 0o111) !== 0 });
    } else if (type === '2') {
      count(path, 0);
      found.push({ path, link });
    } else if (type === '1') {
      count(path, 0);
      // A hard link names its target from the archive's top.
      found.push({ path, link: posix.relative(posix.dirname(path), link.replace(/^\.\//, '')) });
    } else {
      throw new SkillProblem(`${path} in the archive is not a file, folder or link (tar type ${JSON.stringify(type)}).`);
    }
  }
  return settle(found);
}

/** The files of a zip archive, read from its central directory; links settled, each file inflated within its bound. */
export function readZip(archive: Buffer): SkillFile[] {
  const count = budget();
  let end = -1;
  for (let at = archive.length - 22; at >= Math.max(0, archive.length - 22 - 65_535); at--) {
    if (archive.readUInt32LE(at) === 0x06054b50) {
      end = at;
      break;
    }
  }
  if (end === -1) throw new SkillProblem('The archive is not a zip archive.');
  const entries = archive.readUInt16LE(end + 10);
  let at = archive.readUInt32LE(end + 16);
  if (entries === 0xffff || at === 0xffffffff) throw new SkillProblem('The archive is a ZIP64 archive, larger than a skill may be.');
  const found: Found[] = [];
  for (let index = 0; index < entries; index++) {
    if (at + 46 > archive.length || archive.readUInt32LE(at) !== 0x02014b50) throw new SkillProblem('The archive\'s directory is damaged.');
    const flags = archive.readUInt16LE(at + 8);
    const method = archive.readUInt16LE(at + 10);
    const compressed = archive.readUInt32LE(at + 20);
    const size = archive.readUInt32LE(at + 24);
    const nameLength = archive.readUInt16LE(at + 28);
    const extraLength = archive.readUInt16LE(at + 30);
    const commentLength = archive.readUInt16LE(at + 32);
    const mode = archive.readUInt32LE(at + 38) >>> 16;
    const local = archive.readUInt32LE(at + 42);
    const raw = archive.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    at += 46 + nameLength + extraLength + commentLength;
    const path = raw.replace(/^\.\//, '').replace(/\/+$/, '');
    if (raw.endsWith('/')) {
      if (path) checkSkillPath(path);
      continue;
    }
    if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) throw new SkillProblem(`The archive names an absolute path (${path.slice(0, 200)}).`);
    checkSkillPath(path);
    if (flags & 1) throw new SkillProblem(`${path} in the archive is encrypted.`);
    count(path, size);
    if (local + 30 > archive.length || archive.readUInt32LE(local) !== 0x04034b50) throw new SkillProblem('The archive\'s entries are damaged.');
    const start = local + 30 + archive.readUInt16LE(local + 26) + archive.readUInt16LE(local + 28);
    const stored = archive.subarray(start, start + compressed);
    let data: Buffer;
    if (method === 0) data = Buffer.from(stored);
    else if (method === 8) {
      try {
        data = inflateRawSync(stored, { maxOutputLength: Math.max(1, size) });
      } catch {
        throw new SkillProblem(`${path} in the archive does not unpack to the size the archive says.`);
      }
    } else throw new SkillProblem(`${path} in the archive uses a compression the gateway does not read (method ${method}).`);
    if (data.length !== size) throw new SkillProblem(`${path} in the archive does not unpack to the size the archive says.`);
    if ((mode & 0o170000) === 0o120000) found.push({ path, link: data.toString('utf8') });
    else if ((mode & 0o170000) === 0 || (mode & 0o170000) === 0o100000) found.push({ path, data, executable: (mode & 0o111) !== 0 });
    else throw new SkillProblem(`${path} in the archive is not a file, folder or link.`);
  }
  return settle(found);
}

/** Whether a source names a git repository rather than a file or folder here. */
const GIT_URL = /^(?:https?:\/\/|ssh:\/\/|git:\/\/|file:\/\/|git@[^:]+:)/;

/** Clones a repository shallow into a new folder (no hooks, no prompt, no submodules); returns the folder. */
async function clone(url: string): Promise<string> {
  const into = await mkdtemp(join(tmpdir(), 'gateway-skill-'));
  const args = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', ...(url.startsWith('file://') ? ['-c', 'protocol.file.allow=always'] : []), 'clone', '--quiet', '--depth', '1', '--no-tags', '--', url, join(into, 'repo')];
  await new Promise<void>((done, fail) => {
    execFile('git', args, { timeout: 120_000, env: { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: '/bin/false', SSH_ASKPASS: '/bin/false', GIT_SSH_COMMAND: 'ssh -o BatchMode=yes' } }, (error, _stdout, stderr) => {
      if (!error) return done();
      const said = String(stderr).trim().split('\n').at(-1) ?? '';
      fail(new SkillProblem((error as NodeJS.ErrnoException).code === 'ENOENT' ? 'git is not installed: apt-get install git' : `git could not clone ${url}: ${said || error.message}`));
    });
  }).catch(async (error: unknown) => {
    await rm(into, { recursive: true, force: true });
    throw error;
  });
  return into;
}

/** A skill's files from any source `gateway skills add` takes. */
export async function readSkillSource(source: string): Promise<{ files: SkillFile[]; from: string }> {
  if (GIT_URL.test(source)) {
    const into = await clone(source);
    try {
      return { files: unwrap(await readSkillFolder(join(into, 'repo'))), from: `git ${source}` };
    } finally {
      await rm(into, { recursive: true, force: true });
    }
  }
  const path = resolve(source);
  const info = await stat(path).catch(() => undefined);
  if (!info) throw new SkillProblem(`${source} is not a folder, an archive or a git address (https://, ssh://, git@host:path, file://).`);
  if (info.isDirectory()) return { files: unwrap(await readSkillFolder(path)), from: `folder ${path}` };
  const name = basename(path).toLowerCase();
  if (info.size > UNPACKED_LIMIT) throw new SkillProblem(`${source} is larger than a skill may be.`);
  if (name.endsWith('.tar.gz') || name.endsWith('.tgz')) return { files: unwrap(readTar(await gunzip(path))), from: `archive ${path}` };
  if (name.endsWith('.tar')) return { files: unwrap(readTar(await readFile(path))), from: `archive ${path}` };
  if (name.endsWith('.zip') || name.endsWith('.skill')) return { files: unwrap(readZip(await readFile(path))), from: `archive ${path}` };
  throw new SkillProblem(`${source} is a file the gateway does not read as a skill: give a folder, a .tar.gz, .tgz, .tar or .zip archive, or a git address.`);
}
