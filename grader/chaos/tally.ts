/**
 * What a chaos run adds up to: the client's side (requests sent, retries, what the
 * network lost) against the money that moved (the provider's statement) and the ledger,
 * payment by payment. A charge or a ledger row belongs to the intended payment with its
 * user and amount (each payment of a run has its own pair).
 */
import type { Charge } from '../statement.js';
import type { LedgerRow } from '../types.js';
import type { PaymentRun } from './client.js';

/** The numbers of a chaos run: the same seed gives the same ones (but for a run cut by its deadline). */
export interface ChaosTally {
  /** Payments the client meant to make, once each. */
  payments: number;
  /** Attempts sent, first ones and retries. */
  requests: number;
  /** Attempts after a payment's first. */
  retries: number;
  /** Requests lost before they reached the server. */
  lostRequests: number;
  /** Responses lost after the server answered. */
  lostResponses: number;
  /** Requests held back on the way. */
  delayed: number;
  /** Payments answered 2xx in the end. */
  paid: number;
  /** Payments answered with a final refusal (a 4xx). */
  refused: number;
  /** Payments the client gave up on (attempts used up, or the deadline). */
  gaveUp: number;
  /** Retries answered as replays (Idempotency-Replayed: true). */
  replays: number;
  /** Charges on the provider's statement; undefined when the server keeps none. */
  charges: number | undefined;
  /** Rows in the ledger. */
  ledgerRows: number;
  /** Charges per intended payment, in order (ledger rows per payment when there is no statement). */
  chargesPerPayment: number[];
  /** Ledger rows per intended payment, in order. */
  rowsPerPayment: number[];
  /** Payments charged more than once. */
  duplicates: number;
  /** The payments charged more than once, in payment order: the key each sent (none with --no-key), its user and amount (cents), and how many charges. */
  doubled: Array<{ key?: string; user: string; amount: number; charges: number }>;
  /** Payments answered 2xx with no charge at all: the client was told the money moved, and it did not. */
  missing: number;
  /** Charges on the statement that belong to no intended payment (no user and amount of one). */
  strayCharges: number;
  /** Ledger rows that belong to no intended payment. */
  strayRows: number;
  /** The jittered waits before retries, ms, grouped by retry number (index 0: every payment's first retry), each in payment order. */
  retryWaitsMs: number[][];
}

/** How many of `items` belong to each payment, matched by user and amount; the rest are strays. */
function perPayment(runs: PaymentRun[], items: Array<{ user: string; amount: number }>): { counts: number[]; stray: number } {
  const index = new Map(runs.map((r, i) => [`${r.payment.body.user}\0${r.payment.body.amount}`, i]));
  const counts = runs.map(() => 0);
  let stray = 0;
  for (const item of items) {
    const i = index.get(`${item.user}\0${item.amount}`);
    if (i === undefined) stray++;
    else counts[i]++;
  }
  return { counts, stray };
}

/** The waits before retries, ms, grouped by retry number (index 0: the first retry), each in payment order. */
export function waitsByRetry(runs: PaymentRun[]): number[][] {
  const grouped: number[][] = [];
  for (const run of runs) {
    for (const a of run.attempts) if (a.attempt > 0) (grouped[a.attempt - 1] ??= []).push(a.waitedMs);
  }
  return Array.from({ length: grouped.length }, (_, i) => grouped[i] ?? []);
}

/**
 * Adds up a run: `runs` from runPayments, `charges` from the provider's statement
 * (undefined when the server keeps none: duplicates are then counted in the ledger), and
 * every ledger row.
 */
export function tallyRun(runs: PaymentRun[], charges: Charge[] | undefined, rows: LedgerRow[]): ChaosTally {
  const attempts = runs.flatMap((r) => r.attempts);
  const rowsOf = perPayment(runs, rows);
  const chargesOf = charges ? perPayment(runs, charges) : rowsOf;
  return {
    payments: runs.length,
    requests: attempts.length,
    retries: attempts.filter((a) => a.attempt > 0).length,
    lostRequests: attempts.filter((a) => a.fate.loss === 'request').length,
    lostResponses: attempts.filter((a) => a.fate.loss === 'response').length,
    delayed: attempts.filter((a) => a.fate.loss !== 'request' && a.fate.delayMs > 0).length,
    paid: runs.filter((r) => r.outcome === 'paid').length,
    refused: runs.filter((r) => r.outcome === 'refused').length,
    gaveUp: runs.filter((r) => r.outcome === 'attempts' || r.outcome === 'deadline').length,
    replays: attempts.filter((a) => a.replayed).length,
    charges: charges?.length,
    ledgerRows: rows.length,
    chargesPerPayment: chargesOf.counts,
    rowsPerPayment: rowsOf.counts,
    duplicates: chargesOf.counts.filter((n) => n > 1).length,
    doubled: runs.flatMap((r, i) => (chargesOf.counts[i] > 1 ? [{ key: r.payment.key, user: r.payment.body.user, amount: r.payment.body.amount, charges: chargesOf.counts[i] }] : [])),
    missing: runs.filter((r, i) => r.outcome === 'paid' && chargesOf.counts[i] === 0).length,
    strayCharges: charges ? chargesOf.stray : 0,
    strayRows: rowsOf.stray,
    retryWaitsMs: waitsByRetry(runs),
  };
}

/**
 * Whether every payment was charged exactly once and has exactly one ledger row, with
 * no charge or row of no payment: what idempotency keys promise over a lossy network.
 */
export function exactlyOnce(tally: ChaosTally): boolean {
  return tally.chargesPerPayment.every((n) => n === 1) && tally.rowsPerPayment.every((n) => n === 1) && tally.strayCharges === 0 && tally.strayRows === 0;
}
