import fs from 'node:fs';
import { openStudentDatabase } from './student-db.js';
import type { LedgerRow } from './types.js';

/** The most ledger rows read: far more than any check makes, far less than could exhaust the grader's memory. */
export const MAX_LEDGER_ROWS = 10_000;

/**
 * Reads every ledger row (at most MAX_LEDGER_ROWS) from a sqlite file, read-only, ascending payment_id.
 * Returns [] when the file or the table does not exist yet (nothing was charged).
 * Waits up to 5 s for a writer's lock.
 * @throws Error when the file is not a sqlite database or the table lacks a contract column
 */
export function readLedger(dbPath: string): LedgerRow[] {
  if (!fs.existsSync(dbPath)) return [];
  const db = openStudentDatabase(dbPath, { readonly: true });
  try {
    const table = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'ledger'").get();
    if (!table) return [];
    return db
      // Bounded, since the server writes this file: at most MAX_LEDGER_ROWS rows, texts cut to 1024 characters.
      .prepare(
        `SELECT payment_id, substr(idempotency_key, 1, 1024) AS idempotency_key, substr(user, 1, 1024) AS user, amount, substr(created_at, 1, 1024) AS created_at
         FROM ledger ORDER BY payment_id LIMIT ${MAX_LEDGER_ROWS}`,
      )
      .all() as LedgerRow[];
  } finally {
    db.close();
  }
}

/** The rows charged under one idempotency key. */
export function rowsForKey(rows: LedgerRow[], key: string): LedgerRow[] {
  return rows.filter((row) => row.idempotency_key === key);
}
