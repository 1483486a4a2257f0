/** The event bus: modules emit, the control plane delivers to connected clients holding the scope. */

export interface GatewayEvent {
  event: string;
  payload: unknown;
  /** The operator scope a client needs to receive it. */
  scope: string;
  /** Emitted by another daemon sharing this one's store, and relayed here. */
  remote?: true;
}

type Listener = (event: GatewayEvent) => void;

export class EventBus {
  private readonly listeners = new Set<Listener>();
  private readonly named = new Map<string, Set<(payload: unknown) => void>>();

  /** Publishes an event to every subscriber and to listeners of its name. */
  emit(event: string, payload: unknown, scope = 'operator.read'): void {
    const frame = { event, payload, scope };
    for (const listener of this.listeners) listener(frame);
    for (const listener of this.named.get(event) ?? []) listener(payload);
  }

  /**
   * An event another daemon of the same gateway emitted: it reaches this
   * daemon's clients, not its modules (the daemon that emitted it acted on it).
   */
  relay(event: string, payload: unknown, scope: string): void {
    const frame: GatewayEvent = { event, payload, scope, remote: true };
    for (const listener of this.listeners) listener(frame);
  }

  /** Receives every event (the control plane); returns a function that unsubscribes. */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Receives the events of one name inside the daemon; returns a function that unsubscribes. */
  on(event: string, listener: (payload: unknown) => void): () => void {
    let set = this.named.get(event);
    if (!set) {
      set = new Set();
      this.named.set(event, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }
}
