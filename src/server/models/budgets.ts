/**
 * Caps on spending: `agents.<id>.budget` and `automations.<id>.budget`, a
 * day's and a month's (UTC) in models.currency. Before a model is called, what
 * the agent or the automation spent in the period is read from the log of
 * model calls (the store every daemon of a shared store writes): at the cap,
 * the call is refused (429, until the period ends) and nothing is spent.
 * Calls already running finish. Crossing 80 % of a cap, and reaching it, is
 * told to the operators once per period, however many daemons share the
 * store: the first to record the notice tells it.
 */
import type { Budget, GatewayConfig } from '../../shared/config/types.ts';
import { DomainError } from '../kernel/errors.ts';
import type { Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';
import { MICROS } from './prices.ts';
import type { UsageLog } from './usage-log.ts';

export const BUDGET_MIGRATIONS: readonly Migration[] = [{
  version: 3,
  name: 'budget notices told once per period',
  sql: `
    CREATE TABLE budget_notices (
      key TEXT PRIMARY KEY,
      at BIGINT NOT NULL
    );
  `,
}];

type Period = 'daily' | 'monthly';

/** Whom a call is for, as far as caps go (the caller's CallMeta). */
interface CallMeta {
  agent?: string;
  subject?: string;
  surface?: string;
  delegatedBy?: string;
  delegators?: string[];
}

/** When a period began and ends, in UTC. */
export function periodOf(period: Period, now: number): { start: number; end: number } {
  const date = new Date(now);
  if (period === 'daily') {
    const start = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate());
    return { start, end: start + 86_400_000 };
  }
  return { start: Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1), end: Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1) };
}

/** A cap that applies to a call: whose it is, and the setting that holds it. */
interface Cap {
  who: { agent: string } | { automation: string } | { subjects: string[] };
  label: string;
  setting: string;
  budget: Budget;
}

export interface BudgetNotice {
  /** The notice's key: the setting, the period and its start, the level (told once each). */
  key?: string;
  level: 'warning' | 'reached';
  label: string;
  period: Period;
  spent: number;
  cap: number;
  currency: string;
  setting: string;
}

const money = (micros: number, currency: string) => `${(micros / MICROS).toFixed(2)} ${currency}`;

export class Budgets {
  private readonly config: () => GatewayConfig;
  private readonly usage: UsageLog;
  private readonly store: Store;
  private readonly notify: (notice: BudgetNotice) => void;

  private readonly credentialCaps: (subject: string) => Promise<{ token: string; budget: Budget; credentials: string[] }[]>;

  constructor(deps: {
    config: () => GatewayConfig; usage: UsageLog; store: Store; notify: (notice: BudgetNotice) => void;
    /** The caps on a credential's spending (a product token's own and its makers'), each over the credentials that count toward it. */
    credentialCaps?: (subject: string) => Promise<{ token: string; budget: Budget; credentials: string[] }[]>;
  }) {
    this.credentialCaps = deps.credentialCaps ?? (async () => []);
    this.config = deps.config;
    this.usage = deps.usage;
    this.store = deps.store;
    this.notify = deps.notify;
  }

  /** The caps a call falls under: its agent's, its automation's, and its credential's. */
  private async capsOf(meta: CallMeta): Promise<Cap[]> {
    const config = this.config();
    const caps: Cap[] = [];
    const agent = meta.agent ? config.agents[meta.agent] : undefined;
    if (meta.agent && agent?.budget && (agent.budget.daily !== undefined || agent.budget.monthly !== undefined)) {
      caps.push({ who: { agent: meta.agent }, label: `Agent ${meta.agent}`, setting: `agents.${meta.agent}.budget`, budget: agent.budget });
    }
    // A delegated run spends the budget of every agent above it too, up to the one whose run started the chain.
    const above = new Set([...(meta.delegators ?? []), ...(meta.delegatedBy ? [meta.delegatedBy] : [])]);
    above.delete(meta.agent ?? '');
    for (const id of above) {
      const upper = Object.hasOwn(config.agents, id) ? config.agents[id] : undefined;
      if (upper?.budget && (upper.budget.daily !== undefined || upper.budget.monthly !== undefined)) {
        caps.push({ who: { agent: id }, label: `Agent ${id}`, setting: `agents.${id}.budget`, budget: upper.budget });
      }
    }
    const automationId = meta.subject?.startsWith('automation:') ? meta.subject.slice('automation:'.length) : undefined;
    const automation = automationId ? config.automations[automationId] : undefined;
    if (automationId && automation?.budget && (automation.budget.daily !== undefined || automation.budget.monthly !== undefined)) {
      caps.push({ who: { automation: automationId }, label: `Automation ${automationId}`, setting: `automations.${automationId}.budget`, budget: automation.budget });
    }
    if (meta.subject?.startsWith('token:')) {
      for (const cap of await this.credentialCaps(meta.subject)) {
        caps.push({ who: { subjects: cap.credentials }, label: `Token ${cap.token}`, setting: `the budget of token ${cap.token}`, budget: cap.budget });
      }
    }
    return caps;
  }

  /** Each cap of a call with a limit for a period, and what was spent against it in that period. */
  private async *standing(meta: CallMeta, now: number): AsyncGenerator<{ cap: Cap; period: Period; limit: number; start: number; end: number; spent: number; currency: string }> {
    const caps = await this.capsOf(meta);
    if (caps.length === 0) return;
    const currency = this.config().models.currency ?? 'USD';
    for (const cap of caps) {
      for (const period of ['daily', 'monthly'] as const) {
        const limit = cap.budget[period];
        if (limit === undefined) continue;
        const { start, end } = periodOf(period, now);
        yield { cap, period, limit: limit * MICROS, start, end, spent: await this.usage.costSince(cap.who, start, currency), currency };
      }
    }
  }

  /** Refuses a call (429 until the period ends) when its agent or automation has spent a cap. */
  async admit(meta: CallMeta, now = Date.now()): Promise<void> {
    for await (const { cap, period, limit, start, end, spent, currency } of this.standing(meta, now)) {
      if (spent < limit) continue;
      void this.tell({ level: 'reached', label: cap.label, period, spent, cap: limit, currency, setting: cap.setting }, start);
      const seconds = Math.max(1, Math.ceil((end - now) / 1000));
      throw new DomainError('rate_limited',
        `${cap.label} has spent its ${period} budget (${money(spent, currency)} of ${money(limit, currency)}); it runs again after ${new Date(end).toISOString()} (${cap.setting}).`,
        { code: 'budget_exceeded', headers: { 'retry-after': String(seconds) }, details: { setting: cap.setting, period, resetsAt: new Date(end).toISOString() }, retryable: false });
    }
  }

  /** After a call was priced: a cap crossed past 80 % is told once. */
  async spent(meta: CallMeta, now = Date.now()): Promise<void> {
    for await (const { cap, period, limit, start, spent, currency } of this.standing(meta, now)) {
      const level = spent >= limit ? 'reached' : spent >= limit * 0.8 ? 'warning' : undefined;
      if (level) await this.tell({ level, label: cap.label, period, spent, cap: limit, currency, setting: cap.setting }, start);
    }
  }

  /** Tells a notice unless some daemon told it already in this period. */
  private async tell(notice: BudgetNotice, periodStart: number): Promise<void> {
    const key = `${notice.setting}:${notice.period}:${periodStart}:${notice.level}`;
    const { changes } = await this.store.run('INSERT INTO budget_notices (key, at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', key, Date.now());
    if (changes > 0) this.notify({ ...notice, key });
  }

  /** Notices of periods long past are forgotten. */
  async prune(before: number): Promise<number> {
    return (await this.store.run('DELETE FROM budget_notices WHERE at < ?', before)).changes;
  }
}

/** A notice as an operator reads it. */
export const noticeText = (notice: BudgetNotice) => notice.level === 'reached'
  ? `${notice.label} reached its ${notice.period} budget: ${money(notice.spent, notice.currency)} of ${money(notice.cap, notice.currency)}; its runs are refused until the period ends (${notice.setting}).`
  : `${notice.label} has spent ${Math.floor((notice.spent / notice.cap) * 100)} % of its ${notice.period} budget: ${money(notice.spent, notice.currency)} of ${money(notice.cap, notice.currency)} (${notice.setting}).`;
