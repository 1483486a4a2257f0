/**
 * Where the tools act: one workspace folder per agent (its `workspace`
 * setting, else `workspaces/<agent>` in the profile's folder). A call over
 * POST /tools/invoke or the WebSocket acts in the default agent's, or, with
 * no agent, in the profile's own `workspace` folder. A folder of the
 * profile's is mounted as a file system of its own, of tools.exec.workspaceMB,
 * before anything acts in it, where the daemon can (shared/workspace-image.ts);
 * an agent's own `workspace` setting names the operator's folder, which is
 * never moved into an image.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentSettings, GatewayConfig } from '../../shared/config/types.ts';
import { deviceOf, imagePaths, type mountWorkspace, type WorkspaceBound } from '../../shared/workspace-image.ts';
import type { ToolContext } from '../kernel/module.ts';
import { Workspace, type WorkspaceLease } from './workspace.ts';

const MB = 1024 * 1024;
/** A workspace whose size is watched is looked at again this often, for an image it may now get (its files moved out, a setting changed). */
const WATCH_RETRY_MS = 60_000;

export interface WorkspacesDeps {
  config: () => GatewayConfig;
  profileDir: string;
  /** The default agent (it throws when there is none). */
  defaultAgent: () => { id: string; settings: AgentSettings };
  /** Who owns what is made in the workspaces (a root daemon's sandbox user). */
  owner?: { uid: number; gid: number };
  /** Gives a workspace folder a file system of its own (none: every workspace is a plain folder, its size watched). */
  mount?: typeof mountWorkspace;
}

interface Known {
  bytes: number;
  make: boolean;
  bound: Promise<WorkspaceBound>;
  /** The mounted file system's device, to notice it was unmounted behind the daemon's back. */
  device?: number;
  at: number;
  /** Looked at again at the next call (a file system not yet grown to the bound). */
  again?: boolean;
}

export class Workspaces {
  private readonly deps: WorkspacesDeps;
  private readonly known = new Map<string, Known>();
  /** Calls acting in each workspace now. */
  private readonly users = new Map<string, number>();

  constructor(deps: WorkspacesDeps) {
    this.deps = deps;
  }

  /** The workspace folder of an agent (undefined: the one HTTP callers act in). */
  of(agentId?: string): string {
    return this.place(agentId).folder;
  }

  /** The folder, and whether it is the profile's own (one the gateway may mount an image at). */
  private place(agentId?: string): { folder: string; profiles: boolean } {
    const { config, profileDir } = this.deps;
    const configured = config().agents;
    const ofAgent = (id: string, settings: AgentSettings) => (settings.workspace ? { folder: settings.workspace, profiles: false } : { folder: join(profileDir, 'workspaces', id), profiles: true });
    if (agentId && Object.hasOwn(configured, agentId)) return ofAgent(agentId, configured[agentId]!);
    if (Object.keys(configured).length === 0) return { folder: join(profileDir, 'workspace'), profiles: true };
    try {
      const { id, settings } = this.deps.defaultAgent();
      return ofAgent(id, settings);
    } catch {
      return { folder: join(profileDir, 'workspace'), profiles: true };
    }
  }

  /**
   * Mounts the images already made (after the host restarted, a workspace's
   * folder is empty until its image is mounted again), so the person finds
   * their agents' files there without waiting for a call.
   */
  async mountMade(): Promise<string[]> {
    const { profileDir } = this.deps;
    const folders = [join(profileDir, 'workspace'), ...Object.entries(this.deps.config().agents).filter(([, agent]) => !agent.workspace).map(([id]) => join(profileDir, 'workspaces', id))];
    const mounted: string[] = [];
    for (const folder of folders) {
      if (!existsSync(imagePaths(folder).image)) continue;
      const lease = await this.enter(folder, true);
      lease.leave();
      if (lease.bound.by === 'filesystem') mounted.push(folder);
    }
    return mounted;
  }

  /** The workspace a call acts in: the calling agent's, else the default agent's. */
  for(context: Pick<ToolContext, 'agent'>): Workspace {
    const { folder, profiles } = this.place(context.agent);
    return new Workspace(folder, this.deps.owner, () => this.enter(folder, profiles));
  }

  /** Enters a workspace: mounted (made, grown) first, and counted in use until left, so it is never unmounted under a call. */
  private async enter(folder: string, profiles: boolean): Promise<WorkspaceLease> {
    const bound = await this.bound(folder, profiles);
    this.users.set(folder, (this.users.get(folder) ?? 0) + 1);
    let left = false;
    return {
      bound,
      leave: () => {
        if (left) return;
        left = true;
        const users = (this.users.get(folder) ?? 1) - 1;
        if (users > 0) this.users.set(folder, users);
        else this.users.delete(folder);
      },
    };
  }

  /**
   * How a workspace's size is bounded, its image made, mounted or grown first
   * where it can be: once per folder and setting, again when the folder is no
   * longer the mount point it was or could not be grown yet, and a watched
   * one again after a while.
   */
  private bound(folder: string, profiles: boolean): Promise<WorkspaceBound> {
    const { mount } = this.deps;
    if (!mount) return Promise.resolve({ by: 'watch', reason: 'workspaces are plain folders here' });
    if (!profiles) return Promise.resolve({ by: 'watch', reason: `${folder} is the agent's own workspace setting, a folder of the operator's that is not moved into an image` });
    const settings = this.deps.config().tools.exec;
    const bytes = settings.workspaceMB * MB;
    const make = settings.workspaceImage === 'auto';
    const known = this.known.get(folder);
    if (known && known.bytes === bytes && known.make === make && !known.again) {
      if (known.device === undefined ? Date.now() - known.at < WATCH_RETRY_MS : deviceOf(folder) === known.device) return known.bound;
    }
    // One at a time per folder: a call waits for the mount another call began (and, while one grows it, for that).
    const bound = (known?.bound ?? Promise.resolve()).catch(() => undefined).then(() => mount(folder, {
      bytes, make, idle: () => !this.users.has(folder), ...(this.deps.owner ? { owner: this.deps.owner } : {}),
    }));
    const entry: Known = { bytes, make, bound, at: Date.now() };
    this.known.set(folder, entry);
    bound.then((found) => {
      if (found.by === 'filesystem') entry.device = deviceOf(folder);
      // Smaller than the bound (it could not be grown while in use): grown at a later call.
      if (found.by === 'filesystem' && found.bytes < bytes) entry.again = true;
    }, () => {
      if (this.known.get(folder) === entry) this.known.delete(folder);
    });
    return bound;
  }
}
