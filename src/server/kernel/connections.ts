/**
 * The control plane's connections as modules see them. Modules register their
 * part (admission, who is told of admitted clients) at setup, before the
 * control plane exists; the control plane attaches itself when it starts.
 */
import type { ConnectParams } from '../../shared/protocol/frames.ts';
import type { AdmitFn, Connections, RpcClient } from './module.ts';

/** What the control plane offers back once attached. */
export interface ConnectionPlane {
  size: number;
  clients(): RpcClient[];
  closeDevice(deviceId: string, reason: string): number;
}

type Admitted = (client: RpcClient, params: ConnectParams, push: (event: string, payload: unknown) => void) => void;

export class ConnectionsHub implements Connections {
  admit?: AdmitFn;
  readonly admitted: Admitted[] = [];
  readonly closed: ((client: RpcClient) => void)[] = [];
  private plane?: ConnectionPlane;

  attach(plane: ConnectionPlane): void {
    this.plane = plane;
  }

  count(): number {
    return this.plane?.size ?? 0;
  }

  clients(): RpcClient[] {
    return this.plane?.clients() ?? [];
  }

  closeDevice(deviceId: string, reason: string): number {
    return this.plane?.closeDevice(deviceId, reason) ?? 0;
  }

  admission(admit: AdmitFn): void {
    if (this.admit) throw new Error('another module already decides who connects');
    this.admit = admit;
  }

  onAdmitted(listener: Admitted): void {
    this.admitted.push(listener);
  }

  onClosed(listener: (client: RpcClient) => void): void {
    this.closed.push(listener);
  }
}
