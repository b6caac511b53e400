/**
 * Assertions that live checks share: each throws CheckFailed with the exchange attached,
 * so a failure always shows what was sent and what came back.
 */
import { isDeepStrictEqual } from 'node:util';
import { CheckFailed } from './failure.js';
import { responseJson } from './http.js';
import { rowsForKey } from './ledger.js';
import type { LiveContext } from './context.js';
import type { Exchange, LedgerRow } from './types.js';

/** `POST /pay on A with key "k1"`, `... with no Idempotency-Key`, `... with an empty Idempotency-Key`. */
export function describeRequest(exchange: Exchange): string {
  const key =
    exchange.key === undefined ? 'no Idempotency-Key' : exchange.key === '' ? 'an empty Idempotency-Key' : `key ${JSON.stringify(exchange.key)}`;
  return `${exchange.method} ${exchange.path} to server ${exchange.server} with ${key}`;
}

/**
 * Requires an answer with the given status.
 * @throws CheckFailed naming the request when no answer came or the status differs
 */
export function expectStatus(exchange: Exchange, status: number, expected: string, why: string): void {
  if (exchange.error !== undefined) {
    throw new CheckFailed(`${describeRequest(exchange)} got no answer: ${exchange.error}.`, 'A request that never answers leaves the client waiting, then retrying: the server must always answer.', {
      exchanges: [exchange],
    });
  }
  if (exchange.status !== status) throw new CheckFailed(expected, why, { exchanges: [exchange], details: [`expected HTTP ${status}, got HTTP ${exchange.status}`] });
}

/** The JSON body of a 201 answer; fails when it is not a payment object. */
export function paymentOf(exchange: Exchange): Record<string, unknown> {
  const body = responseJson(exchange);
  if (typeof body !== 'object' || body === null || Array.isArray(body) || typeof (body as Record<string, unknown>).payment_id !== 'number') {
    throw new CheckFailed(
      `${describeRequest(exchange)} answered ${exchange.status} without a payment in its body.`,
      'A successful payment answers {"payment_id", "user", "amount", "charged_at"}, as the server contract says.',
      { exchanges: [exchange] },
    );
  }
  return body as Record<string, unknown>;
}

/** The fields in which two JSON bodies differ, as `charged_at: "…" then "…"`. */
export function differences(a: Record<string, unknown>, b: Record<string, unknown>): string[] {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
  return keys
    .filter((k) => !isDeepStrictEqual(a[k], b[k]))
    .map((k) => `${k}: ${JSON.stringify(a[k])} first, ${JSON.stringify(b[k])} then`);
}

/**
 * Requires `retry` to have answered exactly what `first` answered: same status, same body.
 * @throws CheckFailed listing the fields that differ
 */
export function expectReplay(first: Exchange, retry: Exchange, why: string): void {
  expectStatus(
    retry,
    first.status ?? 201,
    `The retry with the same key and body must get the first response again (HTTP ${first.status}), not HTTP ${retry.status}.`,
    why,
  );
  const a = paymentOf(first);
  const b = paymentOf(retry);
  const diff = differences(a, b);
  if (diff.length > 0) {
    throw new CheckFailed(
      'The retry must get the stored first response back unchanged: payment_id, charged_at, all of it.',
      'A client that retries after a timeout must learn what happened the first time; a rebuilt or new answer describes a payment that did not happen.',
      { exchanges: [first, retry], details: diff },
    );
  }
}

/**
 * Requires exactly `count` ledger rows for the key in the check's database.
 * @throws CheckFailed with the rows found
 */
export function expectRows(ctx: LiveContext, key: string, count: number, exchanges: Exchange[], why: string): LedgerRow[] {
  const rows = rowsForKey(ctx.ledger(), key);
  if (rows.length !== count) {
    throw new CheckFailed(`The ledger must hold ${count} row${count === 1 ? '' : 's'} for key ${JSON.stringify(key)}, it holds ${rows.length}.`, why, {
      exchanges,
      ledger: rows,
    });
  }
  return rows;
}

/**
 * Requires the payment provider to have been asked to charge `payment.user` (and, when
 * given, `payment.amount`) exactly `count` times, as its statement shows. Passes silently when the servers keep no statement.
 * @throws CheckFailed with the charges found
 */
export function expectCharges(ctx: LiveContext, payment: { user: string; amount?: number }, count: number, exchanges: Exchange[], why: string): void {
  const charges = ctx.charges();
  if (charges === undefined) return;
  const mine = charges.filter((c) => c.user === payment.user && (payment.amount === undefined || c.amount === payment.amount));
  if (mine.length !== count) {
    const what = `user ${JSON.stringify(payment.user)}${payment.amount === undefined ? '' : ` and amount ${payment.amount}`}`;
    throw new CheckFailed(
      `charge() ran ${mine.length} time${mine.length === 1 ? '' : 's'} for ${what}; it must run ${count === 1 ? 'once' : `${count} times`}: the ledger alone does not show a charge made twice.`,
      why,
      { exchanges, details: mine.map((c) => `charged ${c.user} ${c.amount} at ${c.at}${c.pid ? ` by pid ${c.pid}` : ''}`) },
    );
  }
}
