import { GatewayError } from '../../shared/errors.ts';
import { getPath } from '../../shared/config/keys.ts';
import { changeConfig, loadConfig } from '../../shared/config/profile-config.ts';
import { isSecretName } from '../../shared/secrets/names.ts';
import { gatewayVersion } from '../../shared/version.ts';
import type { Daemon } from '../daemon.ts';
import type { MethodTable } from './method-table.ts';
import { invalidParams, paramsObject, RpcError } from './rpc-error.ts';
import { parseToolRequest, toolAnswer, ToolError } from '../tools/tool-runner.ts';

const keyParam = (params: Record<string, unknown>, required: boolean): string | undefined => {
  const key = params.key;
  if (key === undefined && !required) return undefined;
  if (typeof key !== 'string' || key.length === 0) throw invalidParams('params.key must be a dotted configuration key');
  return key;
};

/** Errors of the shared config code reach the client as INVALID_REQUEST with their message. */
async function asRpc<T>(work: () => Promise<T> | T): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof GatewayError) throw new RpcError('INVALID_REQUEST', error.message, { exitCode: error.exitCode, hints: error.hints });
    throw error;
  }
}

/** The daemon's own methods: health, status, configuration and shutdown. */
export function registerCoreMethods(methods: MethodTable, daemon: Daemon): void {
  methods
    .add('health', () => ({ ok: daemon.readiness === 'ready', status: daemon.readiness }))
    .add('status', () => ({
      profile: daemon.paths.name,
      state: 'running',
      readiness: daemon.readiness,
      pid: process.pid,
      port: daemon.port,
      bind: daemon.bind.mode,
      host: daemon.bind.host,
      url: daemon.url,
      version: gatewayVersion(),
      instanceId: daemon.instanceId,
      startedAt: daemon.startedAt,
      uptimeMs: daemon.uptimeMs,
      logFile: daemon.paths.log,
      secretStore: daemon.secrets.backend,
      authMode: daemon.config.gateway.auth.mode,
      connections: daemon.connections,
      plugins: daemon.pluginSummary(),
    }))
    .add('config.get', (params) => {
      const key = keyParam(paramsObject(params), false);
      return asRpc(() => {
        const { raw, effective } = loadConfig(daemon.paths);
        if (key === undefined) return { config: effective, set: raw };
        const value = getPath(effective, key);
        return { key, value, source: getPath(raw, key) === undefined ? 'default' : 'config' };
      });
    })
    .add('config.set', async (params, client) => {
      const input = paramsObject(params);
      const key = keyParam(input, true)!;
      if (!('value' in input) || input.value === undefined) throw invalidParams('params.value is required');
      const change = await asRpc(() => changeConfig(daemon.paths, key, input.value));
      daemon.applyConfig(loadConfig(daemon.paths).effective);
      daemon.logger.info({ key, restartRequired: change.restartRequired, client: client.clientId }, 'configuration changed');
      daemon.audit('config.changed', { actor: client.deviceId, subject: key, address: client.address });
      return change;
    })
    .add('config.unset', async (params, client) => {
      const key = keyParam(paramsObject(params), true)!;
      const change = await asRpc(() => changeConfig(daemon.paths, key, undefined));
      daemon.applyConfig(loadConfig(daemon.paths).effective);
      daemon.logger.info({ key, restartRequired: change.restartRequired, client: client.clientId }, 'configuration key removed');
      return change;
    })
    .add('secrets.changed', async (params, client) => {
      const name = paramsObject(params).name;
      if (typeof name !== 'string' || !isSecretName(name)) throw invalidParams('params.name must be a secret name');
      daemon.logger.info({ secret: name, client: client.clientId }, 'secret changed');
      daemon.audit('secret.changed', { actor: client.deviceId, subject: name, address: client.address });
      if (name === 'gateway.token' || name === 'gateway.password') await daemon.loadCredentials().catch(() => undefined);
      if (name.startsWith('webhooks.github.secret')) await daemon.loadWebhookSecrets();
      if (name === 'api.serviceKey' || name === 'api.jwt.secret') await daemon.loadApiSecrets();
      if (name === 'hooks.token' || name === 'gateway.token') await daemon.loadHooksToken();
      return { name, applied: true };
    })
    .add('reload', async (_params, client) => {
      daemon.audit('daemon.reload', { actor: client.deviceId, address: client.address });
      return daemon.reload(`rpc from ${client.clientId}`);
    })
    .add('plugins.list', () => ({ plugins: daemon.plugins?.plugins ?? [], lastReload: daemon.plugins?.lastReload ?? null }))
    .add('tools.catalog', () => ({ tools: daemon.tools!.catalog('ws') }))
    .add('tools.invoke', async (params, client) => {
      try {
        const request = parseToolRequest(paramsObject(params));
        const outcome = await daemon.tools!.invoke(request, { name: `device:${client.deviceId}`, surface: 'ws', admin: client.scopes.has('operator.admin') });
        return toolAnswer(outcome);
      } catch (error) {
        if (!(error instanceof ToolError)) throw error;
        const code = error.status === 404 ? 'NOT_FOUND' : error.status === 403 ? 'FORBIDDEN' : error.status >= 500 ? 'INTERNAL' : 'INVALID_REQUEST';
        throw new RpcError(code, error.message, { status: error.status });
      }
    })
    .add('shutdown', (_params, client) => {
      daemon.logger.info({ client: client.clientId, address: client.address }, 'shutdown requested over RPC');
      // Answer first, then stop: the caller waits for the process to exit.
      setImmediate(() => void daemon.stop('rpc shutdown'));
      return { stopping: true, pid: process.pid };
    });
}
