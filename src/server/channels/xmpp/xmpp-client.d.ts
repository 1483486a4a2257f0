/** The parts of @xmpp/client (which ships no types) the XMPP channel and its tests use. */
declare module '@xmpp/client' {
  export interface XmppElement {
    name: string;
    attrs: Record<string, string>;
    children: (XmppElement | string)[];
    is(name: string, xmlns?: string): boolean;
    getChild(name: string, xmlns?: string): XmppElement | undefined;
    getChildText(name: string, xmlns?: string): string | null;
    getChildren(name: string, xmlns?: string): XmppElement[];
    /** The element's text. */
    text(): string;
    toString(): string;
  }
  export interface XmppClient {
    start(): Promise<unknown>;
    stop(): Promise<void>;
    send(element: XmppElement): Promise<void>;
    on(event: 'stanza', listener: (stanza: XmppElement) => void): this;
    on(event: 'online', listener: (jid: { toString(): string }) => void): this;
    on(event: 'error', listener: (error: Error) => void): this;
    on(event: 'offline' | 'disconnect' | 'status', listener: (...args: unknown[]) => void): this;
    /** XEP-0198 stream management: enabled once the server answered <enabled/>; `resumed` once a dropped stream is taken up again. */
    streamManagement?: { enabled: boolean; on(event: 'resumed', listener: () => void): void };
    /** The library's own reconnection: stopped, it leaves the timing to the caller, who opens the stream again with reconnect(). */
    reconnect: { stop(): void; reconnect(): Promise<void> };
    /** Where the connection stands: 'online', 'disconnect', 'offline' and the steps between. */
    status: string;
    /** Sends an IQ and resolves with its result stanza; rejects with the stanza's error (its condition, type, text, application element) or on timeout. */
    iqCaller: { request(stanza: XmppElement, timeoutMs?: number): Promise<XmppElement> };
    /** Whether the stream runs over TLS (STARTTLS done, or xmpps://). */
    isSecure(): boolean;
  }
  export type Authenticate = (credentials: { username: string; password: string }, mechanism: string) => Promise<void>;
  export function client(options: {
    service: string; domain?: string; username?: string; password?: string; resource?: string;
    /** Called to log in, with the mechanisms the server offers: the caller decides whether and how. */
    credentials?: (authenticate: Authenticate, mechanisms: string[], fast: unknown, entity: XmppClient) => Promise<void>;
  }): XmppClient;
  export function xml(name: string, attrs?: Record<string, string> | null, ...children: (XmppElement | string)[]): XmppElement;
}
