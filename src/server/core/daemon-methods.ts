/**
 * The daemon over RPC: health and status, a changed secret, reload, the
 * plugins, shutdown and restart, and the audit log.
 */
import type { AuditEvent } from '../../shared/protocol/results.ts';
import { isSecretName } from '../../shared/secrets/names.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ModuleContext, RpcClient } from '../kernel/module.ts';
import type { Row } from '../store/engine.ts';
import { restartSelf } from './self-restart.ts';
import { status } from './status.ts';

/** An audit event as `gateway audit` shows it. */
export const auditView = (row: Row): AuditEvent => ({
  id: Number(row.id), at: new Date(Number(row.at)).toISOString(), kind: String(row.kind), actor: row.actor, subject: row.subject,
  address: row.address, detail: row.detail === null ? null : JSON.parse(String(row.detail)),
});

export function daemonMethods(ctx: ModuleContext, audit: (kind: string, client: RpcClient, subject?: string) => void): void {
  const { daemon, store } = ctx;
  ctx.rpc.method({ name: 'health', handler: () => ({ ok: daemon.readiness() === 'ready', status: daemon.readiness() }) });
  ctx.rpc.method({ name: 'status', handler: () => status(daemon, ctx.config(), ctx.connections) });
  ctx.rpc.method({
    name: 'secrets.changed',
    handler: async ({ name }, client) => {
      if (!isSecretName(name)) throw new DomainError('invalid', 'params.name must be a secret name.');
      ctx.log.info({ secretName: name, client: client.clientId }, 'secret changed');
      audit('secret.changed', client, name);
      await daemon.secretChanged(name);
      return { name, applied: true };
    },
  });
  ctx.rpc.method({
    name: 'reload',
    handler: (_params, client) => {
      audit('daemon.reload', client);
      return daemon.reload(`rpc from ${client.clientId}`);
    },
  });
  ctx.rpc.method({ name: 'plugins.list', handler: () => daemon.plugins() });
  ctx.rpc.method({
    name: 'shutdown',
    handler: (_params, client) => {
      ctx.log.info({ client: client.clientId, address: client.address }, 'shutdown requested over RPC');
      // Answer first, then stop: the caller waits for the process to exit.
      setImmediate(() => void daemon.stop('rpc shutdown'));
      return { stopping: true, pid: process.pid };
    },
  });
  ctx.rpc.method({
    name: 'restart',
    handler: (_params, client) => {
      const { via } = restartSelf(daemon.profile);
      ctx.log.info({ client: client.clientId, address: client.address, via }, 'restart requested over RPC');
      audit('gateway.restart', client, daemon.profile);
      return { restarting: true, pid: process.pid, via };
    },
  });
  ctx.rpc.method({
    name: 'audit.list',
    handler: async ({ since, limit }) => ({ events: (await store.auditEvents(since ?? 0, limit ?? 200)).reverse().map(auditView) }),
  });
}
