import crypto from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { CheckFailed } from '../../grader/failure.js';
import { describeCharge, expectCharges, expectReplay, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { checkTimeouts, responseJson } from '../../grader/http.js';
import { LOCK_HOLD_MS, RACE_SIZE } from '../../grader/race.js';
import { t } from '../../i18n/index.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';

/**
 * The keyless window the servers are started with (IDEM_KEYLESS_WINDOW_S), in s: long
 * enough that a retry sent at once, and a race under a held lock, fall inside it on a
 * loaded machine (they take well under half of it), short enough to wait out.
 */
export const WINDOW_S = 1;

/** How much longer than the window the grader waits before the same body again, in ms: the records' times are in ms. */
const AFTER_WINDOW_MS = 100;

/**
 * Where in a second (ms past it, by the clock the servers share with the grader) the first
 * keyless request is sent, and how long after its answer the retry goes, in ms: the retry
 * then comes after the next whole second, well inside the window. A key derived from the
 * body and a clock bucket (floor(now / window)) instead of a window that starts at the
 * first request puts the two in different buckets and charges twice, every time.
 */
const FIRST_AT_MS = 750;
const RETRY_AFTER_MS = 300;

/**
 * The fingerprint() of lab/server.py for a payment body: sha256 hex of its canonical JSON
 * (sorted keys, no spaces, non-ASCII escaped as \uXXXX, as Python's json.dumps writes it).
 * A learner who derives the keyless key as this hex and keeps it beside client keys is
 * caught by sending it as a client's key; any other derivation (a prefix, another hash)
 * the grader cannot guess, and cannot collide with on purpose.
 */
export function labFingerprint(body: { user: string; amount: number }): string {
  const canonical = JSON.stringify({ amount: body.amount, user: body.user }).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return crypto.createHash('sha256').update(canonical, 'utf8').digest('hex');
}

/** The ledger rows of a keyless payment of this body. */
function keylessRows(ctx: LiveContext, server: ServerInstance, body: { user: string; amount: number }) {
  return ctx.ledger(server).filter((row) => row.idempotency_key === null && row.user === body.user && row.amount === body.amount);
}

/** How many charges of this body the provider's statement holds. */
function chargesOf(ctx: LiveContext, server: ServerInstance, body: { user: string; amount: number }): number {
  return (ctx.charges(server) ?? []).filter((c) => c.user === body.user && c.amount === body.amount).length;
}

/**
 * A failure inside the window for which the window itself may be to blame is the
 * grader's, not the server's: when the provider's statement shows the body's first two
 * charges a whole window apart or more, a request meant to fall inside the window came
 * after it (the machine was too slow to tell), and an Error is returned (the step's verdict
 * is `error`). Two charges less than a window apart, or any other failure, are the
 * server's: the failure is returned as it is.
 */
function judgedInWindow(ctx: LiveContext, server: ServerInstance, body: { user: string; amount: number }, err: unknown): unknown {
  const at = (ctx.charges(server) ?? []).filter((c) => c.user === body.user && c.amount === body.amount).map((c) => Date.parse(c.at));
  if (err instanceof CheckFailed && at.length >= 2 && at[1] - at[0] >= WINDOW_S * 1000) {
    return new Error(t('step.15.tooSlow', { window: WINDOW_S, ms: at[1] - at[0] }));
  }
  return err;
}

/**
 * Requires a new payment: 201, a payment of what was sent, with a payment_id none of the
 * `earlier` answers gave.
 * @throws CheckFailed naming the request, or the payment it replayed instead
 */
function expectNew(exchange: Exchange, earlier: Exchange[], what: string): number {
  expectStatus(exchange, 201, t('step.15.new', { what }), t('step.15.new.why'));
  const id = paymentOf(exchange).payment_id as number;
  const same = earlier.find((e) => (responseJson(e) as { payment_id?: unknown } | undefined)?.payment_id === id);
  if (same) throw new CheckFailed(t('step.15.notNew', { what, id }), t('step.15.new.why'), { exchanges: [same, exchange] });
  return id;
}

/**
 * RACE_SIZE identical keyless requests sent at once while the grader holds the database's
 * write lock (LOCK_HOLD_MS): every look-up comes before any write, so a keyless dedupe that
 * looks and then inserts charges more than once every time. One charge and one ledger row
 * for the body; every answer the same 201, or 409 for one still in flight; one 201 at least.
 * @throws CheckFailed naming the first broken rule, with the round's exchanges
 */
async function keylessRace(ctx: LiveContext, server: ServerInstance): Promise<void> {
  const body = ctx.data.payment();
  let release: (() => void) | undefined = ctx.holdWriteLock(server);
  let answers: Exchange[];
  try {
    const sent = ctx.paySimultaneously([server], Array.from({ length: RACE_SIZE }, () => ({ body })), checkTimeouts());
    await delay(LOCK_HOLD_MS);
    release();
    release = undefined;
    answers = await sent;
  } finally {
    release?.();
  }
  try {
    const charges = (ctx.charges(server) ?? []).filter((c) => c.user === body.user && c.amount === body.amount);
    const rows = keylessRows(ctx, server, body);
    if (charges.length > 1 || rows.length > 1) {
      throw new CheckFailed(t('step.15.raceDoubled', { size: RACE_SIZE, charges: charges.length, rows: rows.length }), t('step.15.race.why'), {
        exchanges: answers,
        ledger: rows,
        details: charges.map(describeCharge),
      });
    }
    const broken = answers.filter((e) => e.status !== 201 && e.status !== 409);
    const paid = answers.filter((e) => e.status === 201);
    if (broken.length > 0 || paid.length === 0) {
      throw new CheckFailed(t('step.15.raceBroken', { size: RACE_SIZE, status: String(broken[0]?.status ?? answers[0]?.status) }), t('step.15.race.why'), { exchanges: broken.length > 0 ? broken : answers });
    }
    const different = paid.filter((e) => !isDeepStrictEqual(responseJson(e), responseJson(paid[0])));
    if (different.length > 0) {
      throw new CheckFailed(t('step.15.raceDifferent', { size: RACE_SIZE, count: paid.length }), t('step.15.race.why'), { exchanges: [paid[0], ...different] });
    }
    expectCharges(ctx, body, 1, answers, t('step.15.race.why'), server);
  } catch (err) {
    throw judgedInWindow(ctx, server, body, err);
  }
}

/**
 * Step 15 (advanced track): keyless clients, the essay's migration mode. With
 * IDEM_KEYLESS_WINDOW_S set (WINDOW_S here), a request without an Idempotency-Key is
 * deduplicated within the window by a key the server derives from the user and the body's
 * fingerprint (docs/server-contract.md, "The advanced track"): the same body at once
 * replays the first response (one charge, one row; also ten at once under a held write
 * lock), a different body, another user's same amount and a keyed request with the same
 * body are payments of their own, a client's key equal to the body's fingerprint meets no
 * derived key (either way round), and the same body after the window is a new payment.
 * An empty Idempotency-Key is not keyless (400), and with the variable unset a keyless
 * request is refused with 400 as in step 03. The audit counts keyless 201s with one body
 * and payment_id as one payment (LiveContext.keylessGrouping).
 */
export const step: Step = {
  id: '15',
  slug: 'keyless',
  get title() {
    return t('step.15.title');
  },
  cost: 3,
  async live(ctx: LiveContext) {
    ctx.keylessGrouping = 'same-answer';
    const env = { IDEM_KEYLESS_WINDOW_S: String(WINDOW_S) };
    // B runs without the variable, on a database of its own: keyless requests are refused there.
    const [a, b] = await Promise.all([ctx.startServer({ env, priority: 2500 }), ctx.startServer({ ownDatabase: true, label: 'B', priority: 100 })]);
    const body = ctx.data.payment();

    // The first keyless request at FIRST_AT_MS past a second, its retry after the next one.
    await delay((1000 + FIRST_AT_MS - (Date.now() % 1000)) % 1000);
    const first = await ctx.pay(a, { body });
    expectStatus(first, 201, t('step.15.first'), t('step.15.first.why'));
    paymentOf(first);
    await delay(RETRY_AFTER_MS);
    const retry = await ctx.pay(a, { body });
    try {
      expectReplay(first, retry, t('step.15.replay.why'));
      expectCharges(ctx, body, 1, [first, retry], t('step.15.replay.why'), a);
      const rows = keylessRows(ctx, a, body);
      if (rows.length !== 1) throw new CheckFailed(t('step.15.rows', { count: rows.length }), t('step.15.replay.why'), { exchanges: [first, retry], ledger: rows });
    } catch (err) {
      throw judgedInWindow(ctx, a, body, err);
    }
    // The window is waited out from here: after the last keyless request with this body.
    const lastSame = performance.now();
    const ours = [first];
    ours.push(await ctx.pay(a, { body: { user: body.user, amount: ctx.data.amount() } }));
    expectNew(ours[ours.length - 1], [first], t('step.15.what.otherBody'));
    ours.push(await ctx.pay(a, { body: { user: ctx.data.user(), amount: body.amount } }));
    expectNew(ours[ours.length - 1], [first], t('step.15.what.otherUser'));
    ours.push(await ctx.pay(a, { key: ctx.freshKey(), body }));
    expectNew(ours[ours.length - 1], [first], t('step.15.what.keyed'));
    // A client's key that is the body's fingerprint, after the keyless payment and before one.
    const fingerprint = labFingerprint(body);
    ours.push(await ctx.pay(a, { key: fingerprint, body }));
    expectNew(ours[ours.length - 1], ours.slice(0, -1), t('step.15.what.fingerprintKey', { key: fingerprint.slice(0, 12) }));
    const other = ctx.data.payment();
    const otherFingerprint = labFingerprint(other);
    const keyedFirst = await ctx.pay(a, { key: otherFingerprint, body: other });
    expectNew(keyedFirst, ours, t('step.15.what.fingerprintKey', { key: otherFingerprint.slice(0, 12) }));
    expectNew(await ctx.pay(a, { body: other }), [keyedFirst], t('step.15.what.afterKeyed'));

    await keylessRace(ctx, a);

    const empty = ctx.data.payment();
    const refusedEmpty = await ctx.pay(a, { key: '', body: empty });
    expectStatus(refusedEmpty, 400, t('step.15.empty'), t('step.15.empty.why'));
    expectCharges(ctx, empty, 0, [refusedEmpty], t('step.15.empty.why'), a);
    const unset = ctx.data.payment();
    const refusedUnset = await ctx.pay(b, { body: unset });
    expectStatus(refusedUnset, 400, t('step.15.unset'), t('step.15.unset.why'));
    expectCharges(ctx, unset, 0, [refusedUnset], t('step.15.unset.why'), b);

    // After the window: the same body is a new payment.
    await delay(Math.max(0, lastSame + WINDOW_S * 1000 + AFTER_WINDOW_MS - performance.now()));
    const charged = chargesOf(ctx, a, body);
    const later = await ctx.pay(a, { body });
    expectNew(later, ours, t('step.15.what.afterWindow', { window: WINDOW_S }));
    if (chargesOf(ctx, a, body) !== charged + 1) {
      throw new CheckFailed(t('step.15.afterWindowCharge', { window: WINDOW_S }), t('step.15.afterWindow.why'), { exchanges: [first, later] });
    }
    return t('step.15.pass', { size: RACE_SIZE, window: WINDOW_S });
  },
  get hints() {
    return [t('step.15.hint.1'), t('step.15.hint.2'), t('step.15.hint.3')];
  },
};
