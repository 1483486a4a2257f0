/** The tables and columns the sessions module owns beyond the core schema. */
import type { Migration } from '../store/migrations.ts';

export const SESSION_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'steps of agent runs in session history',
    sql: `
      ALTER TABLE session_messages ADD COLUMN role TEXT;
      ALTER TABLE session_messages ADD COLUMN kind TEXT;
      ALTER TABLE session_messages ADD COLUMN data TEXT;
      ALTER TABLE session_messages ADD COLUMN run_id TEXT;
    `,
  },
];
