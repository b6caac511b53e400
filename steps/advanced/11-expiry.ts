import { setTimeout as delay } from 'node:timers/promises';
import { countRows } from '../../grader/tables.js';
import { CheckFailed } from '../../grader/failure.js';
import { Starved } from '../../grader/gate.js';
import { starvedFor, type Starvation } from '../../grader/sched.js';
import { describeCharge, expectCharges, expectReplay, expectRows, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { responseJson } from '../../grader/http.js';
import { chargeMs } from '../../grader/limits.js';
import { fakeClockLibrary } from '../../grader/fake-clock.js';
import { msUntilPhase } from '../../grader/wall-clock.js';
import { t } from '../../i18n/index.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';
import { saysReplayed } from './09-replayed.js';

/** The contract's TTL when IDEM_TTL_S is unset, in s: a day. */
export const DEFAULT_TTL_S = 86_400;

/**
 * The TTL the check gives its servers (IDEM_TTL_S), in s: 1, or more when the run's
 * provider is slow (IDEM_CHARGE_MS), so that a retry sent right after its payment's answer
 * is always inside it: at least four charges long, rounded up to whole seconds.
 */
export function gradedTtlS(): number {
  return Math.max(1, Math.ceil((4 * chargeMs()) / 1000));
}

/**
 * How much longer than the TTL, counted from the payment's charged_at, the check waits
 * before it counts the payment's record as expired, in ms. A record's own time is at the
 * latest the payment's charged_at (docs/server-contract.md), written to the millisecond
 * by the clock the servers share with the grader: a few ms cover the rounding, and no more
 * is given, so a grace the server adds to its TTL is seen.
 */
export const EXPIRY_MARGIN_MS = 5;

/**
 * When (Date.now(), ms) the record of a payment is expired at the latest: its charged_at
 * plus the TTL and EXPIRY_MARGIN_MS.
 */
function expiresBy(paid: Paid, ttlS: number): number {
  return Date.parse(String(paymentOf(paid.first).charged_at)) + ttlS * 1000 + EXPIRY_MARGIN_MS;
}

/**
 * Whether a refusal's body carries a payment: a `payment_id` at any depth (a payment nested
 * as `{"payment": {...}}` too), or the first payment's charged_at in any string.
 */
export function carriesPayment(body: unknown, chargedAt: string, depth = 0): boolean {
  if (depth > 8) return false;
  if (typeof body === 'string') return chargedAt !== '' && body.includes(chargedAt);
  if (Array.isArray(body)) return body.some((v) => carriesPayment(v, chargedAt, depth + 1));
  if (typeof body === 'object' && body !== null) {
    return 'payment_id' in body || Object.values(body).some((v) => carriesPayment(v, chargedAt, depth + 1));
  }
  return false;
}

/**
 * How long after the last 410 the check reads the provider's statement once more, in ms: a
 * server that answers 410 and then charges the expired payment in the background (a
 * thread, a queue) is seen by its charge, as long as it charges within this time.
 */
export const LATE_CHARGE_WAIT_MS = 1500;

/**
 * How long after A is up B is started, beyond the TTL, in ms: B's process starts at least
 * a TTL and this much after A's, so that a record time counted from the process's start
 * (a monotonic clock that starts with the process) reads a TTL younger on B than on A.
 */
export const B_AFTER_A_MS = 250;

/**
 * How long before a sliding TTL would run out (a TTL from the replay's sending) the first
 * request after expiry must be sent for its 410 to tell a sliding TTL from a fixed one, in
 * ms: room for the replay's own time in the server, by which a sliding TTL starts later.
 */
export const SLIDE_MARGIN_MS = 150;

/** Payments made and retried at once before the check gives up on a machine too slow to retry within the TTL. */
const ATTEMPTS = 3;

/** A payment request: a key and a body. */
interface Sent {
  key: string;
  body: { user: string; amount: number };
}

/** A payment made: its request, its first answer, and when that came back (performance.now(), ms). */
interface Paid {
  sent: Sent;
  first: Exchange;
  at: number;
  /** When its replay within the TTL was sent (Date.now(), ms), when payAndReplay made one: a TTL that slides from the last replay runs a TTL from then. */
  retriedAt?: number;
}

/**
 * Pays under a fresh key on `server`: 201 and a payment as the contract writes it.
 * @throws CheckFailed when it is not
 */
async function pay(ctx: LiveContext, server: ServerInstance): Promise<Paid> {
  const sent: Sent = { key: ctx.freshKey(), body: ctx.data.payment() };
  const first = await ctx.pay(server, sent);
  expectStatus(first, 201, t('check.first201'), t('step.11.first.why'));
  paymentOf(first);
  return { sent, first, at: performance.now() };
}

/** Tables that are no idempotency records: the contract's ledger and refunds (docs/server-contract.md). */
export const NOT_RECORDS: readonly string[] = ['ledger', 'refunds'];

/**
 * The rows of every table but NOT_RECORDS: wherever a server keeps its idempotency
 * records (the idem table or one of its own), they are counted.
 * @returns the total and the tables that hold any, as "name: n" joined by ", "
 */
export function recordRows(dbPath: string): { records: number; tables: string } {
  const counts = Object.entries(countRows(dbPath, NOT_RECORDS));
  return {
    records: counts.reduce((sum, [, n]) => sum + n, 0),
    tables: counts.filter(([, n]) => n > 0).map(([name, n]) => `${name}: ${n}`).join(', ') || '-',
  };
}

/**
 * Where in a second (ms past it, by the clock the servers share with the grader) the
 * payment retried within the TTL is sent, and how far past the whole second TTL seconds
 * later its retry goes, in ms. The retry then comes TTL - 0.55 s after the payment, within
 * the TTL, but more than TTL whole seconds after the second the payment was made in: a
 * server that counts age on a clock of whole seconds refuses it every time. And a server
 * whose TTL slides from the last replay still replays the key 0.15 s past the payment's TTL.
 */
export const PAY_AT_MS = 850;
export const RETRY_PAST_MS = 300;

/**
 * Pays under a fresh key and retries it: at once, or (`acrossSecond`) with the payment sent
 * PAY_AT_MS past a second and the retry RETRY_PAST_MS past the whole second TTL seconds
 * later. The retry, answered within the TTL of the payment being sent, must replay it.
 * When the payment was made only after the next whole second (its
 * charged_at says so), or the retry came back only after the TTL (a slow machine, when a
 * record may rightly have expired), the check tries again with a new key, ATTEMPTS times
 * at most.
 * @returns every payment made, the last one replayed
 * @throws CheckFailed when a retry within the TTL did not replay its payment; Error (the
 *   step's status is then an error, not a fail) when every retry came back after the TTL
 */
async function payAndReplay(ctx: LiveContext, server: ServerInstance, ttlS: number, acrossSecond: boolean, retryOn?: { server: ServerInstance; startedS: string }): Promise<Paid[]> {
  const made: Paid[] = [];
  for (let attempt = 1; ; attempt++) {
    if (acrossSecond) await delay(msUntilPhase(PAY_AT_MS));
    const second = Math.floor(Date.now() / 1000);
    const started = performance.now();
    const paid = await pay(ctx, server);
    made.push(paid);
    const chargedAt = Date.parse(String(paymentOf(paid.first).charged_at));
    if (acrossSecond) {
      if (Math.floor(chargedAt / 1000) > second) {
        if (attempt < ATTEMPTS) continue;
        // Charged in the next second every time: the replay across a whole second, which a
        // clock of whole seconds refuses, was never sent. Not a pass: graded again.
        throw new Starved(t('step.11.acrossSecondLate', { tries: ATTEMPTS, at: PAY_AT_MS }));
      }
      await delay(Math.max(0, (second + ttlS) * 1000 + RETRY_PAST_MS - Date.now()));
    }
    paid.retriedAt = Date.now();
    const retry = await ctx.pay(retryOn?.server ?? server, paid.sent);
    const ms = Math.round(performance.now() - started);
    if (retry.status === 201) {
      expectReplay(paid.first, retry, t('step.11.within.why', { ttl: ttlS }));
      return made;
    }
    if (ms >= ttlS * 1000) {
      if (attempt < ATTEMPTS) continue;
      // Not the server's fault: the grader could not send a retry within the TTL (inconclusive, graded again).
      throw new Starved(t('step.11.tooSlow', { ttl: ttlS, ms }));
    }
    const within = retryOn
      ? t('step.11.withinAcross', { key: JSON.stringify(paid.sent.key), paidOn: server.label, server: retryOn.server.label, started: retryOn.startedS, ms, ttl: ttlS, status: String(retry.status) })
      : t('step.11.within', { key: JSON.stringify(paid.sent.key), ms, ttl: ttlS, status: String(retry.status) });
    expectStatus(retry, 201, within, t(retryOn ? 'step.11.sameAge.why' : 'step.11.within.why', { ttl: ttlS }));
  }
}

/**
 * Requires the answer to a request under an expired key to be a 410 with an `{"error"}`,
 * no payment_id (a refusal carries none of the first payment: docs/server-contract.md), no
 * Idempotency-Replayed: true (a refusal is not a replay: step 09's rule, saysReplayed) and
 * no Location header (a 410 points at no new resource: RFC 9110 §10.2.2 gives Location to a
 * 201 and to redirects), and the key's payment to be charged once and recorded once still.
 * `on`: a server on the database the key was paid on, when that is not the check's own
 * (its statement and ledger are read). `later`: the answer came from a server started `startedS` s (at least) after server
 * `other`, which refused the key already: a replay there is said as a record's age that
 * differs from server to server (a clock counted from the process's start).
 * @throws CheckFailed saying what the server did instead: replayed, processed again, another
 *   status, a body with a payment or without an error, a replay header, a Location
 */
function expectGone(ctx: LiveContext, answer: Exchange, paid: Paid, ttlS: number, later?: { other: string; startedS: string }, on?: ServerInstance): void {
  const { sent, first } = paid;
  const facts = { key: JSON.stringify(sent.key), server: answer.server, s: ((performance.now() - paid.at) / 1000).toFixed(1), ttl: ttlS };
  const exchanges = [first, answer];
  if (answer.status === 201) {
    const again = responseJson(answer) as Record<string, unknown> | undefined;
    const firstPayment = paymentOf(first);
    if (again?.payment_id === firstPayment.payment_id) {
      if (later) throw new CheckFailed(t('step.11.replayedOnLater', { ...facts, other: later.other, started: later.startedS }), t('step.11.sameAge.why'), { exchanges: [first, ...ctx.exchanges.slice(-3, -1), answer] });
      throw new CheckFailed(t('step.11.replayed', facts), t('step.11.replayed.why'), { exchanges });
    }
    throw new CheckFailed(t('step.11.reprocessed', { ...facts, id: String(again?.payment_id) }), t('step.11.reprocessed.why'), { exchanges });
  }
  expectStatus(answer, 410, t('step.11.status', { ...facts, status: String(answer.status) }), t('step.11.status.why'));
  if (saysReplayed(answer)) throw new CheckFailed(t('step.11.saysReplayed', facts), t('step.11.saysReplayed.why'), { exchanges: [answer] });
  if (answer.location !== undefined) throw new CheckFailed(t('step.11.location', { ...facts, location: answer.location }), t('step.11.location.why'), { exchanges: [answer] });
  const body = responseJson(answer) as Record<string, unknown> | undefined;
  if (typeof body !== 'object' || body === null || typeof body.error !== 'string' || body.error.trim() === '' || carriesPayment(body, String(paymentOf(first).charged_at))) {
    throw new CheckFailed(t('step.11.noError', facts), t('step.11.noError.why'), { exchanges: [answer] });
  }
  if (!/key|키|键|鍵/i.test(body.error)) ctx.warn(t('step.11.sayNewKey', { error: JSON.stringify(body.error.slice(0, 200)) }));
  expectCharges(ctx, sent.body, 1, exchanges, t('step.11.reprocessed.why'), on);
  expectRows(ctx, sent.key, 1, exchanges, t('step.11.reprocessed.why'), on);
}

/** What a wait for expired records to go saw: the rows last counted (recordRows), how long it waited (ms) and, when more than the young ones were left, whether the bound said nothing. */
export interface SweepWait {
  records: number;
  tables: string;
  waitedMs: number;
  /** Set when rows were left and the servers waited for a CPU (or the grader lagged) a quarter of the bound or more (starvedFor): a timer that sweeps may simply have run late. */
  starved?: Starvation;
}

/**
 * Counts the record rows of `dbPath` (recordRows) every 100 ms until at most `young` are
 * left or `boundMs` ms have passed, measuring meanwhile how starved `servers` were
 * (ctx.starveMeter): the one wait of 11 and 15 for a server's own timer to delete expired
 * records. A server that never deletes them is judged by the rows left; one whose timer was
 * kept off a CPU gets `starved`, for the caller to throw Starved instead of failing it.
 */
export async function waitForSweep(ctx: LiveContext, servers: ServerInstance[], dbPath: string, young: number, boundMs: number): Promise<SweepWait> {
  const start = performance.now();
  const meter = ctx.starveMeter(servers);
  let { records, tables } = recordRows(dbPath);
  while (records > young && performance.now() - start < boundMs) {
    await delay(100);
    ({ records, tables } = recordRows(dbPath));
  }
  const seen = meter.stop();
  const waitedMs = performance.now() - start;
  return { records, tables, waitedMs, ...(records > young && starvedFor(seen, boundMs) ? { starved: seen } : {}) };
}

/**
 * How long, at most, the check waits after a payment made once a record has expired for
 * that record to be deleted, in ms, for a TTL of `ttlS` s: twice the TTL and a second, a
 * generous bound for a server that deletes expired records from a timer of its own (the
 * contract asks for it within a TTL of the record's expiry).
 */
export function sweepWaitMs(ttlS: number): number {
  return 2 * ttlS * 1000 + 1000;
}

/**
 * Requires `late`'s record, expired by now and never requested since, to be deleted with
 * no request under an expired key: pays once more on `server` (a fresh key), then counts
 * the rows of every table but NOT_RECORDS in the sqlite file until at most that payment's
 * record is left (every earlier payment of this database is older than `late`, so expired
 * too), for sweepWaitMs(ttlS) at most. A server that deletes expired records only when a
 * request meets one (its 410) keeps them.
 * @throws CheckFailed naming `late`'s key, the payment made after its TTL and the rows left
 */
async function expectSwept(ctx: LiveContext, server: ServerInstance, late: Paid, ttlS: number): Promise<void> {
  const after = await pay(ctx, server);
  const young = 1;
  // A timer of the server's that sweeps may run late on a loaded machine: the bound says
  // nothing when the server waited for a CPU (or the grader could not look) meanwhile.
  const { records, tables, waitedMs, starved } = await waitForSweep(ctx, [server], ctx.dbPath, young, sweepWaitMs(ttlS));
  if (starved) {
    throw new Starved(t('step.11.sweepStarved', { s: (sweepWaitMs(ttlS) / 1000).toFixed(1), server: server.label, waited: Math.round(starved.serverWaitMs), lag: Math.round(starved.graderLagMs) }));
  }
  if (records > young) {
    const past = (Date.parse(String(paymentOf(after.first).charged_at)) - Date.parse(String(paymentOf(late.first).charged_at))) / 1000 - ttlS;
    throw new CheckFailed(
      t('step.11.lazySweep', {
        key: JSON.stringify(late.sent.key),
        server: server.label,
        ttl: ttlS,
        past: past.toFixed(2),
        after: JSON.stringify(after.sent.key),
        s: (waitedMs / 1000).toFixed(1),
        records,
        tables,
        young,
      }),
      t('step.11.lazySweep.why'),
      { exchanges: [late.first, after.first] },
    );
  }
}

/** How far ahead the clock of the server the day-later round starts (D) reads, in s: a day and an hour, past the default TTL by an hour. */
export const DAY_LATER_S = 90_000;

/**
 * How far a payment's charged_at on D may lie from the grader's clock plus DAY_LATER_S
 * for D's clock to count as moved, in ms: ten minutes (a moved clock reads within a few ms
 * of it; an unmoved one a day away).
 */
export const MOVED_WITHIN_MS = 600_000;

/**
 * The day-later round: C's payment `kept` (IDEM_TTL_S unset: a TTL of a day), retried on D,
 * a server started on C's database whose wall clock reads DAY_LATER_S ahead (libfaketime,
 * InstanceOptions.clockOffsetS), must be refused as expired (410, as expectGone, no
 * charge, no row), not replayed nor charged again: a record's age that wraps at a day
 * (timedelta's .seconds without .days) never reaches the default TTL. Judged only once
 * D's clock is seen to have moved: a fresh payment on D must answer 201 with a charged_at
 * within MOVED_WITHIN_MS of the grader's clock plus DAY_LATER_S. Without libfaketime,
 * when D does not start, when that payment does not answer 201 or its clock did not move
 * (a server that reads the clock without the C library), or when the retry gets neither a
 * 201 nor a 410 (which the preload, not the server, may have caused), the round is passed
 * over with a warning, never failed. Expired records being deleted is not asked of D: a
 * timer within a TTL (a day) of their expiry is the contract's.
 * @throws CheckFailed when the retry on D replays `kept` or is charged as a new payment,
 *   or its 410 breaks a rule of expectGone
 */
async function dayLaterRound(ctx: LiveContext, c: ServerInstance, kept: Paid): Promise<void> {
  const hours = DAY_LATER_S / 3600;
  if (!fakeClockLibrary()) {
    ctx.warn(t('step.11.dayLater.noFaketime', { hours }));
    return;
  }
  let d: ServerInstance;
  try {
    d = await ctx.startServer({ database: ctx.database(c), label: 'D', clockOffsetS: DAY_LATER_S, priority: 1000 });
  } catch (err) {
    if (err instanceof Starved) throw err;
    ctx.warn(t('step.11.dayLater.noStart', { hours, error: String(err instanceof Error ? err.message : err).split('\n')[0].slice(0, 300) }));
    return;
  }
  const probe: Sent = { key: ctx.freshKey(), body: ctx.data.payment() };
  const paid = await ctx.pay(d, probe);
  const chargedAt = paid.status === 201 ? String((responseJson(paid) as Record<string, unknown> | undefined)?.charged_at ?? '') : '';
  const ahead = Date.parse(chargedAt) - Date.now();
  if (!(Math.abs(ahead - DAY_LATER_S * 1000) <= MOVED_WITHIN_MS)) {
    ctx.warn(t('step.11.dayLater.notMoved', { hours, status: String(paid.status ?? paid.error), chargedAt: JSON.stringify(chargedAt) }));
    return;
  }
  const retry = await ctx.pay(d, kept.sent);
  const facts = { key: JSON.stringify(kept.sent.key), paidOn: c.label, server: d.label, hours, chargedAt, ttl: DEFAULT_TTL_S };
  if (retry.status === 201) {
    const again = responseJson(retry) as Record<string, unknown> | undefined;
    const replayed = again?.payment_id === paymentOf(kept.first).payment_id;
    throw new CheckFailed(
      t(replayed ? 'step.11.dayLater.replayed' : 'step.11.dayLater.reprocessed', { ...facts, id: String(again?.payment_id) }),
      t(replayed ? 'step.11.dayLater.why' : 'step.11.reprocessed.why', { ttl: DEFAULT_TTL_S }),
      { exchanges: [kept.first, paid, retry] },
    );
  }
  if (retry.status !== 410) {
    ctx.warn(t('step.11.dayLater.unclear', { ...facts, status: String(retry.status ?? retry.error) }));
    return;
  }
  expectGone(ctx, retry, kept, DEFAULT_TTL_S, undefined, c);
}

/**
 * The check itself, on A and B (IDEM_TTL_S of `ttlS`, one database) and C (IDEM_TTL_S
 * unset, a database of its own): see the step.
 * @returns the pass verdict
 * @throws CheckFailed naming the first broken rule
 */
async function expiry(ctx: LiveContext, a: ServerInstance, startedB: Promise<ServerInstance>, startedC: Promise<ServerInstance>, ttlS: number, bAfterAS: () => string): Promise<string> {
  // One payment left to expire and C's, kept for a day; then, within the TTL, a key
  // replays across a whole second (payAndReplay), and is left to expire too.
  const other = await pay(ctx, a);
  const c = await startedC;
  const kept = await pay(ctx, c);
  const expiring = (await payAndReplay(ctx, a, ttlS, true)).slice(-1)[0];
  await delay(Math.max(0, expiresBy(expiring, ttlS) - Date.now()));

  // Expired: refused on A, on a second try, and on B; its record may still be there. The
  // first try goes out as soon as the record is expired, not once B is up (B may still be
  // starting): a grace the server adds to its TTL shows only in the moments after it.
  const goneSentAt = Date.now();
  const firstGone = await ctx.pay(a, expiring.sent);
  // Sent a TTL or more after the replay (the grader or its timer late): a TTL that slides
  // from the last replay would have run out too, so a 410 then proves nothing. Graded again.
  if (firstGone.status === 410 && expiring.retriedAt !== undefined && goneSentAt >= expiring.retriedAt + ttlS * 1000 - SLIDE_MARGIN_MS) {
    throw new Starved(t('step.11.goneLate', { ms: goneSentAt - expiring.retriedAt, ttl: ttlS }));
  }
  expectGone(ctx, firstGone, expiring, ttlS);
  const b = await startedB;
  const later = { other: a.label, startedS: bAfterAS() };
  for (const server of [a, b]) expectGone(ctx, await ctx.pay(server, expiring.sent), expiring, ttlS, server === b ? later : undefined);
  // Another amount under it while its record may still be there (no payment has come to
  // sweep it): 410 too, not 422 (a fingerprint compared before the record's age).
  const otherBefore = { user: expiring.sent.body.user, amount: ctx.data.amount() };
  const refusedBefore = await ctx.pay(a, { key: expiring.sent.key, body: otherBefore });
  expectGone(ctx, refusedBefore, expiring, ttlS);
  expectCharges(ctx, otherBefore, 0, [refusedBefore], t('step.11.reprocessed.why'));

  // New payments: the expired records are to be deleted by now; a new one, made on B (a
  // server started at least a TTL after A), replays on A: a record's age reads the same on
  // every server (a clock counted from the process's start reads it a TTL older on A).
  const made = [await pay(ctx, a), ...(await payAndReplay(ctx, b, ttlS, false, { server: a, startedS: later.startedS }))].length;
  // A server that deletes expired records from a timer of its own gets up to a TTL more;
  // a timer that ran late because the machine kept A or B off a CPU (or the grader could not
  // look) meanwhile says nothing about the server: inconclusive, graded again.
  const { records, tables, waitedMs, starved } = await waitForSweep(ctx, [a, b], ctx.dbPath, made, ttlS * 1000);
  if (starved) {
    throw new Starved(t('step.11.unboundedStarved', { ttl: ttlS, made, records, s: (waitedMs / 1000).toFixed(1), waited: Math.round(starved.serverWaitMs), lag: Math.round(starved.graderLagMs) }));
  }
  if (records > made) {
    throw new CheckFailed(t('step.11.unbounded', { records, made, ttl: ttlS, tables }), t('step.11.unbounded.why'), { exchanges: ctx.exchanges.slice(-3) });
  }

  // Deleted, the expired keys are still refused: on A and on B, one never retried since included.
  expectGone(ctx, await ctx.pay(a, expiring.sent), expiring, ttlS);
  expectGone(ctx, await ctx.pay(b, other.sent), other, ttlS);
  expectGone(ctx, await ctx.pay(a, other.sent), other, ttlS);

  // The expired key with another amount is refused all the same (410, not 422 or 500: the
  // key is gone whatever the body); another user under it is that user's own new payment.
  const otherBody = { user: expiring.sent.body.user, amount: ctx.data.amount() };
  const refused = await ctx.pay(a, { key: expiring.sent.key, body: otherBody });
  expectGone(ctx, refused, expiring, ttlS);
  expectCharges(ctx, otherBody, 0, [refused], t('step.11.reprocessed.why'));
  const lastGone = { at: performance.now(), exchange: refused };
  const otherUser: Sent = { key: expiring.sent.key, body: ctx.data.payment() };
  const theirs = await ctx.pay(b, otherUser);
  if (theirs.status !== 201) {
    expectStatus(theirs, 201, t('step.11.otherUser', { key: JSON.stringify(otherUser.key), user: JSON.stringify(otherUser.body.user), owner: JSON.stringify(expiring.sent.body.user), status: String(theirs.status) }), t('step.11.otherUser.why'));
  }
  const theirPayment = paymentOf(theirs);
  if (theirPayment.payment_id === paymentOf(expiring.first).payment_id || theirPayment.user !== otherUser.body.user) {
    throw new CheckFailed(t('step.11.otherUser', { key: JSON.stringify(otherUser.key), user: JSON.stringify(otherUser.body.user), owner: JSON.stringify(expiring.sent.body.user), status: '201' }), t('step.11.otherUser.why'), { exchanges: [expiring.first, theirs] });
  }
  expectCharges(ctx, otherUser.body, 1, [theirs], t('step.11.otherUser.why'));

  // One more record left to expire, with no request under an expired key after it: the
  // 410s above may have swept every record expired then (a server that deletes expired
  // records only when a request meets one), but this one is young until after them.
  const late = await pay(ctx, a);

  // Unset, the TTL is a day: C's payment, older than the graded TTL by now, still replays.
  await delay(Math.max(0, expiresBy(kept, ttlS) - Date.now()));
  const retry = await ctx.pay(c, kept.sent);
  const why = t('step.11.default.why', { ttl: DEFAULT_TTL_S });
  if (retry.status !== 201) {
    expectStatus(retry, 201, t('step.11.default', { s: ((performance.now() - kept.at) / 1000).toFixed(1), status: String(retry.status), ttl: DEFAULT_TTL_S }), why);
  }
  expectReplay(kept.first, retry, why);

  // A day and an hour later (a server on C's database whose clock reads so), C's payment
  // has expired with the default TTL: refused with 410, not replayed.
  await dayLaterRound(ctx, c, kept);

  // Once `late` is expired, a payment on A, and no request under an expired key: its record
  // must go all the same (by that payment, or by a timer within sweepWaitMs), else keys
  // that nobody retries after their TTL keep their records for ever.
  await delay(Math.max(0, expiresBy(late, ttlS) - Date.now()));
  await expectSwept(ctx, a, late, ttlS);

  // A refused key is never charged later either (a payment redone in the background after
  // its 410): the provider's statement is read again LATE_CHARGE_WAIT_MS after the last 410.
  await delay(Math.max(0, lastGone.at + LATE_CHARGE_WAIT_MS - performance.now()));
  const since = ((performance.now() - lastGone.at) / 1000).toFixed(1);
  for (const [body, count] of [[expiring.sent.body, 1], [other.sent.body, 1], [otherBefore, 0], [otherBody, 0]] as const) {
    const charges = ctx.chargesFor(body);
    if (charges.length !== count) {
      throw new CheckFailed(
        t('step.11.chargedLater', { s: since, user: JSON.stringify(body.user), amount: body.amount, n: charges.length, count }),
        t('step.11.chargedLater.why'),
        { exchanges: [lastGone.exchange], details: charges.map(describeCharge) },
      );
    }
  }
  return t('step.11.pass', { ttl: ttlS, records, made });
}

/**
 * Step 11 (advanced track): an idempotency record is kept for IDEM_TTL_S seconds (a day
 * when unset), and no longer. A request under a key whose record is older than that is
 * refused with 410 Gone and an `{"error"}` telling the client to send a new key, and is
 * never processed again: not on a second try, not on another instance on the same
 * database, not after the record was deleted (the ledger keeps the key). Expired records
 * are deleted, so the store stays bounded (the rows of every table but ledger and refunds
 * are counted, wherever the server keeps its records); a key within its TTL still replays,
 * and a record's age counts from its payment, not from its last replay. A 410 carries no
 * payment and no Idempotency-Replayed: true. (The essay: keys are kept for a while,
 * Stripe's for 24 hours, and a key reused after that is an error the client must see;
 * docs/server-contract.md fixes 410 and says why.) Graded with IDEM_TTL_S of gradedTtlS()
 * s on A and on B (a second instance from a copy of its own on A's database), and unset on
 * C, on a database of its own. The key left to expire is paid PAY_AT_MS past a second and
 * replayed RETRY_PAST_MS past the whole second a TTL later (a clock of whole seconds
 * refuses that retry, a TTL that slides from the last replay still replays the key
 * EXPIRY_MARGIN_MS past the payment's TTL, and so does a grace added to the TTL); it is
 * then refused on A, A again and B, with another amount on A (410 still, its record maybe
 * still there), and, once its record is deleted, with another amount again (410); another user under it is that user's new payment (201). A 410 carries no
 * payment at any depth (carriesPayment) and no Location header. B is started more than a
 * TTL after A (B_AFTER_A_MS): a replay on B of a key A refused, or a 410 on A to a payment
 * just made on B, is a record age that differs by server (a clock from the process's
 * start). Then one more payment on A is left to expire with no request under an expired
 * key after it, and a payment made on A once its TTL is over must see its record deleted
 * (expectSwept, a timer given sweepWaitMs): a server that deletes expired records only
 * when a request meets one keeps the records of keys nobody retries. LATE_CHARGE_WAIT_MS
 * after the last 410 the provider's statement is read again: a refused key charged later,
 * in the background, fails. C's payment, replayed with the default TTL, is then retried on
 * D, a server on C's database whose wall clock reads DAY_LATER_S ahead (dayLaterRound,
 * libfaketime): a day and an hour old, it must be refused with 410 (an age that wraps at a
 * day never expires); the round is passed over with a warning where D's clock does not move.
 */
export const step: Step = {
  id: '11',
  slug: 'expiry',
  get title() {
    return t('step.11.title');
  },
  async live(ctx: LiveContext) {
    const ttlS = gradedTtlS();
    const env = { IDEM_TTL_S: String(ttlS) };
    const wait = ttlS * 1000 + 150;
    // C keeps the default TTL, on a database of its own: A's sweeps must not reach its records.
    const startedC = ctx.startServer({ ownDatabase: true, label: 'C', priority: wait });
    let startedB: Promise<ServerInstance> | undefined;
    const ended = new AbortController();
    try {
      // A and B charge at once (IDEM_CHARGE_MS=0): a record claimed before its charge is
      // then hardly older than the payment's charged_at, from which expiry is judged.
      const a = await ctx.startServer({ env, label: 'A', priority: wait + 500, chargeMs: 0 });
      const aUp = performance.now();
      // B, a second pod on A's database, starts once A has set it up, and a TTL later
      // (B_AFTER_A_MS more): its process is younger than A's by more than a TTL.
      let bSpawned = aUp;
      startedB = delay(ttlS * 1000 + B_AFTER_A_MS, undefined, { signal: ended.signal }).then(() => {
        bSpawned = performance.now();
        return ctx.startServer({ env, ownCopy: true, label: 'B', priority: wait, chargeMs: 0 });
      });
      // Settled now, so that a check that fails before it awaits B leaves no rejection unhandled.
      startedB.catch(() => undefined);
      return await expiry(ctx, a, startedB, startedC, ttlS, () => ((bSpawned - aUp) / 1000).toFixed(1));
    } finally {
      // A start not begun yet is not begun; every other is over before the check ends, so that the engine stops what came up.
      ended.abort();
      await Promise.allSettled([startedC, startedB]);
    }
  },
  get hints() {
    return [t('step.11.hint.1'), t('step.11.hint.2'), t('step.11.hint.3')];
  },
};
