/**
 * The daemon's own surface: health and status, secret changes, reload and
 * shutdown over RPC, and the audit log (daemon-methods.ts); the configuration
 * (config-changes.ts); the API contract at /openapi.json (api-document.ts);
 * and the gateway.status and gateway.reload tools.
 */
import { configSchema, LIVE_KEYS, READ_ONLY_KEYS, RELOAD_KEYS } from '../../shared/config/schema.ts';
import channelsModule from '../channels/module.ts';
import { defineModule, type RpcClient } from '../kernel/module.ts';
import { apiDocumentRoutes } from './api-document.ts';
import { ConfigChanges } from './config-changes.ts';
import { daemonMethods } from './daemon-methods.ts';
import { startMemoryReducer } from './memory-reducer.ts';
import { pluginSummary } from './status.ts';
import { restoreTiering } from './tiering.ts';

export default defineModule({
  id: 'core',
  needs: [channelsModule],
  setup(ctx) {
    const { daemon, store } = ctx;
    const { channels } = ctx.use(channelsModule);
    const audit = (kind: string, client: RpcClient, subject?: string) => store.audit(kind, { actor: client.deviceId, subject, address: client.address });

    // What keeps the daemon from storing (a full disk) makes it unready, says why, and clears when writes can work again.
    ctx.readiness.check('storage', () => store.health.problem(daemon.paths.dir));
    store.health.onChange((fault) => {
      if (fault) ctx.log.warn({ fault: fault.kind, detail: fault.detail }, 'the gateway cannot store: requests that need to are answered 503 until it can');
      else ctx.log.info('the gateway can store again');
    });
    daemonMethods(ctx, audit);

    const config = new ConfigChanges({ daemon, config: ctx.config, log: ctx.log, audit });
    ctx.rpc.method({ name: 'config.get', handler: ({ key }) => config.get(key) });
    ctx.rpc.method({ name: 'config.set', handler: async ({ key, value }, client) => (await config.change([{ key, value }], client))[0]! });
    ctx.rpc.method({ name: 'config.unset', handler: async ({ key }, client) => (await config.change([{ key, value: undefined }], client))[0]! });
    ctx.rpc.method({ name: 'config.patch', handler: ({ changes, dryRun = false }, client) => config.patch(changes, dryRun, client) });
    ctx.rpc.method({
      name: 'config.schema',
      handler: () => ({ schema: configSchema as unknown as Record<string, unknown>, liveKeys: [...LIVE_KEYS], reloadKeys: [...RELOAD_KEYS], readOnlyKeys: Object.keys(READ_ONLY_KEYS) }),
    });

    // Memory a burst made the process commit goes back once it is idle again; V8 optimises hot code as soon as it is hot.
    let stopMemoryReducer: (() => void) | undefined;
    ctx.onStart(() => {
      stopMemoryReducer = startMemoryReducer(ctx.log);
      // After the other modules' start hooks (start-up still), on the next turn of the event loop.
      setTimeout(() => { if (restoreTiering()) ctx.log.debug('V8 tiering counts restored after start-up'); }, 0).unref();
    });
    ctx.onStop(() => stopMemoryReducer?.());

    apiDocumentRoutes(ctx);
    ctx.tools.add({
      name: 'gateway.status',
      description: 'The gateway\'s profile, version, uptime, channels and plugins.',
      inputSchema: { type: 'object', additionalProperties: false, properties: {} },
      handler: () => ({
        profile: daemon.profile, version: daemon.version, pid: process.pid, uptimeMs: Date.now() - daemon.startedAt, url: daemon.url,
        channels: channels.status(), plugins: pluginSummary(daemon),
      }),
    });
    ctx.tools.add({
      name: 'gateway.reload',
      description: 'Re-read the configuration and plugins without a restart.',
      inputSchema: { type: 'object', additionalProperties: false, properties: {} },
      dangerous: true,
      handler: () => daemon.reload('tool gateway.reload'),
    });
  },
});
