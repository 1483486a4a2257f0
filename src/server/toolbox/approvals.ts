/**
 * Commands waiting for an operator: exec under the ask approval (or a
 * command the allowlist does not cover) waits here until someone approves
 * or rejects it (`gateway approvals approve <id>`, the Control UI), or its
 * time runs out. Held by the daemon running the call; nothing runs unless
 * approved.
 */
import { randomBytes } from 'node:crypto';
import type { ExecApprovalView } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import { allowlistVerdict } from './allowlist.ts';

export type Decision = 'approved' | 'rejected' | 'expired';

interface Pending {
  view: ExecApprovalView;
  settle: (decision: Decision, by?: string) => void;
  timer: NodeJS.Timeout;
}

export class Approvals {
  private readonly pending = new Map<string, Pending>();
  private readonly tell: (event: 'requested' | 'resolved', view: ExecApprovalView) => void;

  constructor(tell: (event: 'requested' | 'resolved', view: ExecApprovalView) => void) {
    this.tell = tell;
  }

  /** Waits for an operator's decision on a command. */
  ask(request: { command: string; caller: string; agent: string | null; sessionKey: string | null; why: string; timeoutMs: number }): Promise<{ decision: Decision; id: string; by?: string }> {
    const id = `ap_${randomBytes(6).toString('base64url')}`;
    const now = Date.now();
    const view: ExecApprovalView = {
      id, command: request.command, caller: request.caller, agent: request.agent, sessionKey: request.sessionKey, why: request.why,
      requestedAt: new Date(now).toISOString(), expiresAt: new Date(now + request.timeoutMs).toISOString(), status: 'pending', decidedBy: null,
    };
    return new Promise((resolve) => {
      const settle = (decision: Decision, by?: string) => {
        const entry = this.pending.get(id);
        if (!entry) return;
        clearTimeout(entry.timer);
        this.pending.delete(id);
        const done: ExecApprovalView = { ...view, status: decision, decidedBy: by ?? null };
        this.tell('resolved', done);
        resolve({ decision, id, ...(by ? { by } : {}) });
      };
      const timer = setTimeout(() => settle('expired'), request.timeoutMs);
      timer.unref();
      this.pending.set(id, { view, settle, timer });
      this.tell('requested', view);
    });
  }

  list(): ExecApprovalView[] {
    return [...this.pending.values()].map((entry) => entry.view);
  }

  decide(id: string, approve: boolean, by: string): ExecApprovalView {
    const entry = this.pending.get(id);
    if (!entry) throw new DomainError('not_found', `No command waits for approval as ${id} (it was decided, or its time ran out): gateway approvals list`);
    entry.settle(approve ? 'approved' : 'rejected', by);
    return { ...entry.view, status: approve ? 'approved' : 'rejected', decidedBy: by };
  }

  /** Refuses everything still waiting (the daemon stops). */
  close(): void {
    for (const entry of [...this.pending.values()]) entry.settle('expired');
  }
}

/**
 * Whether a command runs without asking under the allowlist patterns: its
 * words, as /bin/sh will run them, match a pattern's, and no word that runs
 * another command is covered by a `*` (see allowlist.ts).
 */
export function allowedCommand(command: string, patterns: readonly string[]): boolean {
  return allowlistVerdict(command, patterns).allowed;
}
