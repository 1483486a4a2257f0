/**
 * Tools: the one registry behind POST /tools/invoke, the tools RPC methods and
 * (later) agents, with its policy (deny lists, dangerous tools), argument
 * schemas and idempotency keys.
 */
import { ROUTE_SCOPES } from '../../shared/api/routes.ts';
import { errorResponse, jsonResponse, ref, security } from '../kernel/api-doc.ts';
import { defineModule, type Principal } from '../kernel/module.ts';
import { callerPerson, OPERATOR } from '../kernel/person.ts';
import jobsModule from '../jobs/module.ts';
import { parseToolRequest, toolAnswer, ToolRunner } from './tool-runner.ts';

export type { ToolRunner };

export default defineModule<{ runner: ToolRunner }>({
  id: 'tools',
  needs: [jobsModule],
  migrations: [{
    version: 1,
    name: 'tool idempotency keys',
    was: { schema: 6 },
    sql: `
      CREATE TABLE tool_invocations (
        caller TEXT NOT NULL,
        key TEXT NOT NULL,
        tool TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (caller, key)
      );
      CREATE INDEX tool_invocations_created ON tool_invocations (created_at);
    `,
  }],
  setup(ctx) {
    const runner = new ToolRunner({ table: ctx.table, config: ctx.config, store: ctx.store, logger: ctx.log });
    ctx.use(jobsModule).retention('toolInvocations', () => runner.prune());

    ctx.http.reserve('/tools');
    ctx.http.document({
      paths: {
        '/tools/invoke': {
          post: {
            summary: 'invoke a tool', ...security('POST /tools/invoke'),
            requestBody: { required: true, content: { 'application/json': { schema: ref('ToolInvokeRequest') } } },
            responses: {
              200: jsonResponse('ToolInvokeResult', 'the tool ran (or, with dryRun, would run); its result says how it went: a page\'s own status (web.fetch of a 404), a command\'s exit code, an MCP tool\'s isError'),
              400: jsonResponse('ToolInvokeError', 'bad request, args that fail the tool\'s schema, or a request the tool refuses (an address web.fetch does not reach, a name too long for the file system)'),
              401: jsonResponse('ToolInvokeError', 'missing or wrong credential'),
              403: jsonResponse('ToolInvokeError', 'the credential lacks tools:invoke'),
              404: jsonResponse('ToolInvokeError', 'unknown tool, or one the policy denies over HTTP'),
              409: jsonResponse('ToolInvokeError', 'the idempotency key was used for another call'),
              413: jsonResponse('ToolInvokeError', 'body too large'),
              429: errorResponse('too many requests; see Retry-After'),
              500: jsonResponse('ToolInvokeError', 'a fault of the gateway (or of the tool\'s code) no caller can act on; the gateway log has the details'),
              502: jsonResponse('ToolInvokeError', 'the server the tool works against (an MCP server, the host web.fetch asked) failed the call, could not be reached, did not answer in time or answered what cannot be read'),
              503: jsonResponse('ToolInvokeError', 'the tool cannot run now: the server it runs on (an MCP server) is not connected, exec\'s sandbox is missing, a channel is not running, the store is full'),
            },
          },
        },
      },
    });
    ctx.http.route({
      method: 'POST', path: '/tools/invoke', auth: { scope: ROUTE_SCOPES['POST /tools/invoke'] }, envelope: true,
      body: { types: ['application/json'], limit: () => ctx.config().gateway.http.maxBodyBytes },
      handler: async (http) => {
        const principal = http.state.principal as Principal;
        const request = parseToolRequest(http.received!.value);
        const header = http.get('idempotency-key');
        if (header && !request.idempotencyKey) request.idempotencyKey = header;
        const admin = principal.scopes === 'all' || principal.scopes.has('admin');
        http.body = toolAnswer(await runner.invoke(request, { name: principal.subject, surface: 'http', admin, person: callerPerson(principal) }));
      },
    });

    ctx.rpc.method({ name: 'tools.catalog', handler: () => ({ tools: runner.catalog('ws') }) });
    ctx.rpc.method({
      name: 'tools.invoke',
      handler: async (params, client) => toolAnswer(await runner.invoke(parseToolRequest(params), {
        name: `device:${client.deviceId}`, surface: 'ws', admin: client.scopes.has('operator.admin'), person: OPERATOR,
      })),
    });

    return { runner };
  },
});
