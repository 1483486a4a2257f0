import { matchesPattern } from '../../shared/patterns.ts';
import { randomUUID } from 'node:crypto';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { DomainError } from '../kernel/errors.ts';

/** A connected companion node and what it offers, after the gateway's policy. */
export interface ConnectedNode {
  deviceId: string;
  connectionId: string;
  clientId: string;
  platform: string;
  address: string;
  caps: string[];
  /** Commands the node declared. */
  declared: string[];
  /** Declared commands the policy allows. */
  commands: string[];
  permissions: Record<string, unknown>;
  connectedAt: number;
  /** Sends an event to the node. */
  push: (event: string, payload: unknown) => void;
}

interface Pending {
  nodeConnection: string;
  resolve: (value: unknown) => void;
  reject: (error: DomainError) => void;
  timer: NodeJS.Timeout;
}


/** Whether gateway.nodes allows a command: not denied, and allowed when an allow-list is set. */
export function commandAllowed(policy: GatewayConfig['gateway']['nodes'], command: string): boolean {
  if (policy.denyCommands.some((pattern) => matchesPattern(pattern, command))) return false;
  return policy.allowCommands.length === 0 || policy.allowCommands.some((pattern) => matchesPattern(pattern, command));
}

/** Connected nodes and the commands relayed to them. */
export class NodeRegistry {
  private readonly nodes = new Map<string, ConnectedNode>();
  private readonly pending = new Map<string, Pending>();
  private readonly policy: () => GatewayConfig['gateway']['nodes'];

  constructor(policy: () => GatewayConfig['gateway']['nodes']) {
    this.policy = policy;
  }

  add(node: Omit<ConnectedNode, 'commands'>): ConnectedNode {
    const entry = { ...node, commands: node.declared.filter((command) => commandAllowed(this.policy(), command)) };
    this.nodes.set(node.connectionId, entry);
    return entry;
  }

  remove(connectionId: string): void {
    if (!this.nodes.delete(connectionId)) return;
    for (const [id, pending] of this.pending) {
      if (pending.nodeConnection !== connectionId) continue;
      clearTimeout(pending.timer);
      this.pending.delete(id);
      pending.reject(new DomainError('unavailable', 'The node disconnected before it answered.', { retryable: true }));
    }
  }

  list(): ConnectedNode[] {
    return [...this.nodes.values()];
  }

  /** A node by device id, an unambiguous device id prefix, or client id. */
  find(name: string): ConnectedNode | undefined {
    const nodes = this.list();
    const exact = nodes.find((node) => node.deviceId === name || node.clientId === name);
    if (exact) return exact;
    const prefixed = nodes.filter((node) => name.length >= 6 && node.deviceId.startsWith(name));
    return prefixed.length === 1 ? prefixed[0] : undefined;
  }

  /** Relays a command to a node and resolves with its result, or fails on refusal, error or timeout. */
  invoke(name: string, command: string, args: unknown, timeoutMs: number): Promise<unknown> {
    const node = this.find(name);
    if (!node) return Promise.reject(new DomainError('not_found', `No connected node ${JSON.stringify(name)}.`));
    if (!node.declared.includes(command)) return Promise.reject(new DomainError('not_found', `Node ${node.clientId} does not offer ${command}.`));
    if (!node.commands.includes(command)) {
      return Promise.reject(new DomainError('forbidden', `${command} is not allowed by gateway.nodes.allowCommands / denyCommands.`));
    }
    const invocationId = randomUUID();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(invocationId);
        reject(new DomainError('unavailable', `Node ${node.clientId} did not answer ${command} within ${timeoutMs} ms.`, { details: { timeoutMs }, retryable: true }));
      }, timeoutMs);
      this.pending.set(invocationId, { nodeConnection: node.connectionId, resolve, reject, timer });
      node.push('node.invoke', { invocationId, command, args: args ?? null });
    });
  }

  /** A node's answer to an invocation it received. */
  settle(connectionId: string, invocationId: string, outcome: { ok: boolean; result?: unknown; error?: string }): boolean {
    const pending = this.pending.get(invocationId);
    if (!pending || pending.nodeConnection !== connectionId) return false;
    this.pending.delete(invocationId);
    clearTimeout(pending.timer);
    if (outcome.ok) pending.resolve(outcome.result ?? null);
    else pending.reject(new DomainError('unavailable', `The node failed: ${String(outcome.error ?? 'no reason given').slice(0, 500)}.`));
    return true;
  }
}
