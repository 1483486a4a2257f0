/**
 * The built-in tools that make an agent useful, contained: web.fetch (public
 * addresses only, bounded), web.search and browser.* (web-tools.ts), files.*
 * (one workspace folder per agent) and exec (a command in a bubblewrap
 * sandbox over that folder, run only as the approval setting says).
 * Called by an agent, they act in its workspace; over POST /tools/invoke or
 * the WebSocket, in the default agent's (or, with no agent, the profile's own
 * `workspace` folder): workspaces.ts.
 */
import agentsModule from '../agents/module.ts';
import approvalsModule from '../approvals/module.ts';
import { defineModule } from '../kernel/module.ts';
import channelsModule from '../channels/module.ts';
import { execTool } from './exec-tool.ts';
import { fileTools, webFetchTool } from './file-tools.ts';
import { SANDBOX_USER } from '../sandbox/sandbox.ts';
import skillsModule from '../skills/module.ts';
import { browserTools, webSearchTool } from './web-tools.ts';
import { Workspaces } from './workspaces.ts';
import { mountWorkspace } from '../../shared/workspace-image.ts';

/** What other modules (and tests) get from this one. */
export interface Toolbox {
  /** The workspace folder of an agent (undefined: the one HTTP callers act in). */
  workspaceOf(agentId?: string): string;
}

export default defineModule<Toolbox>({
  id: 'toolbox',
  needs: [agentsModule, skillsModule, channelsModule, approvalsModule],
  setup(ctx) {
    const agents = ctx.use(agentsModule);
    // A root daemon's sandbox runs commands as an unprivileged user, who owns what is made in the workspaces.
    const owner = process.getuid?.() === 0 ? SANDBOX_USER : undefined;
    const profileDir = ctx.daemon.paths.dir;
    const workspaces = new Workspaces({ config: ctx.config, profileDir, defaultAgent: () => agents.resolve(), mount: mountWorkspace, ...(owner ? { owner } : {}) });
    // Images made before are mounted at start, off the start's path: a call meanwhile waits for its own.
    ctx.onStart(() => {
      void workspaces.mountMade().catch((error: unknown) => ctx.log.warn({ err: error }, 'a workspace\'s file system could not be mounted at start; the next call in it tries again'));
    });
    ctx.tools.add(webFetchTool(ctx.config));
    ctx.tools.add(webSearchTool(ctx));
    for (const tool of browserTools(ctx, { profileDir, workspaces, ...(owner ? { owner } : {}) })) ctx.tools.add(tool);
    const skills = ctx.use(skillsModule);
    for (const tool of fileTools(workspaces, skills)) ctx.tools.add(tool);

    // Commands that ask wait for an operator in the store (approvals/), answered from the CLI, the Control UI or a chat.
    const { approvals } = ctx.use(approvalsModule);
    ctx.tools.add(execTool({ config: ctx.config, approvals, workspaces, skills }));
    // Files agents send on channels come from their workspace, through the same containment as files.*.
    ctx.use(channelsModule).channels.readFilesFrom((agent) => workspaces.for({ agent }));
    return { workspaceOf: (agentId) => workspaces.of(agentId) };
  },
});
