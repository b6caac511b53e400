import { setTimeout as delay } from 'node:timers/promises';
import { CheckFailed } from '../../grader/failure.js';
import { expectReplay, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { chargeMs } from '../../grader/limits.js';
import { findHidden, readCells, timestampForms, type Cell } from '../../grader/tables.js';
import { t } from '../../i18n/index.js';
import type { LiveContext } from '../../grader/context.js';
import type { Step } from '../../grader/track.js';

/**
 * The tables that may hold a payment's charged_at: the ledger (the payment itself) and the
 * refunds of the advanced contract (a refund's own time is not the payment's, but the
 * table is the payment's too).
 */
export const PAYMENT_TABLES = ['ledger', 'refunds'] as const;

/**
 * The shortest provider latency the step's servers get, in ms (IDEM_CHARGE_MS, at least the
 * run's): a record claimed before the charge is then never stamped in the same millisecond
 * as the payment's charged_at, so its own time is never taken for a copy of it.
 */
export const MIN_CHARGE_MS = 20;

/**
 * Whether a cell is a record's own time that happens to fall in the payment's millisecond:
 * the contract's `idem.created_at` holding nothing but a time (a design may stamp its
 * record when the payment completes, as the ledger row is written). A time anywhere else,
 * or inside more than a time, is a copy of the response.
 */
function ownTime(cell: Cell, chargedAt: string, forms: readonly string[]): boolean {
  if (cell.table !== 'idem' || cell.column !== 'created_at') return false;
  const text = cell.value.toString('utf8').trim();
  return text === chargedAt || forms.includes(text) || forms.includes(text.replace(/\D/g, ''));
}

/**
 * How long the check waits before each retry, in ms: a replay stamped anew (a fresh
 * charged_at) is then never stamped in the first response's millisecond.
 */
export const REPLAY_GAP_MS = 10;

/**
 * Step 13 (advanced track): the record keeps the status and the payment's id, not the
 * response; a replay is rebuilt from the ledger and equals the first response in every
 * field. A payment on A is retried on A and on B (a pod with a copy of its own: nothing of
 * A's memory or files), each retry must replay it exactly, and then every table of the
 * sqlite file but the ledger and refunds is read (read-only, bounded: grader/tables.ts):
 * none may hold the first response's charged_at, as it is, as its digits or epoch
 * milliseconds, or under base64, hex, zlib or gzip (the essay: store the status and a
 * pointer to the result, and let the ledger be the one copy of the payment;
 * docs/server-contract.md, "The advanced track").
 */
export const step: Step = {
  id: '13',
  slug: 'minimal',
  get title() {
    return t('step.13.title');
  },
  async live(ctx: LiveContext) {
    const slow = Math.max(chargeMs(), MIN_CHARGE_MS);
    const [a, b] = await Promise.all([ctx.startServer({ chargeMs: slow, priority: 300 }), ctx.startServer({ ownCopy: true, chargeMs: slow, priority: 200 })]);
    const key = ctx.freshKey();
    const body = ctx.data.payment();
    const first = await ctx.pay(a, { key, body });
    expectStatus(first, 201, t('check.first201'), t('step.13.first.why'));
    const payment = paymentOf(first);
    await delay(REPLAY_GAP_MS);
    const retry = await ctx.pay(a, { key, body });
    expectReplay(first, retry, t('step.13.replay.why'));
    await delay(REPLAY_GAP_MS);
    const elsewhere = await ctx.pay(b, { key, body });
    expectReplay(first, elsewhere, t('step.13.replay.why'));
    // Throws when the servers never made the file (they ignore IDEM_DB).
    ctx.ledger(a);
    const cells = readCells(ctx.database(a).dbPath, PAYMENT_TABLES);
    const chargedAt = String(payment.charged_at);
    const forms = timestampForms(chargedAt);
    const found = findHidden(cells, chargedAt, forms).filter((f) => !ownTime(f.cell, chargedAt, forms));
    if (found.length > 0) {
      const { cell, how } = found[0];
      throw new CheckFailed(
        t('step.13.stored', { table: cell.table, column: cell.column, row: cell.row, chargedAt, how: how === '' ? t('step.13.how.plain') : t('step.13.how.encoded', { how }) }),
        t('step.13.stored.why'),
        {
          exchanges: [first, retry, elsewhere],
          details: found.map((f) => t('step.13.found', { table: f.cell.table, column: f.cell.column, row: f.cell.row, how: f.how === '' ? t('step.13.how.plain') : f.how, bytes: f.cell.value.length })),
        },
      );
    }
    const tables = new Set(cells.map((c) => c.table));
    return t('step.13.pass', { chargedAt, cells: cells.length, tables: tables.size });
  },
  get hints() {
    return [t('step.13.hint.1'), t('step.13.hint.2'), t('step.13.hint.3')];
  },
};
