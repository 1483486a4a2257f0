import { METHOD_SCOPES, type MethodName } from '../../shared/protocol/methods.ts';
import type { NODE_SCOPE } from '../../shared/protocol/methods.ts';
import type { OperatorScope } from '../../shared/protocol/scopes.ts';

/** Who is calling: the authenticated connection's identity and grants. */
export interface RpcClient {
  connectionId: string;
  clientId: string;
  role: string;
  scopes: ReadonlySet<string>;
  address: string;
  deviceId: string;
}

export type MethodHandler = (params: unknown, client: RpcClient) => unknown | Promise<unknown>;

export interface MethodEntry {
  scope: OperatorScope | typeof NODE_SCOPE;
  handler: MethodHandler;
}

/** The methods the daemon answers. Scopes come from the shared table, never from the handler. */
export class MethodTable {
  private readonly entries = new Map<string, MethodEntry>();
  /** Methods registered elsewhere (plugins), asked after the gateway's own. */
  fallback?: (name: string) => MethodEntry | undefined;

  add(name: MethodName, handler: MethodHandler): this {
    this.entries.set(name, { scope: METHOD_SCOPES[name], handler });
    return this;
  }

  get(name: string): MethodEntry | undefined {
    return this.entries.get(name) ?? this.fallback?.(name);
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  names(): string[] {
    return [...this.entries.keys()].sort();
  }
}
