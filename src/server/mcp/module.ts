/**
 * MCP servers as tool sources: each server in `mcp.servers` is connected over
 * streamable HTTP (servers.ts), its tools offered as mcp.<name>.<tool>
 * through the tool registry (so the allow/deny policy, scopes and
 * dangerous-tool rules apply: an MCP tool reaches HTTP callers and agents
 * only once gateway.tools.allow names it), and its OAuth login run by the
 * gateway (login.ts, with its HTTP routes in routes.ts).
 */
import { mcpUrlProblem } from '../../shared/mcp-url.ts';
import { defineModule } from '../kernel/module.ts';
import jobsModule from '../jobs/module.ts';
import toolsModule from '../tools/module.ts';
import { callbackUrl, McpLogins } from './login.ts';
import { FlowStore, MCP_MIGRATIONS } from './oauth.ts';
import { loginRoutes } from './routes.ts';
import { McpServers } from './servers.ts';

export default defineModule({
  id: 'mcp',
  needs: [jobsModule, toolsModule],
  migrations: MCP_MIGRATIONS,
  async setup(ctx) {
    const flows = new FlowStore(ctx.store);
    ctx.use(jobsModule).retention('mcpOauthFlows', () => flows.prune());
    const { runner } = ctx.use(toolsModule);
    const clientName = `gateway (${ctx.daemon.profile})`;
    const redirectUrl = () => callbackUrl(ctx.config().mcp.callbackUrl, ctx.daemon.url);
    const servers = new McpServers({
      flows, secrets: ctx.secrets, log: ctx.log, clientName, version: ctx.daemon.version, callbackUrl: redirectUrl,
      onChange: (info) => ctx.events.emit('mcp.status', info, 'operator.read'),
      onLoginLost: (server, reason) => void ctx.store.audit('mcp.login.lost', { subject: server, detail: { reason } }),
    });
    await servers.sync(ctx.config().mcp.servers);
    runner.addSource(servers.toolSource());
    const logins = new McpLogins({ servers, flows, audit: (kind, fields) => ctx.store.audit(kind, fields), log: ctx.log, clientName, callbackUrl: redirectUrl });
    loginRoutes(ctx.http, logins);

    ctx.rpc.method({ name: 'mcp.list', handler: async () => ({ servers: await servers.list() }) });
    ctx.rpc.method({
      name: 'mcp.tools',
      handler: async ({ name }) => {
        const { connection } = servers.find(name);
        const overHttp = new Set(runner.catalog('http').map((tool) => tool.name));
        return { server: await connection.info(), tools: connection.toolInfo((tool) => overHttp.has(tool)) };
      },
    });
    ctx.rpc.method({
      name: 'mcp.login',
      handler: async ({ name }) => {
        const { authorizationUrl } = await logins.start(name);
        return { server: await servers.find(name).connection.info(), callbackUrl: redirectUrl(), ...(authorizationUrl ? { authorizationUrl } : {}) };
      },
    });
    ctx.rpc.method({
      name: 'mcp.logout',
      handler: async ({ name }, client) => {
        const { connection } = servers.find(name);
        await connection.logout();
        await flows.drop(name);
        await ctx.store.audit('mcp.logout', { actor: client.deviceId, subject: name, address: client.address });
        return { server: await connection.info() };
      },
    });

    ctx.configCheck((next) => Object.entries(next.mcp.servers).flatMap(([name, server]) => {
      const problem = mcpUrlProblem(server.url);
      return problem ? [`mcp.servers.${name}.url: ${problem}`] : [];
    }));
    ctx.watch.config((next) => void servers.sync(next.mcp.servers).catch((error: unknown) => ctx.log.error({ err: error }, 'applying the MCP servers failed')));
    ctx.watch.secrets(['mcp.servers.*'], (name) => servers.secretChanged(name));
    ctx.onStart(() => servers.start());
    ctx.onStop(() => servers.stop());
  },
});
