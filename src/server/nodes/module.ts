/** Companion nodes: connections of role node, their commands under the policy, and commands relayed to them. */
import { DomainError } from '../kernel/errors.ts';
import { defineModule } from '../kernel/module.ts';
import { NodeRegistry } from './node-registry.ts';

const DEFAULT_INVOKE_TIMEOUT_MS = 30_000;

export default defineModule({
  id: 'nodes',
  setup(ctx) {
    const nodes = new NodeRegistry(() => ctx.config().gateway.nodes);
    ctx.connections.onAdmitted((client, params, push) => {
      if (client.role !== 'node') return;
      const node = nodes.add({
        deviceId: client.deviceId, connectionId: client.connectionId, clientId: client.clientId, platform: params.client.platform,
        address: client.address, caps: params.caps ?? [], declared: params.commands ?? [], permissions: params.permissions ?? {},
        connectedAt: Date.now(), push,
      });
      ctx.log.info({ node: node.clientId, device: node.deviceId, commands: node.commands }, 'node connected');
    });
    ctx.connections.onClosed((client) => nodes.remove(client.connectionId));

    ctx.rpc.method({
      name: 'nodes.list',
      handler: () => ({
        nodes: nodes.list().map((node) => ({
          deviceId: node.deviceId, clientId: node.clientId, platform: node.platform, address: node.address, caps: node.caps,
          commands: node.commands, deniedCommands: node.declared.filter((command) => !node.commands.includes(command)),
          permissions: node.permissions, connectedAt: new Date(node.connectedAt).toISOString(),
        })),
      }),
    });
    ctx.rpc.method({
      name: 'nodes.invoke',
      handler: async ({ node, command, args, timeoutMs }) => ({
        node, command, result: await nodes.invoke(node, command, args, timeoutMs ?? DEFAULT_INVOKE_TIMEOUT_MS),
      }),
    });
    ctx.rpc.method({
      name: 'node.invoke.result',
      handler: ({ invocationId, ok, result, error }, client) => {
        if (!nodes.settle(client.connectionId, invocationId, { ok, result, error })) {
          throw new DomainError('not_found', `No pending invocation ${invocationId} for this node (timed out or unknown).`);
        }
        return { accepted: true };
      },
    });
  },
});
