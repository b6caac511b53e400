import fs from 'node:fs';
import Database from 'better-sqlite3';
import type { LedgerRow } from './types.js';

/**
 * Reads every ledger row from a sqlite file, read-only, ascending payment_id.
 * Returns [] when the file or the table does not exist yet (nothing was charged).
 * Waits up to 5 s for a writer's lock.
 * @throws Error when the file is not a sqlite database or the table lacks a contract column
 */
export function readLedger(dbPath: string): LedgerRow[] {
  if (!fs.existsSync(dbPath)) return [];
  const db = new Database(dbPath, { readonly: true, fileMustExist: true, timeout: 5000 });
  try {
    const table = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'ledger'").get();
    if (!table) return [];
    return db
      .prepare('SELECT payment_id, idempotency_key, user, amount, created_at FROM ledger ORDER BY payment_id')
      .all() as LedgerRow[];
  } finally {
    db.close();
  }
}

/** The rows charged under one idempotency key. */
export function rowsForKey(rows: LedgerRow[], key: string): LedgerRow[] {
  return rows.filter((row) => row.idempotency_key === key);
}
