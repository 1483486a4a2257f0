/**
 * Commands waiting for an operator: exec under the ask approval (or a
 * command the allowlist does not cover) waits until someone approves or
 * rejects it, from the CLI, the Control UI or a chat (a button, or a reply
 * "approve 7f3a"), or its time runs out. The request is a row of the store:
 * the first answer wins there, atomically, on SQLite and on a PostgreSQL
 * store several daemons share; the daemon running the call hears of it at
 * once (the same daemon, or another's event) or at its next look. Nothing
 * runs unless approved; every outcome is in the audit, with who answered
 * and through what, and the chats told of the request hear of its end.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { ExecApprovalView } from '../../shared/protocol/results.ts';
import { visibleText } from '../../shared/visible-text.ts';
import { inTransaction, type Db, type Store, type Tx } from '../store/database.ts';
import { pruneRows } from '../store/retention.ts';
import { clock, codeSpan, type NotifyTarget, type OperatorNotices } from './notices.ts';

export type Decision = 'approved' | 'rejected' | 'expired';

/** Who answers, and through what: `device:<id>` through cli or control-ui, `<channel>:<sender>` through the channel. */
export interface Decider {
  by: string;
  via: string;
  /** Where the answer came from (a device's address), for the audit. */
  address?: string;
}

/** What became of an answer: it decided; it came late (decided already, or the time ran out); it named no single request. */
export type Decided =
  | { outcome: 'decided'; view: ExecApprovalView }
  | { outcome: 'late'; view: ExecApprovalView }
  | { outcome: 'ambiguous'; ids: string[] }
  | { outcome: 'unknown' };

export interface ApprovalRequest {
  command: string;
  caller: string;
  agent: string | null;
  sessionKey: string | null;
  why: string;
  timeoutMs: number;
}

type Row = Record<string, string | number | bigint | null>;

/** How often a daemon sharing its store looks whether another daemon decided what it waits for (besides that daemon's event). */
const LOOK_EVERY_MS = 2000;
/** A reference an operator types: the id, or the short code (4 or more of the id's hex digits). */
const CODE = /^[0-9a-f]{4,12}$/;

const toView = (row: Row): ExecApprovalView => ({
  id: String(row.id), code: String(row.code), command: String(row.command), caller: String(row.caller),
  agent: row.agent === null ? null : String(row.agent), sessionKey: row.session_key === null ? null : String(row.session_key), why: String(row.why),
  requestedAt: new Date(Number(row.requested_at)).toISOString(), expiresAt: new Date(Number(row.expires_at)).toISOString(),
  status: String(row.status) as ExecApprovalView['status'],
  decidedBy: row.decided_by === null ? null : String(row.decided_by), decidedVia: row.decided_via === null ? null : String(row.decided_via),
});

/** What a chat is told of a request. */
export function requestText(view: ExecApprovalView, buttons: boolean): string {
  const who = view.agent ? `Agent ${view.agent}` : visibleText(view.caller);
  return [
    `Approval ${view.code}: ${who} wants to run ${codeSpan(visibleText(view.command))}`,
    `${view.why}${view.sessionKey ? ` (session ${visibleText(view.sessionKey)})` : ''}; it waits until ${clock(Date.parse(view.expiresAt))}.`,
    buttons ? `Approve or reject with the buttons, or reply "approve ${view.code}" or "reject ${view.code}".` : `Reply "approve ${view.code}" or "reject ${view.code}".`,
  ].join('\n');
}

/** What a chat is told once a request is over. */
export function outcomeText(view: ExecApprovalView): string {
  const command = codeSpan(visibleText(view.command));
  if (view.status === 'expired') return `Approval ${view.code}: nobody answered in time (${view.decidedVia ?? 'its time ran out'}); it did not run: ${command}`;
  return `Approval ${view.code}: ${view.status} by ${view.decidedBy} (${view.decidedVia}): ${command}`;
}

/** What the person who answered is told. */
export function answerText(decided: Decided): string {
  switch (decided.outcome) {
    case 'decided': return `${decided.view.status === 'approved' ? 'Approved' : 'Rejected'} ${decided.view.code}: ${visibleText(decided.view.command)}`;
    case 'late': return decided.view.status === 'expired'
      ? `Approval ${decided.view.code} is over: nobody answered in time, and the command did not run.`
      : `Approval ${decided.view.code} was already ${decided.view.status} by ${decided.view.decidedBy} (${decided.view.decidedVia}); your answer changes nothing.`;
    case 'ambiguous': return `Several approvals begin with that code (${decided.ids.join(', ')}); give more of it.`;
    default: return 'No approval has that code.';
  }
}

export interface ExecApprovalsDeps {
  store: Store;
  /** This daemon's instance id, recorded with the requests it waits on. */
  daemon: string;
  notices: OperatorNotices;
  /** Tells operators (the exec.approval event). */
  tell: (event: 'requested' | 'resolved', view: ExecApprovalView) => void;
  /** Tells the other daemons sharing the store that a request was decided here. */
  publish?: (id: string) => void;
  /** The store is shared: look now and then for what other daemons decided. */
  shared?: boolean;
  logger: Logger;
  now?: () => number;
}

export class ExecApprovals {
  private readonly deps: ExecApprovalsDeps;
  private readonly now: () => number;
  /** The requests this daemon's calls wait on, by id. */
  private readonly waiting = new Map<string, { resolve: (outcome: { decision: Decision; id: string; by?: string }) => void; timer?: NodeJS.Timeout }>();
  private look?: NodeJS.Timeout;

  constructor(deps: ExecApprovalsDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
  }

  /** Waits for an operator's decision on a command: the request is stored and told to approvals.notify's chats first. */
  async ask(request: ApprovalRequest): Promise<{ decision: Decision; id: string; by?: string }> {
    const id = await this.newId();
    return new Promise((resolve, reject) => {
      // Waiting before the request exists: an answer right after it is stored finds the waiter.
      this.waiting.set(id, { resolve });
      this.create(id, request).then((view) => {
        const entry = this.waiting.get(id);
        if (entry) {
          entry.timer = setTimeout(() => void this.expire(id), Math.max(0, Date.parse(view.expiresAt) - this.now()));
          entry.timer.unref();
        }
        this.watch();
      }, (error: unknown) => {
        this.waiting.delete(id);
        reject(error);
      });
    });
  }

  /** An id whose first four digits (the short code a chat answers with) are unlike any other request's waiting. */
  private async newId(): Promise<string> {
    for (let tries = 0; ; tries++) {
      const id = `ap_${randomBytes(6).toString('hex')}`;
      if (tries >= 20 || !(await this.deps.store.get("SELECT 1 AS taken FROM exec_approvals WHERE code = ? AND status = 'pending'", id.slice(3, 7)))) return id;
    }
  }

  private async create(id: string, request: ApprovalRequest): Promise<ExecApprovalView> {
    const { store, notices } = this.deps;
    const now = this.now();
    const targets = notices.targets();
    const view = await store.transaction(async (tx) => {
      await tx.run(`INSERT INTO exec_approvals (id, code, command, caller, agent, session_key, why, requested_at, expires_at, status, daemon, notified)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`, id, id.slice(3, 7), request.command, request.caller, request.agent, request.sessionKey, request.why,
      now, now + request.timeoutMs, this.deps.daemon, JSON.stringify(targets));
      const created = toView((await tx.get<Row>('SELECT * FROM exec_approvals WHERE id = ?', id))!);
      const buttons = [{ label: 'Approve', data: `ap:y:${id}` }, { label: 'Reject', data: `ap:n:${id}` }];
      await notices.tell(targets, `approval:${id}`, (target) => requestText(created, notices.hasButtons(target.channel)), tx, buttons);
      return created;
    });
    this.deps.tell('requested', view);
    return view;
  }

  /** The requests waiting now, on any daemon of the store, oldest first, each with how its chats were told. */
  async list(): Promise<ExecApprovalView[]> {
    const rows = await this.deps.store.all<Row>("SELECT * FROM exec_approvals WHERE status = 'pending' AND expires_at > ? ORDER BY requested_at", this.now());
    return Promise.all(rows.map(async (row) => ({ ...toView(row), told: await this.deps.notices.told(targetsOf(row), `approval:${String(row.id)}`) })));
  }

  /** The request an id or short code names, if any (the one waiting, else the latest). */
  async named(reference: string, db: Db = this.deps.store): Promise<ExecApprovalView | undefined> {
    const found = await this.find(reference, db);
    return 'row' in found ? toView(found.row) : undefined;
  }

  /** A request by its id or short code: the one waiting it names, else the latest it names (over already), else none or several. */
  private async find(reference: string, db: Db): Promise<{ row: Row } | Extract<Decided, { outcome: 'ambiguous' | 'unknown' }>> {
    const ref = reference.trim().toLowerCase();
    if (ref.startsWith('ap_')) {
      const row = await db.get<Row>('SELECT * FROM exec_approvals WHERE id = ?', ref);
      return row ? { row } : { outcome: 'unknown' };
    }
    if (!CODE.test(ref)) return { outcome: 'unknown' };
    const rows = await db.all<Row>('SELECT * FROM exec_approvals WHERE code = ? AND id LIKE ? ORDER BY requested_at DESC LIMIT 20', ref.slice(0, 4), `ap_${ref}%`);
    const waiting = rows.filter((row) => row.status === 'pending');
    if (waiting.length > 1) return { outcome: 'ambiguous', ids: waiting.map((row) => String(row.id)) };
    const row = waiting[0] ?? rows[0];
    return row ? { row } : { outcome: 'unknown' };
  }

  /**
   * Answers a request (by id or short code): the first answer wins, in the
   * caller's transaction when it gives one. The winner's decision is audited
   * and told to the chats that were told of the request (their messages
   * edited where they can be), and to the daemon whose call waits.
   */
  async decide(reference: string, approve: boolean, decider: Decider, db?: Db): Promise<Decided> {
    const work = async (tx: Tx): Promise<Decided> => {
      const found = await this.find(reference, tx);
      if (!('row' in found)) return found;
      const id = String(found.row.id);
      const now = this.now();
      const { changes } = await tx.run("UPDATE exec_approvals SET status = ?, decided_by = ?, decided_via = ?, decided_at = ? WHERE id = ? AND status = 'pending' AND expires_at > ?",
        approve ? 'approved' : 'rejected', decider.by, decider.via, now, id, now);
      const view = toView((await tx.get<Row>('SELECT * FROM exec_approvals WHERE id = ?', id))!);
      if (changes === 0) return { outcome: 'late', view: view.status === 'pending' ? { ...view, status: 'expired' } : view };
      await this.deps.store.audit(approve ? 'exec.approved' : 'exec.rejected', {
        actor: decider.by, subject: id, ...(decider.address ? { address: decider.address } : {}), detail: { command: view.command, code: view.code, via: decider.via },
      }, tx);
      await this.deps.notices.follow(targetsOf(found.row), `approval:${id}`, `approval-done:${id}`, outcomeText(view), tx);
      tx.afterCommit(() => this.ended(view, true));
      return { outcome: 'decided', view };
    };
    return db && inTransaction(db) ? work(db) : this.deps.store.transaction(work);
  }

  /** A request is over: operators are told, the call waiting here goes on, the other daemons hear of it. */
  private ended(view: ExecApprovalView, here: boolean): void {
    this.deps.tell('resolved', view);
    this.settle(view);
    if (here) this.deps.publish?.(view.id);
  }

  /** The call waiting on a request, if this daemon runs it, goes on with its outcome. */
  private settle(view: ExecApprovalView): void {
    if (view.status === 'pending') return;
    const entry = this.waiting.get(view.id);
    if (!entry) return;
    this.waiting.delete(view.id);
    clearTimeout(entry.timer);
    entry.resolve({ decision: view.status, id: view.id, ...(view.decidedBy ? { by: view.decidedBy } : {}) });
  }

  /** Another daemon decided a request (its event): the call waiting here, if any, reads the outcome. */
  async heard(id: string): Promise<void> {
    if (!this.waiting.has(id)) return;
    const row = await this.deps.store.get<Row>('SELECT * FROM exec_approvals WHERE id = ?', id);
    if (row) this.settle(toView(row));
  }

  /** Its time ran out: nobody answered (unless an answer won just before). */
  private async expire(id: string, why = 'its time ran out'): Promise<void> {
    try {
      const view = await this.deps.store.transaction(async (tx) => {
        const row = await tx.get<Row>('SELECT * FROM exec_approvals WHERE id = ?', id);
        if (!row) return undefined;
        const { changes } = await tx.run("UPDATE exec_approvals SET status = 'expired', decided_via = ?, decided_at = ? WHERE id = ? AND status = 'pending'", why, this.now(), id);
        const current = toView((await tx.get<Row>('SELECT * FROM exec_approvals WHERE id = ?', id))!);
        if (changes > 0) {
          await this.deps.store.audit('exec.expired', { actor: 'gateway', subject: id, detail: { command: current.command, code: current.code, why } }, tx);
          await this.deps.notices.follow(targetsOf(row), `approval:${id}`, `approval-done:${id}`, outcomeText(current), tx);
          tx.afterCommit(() => this.deps.tell('resolved', current));
        }
        return current;
      });
      if (view) this.settle(view);
      else this.settle({ id, status: 'expired' } as ExecApprovalView);
    } catch (error) {
      this.deps.logger.warn({ err: error, approval: id }, 'an approval\'s end could not be recorded; trying again');
      const entry = this.waiting.get(id);
      if (entry) {
        entry.timer = setTimeout(() => void this.expire(id, why), 1000);
        entry.timer.unref();
      }
    }
  }

  /** Sharing the store: while calls wait here, look every few seconds whether another daemon decided (its event may be missed). */
  private watch(): void {
    if (!this.deps.shared || this.look) return;
    this.look = setInterval(() => {
      if (this.waiting.size === 0) {
        clearInterval(this.look);
        this.look = undefined;
        return;
      }
      const ids = [...this.waiting.keys()];
      void this.deps.store.all<Row>(`SELECT * FROM exec_approvals WHERE status <> 'pending' AND id IN (${ids.map(() => '?').join(', ')})`, ...ids)
        .then((rows) => rows.forEach((row) => this.settle(toView(row))), () => undefined);
    }, LOOK_EVERY_MS);
    this.look.unref();
  }

  /**
   * Requests a daemon that died left waiting can no longer run: they end as
   * expired. Alone on its store, a starting daemon knows every waiting one
   * not its own was a previous one's; sharing one, only those of daemons no
   * longer attached.
   */
  async interruptLeftovers(): Promise<number> {
    const live = await this.deps.store.liveDaemons();
    const alive = live?.length ? live : [this.deps.daemon];
    const rows = await this.deps.store.all<Row>(`SELECT id FROM exec_approvals WHERE status = 'pending' AND (daemon IS NULL OR daemon NOT IN (${alive.map(() => '?').join(', ')}))`, ...alive);
    for (const row of rows) await this.expire(String(row.id), 'the daemon stopped while it waited');
    return rows.length;
  }

  /** Refuses everything still waiting here (the daemon stops). */
  async close(): Promise<void> {
    clearInterval(this.look);
    this.look = undefined;
    await Promise.all([...this.waiting.keys()].map((id) => this.expire(id, 'the daemon stopped while it waited')));
    for (const id of [...this.waiting.keys()]) this.settle({ id, status: 'expired' } as ExecApprovalView);
  }

  async prune(retentionMs: number): Promise<number> {
    return pruneRows(this.deps.store, 'exec_approvals', 'id', "status <> 'pending' AND requested_at < ?", this.now() - retentionMs);
  }
}

/** The chats a request was told to (approvals.notify when it was made). */
function targetsOf(row: Row): NotifyTarget[] {
  try {
    return row.notified ? JSON.parse(String(row.notified)) as NotifyTarget[] : [];
  } catch {
    return [];
  }
}
