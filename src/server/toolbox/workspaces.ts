/**
 * Where the tools act: one workspace folder per agent (its `workspace`
 * setting, else `workspaces/<agent>` in the profile's folder). A call over
 * POST /tools/invoke or the WebSocket acts in the default agent's, or, with
 * no agent, in the profile's own `workspace` folder.
 */
import { join } from 'node:path';
import type { AgentSettings, GatewayConfig } from '../../shared/config/types.ts';
import type { ToolContext } from '../kernel/module.ts';
import { Workspace } from './workspace.ts';

export interface WorkspacesDeps {
  config: () => GatewayConfig;
  profileDir: string;
  /** The default agent (it throws when there is none). */
  defaultAgent: () => { id: string; settings: AgentSettings };
  /** Who owns what is made in the workspaces (a root daemon's sandbox user). */
  owner?: { uid: number; gid: number };
}

export class Workspaces {
  private readonly deps: WorkspacesDeps;

  constructor(deps: WorkspacesDeps) {
    this.deps = deps;
  }

  /** The workspace folder of an agent (undefined: the one HTTP callers act in). */
  of(agentId?: string): string {
    const { config, profileDir } = this.deps;
    const configured = config().agents;
    if (agentId && Object.hasOwn(configured, agentId)) return configured[agentId]!.workspace ?? join(profileDir, 'workspaces', agentId);
    if (Object.keys(configured).length === 0) return join(profileDir, 'workspace');
    try {
      const { id, settings } = this.deps.defaultAgent();
      return settings.workspace ?? join(profileDir, 'workspaces', id);
    } catch {
      return join(profileDir, 'workspace');
    }
  }

  /** The workspace a call acts in: the calling agent's, else the default agent's. */
  for(context: Pick<ToolContext, 'agent'>): Workspace {
    return new Workspace(this.of(context.agent), this.deps.owner);
  }
}
