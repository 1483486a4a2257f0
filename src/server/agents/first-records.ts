/**
 * A run's first records (the session, the turn, the run) are written in one
 * transaction while the daemon waits for the model: right after its first
 * event is passed on, or a few milliseconds after the request left,
 * whichever comes first; and always before any other record of the run.
 * They never stand in front of the first token. A run whose first records
 * cannot be written stops.
 */
export class FirstRecords {
  private readonly write: () => Promise<void>;
  private begun: Promise<void> | undefined;
  private failed: Error | undefined;
  private readonly unkept = new AbortController();

  /** `write` writes the records, in one transaction. */
  constructor(write: () => Promise<void>) {
    this.write = write;
  }

  /** Aborted, with the failure as its reason, when the records could not be written. */
  get signal(): AbortSignal {
    return this.unkept.signal;
  }

  /** Why the records could not be written, once that is known. */
  get failure(): Error | undefined {
    return this.failed;
  }

  /** Writes the records (once; later calls wait for that write). */
  begin(): Promise<void> {
    this.begun ??= this.write().catch((error: unknown) => {
      this.failed = error instanceof Error ? error : new Error(String(error));
      this.unkept.abort(this.failed);
      throw this.failed;
    });
    return this.begun;
  }

  /** Writes the records a moment from now (at the next turn of the event loop for 0); a failure stops the run with the reason. */
  soon(delayMs: number): void {
    const later = () => void this.begin().catch(() => undefined);
    if (delayMs === 0) setImmediate(later);
    else setTimeout(later, delayMs);
  }
}
