import type { MethodTable } from '../ws/method-table.ts';
import { invalidParams, paramsObject, RpcError } from '../ws/rpc-error.ts';
import { MAX_INVOKE_TIMEOUT_MS, type NodeRegistry } from './node-registry.ts';

const DEFAULT_INVOKE_TIMEOUT_MS = 30_000;

/** Listing nodes and relaying commands to them; nodes answer with node.invoke.result. */
export function registerNodeMethods(methods: MethodTable, nodes: NodeRegistry): void {
  methods
    .add('nodes.list', () => ({
      nodes: nodes.list().map((node) => ({
        deviceId: node.deviceId, clientId: node.clientId, platform: node.platform, address: node.address, caps: node.caps,
        commands: node.commands, deniedCommands: node.declared.filter((command) => !node.commands.includes(command)),
        permissions: node.permissions, connectedAt: new Date(node.connectedAt).toISOString(),
      })),
    }))
    .add('nodes.invoke', (params) => {
      const input = paramsObject(params);
      if (typeof input.node !== 'string' || input.node.length === 0) throw invalidParams('params.node must name a node');
      if (typeof input.command !== 'string' || input.command.length === 0) throw invalidParams('params.command must be a command name');
      const timeoutMs = input.timeoutMs ?? DEFAULT_INVOKE_TIMEOUT_MS;
      if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > MAX_INVOKE_TIMEOUT_MS) {
        throw invalidParams(`timeoutMs must be an integer from 100 to ${MAX_INVOKE_TIMEOUT_MS}`);
      }
      return nodes.invoke(input.node, input.command, input.args, timeoutMs).then((result) => ({ node: input.node, command: input.command, result }));
    })
    .add('node.invoke.result', (params, client) => {
      const input = paramsObject(params);
      if (typeof input.invocationId !== 'string' || typeof input.ok !== 'boolean') throw invalidParams('params need invocationId and ok');
      const settled = nodes.settle(client.connectionId, input.invocationId, { ok: input.ok, result: input.result, error: typeof input.error === 'string' ? input.error : undefined });
      if (!settled) throw new RpcError('NOT_FOUND', `no pending invocation ${input.invocationId} for this node (timed out or unknown)`);
      return { accepted: true };
    });
}
