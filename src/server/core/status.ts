/** What the daemon says of itself: `gateway status` over RPC, and the plugins it runs. */
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { PluginSummary, StatusPayload } from '../../shared/protocol/results.ts';
import type { Connections, DaemonView } from '../kernel/module.ts';

export function pluginSummary(daemon: Pick<DaemonView, 'plugins'>): PluginSummary {
  const { plugins, lastReload } = daemon.plugins();
  return {
    loaded: plugins.filter((p) => p.status === 'loaded' && !p.builtin).map((p) => p.name),
    errors: plugins.filter((p) => p.status === 'error').map((p) => ({ plugin: p.name, error: p.error! })),
    lastReload,
  };
}

export function status(daemon: DaemonView, config: GatewayConfig, connections: Pick<Connections, 'count'>): StatusPayload {
  const problems = daemon.problems();
  return {
    profile: daemon.profile,
    state: 'running',
    readiness: daemon.readiness(),
    pid: process.pid,
    port: daemon.port,
    bind: daemon.bind.mode,
    host: daemon.bind.host,
    url: daemon.url,
    version: daemon.version,
    instanceId: daemon.instanceId,
    startedAt: daemon.startedAt,
    uptimeMs: Date.now() - daemon.startedAt,
    // Empty when the daemon logs to stdout only (its supervisor's journal keeps the log).
    logFile: daemon.logFile ?? '',
    secretStore: daemon.secretStore,
    authMode: config.gateway.auth.mode,
    connections: connections.count(),
    plugins: pluginSummary(daemon),
    ...(Object.keys(problems).length > 0 ? { problems } : {}),
    memory: (({ rss, heapUsed, heapTotal, external }) => ({ rss, heapUsed, heapTotal, external }))(process.memoryUsage()),
  };
}
