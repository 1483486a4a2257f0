/**
 * One voice call's folder and the commands run over it: ffmpeg and a command
 * engine run in the exec sandbox (sandbox.ts: the system's programs
 * read-only, this folder at /workspace, no network, bounded), never beside
 * the gateway. The folder is the call's alone and removed when it ends.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { chmod, chown, mkdir, open, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DomainError } from '../kernel/errors.ts';
import { runSandboxed, SANDBOX_USER, sandboxTools, type ExecResult } from '../sandbox/sandbox.ts';

const MB = 1024 * 1024;
/** The most bytes of a file the gateway reads back from a call's folder. */
const READ_LIMIT = 256 * MB;

export interface RunOptions {
  timeoutMs: number;
  /** Host files and folders the command reads (an engine's models), bound read-only. */
  readOnly?: readonly string[];
  input?: string | Buffer;
}

export class Contained {
  readonly dir: string;

  private constructor(dir: string) {
    this.dir = dir;
  }

  /** A new folder for one call; refused (503) where the sandbox cannot run. */
  static async open(): Promise<Contained> {
    const tools = sandboxTools();
    if ('missing' in tools) throw new DomainError('unavailable', `Voice is unavailable: ${tools.missing}.`, { code: 'sandbox_missing' });
    const dir = join(tmpdir(), `gateway-voice-${randomBytes(9).toString('hex')}`);
    await mkdir(dir, { mode: 0o700 });
    // A root daemon's sandbox runs as nobody, who must write here; the folder is new and unguessable, made by this process.
    if (process.getuid?.() === 0) await chown(dir, SANDBOX_USER.uid, SANDBOX_USER.gid);
    return new Contained(dir);
  }

  /** Runs a program and its arguments (no shell) over the folder, at /workspace. */
  run(argv: readonly string[], options: RunOptions): Promise<ExecResult> {
    return runSandboxed(argv, this.dir, {
      timeoutMs: options.timeoutMs, cpuSeconds: Math.max(5, Math.ceil((options.timeoutMs / 1000) * 2)), memoryBytes: 4096 * MB, processes: 64,
      fileBytes: READ_LIMIT, tmpBytes: 64 * MB, outputBytes: 1 * MB, network: false, readOnly: options.readOnly, input: options.input,
    });
  }

  /** Writes a file of the call (a name, never a path). */
  async write(name: string, bytes: Buffer): Promise<void> {
    const path = join(this.dir, name);
    await writeFile(path, bytes, { mode: 0o644, flag: 'wx' });
    // Readable by the sandbox's user whatever the daemon's umask: the folder around it is the call's alone.
    await chmod(path, 0o644);
  }

  /** Size of a file the command wrote (0 when it wrote none). */
  async size(name: string): Promise<number> {
    try {
      const info = await stat(join(this.dir, name));
      return info.isFile() ? info.size : 0;
    } catch {
      return 0;
    }
  }

  /** Reads back a file the command wrote: a regular file only, its links not followed, bounded. */
  async read(name: string): Promise<Buffer> {
    let handle;
    try {
      handle = await open(join(this.dir, name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch {
      throw new DomainError('upstream', 'The engine wrote no audio.', { code: 'no_audio' });
    }
    try {
      const info = await handle.stat();
      if (!info.isFile()) throw new DomainError('upstream', 'The engine wrote no audio.', { code: 'no_audio' });
      if (info.size > READ_LIMIT) throw new DomainError('upstream', `The engine wrote more than ${READ_LIMIT / MB} MB of audio.`, { code: 'too_much_audio' });
      const buffer = Buffer.alloc(info.size);
      let offset = 0;
      while (offset < buffer.length) {
        const { bytesRead } = await handle.read(buffer, offset, buffer.length - offset, offset);
        if (bytesRead === 0) break;
        offset += bytesRead;
      }
      return buffer.subarray(0, offset);
    } finally {
      await handle.close();
    }
  }

  async close(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Runs a call with a folder of its own, removed after, whatever happened. */
export async function withContained<T>(work: (contained: Contained) => Promise<T>): Promise<T> {
  const contained = await Contained.open();
  try {
    return await work(contained);
  } finally {
    await contained.close();
  }
}
