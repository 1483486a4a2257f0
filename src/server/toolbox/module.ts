/**
 * The built-in tools that make an agent useful, contained: web.fetch (public
 * addresses only, bounded), files.* (one workspace folder per agent) and
 * exec (a command in a bubblewrap sandbox over that folder, run only as the
 * approval setting says).
 * Called by an agent, they act in its workspace; over POST /tools/invoke or
 * the WebSocket, in the default agent's (or, with no agent, the profile's own
 * `workspace` folder): workspaces.ts.
 */
import agentsModule from '../agents/module.ts';
import approvalsModule from '../approvals/module.ts';
import { defineModule } from '../kernel/module.ts';
import { execTool } from './exec-tool.ts';
import { fileTools, webFetchTool } from './file-tools.ts';
import { SANDBOX_USER } from '../sandbox/sandbox.ts';
import skillsModule from '../skills/module.ts';
import { Workspaces } from './workspaces.ts';

/** What other modules (and tests) get from this one. */
export interface Toolbox {
  /** The workspace folder of an agent (undefined: the one HTTP callers act in). */
  workspaceOf(agentId?: string): string;
}

export default defineModule<Toolbox>({
  id: 'toolbox',
  needs: [agentsModule, skillsModule, approvalsModule],
  setup(ctx) {
    const agents = ctx.use(agentsModule);
    const workspaces = new Workspaces({
      config: ctx.config, profileDir: ctx.daemon.paths.dir, defaultAgent: () => agents.resolve(),
      // A root daemon's sandbox runs commands as an unprivileged user, who owns what is made in the workspaces.
      ...(process.getuid?.() === 0 ? { owner: SANDBOX_USER } : {}),
    });
    ctx.tools.add(webFetchTool(ctx.config));
    const skills = ctx.use(skillsModule);
    for (const tool of fileTools(workspaces, skills)) ctx.tools.add(tool);

    // Commands that ask wait for an operator in the store (approvals/), answered from the CLI, the Control UI or a chat.
    const { approvals } = ctx.use(approvalsModule);
    ctx.tools.add(execTool({ config: ctx.config, approvals, workspaces, skills }));
    return { workspaceOf: (agentId) => workspaces.of(agentId) };
  },
});
