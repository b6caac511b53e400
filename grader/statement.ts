/**
 * The payment provider's statement (server contract: IDEM_PROVIDER_LOG): one JSON line per
 * call of charge(), `{"user", "amount", "at", "pid"}`. The grader reads it to count the
 * money that moved; `idem-lab statement` and `./statement.sh` print it beside the ledger.
 */
import fs from 'node:fs';
import type { LedgerRow } from './types.js';

/** One line of the provider's statement: a call of charge(). */
export interface Charge {
  user: string;
  amount: number;
  /** ISO-8601 UTC time of the charge. */
  at: string;
  /** The server process that charged, as it saw its own pid (in a sandbox: inside its pid namespace). */
  pid?: number;
  /**
   * The label of the check's server that charged (`B`), when the grader can tell: one server
   * of those on this statement's database reported a charge of this user and amount from
   * this pid at its provider's gate (LiveContext.charges). A learner finds no process by a
   * sandbox's pid; the label names the server the failure speaks of.
   */
  server?: string;
  /** The provider's idempotency key the charge was asked with (the advanced contract's charge(..., key)), when it was given one. */
  key?: string;
}

/** The most of a statement that is read, in bytes: a server cannot make the grader hold more. */
export const STATEMENT_MAX_BYTES = 4 * 1024 * 1024;

/**
 * Every charge in a statement file, in order; undefined when the file does not exist (the
 * server keeps no statement). Lines that are not a charge are passed over; past
 * STATEMENT_MAX_BYTES the rest is not read.
 */
export function readStatement(file: string): Charge[] | undefined {
  return readStatementLines(file)?.charges;
}

/**
 * A statement file's charges and its other lines (not empty, not a JSON charge with a
 * user and an amount), each in order; undefined when the file does not exist. At most
 * STATEMENT_MAX_BYTES are read: a line cut there is neither.
 */
export function readStatementLines(file: string): { charges: Charge[]; other: string[] } | undefined {
  let fd: number;
  try {
    // Never through a link (O_NOFOLLOW): a statement made a link is read as empty, as a FIFO is.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ELOOP' ? { charges: [], other: [] } : undefined;
  }
  let text: string;
  let cut = false;
  try {
    if (!fs.fstatSync(fd).isFile()) return { charges: [], other: [] };
    const size = fs.fstatSync(fd).size;
    const buffer = Buffer.alloc(Math.min(size, STATEMENT_MAX_BYTES));
    const read = fs.readSync(fd, buffer, 0, buffer.length, 0);
    text = buffer.subarray(0, read).toString('utf8');
    cut = size > read;
  } finally {
    fs.closeSync(fd);
  }
  const charges: Charge[] = [];
  const other: string[] = [];
  const lines = text.split('\n');
  if (cut) lines.pop();
  for (const line of lines) {
    // Only an empty line is nothing: a line of spaces or tabs is not a charge, so it is a foreign line (records can hide in whitespace).
    if (line === '') continue;
    let charge: Charge | undefined;
    try {
      charge = JSON.parse(line) as Charge;
    } catch {
      // not JSON
    }
    if (charge && typeof charge.user === 'string' && typeof charge.amount === 'number') charges.push(charge);
    else other.push(line);
  }
  return { charges, other };
}

/**
 * The statement beside the ledger, as `idem-lab statement` and `./statement.sh` print it:
 * a table of charges, each paired with the ledger row of the same user and amount (the
 * k-th charge with the k-th row), then the rows no charge paid for, then one line counting
 * both. `labels` gives the words, so the caller chooses the language.
 */
export function formatStatement(
  charges: Charge[],
  rows: LedgerRow[],
  labels: { columns: [string, string, string, string, string]; noRow: string; payment: (id: number) => string; unpaid: (id: number) => string; summary: (charges: number, rows: number) => string },
): string[] {
  const unmatched = [...rows];
  const table = [labels.columns.map(String)];
  for (const c of charges) {
    const i = unmatched.findIndex((r) => r.user === c.user && r.amount === c.amount);
    const row = i >= 0 ? unmatched.splice(i, 1)[0] : undefined;
    table.push([c.at, c.user, String(c.amount), c.pid === undefined ? '-' : String(c.pid), row ? labels.payment(row.payment_id) : labels.noRow]);
  }
  const widths = labels.columns.map((_, i) => Math.max(...table.map((r) => r[i].length)));
  const lines = table.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '));
  for (const row of unmatched) lines.push(labels.unpaid(row.payment_id));
  lines.push(labels.summary(charges.length, rows.length));
  return lines;
}
