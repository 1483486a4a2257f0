/**
 * Server-sent events on a raw response: each write flushed as it comes, a
 * keepalive comment when the stream has been idle, and the client's going
 * away noticed at once.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export class EventStream {
  private lastWrite = Date.now();
  private readonly keepalive: NodeJS.Timeout;
  private ended = false;
  private readonly res: ServerResponse;
  /** Aborted when the client closes the connection before the stream ends. */
  readonly gone = new AbortController();

  constructor(req: IncomingMessage, res: ServerResponse, keepaliveMs: number) {
    this.res = res;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    // The head leaves once the work this turn started (the model request) is on its way, or with the first event.
    setImmediate(() => {
      if (!res.headersSent && !res.destroyed) res.flushHeaders();
    });
    const onClose = () => {
      if (!this.ended) this.gone.abort(new Error('the client went away'));
      clearInterval(this.keepalive);
    };
    res.on('close', onClose);
    req.on('aborted', onClose);
    this.keepalive = setInterval(() => {
      if (Date.now() - this.lastWrite >= keepaliveMs) this.write(': keepalive\n\n');
    }, Math.max(250, Math.floor(keepaliveMs / 3))).unref();
  }

  private write(text: string): void {
    if (this.ended || this.res.destroyed) return;
    this.lastWrite = Date.now();
    this.res.write(text);
  }

  /** An event: `data:` only, or with an `event:` name (the Responses API names its events). */
  send(data: unknown, event?: string): void {
    this.write(`${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepalive);
    if (!this.res.destroyed) this.res.end();
  }
}
