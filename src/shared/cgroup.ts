/**
 * A control group per sandbox, so exec's memory and process limits bound a
 * command with everything it starts together (rlimits bound each process
 * alone). Made below the daemon's own group on cgroup v2 (memory.max,
 * memory.swap.max, pids.max) or on the v1 memory and pids hierarchies
 * (memory.limit_in_bytes, memory.memsw.limit_in_bytes, pids.max), wherever
 * the daemon may write: a root daemon usually can, a user's daemon only
 * where systemd delegated its group. Where no group can be made, the limits
 * stay per process; `gateway doctor` and the exec result say so.
 */
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface GroupLimits {
  memoryBytes: number;
  processes: number;
}

/** Where the groups of this daemon's sandboxes are made, one folder per controller. */
interface Layout {
  version: 1 | 2;
  /** v2: the one folder; v1: the memory folder and the pids folder. */
  memory: string;
  pids: string;
}

export type CgroupSupport = { available: true; version: 1 | 2; where: string } | { available: false; reason: string };

/** The mount points of each cgroup hierarchy, from this process's mountinfo. */
function mounts(): { v2?: string; v1: Record<string, string> } {
  const found: { v2?: string; v1: Record<string, string> } = { v1: {} };
  let text = '';
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return found;
  }
  for (const line of text.split('\n')) {
    const [before, after] = line.split(' - ');
    if (!before || !after) continue;
    const mountPoint = before.split(' ')[4]!;
    const [type, , options = ''] = after.split(' ');
    if (type === 'cgroup2' && !found.v2) found.v2 = mountPoint;
    if (type === 'cgroup') for (const option of options.split(',')) if (option === 'memory' || option === 'pids') found.v1[option] = mountPoint;
  }
  return found;
}

/** This process's own group in each hierarchy (v2 under '', v1 under each controller). */
function ownGroups(): Record<string, string> {
  const groups: Record<string, string> = {};
  try {
    for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
      const match = /^\d+:([^:]*):(.*)$/.exec(line);
      if (!match) continue;
      if (match[1] === '') groups[''] = match[2]!;
      else for (const controller of match[1]!.split(',')) groups[controller] = match[2]!;
    }
  } catch {
    // Not Linux: no groups.
  }
  return groups;
}

let layout: Promise<Layout | { reason: string }> | undefined;
let counter = 0;

/** Finds where groups can be made, once per daemon, by making and removing one. */
function findLayout(): Promise<Layout | { reason: string }> {
  layout ??= (async () => {
    const { v2, v1 } = mounts();
    const own = ownGroups();
    const tries: Layout[] = [];
    if (v1.memory && v1.pids && own.memory !== undefined && own.pids !== undefined) {
      tries.push({ version: 1, memory: join(v1.memory, own.memory), pids: join(v1.pids, own.pids) });
    }
    if (v2 && own[''] !== undefined) {
      const base = join(v2, own['']);
      tries.push({ version: 2, memory: base, pids: base });
    }
    if (tries.length === 0) return { reason: 'no cgroup v2 or v1 memory and pids hierarchy is mounted' };
    const reasons: string[] = [];
    for (const candidate of tries) await sweep(candidate);
    for (const candidate of tries) {
      const probe = await makeGroup(candidate, `gateway-probe-${process.pid}`, { memoryBytes: 64 * 1024 * 1024, processes: 8 }).catch((error: NodeJS.ErrnoException) => {
        reasons.push(`v${candidate.version} at ${candidate.memory}: ${error.code ?? error.message}`);
        return undefined;
      });
      if (!probe) continue;
      await probe.remove();
      return candidate;
    }
    return { reason: `no group could be made (${reasons.join('; ')})` };
  })();
  return layout;
}

/** Removes the groups a daemon that is gone left behind (killed before it could remove them): their names hold its process id. */
async function sweep(where: Layout): Promise<void> {
  for (const folder of new Set([where.memory, where.pids])) {
    const names = await readdir(folder).catch(() => [] as string[]);
    for (const name of names) {
      const match = /^gateway-(?:exec|probe)-(\d+)(?:-\d+)?$/.exec(name);
      if (!match || Number(match[1]) === process.pid || existsSync(`/proc/${match[1]}`)) continue;
      await rmdir(join(folder, name)).catch(() => undefined);
    }
  }
}

/** Whether sandboxes get a group of their own here, and where (or why not). */
export async function cgroupSupport(): Promise<CgroupSupport> {
  const found = await findLayout();
  return 'reason' in found ? { available: false, reason: found.reason } : { available: true, version: found.version, where: found.memory };
}

export interface SandboxGroup {
  /** The files a process's id is written to, for it to join the group. */
  procs: string[];
  /**
   * Puts a process and every process it started into the group: each parent
   * before its children are looked for, so whatever it starts meanwhile is
   * born inside. For a process held still (bubblewrap's --block-fd) until it
   * resolves.
   */
  adopt(pid: number): Promise<void>;
  /** Whether the memory limit stopped something. */
  hitMemory(): Promise<boolean>;
  /** Kills what is left in the group and removes it. */
  remove(): Promise<void>;
}

/** v2: lets the daemon's group hand memory and pids to the groups below it (the daemon moves to a leaf of its own if it must). */
async function delegate(base: string): Promise<void> {
  const control = join(base, 'cgroup.subtree_control');
  const enabled = (await readFile(control, 'utf8')).split(/\s+/);
  if (enabled.includes('memory') && enabled.includes('pids')) return;
  try {
    await writeFile(control, '+memory +pids');
  } catch (error) {
    // A group with processes in it cannot hand controllers down: the daemon moves to a leaf group of its own first.
    if ((error as NodeJS.ErrnoException).code !== 'EBUSY') throw error;
    const leaf = join(base, 'gateway-daemon');
    await mkdir(leaf).catch((made: NodeJS.ErrnoException) => {
      if (made.code !== 'EEXIST') throw made;
    });
    for (const pid of (await readFile(join(base, 'cgroup.procs'), 'utf8')).split('\n').filter(Boolean)) {
      await writeFile(join(leaf, 'cgroup.procs'), pid).catch(() => undefined);
    }
    await writeFile(control, '+memory +pids');
  }
}

async function makeGroup(where: Layout, name: string, limits: GroupLimits): Promise<SandboxGroup> {
  const folders = where.version === 2 ? [join(where.memory, name)] : [join(where.memory, name), join(where.pids, name)];
  if (where.version === 2) await delegate(where.memory);
  const made: string[] = [];
  const remove = async () => {
    for (const folder of made) {
      // Whatever outlived the sandbox is killed first; a group is removed only once empty.
      for (let attempt = 0; attempt < 50; attempt++) {
        const pids = (await readFile(join(folder, 'cgroup.procs'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
        for (const pid of pids) {
          try {
            process.kill(Number(pid), 'SIGKILL');
          } catch {
            // Gone already.
          }
        }
        const removed = await rmdir(folder).then(() => true, (error: NodeJS.ErrnoException) => error.code === 'ENOENT');
        if (removed) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  };
  try {
    for (const folder of folders) {
      await mkdir(folder);
      made.push(folder);
    }
    const memory = String(limits.memoryBytes);
    if (where.version === 2) {
      await writeFile(join(folders[0]!, 'memory.max'), memory);
      if (existsSync(join(folders[0]!, 'memory.swap.max'))) await writeFile(join(folders[0]!, 'memory.swap.max'), '0');
      await writeFile(join(folders[0]!, 'pids.max'), String(limits.processes));
    } else {
      await writeFile(join(folders[0]!, 'memory.limit_in_bytes'), memory);
      // With swap accounting, memory and swap together are held to the same figure: nothing is pushed out to swap instead.
      if (existsSync(join(folders[0]!, 'memory.memsw.limit_in_bytes'))) await writeFile(join(folders[0]!, 'memory.memsw.limit_in_bytes'), memory).catch(() => undefined);
      await writeFile(join(folders[1]!, 'pids.max'), String(limits.processes));
    }
  } catch (error) {
    await remove();
    throw error;
  }
  const procs = folders.map((folder) => join(folder, 'cgroup.procs'));
  return {
    procs,
    adopt: async (pid) => {
      const queue = [pid];
      const seen = new Set<number>();
      while (queue.length > 0) {
        const next = queue.shift()!;
        if (seen.has(next)) continue;
        seen.add(next);
        try {
          for (const file of procs) await writeFile(file, String(next));
        } catch (error) {
          // Gone meanwhile (it had nothing left to start); any other refusal means the group does not hold the sandbox.
          if ((error as NodeJS.ErrnoException).code === 'ESRCH') continue;
          throw error;
        }
        const tasks = await readdir(`/proc/${next}/task`).catch(() => [] as string[]);
        for (const task of tasks) {
          const children = await readFile(`/proc/${next}/task/${task}/children`, 'utf8').catch(() => '');
          for (const child of children.split(' ').filter(Boolean)) queue.push(Number(child));
        }
      }
    },
    hitMemory: async () => {
      if (where.version === 2) return /^oom_kill [1-9]/m.test(await readFile(join(folders[0]!, 'memory.events'), 'utf8').catch(() => ''));
      return /^oom_kill [1-9]/m.test(await readFile(join(folders[0]!, 'memory.oom_control'), 'utf8').catch(() => ''));
    },
    remove,
  };
}

/** A group for one sandbox, or undefined where none can be made (the limits then stay per process). */
export async function sandboxGroup(limits: GroupLimits): Promise<SandboxGroup | undefined> {
  const found = await findLayout();
  if ('reason' in found) return undefined;
  return makeGroup(found, `gateway-exec-${process.pid}-${++counter}`, limits);
}
