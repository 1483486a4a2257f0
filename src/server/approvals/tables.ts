/**
 * What the operator-in-control feature keeps in the profile's database: the
 * commands waiting for an approval (decided once, atomically, whichever daemon
 * of a shared store the answer reaches) and the questions agents asked their
 * people (the run that asked resumes with the answer, or with its default
 * once the question's time runs out).
 */
import type { Migration } from '../store/migrations.ts';

export const APPROVAL_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'commands waiting for an approval, and questions agents asked',
  sql: `
    CREATE TABLE exec_approvals (
      id TEXT PRIMARY KEY,
      code TEXT NOT NULL,
      command TEXT NOT NULL,
      caller TEXT NOT NULL,
      agent TEXT,
      session_key TEXT,
      why TEXT NOT NULL,
      requested_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      status TEXT NOT NULL,
      decided_by TEXT,
      decided_via TEXT,
      decided_at BIGINT,
      daemon TEXT,
      notified TEXT
    );
    CREATE INDEX exec_approvals_code ON exec_approvals (code, status);
    CREATE INDEX exec_approvals_status ON exec_approvals (status, requested_at);
    CREATE TABLE agent_questions (
      id TEXT PRIMARY KEY,
      session_key TEXT NOT NULL,
      run_id TEXT NOT NULL,
      call_id TEXT NOT NULL,
      agent TEXT NOT NULL,
      person TEXT NOT NULL,
      channel TEXT NOT NULL,
      account TEXT NOT NULL,
      recipient TEXT NOT NULL,
      question TEXT NOT NULL,
      options TEXT,
      default_answer TEXT,
      asked_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      status TEXT NOT NULL,
      answer TEXT,
      answered_by TEXT,
      answered_via TEXT,
      answered_at BIGINT
    );
    CREATE INDEX agent_questions_person ON agent_questions (person, status);
    CREATE INDEX agent_questions_status ON agent_questions (status, asked_at);
  `,
}];
