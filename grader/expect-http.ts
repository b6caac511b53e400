/**
 * Assertions that live checks share: each throws CheckFailed with the exchange attached,
 * so a failure always shows what was sent and what came back.
 */
import { isDeepStrictEqual } from 'node:util';
import { t } from '../i18n/index.js';
import { CheckFailed } from './failure.js';
import { Starved } from './gate.js';
import { responseJson } from './http.js';
import { rowsForKey } from './ledger.js';
import type { Charge, LiveContext } from './context.js';
import type { ServerInstance } from './server.js';
import type { Exchange, LedgerRow } from './types.js';

/** `POST /pay on A with key "k1"`, `... with no Idempotency-Key`, `... with an empty Idempotency-Key`. */
export function describeRequest(exchange: Exchange): string {
  const key =
    exchange.key === undefined ? t('check.describe.noKey') : exchange.key === '' ? t('check.describe.emptyKey') : t('check.describe.key', { key: JSON.stringify(exchange.key) });
  return t('check.describe', { method: exchange.method, path: exchange.path, server: exchange.server, key });
}

/**
 * Requires an answer with the given status.
 * @param why why the expected status matters; replaced by what the observed one says when
 *   the server failed inside (see observedWhy)
 * @throws CheckFailed naming the request when no answer came or the status differs
 */
export function expectStatus(exchange: Exchange, status: number, expected: string, why: string): void {
  if (exchange.starved) throw starvedExchange(exchange);
  if (exchange.error !== undefined) {
    throw new CheckFailed(t('check.noAnswer', { request: describeRequest(exchange), error: exchange.error }), t('check.noAnswer.why'), {
      exchanges: [exchange],
    });
  }
  if (exchange.status !== status) {
    throw new CheckFailed(expected, observedWhy(exchange, why), { exchanges: [exchange], details: [t('check.expectedStatus', { expected: status, got: String(exchange.status) })] });
  }
}

/** The inconclusive verdict on an exchange that ran out of time while the machine starved the server or the grader (Exchange.starved). */
export function starvedExchange(exchange: Exchange): Starved {
  const seen = exchange.starved ?? { serverWaitMs: 0, graderLagMs: 0, boundMs: 0 };
  return new Starved(t('check.requestStarved', { request: describeRequest(exchange), seconds: seen.boundMs / 1000, waited: seen.serverWaitMs, lag: seen.graderLagMs }));
}

/** An error of sqlite's lock in an answer's body: the lock was held longer than the connection waits. */
const DATABASE_LOCKED = /database (table )?is locked|SQLITE_BUSY|database is busy/i;

/**
 * Why a wrong status matters, chosen by what was observed: an answer of 5xx is the server
 * failing inside, whatever the check was about (a 500 "database is locked" in step 02 is
 * sqlite's lock, not a key compared wrongly), and its body's error is looked at for
 * sqlite's lock; any other status keeps `why`, the reason the expected status matters.
 */
export function observedWhy(exchange: Exchange, why: string): string {
  if (exchange.status === undefined || exchange.status < 500) return why;
  const said = exchange.responseBody ?? '';
  return DATABASE_LOCKED.test(said) ? t('check.serverError.locked.why', { status: exchange.status }) : t('check.serverError.why', { status: exchange.status });
}

/** A whole number as JSON writes it (`4210`, not `4210.0` or `"4210"`), for the field of a raw body. */
function integerLiteral(raw: string, field: string): boolean {
  const literal = new RegExp(`"${field}"\\s*:\\s*(-?[0-9][0-9.eE+-]*)`).exec(raw);
  return literal !== null && /^-?[0-9]+$/.test(literal[1]);
}

/**
 * Whether a text is a time as the contract writes it (docs/server-contract.md): ISO 8601 in
 * UTC to the millisecond with `Z`, `2026-12-01T10:02:25.118Z`, and a real date and time.
 */
export function isContractTime(text: string): boolean {
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(text) && new Date(text).toISOString() === text;
}

/**
 * The JSON body of a 201 answer, checked against the server contract and the request it
 * answers: `{"payment_id", "user", "amount", "charged_at"}` with the user and the amount
 * that were sent, payment_id and amount written as whole numbers, charged_at a time as the
 * contract writes it (isContractTime).
 * @throws CheckFailed naming what is wrong with it
 */
export function paymentOf(exchange: Exchange): Record<string, unknown> {
  const body = responseJson(exchange);
  const fail = (problems: string[]) =>
    new CheckFailed(t('check.noPayment', { request: describeRequest(exchange), status: String(exchange.status) }), t('check.noPayment.why'), {
      exchanges: [exchange],
      details: problems,
    });
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw fail([]);
  const payment = body as Record<string, unknown>;
  let sent: { user?: unknown; amount?: unknown } = {};
  try {
    sent = JSON.parse(exchange.requestBody) as typeof sent;
  } catch {
    // a raw body the grader sent on purpose: nothing to compare with
  }
  const raw = exchange.responseBody ?? '';
  const problems: string[] = [];
  if (!Number.isSafeInteger(payment.payment_id) || !integerLiteral(raw, 'payment_id')) problems.push(t('check.payment.field', { field: 'payment_id', got: String(JSON.stringify(payment.payment_id)) }));
  if (typeof sent.user === 'string' && payment.user !== sent.user) problems.push(t('check.payment.sent', { field: 'user', got: String(JSON.stringify(payment.user)), sent: JSON.stringify(sent.user) }));
  if (typeof sent.amount === 'number' && (payment.amount !== sent.amount || !integerLiteral(raw, 'amount'))) {
    problems.push(t('check.payment.sent', { field: 'amount', got: /"amount"\s*:\s*([^,}]*)/.exec(raw)?.[1]?.trim() ?? 'none', sent: String(sent.amount) }));
  }
  if (typeof payment.charged_at !== 'string') problems.push(t('check.payment.field', { field: 'charged_at', got: String(JSON.stringify(payment.charged_at)) }));
  else if (!isContractTime(payment.charged_at)) problems.push(t('check.payment.time', { got: JSON.stringify(payment.charged_at) }));
  if (problems.length > 0) throw fail(problems);
  return payment;
}

/**
 * One charge of the provider's statement as a failure shows it: `charged mina_48213 4210 at …
 * by server B` when the grader knows which server charged (Charge.server), else `… by pid 42`.
 */
export function describeCharge(c: Charge): string {
  const by = c.server !== undefined ? t('check.charged.server', { server: c.server }) : c.pid ? t('check.charged.pid', { pid: c.pid }) : '';
  return t('check.charged', { user: c.user, amount: c.amount, at: c.at }) + by;
}

/** The fields in which two JSON bodies differ, as `charged_at: "…" then "…"`. */
export function differences(a: Record<string, unknown>, b: Record<string, unknown>): string[] {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
  return keys
    .filter((k) => !isDeepStrictEqual(a[k], b[k]))
    .map((k) => t('check.difference', { field: k, first: String(JSON.stringify(a[k])), then: String(JSON.stringify(b[k])) }));
}

/**
 * Why a 422 to a retry of a 201 matters, by where it was sent: to another process (another
 * instance, or the same label after a restart: another port) a fingerprint that changes
 * from process to process is the likely cause (Python's salted hash()); to the very process
 * that answered the first, a salted hash cannot differ, so the record itself was changed
 * or replaced, or the fingerprint is not of the body's fields alone.
 */
function replay422Why(first: Exchange, retry: Exchange): string {
  return first.server === retry.server && first.port === retry.port ? t('check.replay422.sameProcess.why') : t('check.replay422.why');
}

/**
 * Requires `retry` to have answered exactly what `first` answered: same status, same body.
 * @throws CheckFailed listing the fields that differ
 */
export function expectReplay(first: Exchange, retry: Exchange, why: string): void {
  // The reason follows what happened: a 409 is a key stuck in flight, a 422 a fingerprint that changed, not a charge made twice.
  expectStatus(
    retry,
    first.status ?? 201,
    t('check.replayStatus', { first: String(first.status), got: String(retry.status) }),
    retry.status === 409 ? t('check.stuckInFlight.why') : retry.status === 422 && (first.status ?? 201) === 201 ? replay422Why(first, retry) : why,
  );
  const a = paymentOf(first);
  // What differs from the first answer is said first; then the retry must be a payment itself.
  const b = responseJson(retry);
  const diff = typeof b === 'object' && b !== null && !Array.isArray(b) ? differences(a, b as Record<string, unknown>) : [];
  if (diff.length > 0) {
    throw new CheckFailed(
      t('check.replayBody'),
      t('check.replayBody.why'),
      { exchanges: [first, retry], details: diff },
    );
  }
  paymentOf(retry);
}

/**
 * Requires exactly `count` ledger rows for the key in the check's database (or in the
 * database of the instance `on`).
 * @throws CheckFailed with the rows found
 */
export function expectRows(ctx: LiveContext, key: string, count: number, exchanges: Exchange[], why: string, on?: ServerInstance): LedgerRow[] {
  const rows = rowsForKey(ctx.ledger(on), key);
  if (rows.length !== count) {
    throw new CheckFailed(t(count === 1 ? 'check.rows.one' : 'check.rows.many', { count, key: JSON.stringify(key), found: rows.length }), why, {
      exchanges,
      ledger: rows,
    });
  }
  return rows;
}

/**
 * Requires the payment provider to have been asked to charge `payment.user` (and, when
 * given, `payment.amount`) exactly `count` times, as its statement shows (the server
 * contract's IDEM_PROVIDER_LOG). A server that keeps no statement fails when `count` > 0:
 * without it no charge can be proved. `on`: read the statement of that instance's database
 * (default: the check's own).
 * @throws CheckFailed with the charges found
 */
export function expectCharges(ctx: LiveContext, payment: { user: string; amount?: number }, count: number, exchanges: Exchange[], why: string, on?: ServerInstance): void {
  const charges = ctx.charges(on);
  if (charges === undefined) {
    if (count === 0) return;
    throw new CheckFailed(t('check.audit.noStatement', { log: ctx.database(on).providerLog, count }), t('check.audit.noStatement.why'), { exchanges });
  }
  const mine = charges.filter((c) => c.user === payment.user && (payment.amount === undefined || c.amount === payment.amount));
  if (mine.length > 0 && count === 0) {
    // Money moved for a request that was refused: say so, naming the refusal.
    const refused = [...exchanges].reverse().find((e) => e.status !== 201) ?? exchanges[exchanges.length - 1];
    const what = t('check.charges.userAmount', { user: JSON.stringify(payment.user), amount: payment.amount ?? mine[0].amount });
    throw new CheckFailed(
      t('check.audit.refusedCharged', { what, n: mine.length, request: describeRequest(refused), status: String(refused.status ?? t('check.audit.noAnswer')) }),
      why,
      { exchanges, details: mine.map(describeCharge) },
    );
  }
  if (mine.length !== count) {
    const what =
      payment.amount === undefined ? t('check.charges.user', { user: JSON.stringify(payment.user) }) : t('check.charges.userAmount', { user: JSON.stringify(payment.user), amount: payment.amount });
    const ran = t(mine.length === 1 ? 'check.times.one' : 'check.times.many', { n: mine.length });
    const must = count === 1 ? t('check.once') : t('check.times.many', { n: count });
    throw new CheckFailed(
      t('check.charges', { ran, what, must }),
      why,
      { exchanges, details: mine.map(describeCharge) },
    );
  }
}
