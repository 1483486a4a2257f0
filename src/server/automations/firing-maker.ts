/**
 * Making a firing: its row, keyed by its automation and what fired it, and
 * its job, in the caller's transaction. Whoever fires a key first makes it;
 * the others get the job it made.
 */
import type { JobQueue } from '../jobs/module.ts';
import type { Db, Tx } from '../store/database.ts';
import type { Firings } from './firings.ts';

export const AUTOMATION_JOB = 'automation.run';
const MAX_ATTEMPTS = 5;

export type FiredBy = 'schedule' | 'catch-up' | 'webhook' | 'hook' | 'manual';

/** A firing to make. */
export interface NewFiring {
  automation: string;
  key: string;
  scheduledFor: number;
  firedBy: FiredBy;
  /** What the trigger brought, for the templates (beside automation, firedBy and scheduledFor). */
  fields?: Record<string, unknown>;
}

/** What a firing's job carries. */
export interface FiringPayload {
  automation: string;
  key: string;
  scheduledFor: number;
  /** The fields its templates read from. */
  fields: Record<string, unknown>;
}

export interface MadeFiring {
  automation: string;
  key: string;
  jobId: string;
  /** This caller made it (false: it was made before). */
  fresh: boolean;
}

export class FiringMaker {
  private readonly firings: Firings;
  private readonly queue: Pick<JobQueue, 'newId' | 'enqueue'>;

  constructor(firings: Firings, queue: Pick<JobQueue, 'newId' | 'enqueue'>) {
    this.firings = firings;
    this.queue = queue;
  }

  /** Makes firings in the caller's transaction: each key once, its job with it; says which were new. */
  async make(tx: Tx | Db, list: readonly NewFiring[]): Promise<MadeFiring[]> {
    const made: MadeFiring[] = [];
    for (const firing of list) {
      const jobId = this.queue.newId();
      const fresh = await this.firings.claim(tx, { automation: firing.automation, key: firing.key, scheduledFor: firing.scheduledFor, jobId, firedBy: firing.firedBy });
      if (fresh) {
        const payload: FiringPayload = {
          automation: firing.automation, key: firing.key, scheduledFor: firing.scheduledFor,
          fields: { automation: firing.automation, firedBy: firing.firedBy, scheduledFor: new Date(firing.scheduledFor).toISOString(), ...firing.fields },
        };
        await this.queue.enqueue({ id: jobId, kind: AUTOMATION_JOB, payload, source: `automation:${firing.automation}`, maxAttempts: MAX_ATTEMPTS, runAt: firing.scheduledFor }, tx);
      }
      made.push({ automation: firing.automation, key: firing.key, jobId: fresh ? jobId : (await this.firings.get(firing.automation, firing.key, tx))!.job_id, fresh });
    }
    return made;
  }
}
