/** Rows of a profile's state database, read without writing or holding a lock (the daemon may be running). Throws what SQLite says. */
export async function stateRows<T>(db: string, sql: string, ...params: (string | number)[]): Promise<T[]> {
  const { DatabaseSync } = await import('node:sqlite');
  const database = new DatabaseSync(db, { readOnly: true });
  try {
    return database.prepare(sql).all(...params) as T[];
  } finally {
    database.close();
  }
}
