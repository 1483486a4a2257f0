/**
 * What a run reads of its session: the latest summary and the messages
 * after it, bounded by the agent's window; what falls out of the window is
 * summarised into a new summary message first (a failed summary leaves the
 * window as it is and says so in the log).
 */
import type { Logger } from 'pino';
import type { AgentSettings } from '../../shared/config/types.ts';
import type { CallMeta, ModelCaller } from '../models/module.ts';
import type { SessionMessage, Sessions } from '../sessions/module.ts';
import { summarise, type Summarised, window as summaryWindow } from './summary.ts';

/** The most messages read at once: the first run on a long session from before summaries reads this many of its newest. */
export const SESSION_READ_MAX = 5000;

export interface SessionReaderDeps {
  sessions: Pick<Sessions, 'store' | 'append'>;
  caller: ModelCaller;
  log: Logger;
}

export interface SessionRead {
  /** The messages the model reads, oldest first (the turns the run answers among them). */
  past: SessionMessage[];
  /** The summary of what came before them. */
  summary: string | undefined;
}

export class SessionReader {
  private readonly deps: SessionReaderDeps;

  constructor(deps: SessionReaderDeps) {
    this.deps = deps;
  }

  /** `meta` is the run's own: a summary made here is charged as the run's model calls are (its credential, automation, person, delegators). */
  async read(sessionKey: string, settings: AgentSettings, turnIds: number[], meta: CallMeta & { agent: string }, signal: AbortSignal): Promise<SessionRead> {
    const agentId = meta.agent;
    const { sessions, caller, log } = this.deps;
    const latest = await sessions.store.latestSummary(sessionKey);
    const covered = latest?.data?.summarises as Summarised | undefined;
    const since = covered?.toId ?? 0;
    // Usually a few dozen; the first run on a long session from before summaries reads at most SESSION_READ_MAX of its newest.
    const count = await sessions.store.countAfter(sessionKey, since);
    const unsummarised = count === 0 ? [] : await sessions.store.history(sessionKey, { limit: Math.min(count, SESSION_READ_MAX) });
    const after = unsummarised.filter((message) => message.id > since && message.kind !== 'summary');
    const { older, kept } = summaryWindow(after, settings, turnIds);
    if (older.length === 0 || !settings.model) return { past: kept, summary: latest?.text };
    try {
      const made = await summarise(caller, [settings.model, ...settings.fallbacks], latest?.text, older, meta, signal, settings.contextTokens);
      if (!made.text) throw new Error('the model answered an empty summary');
      const summarises: Summarised = { fromId: covered?.fromId ?? older[0]!.id, toId: older.at(-1)!.id, count: older.length + (covered?.count ?? 0), ...(count > SESSION_READ_MAX ? { unread: count - SESSION_READ_MAX } : {}) };
      await sessions.append(sessionKey, {
        direction: 'out', sender: agentId, text: made.text, at: Date.now(), role: 'system', messageKind: 'summary', via: `agent:${agentId}`,
        data: { summarises, model: made.model, usage: made.usage },
      });
      log.info({ agent: agentId, sessionKey, messages: older.length }, 'summarised the earlier messages of a long session');
      return { past: kept, summary: made.text };
    } catch (error) {
      if (signal.aborted) throw error;
      log.warn({ agent: agentId, sessionKey, err: error }, 'the earlier messages of a long session could not be summarised; the model reads the latest ones only');
      return { past: kept, summary: latest?.text };
    }
  }
}
