/**
 * The audit every live check ends with: the money and the ledger against every request
 * the check sent, not only the payment it was about. What was paid is derived from the
 * exchanges themselves: each distinct (idempotency key, body) answered 201 is one payment,
 * and so is each keyless request answered 201 (or, when the check says keyless requests are
 * deduplicated, see KeylessGrouping, each distinct keyless (body, payment_id answered));
 * every other request (400, 409, 422, a 5xx, no answer) paid nothing. Then:
 * - the provider's statement must show exactly one charge per payment, for its user and
 *   amount: a refused request that reached charge() is named, and a server that keeps no
 *   statement, or wrote no line for a payment, fails (the server contract's
 *   IDEM_PROVIDER_LOG); a line in it that is not a charge fails too (the statement is the
 *   provider's: a server that keeps its records there keeps them outside IDEM_DB);
 * - the whole ledger must hold exactly one row per payment, under its key, user and
 *   amount, with the payment_id its answer gave: a row nobody paid for (a replay that
 *   inserts a keyless row) fails, and so does an answer whose payment_id is not its row's,
 *   and a row whose created_at is not the very text of its payment's charged_at;
 * - no answer says it is a replay when it is not one (Idempotency-Replayed, or Stripe's
 *   Idempotent-Replayed, `true`): every payment has at least one 201 that does not say so
 *   (its first answer; "at least one", since a replay may reach the grader before the
 *   first answer does), and no refusal (any answer but 201) says so. A headers dict kept
 *   at module level, set by the first replay, marks every later answer: only a look at
 *   every answer of the check sees it.
 */
import { t } from '../i18n/index.js';
import { CheckFailed } from './failure.js';
import { describeCharge, describeRequest, paymentOf } from './expect-http.js';
import { readStatementLines } from './statement.js';
import type { Charge, CheckDatabase, LiveContext } from './context.js';
import type { Exchange, KeylessGrouping, LedgerRow } from './types.js';

/** A payment body as the grader sent it. */
interface Body {
  user: string;
  amount: number;
}

/** The body a POST /pay sent, when it was a payment request. */
function bodyOf(exchange: Exchange): Body | undefined {
  if (exchange.method !== 'POST') return undefined;
  try {
    const body = JSON.parse(exchange.requestBody) as Partial<Body>;
    return typeof body.user === 'string' && typeof body.amount === 'number' ? { user: body.user, amount: body.amount } : undefined;
  } catch {
    return undefined;
  }
}

const bodyId = (b: Body) => `${b.user}\0${b.amount}`;

/** One payment the grader made: the first 201 of its (key, body), and every request of it. */
export interface Payment {
  key: string | undefined;
  body: Body;
  first: Exchange;
  requests: Exchange[];
}

export type { KeylessGrouping } from './types.js';

/**
 * The payments the exchanges made, in the order of their first 201, and the requests that
 * made none, grouped by body. `keyless`: how requests without a key are grouped (default `each`).
 */
export function paymentsOf(exchanges: Exchange[], keyless: KeylessGrouping = 'each'): { payments: Payment[]; refused: Map<string, Exchange[]> } {
  const byKey = new Map<string, Payment>();
  const payments: Payment[] = [];
  const refused = new Map<string, Exchange[]>();
  for (const exchange of exchanges) {
    const body = bodyOf(exchange);
    if (!body) continue;
    const id = `${exchange.key ?? '\u0001none'}\0${bodyId(body)}`;
    const known = byKey.get(id);
    if (known && exchange.key !== undefined && exchange.key !== '') {
      known.requests.push(exchange);
      continue;
    }
    // A keyless 201 of a deduplicating server: one payment per body and payment_id answered.
    const answer = exchange.key === undefined && keyless === 'same-answer' && exchange.status === 201 ? `${id}\0${String(idOf(exchange))}` : undefined;
    const replayed = answer === undefined ? undefined : byKey.get(answer);
    if (replayed) {
      replayed.requests.push(exchange);
      continue;
    }
    if (exchange.status === 201) {
      const payment: Payment = { key: exchange.key, body, first: exchange, requests: [exchange] };
      payments.push(payment);
      if (exchange.key !== undefined && exchange.key !== '') byKey.set(id, payment);
      if (answer !== undefined) byKey.set(answer, payment);
    } else {
      refused.set(bodyId(body), [...(refused.get(bodyId(body)) ?? []), exchange]);
    }
  }
  return { payments, refused };
}

/** The payment_id an answer gave, when it gave one. */
function idOf(exchange: Exchange): unknown {
  try {
    return (JSON.parse(exchange.responseBody ?? '') as { payment_id?: unknown }).payment_id;
  } catch {
    return undefined;
  }
}

/** The charged_at an answer gave, when it gave one. */
function chargedAtOf(exchange: Exchange): unknown {
  try {
    return (JSON.parse(exchange.responseBody ?? '') as { charged_at?: unknown }).charged_at;
  } catch {
    return undefined;
  }
}

/** The payment_id the first answer of a payment gave, when it gave one. */
function answeredId(p: Payment): unknown {
  return idOf(p.first);
}

function rowMatches(row: LedgerRow, p: Payment): boolean {
  return row.user === p.body.user && row.amount === p.body.amount && row.idempotency_key === (p.key ?? null) && row.payment_id === answeredId(p);
}

/**
 * Checks the statement and the whole ledger against every request of the check: each
 * database of the check (see LiveContext.databases) against the requests sent to the
 * instances on it.
 * @throws CheckFailed naming the first request whose money or row is wrong
 */
export function auditPayments(ctx: LiveContext): void {
  // Every success must be a payment as the contract writes it, for what was sent.
  for (const exchange of ctx.exchanges) if (exchange.status === 201 && bodyOf(exchange)) paymentOf(exchange);
  // A part the grader gave up on without a verdict is the grader's: its requests, charges and rows are left out (LiveContext.leftOut).
  const judged = (body: Body | undefined) => body === undefined || !ctx.isLeftOut(body);
  for (const db of ctx.databases()) {
    const { payments, refused } = paymentsOf(db.exchanges.filter((e) => judged(bodyOf(e))), ctx.keylessGrouping);
    auditStatement(db, payments, refused, judged);
    auditLedger(ctx, db, payments, judged);
    auditReplayHeader(payments, refused);
  }
}

/**
 * The header by which an answer says it is a replay (`true`): Idempotency-Replayed, or
 * Stripe's Idempotent-Replayed when only that one said so; undefined when none did.
 */
function replayHeader(exchange: Exchange): string | undefined {
  const says = (v: string | undefined) => v?.trim().toLowerCase() === 'true';
  if (exchange.replayedAlias !== undefined) {
    return says(exchange.replayed) ? 'Idempotency-Replayed' : says(exchange.replayedAlias) ? 'Idempotent-Replayed' : undefined;
  }
  return says(exchange.replayed) ? (exchange.replayedName ?? 'Idempotency-Replayed') : undefined;
}

const saysReplayed = (exchange: Exchange) => replayHeader(exchange) !== undefined;

/**
 * No answer says it is a replay when it is not one: every payment has a 201 that does not
 * say so, and no refusal says so.
 * @throws CheckFailed naming the first payment all of whose 201s said so, or the first refusal that did
 */
function auditReplayHeader(payments: Payment[], refused: Map<string, Exchange[]>): void {
  for (const p of payments) {
    const answered = p.requests.filter((e) => e.status === 201);
    if (answered.length > 0 && answered.every(saysReplayed)) {
      throw new CheckFailed(t('check.audit.firstReplayed', { request: describeRequest(p.first), n: answered.length, header: replayHeader(p.first) ?? replayHeader(answered[0])! }), t('check.audit.firstReplayed.why'), {
        exchanges: p.requests.slice(0, 6),
      });
    }
  }
  const refusal = [...refused.values()].flat().find((e) => e.status !== undefined && saysReplayed(e));
  if (refusal) {
    throw new CheckFailed(t('check.audit.refusalReplayed', { request: describeRequest(refusal), status: String(refusal.status), header: replayHeader(refusal)! }), t('check.audit.refusalReplayed.why'), {
      exchanges: [refusal],
    });
  }
}

function auditStatement(db: CheckDatabase, payments: Payment[], refused: Map<string, Exchange[]>, judged: (body: Body) => boolean): void {
  // One read of the statement: its charges, and its lines that are not charges.
  const statement = readStatementLines(db.providerLog);
  const charges = statement?.charges.filter((c) => judged({ user: c.user, amount: c.amount }));
  if (charges === undefined) {
    if (payments.length === 0) return;
    throw new CheckFailed(t('check.audit.noStatement', { log: db.providerLog, count: payments.length }), t('check.audit.noStatement.why'), {
      exchanges: [payments[0].first],
    });
  }
  // The statement is the provider's: a line that is not a charge was written by someone else.
  const other = statement?.other ?? [];
  if (other.length > 0) {
    throw new CheckFailed(t('check.audit.foreignLines', { log: db.providerLog, n: other.length, line: other[0].slice(0, 200) }), t('check.audit.foreignLines.why'));
  }
  const expected = new Map<string, Payment[]>();
  for (const p of payments) expected.set(bodyId(p.body), [...(expected.get(bodyId(p.body)) ?? []), p]);
  const charged = new Map<string, Charge[]>();
  for (const c of charges) charged.set(`${c.user}\0${c.amount}`, [...(charged.get(`${c.user}\0${c.amount}`) ?? []), c]);
  const ids = [...new Set([...expected.keys(), ...charged.keys()])];
  for (const id of ids) {
    const paid = expected.get(id) ?? [];
    const got = charged.get(id) ?? [];
    if (got.length === paid.length) continue;
    const [user, amount] = [got[0]?.user ?? paid[0]?.body.user, got[0]?.amount ?? paid[0]?.body.amount];
    const what = t('check.charges.userAmount', { user: JSON.stringify(user), amount: amount as number });
    const details = got.map(describeCharge);
    const noRefusals = refused.get(id) ?? [];
    if (got.length > paid.length && paid.length === 0 && noRefusals.length > 0) {
      throw new CheckFailed(
        t('check.audit.refusedCharged', { what, n: got.length, request: describeRequest(noRefusals[0]), status: String(noRefusals[0].status ?? t('check.audit.noAnswer')) }),
        t('check.audit.refusedCharged.why'),
        { exchanges: noRefusals, details },
      );
    }
    if (got.length > paid.length && paid.length === 0) {
      throw new CheckFailed(t('check.audit.unrequested', { what, n: got.length }), t('check.audit.unrequested.why'), { details });
    }
    if (got.length > paid.length) {
      const requests = paid.flatMap((p) => p.requests);
      throw new CheckFailed(
        t('check.audit.extraCharges', { what, n: got.length, payments: paid.length, requests: requests.length + noRefusals.length }),
        t('check.audit.extraCharges.why'),
        { exchanges: [...requests, ...noRefusals], details },
      );
    }
    const missing = paid[got.length];
    throw new CheckFailed(
      t(charges.length === 0 ? 'check.audit.emptyStatement' : 'check.audit.missingCharge', { what, n: got.length, payments: paid.length, log: db.providerLog }),
      t('check.audit.missingCharge.why'),
      { exchanges: [missing.first], details },
    );
  }
}

/** Whether the exchange sent the user and amount of the row. */
function sameBody(exchange: Exchange, row: LedgerRow): boolean {
  const body = bodyOf(exchange);
  return body !== undefined && body.user === row.user && body.amount === row.amount;
}

function auditLedger(ctx: LiveContext, db: CheckDatabase & { exchanges: Exchange[] }, payments: Payment[], judged: (body: Body) => boolean): void {
  // Rows the check wrote itself (LiveContext.seedLedgerRow) are no payment of the server's.
  const rows = ctx.ledger(db).filter((row) => (row.idempotency_key === null || !ctx.seededKeys.has(row.idempotency_key)) && judged({ user: row.user, amount: row.amount }));
  const unmatched = [...rows];
  for (const p of payments) {
    const i = unmatched.findIndex((row) => rowMatches(row, p));
    if (i < 0) {
      throw new CheckFailed(
        t('check.audit.noRow', { request: describeRequest(p.first), user: JSON.stringify(p.body.user), amount: p.body.amount }),
        t('check.audit.noRow.why'),
        { exchanges: [p.first], ledger: rows },
      );
    }
    // The contract: the ledger's created_at is the very text of the payment's charged_at
    // (so it is ISO 8601 UTC to the millisecond with Z too, which paymentOf checked).
    const row = unmatched[i];
    const charged = chargedAtOf(p.first);
    if (typeof charged === 'string' && row.created_at !== charged) {
      throw new CheckFailed(
        t('check.audit.createdAt', { id: row.payment_id, created: JSON.stringify(row.created_at), charged: JSON.stringify(charged) }),
        t('check.audit.createdAt.why'),
        { exchanges: [p.first], ledger: [row] },
      );
    }
    unmatched.splice(i, 1);
  }
  if (unmatched.length > 0) {
    const row = unmatched[0];
    throw new CheckFailed(
      t('check.audit.extraRow', { count: rows.length, payments: payments.length, id: row.payment_id, key: row.idempotency_key === null ? t('check.audit.noKeyColumn') : JSON.stringify(row.idempotency_key) }),
      t('check.audit.extraRow.why'),
      { ledger: rows, exchanges: db.exchanges.filter((e) => sameBody(e, row)).slice(0, 6) },
    );
  }
}
