/** The bound on voice calls at once (voice.concurrency). */
import { rateLimited } from '../kernel/errors.ts';

/** Calls at once, with the ones past the bound waiting in order (or refused, when they may not wait). */
export class Slots {
  private busy = 0;
  private readonly waiting: (() => void)[] = [];

  async take(bound: number, wait: boolean): Promise<() => void> {
    if (this.busy >= bound) {
      if (!wait) throw rateLimited(1000, `${bound} voice calls are running already (voice.concurrency)`);
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.busy++;
    }
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.busy--;
    };
  }
}
