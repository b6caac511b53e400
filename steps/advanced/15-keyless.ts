import crypto from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { msUntilPhase } from '../../grader/wall-clock.js';
import { isDeepStrictEqual } from 'node:util';
import { CheckFailed, inPart, withNote } from '../../grader/failure.js';
import { describeCharge, expectCharges, expectReplay, expectStatus, paymentOf, starvedExchange } from '../../grader/expect-http.js';
import { responseJson, SECOND_CLIENT_ADDRESS } from '../../grader/http.js';
import { RACE_SIZE, sendForced } from '../../grader/race.js';
import { Inconclusive, Starved } from '../../grader/gate.js';
import { t } from '../../i18n/index.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';
import { saysReplayed } from './09-replayed.js';
import { B_AFTER_A_MS, NOT_RECORDS, waitForSweep } from './11-expiry.js';
import { readCells } from '../../grader/tables.js';
import { expectState, linkOf, linkTarget, seedOlderPayment } from './14-state.js';

/**
 * The keyless window the servers are started with (IDEM_KEYLESS_WINDOW_S), in s: long
 * enough that a retry sent at once, a race under a held lock and the record-key probe
 * (recordKeyProbe) fall inside it on a loaded machine, short enough to wait out. Every
 * time of the step is derived from it; a request meant to fall inside the window that was
 * answered a window or more after its body's first request was sent is never the server's
 * failure (answeredInWindow, judgedInWindow: the round is made again).
 */
export const WINDOW_S = 2;

/**
 * How much longer than the window the grader waits before the same body again, in ms,
 * counted from the first keyless request's answer (its record can be no younger): the
 * records' times are in ms.
 */
const AFTER_WINDOW_MS = 100;

/**
 * Where in a second of the wall clock the timed round's first request is sent, in ms past
 * the whole second. Early in its second, the body's record is made early in its second too,
 * and the same body sent AFTER_WINDOW_MS past the window falls in the second a window later,
 * not the one after: a server that cuts both its record's time and its clock to whole
 * seconds and ends the window only when that age is more than the window (a window of
 * 2 to 3 s long, depending on the phase) replays it, every time, instead of paying anew.
 * A new payment decided (charged, or answered) in the second after that one proves
 * nothing, and the round is made again (step.15.wholeSecondUntold).
 */
const ROUND_PHASE_MS = 20;

/**
 * Keyless bodies whose first requests are spread over one window, SPREAD_MS apart (the
 * step's body first), each sent again RETRY_AFTER_MS after its first request's answer.
 * Every pair spans RETRY_AFTER_MS and they follow each other SPREAD_MS apart, so
 * any instant of a window lies inside some pair at least (RETRY_AFTER_MS - SPREAD_MS) / 2
 * = a window / 8 (250 ms) from either end: a key derived from the body and a clock bucket
 * (floor(now / window), counted from the epoch, from the process's start or from any other
 * instant) instead of a window that starts at the first request has a bucket edge inside
 * one pair, which is then charged twice, every time. (A record's age taken on a clock of
 * whole seconds is not caught here every time, a retry half a window on reads at most a
 * second older: wholeSecondRound catches it.) Every retry still comes RETRY_AFTER_MS into
 * its window, half of it, and the time its first request took to be answered.
 */
export const SPREAD_BODIES = 4;
const SPREAD_MS = (WINDOW_S * 1000) / SPREAD_BODIES;
const RETRY_AFTER_MS = (WINDOW_S * 1000) / 2;

/**
 * When the step's body is sent again on B, a second server on the same database, in ms
 * after its first request: 0.6 of the window. Inside the window, so it must replay (a
 * dedupe kept in one process's memory charges again); and the same body is sent a last
 * time a window and AFTER_WINDOW_MS after the first, when a window that slides with every
 * replay (renewed at this retry) has not yet ended, while one that starts with the first
 * request has.
 */
const OTHER_POD_AT_MS = WINDOW_S * 1000 * 0.6;

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
  return ctx.chargesFor(body, server).length;
}

/**
 * How much of a period of `periodMs` ms `spans` cover, in ms, each span [from, to] in ms on
 * one clock (performance.now()) taken modulo the period; a span whose end is before its start
 * covers nothing. For the timed round: a keyless pair parts at a clock bucket's edge for sure
 * only when the edge lies between its first request's answer (the record was made before)
 * and its retry's sending (the retry is decided after); the edges of buckets a window long
 * lie a window apart, at an offset nobody knows, so one of them lies inside some pair
 * whatever the offset exactly when the spans, modulo the window, cover all of it.
 */
export function coveredModulo(spans: ReadonlyArray<readonly [number, number]>, periodMs: number): number {
  const pieces: Array<[number, number]> = [];
  for (const [from, to] of spans) {
    if (!(to > from)) continue;
    if (to - from >= periodMs) return periodMs;
    const start = ((from % periodMs) + periodMs) % periodMs;
    const end = start + (to - from);
    if (end <= periodMs) pieces.push([start, end]);
    else pieces.push([start, periodMs], [0, end - periodMs]);
  }
  pieces.sort((x, y) => x[0] - y[0]);
  let covered = 0;
  let end = Number.NEGATIVE_INFINITY;
  for (const [from, to] of pieces) {
    if (to <= end) continue;
    covered += to - Math.max(from, end);
    end = to;
  }
  return covered;
}

/** How many times the timed round is made before a machine too slow to keep its times is reported (Inconclusive). */
const TIMED_TRIES = 3;

/**
 * A failure inside the window for which the window itself may be to blame is the
 * grader's, not the server's: when the provider's statement shows the body's first two
 * charges a whole window apart or more, a request meant to fall inside the window came
 * after it (the machine was too slow to tell), and Inconclusive is returned: the timed
 * round is made again with new bodies, up to TIMED_TRIES times, then the step's verdict is
 * `error` ("too slow to judge"), never the learner's failure. Two charges less than a window apart, or any other failure, are the
 * server's: the failure is returned as it is. `from`: the charges before the window judged
 * (the payment after the first window is judged from its own charge on). `sentAtMs`: when
 * the body's requests were sent (epoch ms), where known: the window is measured from it, not
 * from the first charge, since a server may begin its window at the claim, before charging.
 */
function judgedInWindow(ctx: LiveContext, server: ServerInstance, body: { user: string; amount: number }, err: unknown, from = 0, sentAtMs?: number): unknown {
  const at = ctx.chargesFor(body, server).map((c) => Date.parse(c.at)).slice(from);
  // The server's window began no earlier than the body reached it: when the round's sending
  // time is known (requests sent at once), from then, for a server may start its window at
  // the claim, before the first charge (the reference under load: charges 505 ms apart, the
  // second request decided 1.06 s after the round was sent, past the window); else from the first charge.
  const start = sentAtMs ?? at[0];
  if (err instanceof CheckFailed && at.length >= 2 && at[1] - start >= WINDOW_S * 1000) {
    return new Inconclusive(t('step.15.tooSlow', { window: WINDOW_S, ms: at[1] - start }));
  }
  return err;
}

/**
 * Judges a request meant to fall inside the window by `judge` only when it surely did:
 * `sinceFirstMs` runs from the sending of the body's first request (no later than the
 * server's start of the window, whatever moment of the first request it counts from) to
 * the answer of this one (no earlier than the server handled it). Under a window, the
 * server handled it inside its window by its own reckoning, and a failure is the server's;
 * a window or more, and the machine may have been too slow to keep the round's times: a
 * failure is Inconclusive (the round is made again), never the server's.
 * @throws what `judge` throws; Inconclusive in place of a CheckFailed when answered late
 */
function answeredInWindow(sinceFirstMs: number, judge: () => void): void {
  try {
    judge();
  } catch (err) {
    if (err instanceof CheckFailed && sinceFirstMs >= WINDOW_S * 1000) throw new Inconclusive(t('step.15.sentLate', { window: WINDOW_S, ms: Math.round(sinceFirstMs) }));
    throw err;
  }
}

/**
 * Requires a new payment: 201, a payment of what was sent, with a payment_id none of the
 * `earlier` answers gave, whose Location links to it on `server` (step 14's linkOf: every
 * 201, keyless or not, carries `Location: /payments/{id}`).
 * @returns the request target the Location resolves to, `/payments/{id}`
 * @throws CheckFailed naming the request, the payment it replayed instead, or what is wrong with its link
 */
function expectNew(exchange: Exchange, earlier: Exchange[], what: string, server: ServerInstance): string {
  expectStatus(exchange, 201, t('step.15.new', { what }), t('step.15.new.why'));
  const id = paymentOf(exchange).payment_id as number;
  const same = earlier.find((e) => (responseJson(e) as { payment_id?: unknown } | undefined)?.payment_id === id);
  if (same) throw new CheckFailed(t('step.15.notNew', { what, id }), t('step.15.new.why'), { exchanges: [same, exchange] });
  return keylessLink(exchange, server, what);
}

/**
 * The Location of a 201 (a first keyless answer or any new payment), required to lead to
 * its payment on `server` as step 14 requires (linkOf): a link made from anything but the
 * payment's id (a record's rowid, a row count) is caught, since the check's database
 * holds an older payment without a record (seedOlderPayment) from the start.
 * @returns the request target, `/payments/{id}`
 * @throws CheckFailed naming the answer when the header is missing or links elsewhere
 */
function keylessLink(exchange: Exchange, server: ServerInstance, what: string): string {
  return linkOf(exchange, server, paymentOf(exchange).payment_id as number, t('step.15.what.answerTo', { what }));
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
  // Wall-clock time (epoch ms, as the provider's statement) before any request is sent: no server's window for the body begins earlier.
  const sentAtMs = Date.now();
  const { exchanges: answers } = await sendForced(ctx, [server], Array.from({ length: RACE_SIZE }, () => ({ body })), { lockDatabase: true });
  let paid: Exchange[];
  try {
    const charges = ctx.chargesFor(body, server);
    const rows = keylessRows(ctx, server, body);
    if (charges.length > 1 || rows.length > 1) {
      throw new CheckFailed(t('step.15.raceDoubled', { size: RACE_SIZE, charges: charges.length, rows: rows.length }), t('step.15.race.why'), {
        exchanges: answers,
        ledger: rows,
        details: charges.map(describeCharge),
      });
    }
    const broken = answers.filter((e) => e.status !== 201 && e.status !== 409);
    paid = answers.filter((e) => e.status === 201);
    // A request that ran out of time while the machine starved the server or the grader says nothing.
    const starved = broken.find((e) => e.starved);
    if (starved) throw starvedExchange(starved);
    if (broken.length > 0 || paid.length === 0) {
      throw new CheckFailed(t('step.15.raceBroken', { size: RACE_SIZE, status: String(broken[0]?.status ?? answers[0]?.status) }), t('step.15.race.why'), { exchanges: broken.length > 0 ? broken : answers });
    }
    const different = paid.filter((e) => !isDeepStrictEqual(responseJson(e), responseJson(paid[0])));
    if (different.length > 0) {
      throw new CheckFailed(t('step.15.raceDifferent', { size: RACE_SIZE, count: paid.length }), t('step.15.race.why'), { exchanges: [paid[0], ...different] });
    }
    expectCharges(ctx, body, 1, answers, t('step.15.race.why'), server);
  } catch (err) {
    throw judgedInWindow(ctx, server, body, err, 0, sentAtMs);
  }
  keylessLink(paid[0], server, t('step.15.what.race', { size: RACE_SIZE }));
}

/**
 * Requires a keyless retry to be a replay of `first` like any other (steps 09 and 14 on a
 * keyless request): the first response unchanged, one charge and one ledger row for the
 * body, `Idempotency-Replayed: true`, and the first response's Location (resolved as a
 * client follows it on each server, so `/payments/7` on A and an absolute link naming B
 * on B are one link; when either does not resolve, the two headers must read the same).
 * Only whether the replay links where the first did is checked here: where the link
 * itself must lead is step 14's. A failure the window may be to blame for is the
 * grader's (judgedInWindow). `a`: the server whose database and statement are read (every
 * server of the round shares them); `on`: the server that answered the retry; `firstOn`:
 * the one that answered `first` (A unless said).
 * @throws CheckFailed naming the first broken rule; Error when the machine was too slow to tell
 */
function expectKeylessReplay(ctx: LiveContext, a: ServerInstance, body: { user: string; amount: number }, first: Exchange, retry: Exchange, on: ServerInstance, charges = 1, payments = 1, firstOn: ServerInstance = a): void {
  try {
    expectReplay(first, retry, t('step.15.replay.why'));
    expectCharges(ctx, body, charges, [first, retry], t('step.15.replay.why'), a);
    const rows = keylessRows(ctx, a, body);
    if (rows.length !== payments) throw new CheckFailed(t('step.15.rows', { count: rows.length }), t('step.15.replay.why'), { exchanges: [first, retry], ledger: rows });
  } catch (err) {
    throw judgedInWindow(ctx, a, body, err, charges - 1);
  }
  if (!saysReplayed(retry)) {
    throw new CheckFailed(t('step.15.unmarked', { value: retry.replayed ?? t('step.15.noHeader') }), t('step.15.unmarked.why'), { exchanges: [first, retry] });
  }
  if (first.location === undefined) return;
  if (retry.location === undefined) {
    throw new CheckFailed(t('step.15.replayNoLocation', { first: first.location }), t('step.15.replayLocation.why'), { exchanges: [first, retry] });
  }
  const was = linkTarget(first.location, firstOn.port);
  const is = linkTarget(retry.location, on.port);
  const same = 'target' in was && 'target' in is ? was.target === is.target : first.location.trim() === retry.location.trim();
  if (!same) {
    throw new CheckFailed(t('step.15.replayLocation', { first: first.location, location: retry.location }), t('step.15.replayLocation.why'), { exchanges: [first, retry] });
  }
}

/**
 * Requires a first answer (a new payment) not to say Idempotency-Replayed: true: it is no
 * replay (step 09's rule, saysReplayed).
 * @throws CheckFailed naming the request
 */
function expectUnmarked(exchange: Exchange, what: string): void {
  if (saysReplayed(exchange)) throw new CheckFailed(t('step.15.firstMarked', { what }), t('step.15.firstMarked.why'), { exchanges: [exchange] });
}

/** The longest stored text the probe sends as a client's key, in characters: a key, not a stored response. */
const PROBE_KEY_MAX = 200;

/** How many stored texts the probe sends at most (each twice): the record of one payment holds a few. */
const PROBE_KEYS_MAX = 12;

/**
 * The texts of the cells of every table but ledger and refunds (NOT_RECORDS: wherever a
 * server keeps its records) read as UTF-8, with the strings a JSON array or object among
 * them holds at its top level (`["mina", "keyless:mina:500"]` gives `keyless:mina:500` too);
 * sqlite's own tables (sqlite_sequence) are left out.
 */
function storedTexts(dbPath: string): Set<string> {
  const texts = new Set<string>();
  for (const cell of readCells(dbPath, NOT_RECORDS)) {
    // sqlite's own tables (sqlite_sequence's counters) hold no record and change with every payment.
    if (cell.table.toLowerCase().startsWith('sqlite_')) continue;
    const text = cell.value.toString('utf8');
    texts.add(text);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      continue;
    }
    if (parsed !== null && typeof parsed === 'object') for (const v of Object.values(parsed)) if (typeof v === 'string') texts.add(v);
  }
  return texts;
}

/**
 * A derived key must never meet a client's key, whatever text it is derived as (a prefix
 * and the fingerprint, the user and amount joined, the fields as JSON): one keyless
 * payment is made, alone (every other request is answered), and the texts its record
 * added to the server's tables (storedTexts, new since just before it; at most
 * PROBE_KEYS_MAX of at most PROBE_KEY_MAX printable ASCII characters, which a header can
 * carry as they are) are each sent as a client's Idempotency-Key, by the payment's own user
 * with its body and by another user with its amount, all at once: every one must be a new payment
 * (expectNew), not a replay of the keyless one, nor a 409 or 422 for a key seen before.
 * The verdict is causal: a failure is the server's whenever it came (a client's key met a
 * derived record); a pass counts only when the keyless record surely stood through every
 * request: the last was answered within the window of the keyless request's sending, or
 * every text the record added is still in the database after it (a server may delete the
 * record once the window is over); else the round is made again with a new body, up
 * to TIMED_TRIES times, and then the step is an error ("too slow to judge"), not a pass.
 * @throws CheckFailed naming the text sent and the payment it got; Inconclusive when every round came too late
 */
async function recordKeyProbe(ctx: LiveContext, a: ServerInstance): Promise<void> {
  const dbPath = ctx.database(a).dbPath;
  for (let attempt = 1; ; attempt++) {
    const before = storedTexts(dbPath);
    const body = ctx.data.payment();
    const sent = performance.now();
    const keyless = await ctx.pay(a, { body });
    const what = t('step.15.what.userAmount', { user: body.user, amount: body.amount });
    expectNew(keyless, [], what, a);
    expectUnmarked(keyless, what);
    const added = [...storedTexts(dbPath)].filter((text) => !before.has(text));
    const texts = added.filter((text) => text.length <= PROBE_KEY_MAX && /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(text)).slice(0, PROBE_KEYS_MAX);
    const other = { user: ctx.data.user(), amount: body.amount };
    // Sent all at once (each text by both users), so that the round takes one answer's time
    // rather than one per text on a loaded machine; judged afterwards in a fixed order.
    const probes = texts.flatMap((key) => [body, other].map((payer) => ({ key, payer })));
    const exchanges = await Promise.all(probes.map(({ key, payer }) => ctx.pay(a, { key, body: payer })));
    const answered = performance.now();
    const ours = [keyless];
    probes.forEach(({ key, payer }, i) => {
      const probeWhat = t('step.15.what.recordKey', { user: payer.user, key });
      expectNew(exchanges[i], ours, probeWhat, a);
      expectUnmarked(exchanges[i], probeWhat);
      ours.push(exchanges[i]);
    });
    // Conclusive when the keyless record surely stood through every request: they were all
    // answered within its window, or its texts are all still in the database now.
    if (answered - sent < WINDOW_S * 1000) return;
    const still = storedTexts(dbPath);
    if (added.every((text) => still.has(text))) return;
    if (attempt >= TIMED_TRIES) throw new Inconclusive(t('step.15.probeLate', { window: WINDOW_S, ms: Math.round(answered - sent) }));
  }
}

/**
 * The keyless records are deleted once their window is over: a window and
 * AFTER_WINDOW_MS after the race, one more keyless payment is made, and then (a server
 * that deletes from a timer of its own gets up to a window more) the rows of every table
 * but ledger and refunds (recordRows, step 11's count) may be at most the records still
 * young: that payment's, and those of the payments under a client's key (kept for the
 * default TTL of a day).
 * @throws CheckFailed when more are kept; Starved when they were kept while A was kept off a CPU
 */
async function expectKeylessSwept(ctx: LiveContext, a: ServerInstance): Promise<void> {
  await delay(WINDOW_S * 1000 + AFTER_WINDOW_MS);
  const last = ctx.data.payment();
  const paid = await ctx.pay(a, { body: last });
  expectStatus(paid, 201, t('step.15.first'), t('step.15.first.why'));
  keylessLink(paid, a, t('step.15.what.last'));
  const young = ctx.ledger(a).filter((row) => row.idempotency_key !== null).length + 1;
  // A timer of A's that sweeps, kept off a CPU meanwhile (or a grader that could not look),
  // says nothing by running late: inconclusive, graded again.
  const { records, tables, waitedMs, starved } = await waitForSweep(ctx, [a], ctx.database(a).dbPath, young, WINDOW_S * 1000);
  if (starved) {
    throw new Starved(t('step.15.unboundedStarved', { records, young, window: WINDOW_S, s: (waitedMs / 1000).toFixed(1), waited: Math.round(starved.serverWaitMs), lag: Math.round(starved.graderLagMs) }));
  }
  if (records > young) {
    throw new CheckFailed(t('step.15.unbounded', { records, young, window: WINDOW_S, tables }), t('step.15.unbounded.why'), { exchanges: [paid] });
  }
}

/**
 * Two keyless bodies that read alike when user and amount are written side by side: user
 * U paying D·R and user U+D paying R (`ab_12345` paying 2345, `ab_123452` paying 345),
 * from the seed's user U and amount D·R (whose second digit is not 0). Scoped by user,
 * they are two payments; a key made of the two written together is one.
 */
function joinedBodies(ctx: LiveContext): [{ user: string; amount: number }, { user: string; amount: number }] {
  const user = ctx.data.user();
  let amount = ctx.data.amount();
  for (let tries = 0; String(amount)[1] === '0' && tries < 100; tries++) amount = ctx.data.amount();
  const digits = String(amount).replace(/^(\d)0+/, '$1');
  return [
    { user, amount: Number(digits) },
    { user: `${user}${digits[0]}`, amount: Number(digits.slice(1)) },
  ];
}

/**
 * The checks that need no clock, run beside the timed requests on a body of their own
 * (so the step's body is charged by keyless requests alone): a keyless payment, then the
 * same body with a client's key and with a client's key that is the body's fingerprint
 * (both new payments, within the keyless one's window); another amount, another user's
 * same amount; a client's key that is a body's fingerprint before a keyless request of
 * it; two bodies that read alike joined; an empty key (400) and, on C (without the
 * variable), a keyless request (400). The first user in capitals and with a space after it
 * are put in `variants`, to be sent once the timed requests are over.
 * @returns the answers that are payments, every one of its own: none may answer the step's body after the window
 * @throws CheckFailed naming the first broken rule
 */
async function apartChecks(ctx: LiveContext, a: ServerInstance, startedC: Promise<ServerInstance>, first: Exchange, variants: Array<{ body: { user: string; amount: number }; what: string }>): Promise<Exchange[]> {
  const ours = [first];
  const pay = async (req: { key?: string; body: { user: string; amount: number } }, what: string, earlier = ours) => {
    const exchange = await ctx.pay(a, req);
    expectNew(exchange, earlier, what, a);
    expectUnmarked(exchange, what);
    ours.push(exchange);
    return exchange;
  };
  const body = ctx.data.payment();
  const keyless = await pay({ body }, t('step.15.what.userAmount', { user: body.user, amount: body.amount }));
  // Its link, followed: the keyless payment's state, as step 14 serves a keyed one's.
  await expectState(ctx, a, keylessLink(keyless, a, t('step.15.what.userAmount', { user: body.user, amount: body.amount })), paymentOf(keyless), 'charged');
  await pay({ key: ctx.freshKey(), body }, t('step.15.what.keyed'));
  // A client's key that is the body's fingerprint, after the keyless payment and before one.
  const fingerprint = labFingerprint(body);
  await pay({ key: fingerprint, body }, t('step.15.what.fingerprintKey', { key: fingerprint.slice(0, 12) }));
  await pay({ body: { user: body.user, amount: ctx.data.amount() } }, t('step.15.what.otherBody'));
  await pay({ body: { user: ctx.data.user(), amount: body.amount } }, t('step.15.what.otherUser'));
  const other = ctx.data.payment();
  const otherFingerprint = labFingerprint(other);
  const keyedFirst = await pay({ key: otherFingerprint, body: other }, t('step.15.what.fingerprintKey', { key: otherFingerprint.slice(0, 12) }));
  await pay({ body: other }, t('step.15.what.afterKeyed'), [keyedFirst]);
  // Two users whose user and amount, written side by side, read the same.
  const [one, two] = joinedBodies(ctx);
  const paidOne = await pay({ body: one }, t('step.15.what.userAmount', { user: one.user, amount: one.amount }), []);
  await pay({ body: two }, t('step.15.what.joined', { user: two.user, amount: two.amount, other: one.user, otherAmount: one.amount }), [paidOne]);

  // The same user in capitals and with a space after it, sent after the timed window (so
  // that they do not slow its requests): other users, compared as sent.
  variants.push(...[body.user.toUpperCase(), `${body.user} `].map((user) => ({ body: { user, amount: body.amount }, what: t('step.15.what.variantUser', { user: JSON.stringify(user), other: JSON.stringify(body.user) }) })));
  const empty = ctx.data.payment();
  const refusedEmpty = await ctx.pay(a, { key: '', body: empty });
  expectStatus(refusedEmpty, 400, t('step.15.empty'), t('step.15.empty.why'));
  expectCharges(ctx, empty, 0, [refusedEmpty], t('step.15.empty.why'), a);
  const c = await startedC;
  const unset = ctx.data.payment();
  const refusedUnset = await ctx.pay(c, { body: unset });
  expectStatus(refusedUnset, 400, t('step.15.unset'), t('step.15.unset.why'));
  expectCharges(ctx, unset, 0, [refusedUnset], t('step.15.unset.why'), c);
  return ours;
}

/** A request sent no earlier than `at` (performance.now() time, ms) nor before `after` settles: the exchange, when it went and when its answer came (performance.now() times, ms). */
async function payAt(ctx: LiveContext, server: ServerInstance, body: { user: string; amount: number }, at: number, after?: Promise<unknown>): Promise<{ exchange: Exchange; sent: number; answered: number }> {
  await after;
  await delay(Math.max(0, at - performance.now()));
  const sent = performance.now();
  const exchange = await ctx.pay(server, { body });
  return { exchange, sent, answered: performance.now() };
}

/**
 * How far the grader's two clocks (Date.now(), performance.now()) may drift apart over a
 * timed round, in ms, where a time of the wall clock is said on performance.now(): a bound,
 * taken wide, always spent toward "made again".
 */
const CLOCKS_APART_MS = 10;

/**
 * How late past ROUND_PHASE_MS the timed round may begin, in ms: a timer that fired later
 * (a loaded machine) waits for the next second's phase, up to PHASE_TRIES times, rather
 * than spend a round that could not tell a window read on whole seconds.
 */
const ROUND_PHASE_LATE_MS = 200;
const PHASE_TRIES = 3;

/**
 * When `server` decided a payment of `body` at the latest, in ms of performance.now(): the
 * start its provider's gate saw of the first charge of the body reported after `sent` (a
 * server decides before it charges; the gate's report comes before the charge goes on), or,
 * when there was none (a replay, a server that does not speak the gate), `answered` (when
 * its answer came, ms of performance.now()).
 */
function decidedAt(ctx: LiveContext, server: ServerInstance, body: { user: string; amount: number }, sent: number, answered: number): number {
  const started = ctx
    .gate(server)
    .chargesOf(body)
    .map((c) => c.startedAt)
    .filter((at) => at >= sent);
  return Math.min(answered, ...started);
}

/** The payment_id of an answer's JSON body, if any. */
function paymentIdOf(exchange: Exchange): unknown {
  return (responseJson(exchange) as { payment_id?: unknown } | undefined)?.payment_id;
}

/** True when `retry` was answered 201 with another payment than `first`'s: the body was paid anew. */
function paidAnew(first: Exchange, retry: Exchange): boolean {
  return retry.status === 201 && paymentIdOf(retry) !== undefined && paymentIdOf(retry) !== paymentIdOf(first);
}

/**
 * The verdict of a round whose requests were sent earlier: throws what the round's check
 * throws (CheckFailed; Inconclusive when the machine was too slow to tell). Rounds sent
 * while B starts are judged after every other check, so that a server those catch is
 * told their reason.
 */
type Judge = () => Promise<void>;

/**
 * Gives `judge`'s verdict; when it is Inconclusive, makes the round again (`again`) and
 * judges that, up to TIMED_TRIES rounds in all.
 * @throws the last round's CheckFailed or Inconclusive
 */
async function settled(judge: Judge, again: () => Promise<Judge>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await judge();
      return;
    } catch (err) {
      if (!(err instanceof Inconclusive) || attempt >= TIMED_TRIES) throw err;
      judge = await again();
    }
  }
}

/**
 * When the whole-second probe's first request is sent, in ms past a second of the wall
 * clock: half a second, so that the first request has as long to be answered within its
 * second as the retry, sent just after the whole second a window later, has to be answered
 * within the window (half a second less than a window after the first request).
 */
const WHOLE_SECOND_FIRST_AT_MS = 500;

/** How long after the whole second a window after the first answer's second the whole-second probe's retry is sent, in ms: past it on any clock. */
const WHOLE_SECOND_PAST_MS = 20;

/**
 * The whole-second probe, on A: a keyless body sent WHOLE_SECOND_FIRST_AT_MS past a
 * second of the wall clock (epoch time, which the server reads too), then again
 * WHOLE_SECOND_PAST_MS after the whole second WINDOW_S s after the second its first answer
 * came in (so after the same whole second counted from the first request's own second,
 * wherever the server took its time). A server that measures a record's age from its time
 * cut to the whole second reads the record more than a window old then, and pays again
 * every time, whatever the phase of the clock; the retry is half a second less than a
 * window after the first request, so a correct server replays. Judged (later) as any
 * keyless retry (expectKeylessReplay), with the window as a bound only: a failure answered a
 * window or more after the first request was sent (a first answer that came in the next
 * second, say) is Inconclusive and the round is made again (settled).
 * @returns the round's judge: CheckFailed naming the two times, with a note when the retry paid anew
 */
async function wholeSecondRound(ctx: LiveContext, a: ServerInstance): Promise<Judge> {
  const body = ctx.data.payment();
  await delay(msUntilPhase(WHOLE_SECOND_FIRST_AT_MS));
  const sentAt = Date.now();
  const sent = performance.now();
  const first = await ctx.pay(a, { body });
  const retryAt = Math.floor(Date.now() / 1000) * 1000 + WINDOW_S * 1000 + WHOLE_SECOND_PAST_MS;
  await delay(Math.max(0, retryAt - Date.now()));
  const retrySentAt = Date.now();
  const retry = await ctx.pay(a, { body });
  const answered = performance.now();
  const part = t('step.15.part.wholeSecond', { first: sentAt % 1000, ms: retrySentAt - sentAt, retry: retrySentAt % 1000, window: WINDOW_S });
  return () =>
    inPart(part, async () => {
      expectStatus(first, 201, t('step.15.first'), t('step.15.first.why'));
      expectUnmarked(first, t('step.15.what.first'));
      try {
        answeredInWindow(answered - sent, () => expectKeylessReplay(ctx, a, body, first, retry, a));
      } catch (err) {
        throw paidAnew(first, retry) ? withNote(err, t('step.15.wholeSecond', { ms: retrySentAt - sentAt, window: WINDOW_S, cut: sentAt % 1000 })) : err;
      }
    });
}

/**
 * The retry from another client address, on A: a keyless body sent as usual (from
 * 127.0.0.1), then at once from SECOND_CLIENT_ADDRESS (the sandbox relay's second socket,
 * or bound unsandboxed, as step 02 sends a keyed retry): the same user and body, so the
 * same payment (a derived key that names the client's address pays it twice). Where the
 * address could not be used unsandboxed, the retry came from 127.0.0.1 and a warning says
 * so; behind a relay whose second socket is gone (the server beside it most likely removed
 * it), the verdict is Inconclusive, never a pass.
 * @returns the round's judge: CheckFailed naming the address, with a note when the retry paid anew
 */
async function otherClientRound(ctx: LiveContext, a: ServerInstance): Promise<Judge> {
  const body = ctx.data.payment();
  const sent = performance.now();
  const first = await ctx.pay(a, { body });
  const retrySent = performance.now();
  const retry = await ctx.pay(a, { body, client: 'second' });
  const answered = performance.now();
  return async () => {
    if (retry.client?.relayMissing) throw new Inconclusive(t('step.15.noSecondSocket', { address: SECOND_CLIENT_ADDRESS }));
    const fallback = retry.client?.fallback;
    if (fallback !== undefined) ctx.warn(t('step.15.noSecondClient', { address: SECOND_CLIENT_ADDRESS, why: fallback }));
    const part =
      fallback === undefined
        ? t('step.15.part.otherClient', { address: SECOND_CLIENT_ADDRESS, ms: Math.round(retrySent - sent) })
        : t('step.15.part.otherClientFallback', { address: SECOND_CLIENT_ADDRESS, why: fallback });
    await inPart(part, async () => {
      expectStatus(first, 201, t('step.15.first'), t('step.15.first.why'));
      try {
        answeredInWindow(answered - sent, () => expectKeylessReplay(ctx, a, body, first, retry, a));
      } catch (err) {
        throw paidAnew(first, retry) && fallback === undefined ? withNote(err, t('step.15.otherClient', { address: SECOND_CLIENT_ADDRESS })) : err;
      }
    });
  };
}

/**
 * The retry on A of a keyless payment made on B, B's process started a window or more
 * after A's (`started`: how much later, in s, as said): sent at once, within the window,
 * so it must replay. A keyless record stamped on a clock that starts with its process (a
 * monotonic clock) reads as much older on A as B is younger, past the window, and pays
 * again (the other way round, a record of A's reads young on B, from the future).
 * @returns the round's judge: CheckFailed naming B's start, with a note when the retry paid anew
 */
async function laterPodRound(ctx: LiveContext, a: ServerInstance, b: ServerInstance, started: string): Promise<Judge> {
  const body = ctx.data.payment();
  const sent = performance.now();
  const first = await ctx.pay(b, { body });
  const retrySent = performance.now();
  const retry = await ctx.pay(a, { body });
  const answered = performance.now();
  const ms = Math.round(retrySent - sent);
  return () =>
    inPart(t('step.15.part.laterPod', { ms, started }), async () => {
      expectStatus(first, 201, t('step.15.first'), t('step.15.first.why'));
      try {
        answeredInWindow(answered - sent, () => expectKeylessReplay(ctx, a, body, first, retry, a, 1, 1, b));
      } catch (err) {
        throw paidAnew(first, retry) ? withNote(err, t('step.15.laterPod', { ms, started, window: WINDOW_S })) : err;
      }
    });
}

/**
 * Step 15 (advanced track): keyless clients, the essay's migration mode. With
 * IDEM_KEYLESS_WINDOW_S set (WINDOW_S here), a request without an Idempotency-Key is
 * deduplicated within the window by a key the server derives from the user and the body's
 * fingerprint (docs/server-contract.md, "The advanced track"). Timed, from the first
 * keyless request: SPREAD_BODIES bodies spread over a window, each retried half a window
 * after its first request, must replay (the first response, Idempotency-Replayed: true,
 * the first's Location, one charge, one row), so that a clock bucket's edge, wherever it
 * falls, parts one pair; the first body again on B, a second server on the same database,
 * at 0.6 of the window, must replay too (a dedupe in one process's memory fails); and the
 * first body a window and AFTER_WINDOW_MS after its first answer is a new payment, charged
 * (a window that never ends, or slides with every replay, fails). Beside them, untimed: a
 * different body, another user's same amount, a keyed request with a keyless payment's body,
 * and two users whose user and amount read alike written side by side are payments of
 * their own; a client's key equal to the body's fingerprint meets no derived key (either
 * way round); an empty Idempotency-Key is not keyless (400), and with the variable unset
 * (C) a keyless request is refused with 400 as in step 03. Then ten identical keyless
 * requests at once under a held write lock charge once. No first answer (a keyless one, the
 * payment after the window) says Idempotency-Replayed: true; the payment after the window
 * is retried at once and replays; the first user in capitals and with a space after it
 * are other users; after the race, the texts one keyless payment's record stored in the
 * database are sent as clients' keys and must each be a new payment (recordKeyProbe: a
 * derived key kept among client keys as `keyless:` and the fingerprint, or the user and
 * amount joined, meets them); a window after the race the keyless records are deleted
 * (expectKeylessSwept). Every keyless 201 (and every new payment) carries a Location that
 * leads to its payment (step 14's linkOf; GET on one shows it charged), with an older
 * payment seeded first (seedOlderPayment), so that a link built from a record's row
 * number is caught. What it cannot catch: a derived key whose text is stored nowhere the
 * grader reads (hashed again before it is kept, say) and yet meets a client's key that
 * hashes alike. The audit counts keyless 201s with one body and payment_id as one payment
 * (LiveContext.keylessGrouping). B is started a window after A (as step 11 starts its B a
 * TTL later), and three more rounds, made on A while B starts or after the checks above
 * and judged after all of them (so that a server those catch is told their reason): a body
 * paid on B and sent again on A at once must replay (laterPodRound: a record's time counted
 * from its process's start reads past the window on A); a body sent half a second past a
 * second of the wall clock and again just after the whole second a window later must replay
 * (wholeSecondRound: a record's age on a clock of whole seconds reads past the window); and
 * a keyless retry from the second client address, 127.3.4.5, must replay (otherClientRound:
 * a derived key that names the client's address pays it twice). A and B charge at once
 * (IDEM_CHARGE_MS=0): the timed round's payment after the window tells a window from one
 * read on whole seconds at both ends only when the server decided it within the window's
 * last whole second, and is made again when it did not (step.15.wholeSecondUntold).
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
    // A and B: two pods with the window on the check's database, B started a window after
    // A. C runs without the variable, on a database of its own: keyless requests are refused there.
    const startedC = ctx.startServer({ ownDatabase: true, label: 'C', priority: 100 });
    const pending: Array<Promise<unknown>> = [];
    /** Keeps `p` to be waited for before the check ends; its failure is judged where it is awaited, not reported as unhandled before. */
    const kept = <T>(p: Promise<T>): Promise<T> => {
      p.catch(() => undefined);
      pending.push(p);
      return p;
    };
    kept(startedC);
    const ended = new AbortController();
    try {
      // A and B charge at once (IDEM_CHARGE_MS=0, as step 11's servers): a first payment
      // answered late in its second leaves no room to tell a window from one read on whole
      // seconds (the timed round's payment after the window), and a slow provider is not
      // what this step is about.
      const a = await kept(ctx.startServer({ env, label: 'A', priority: 2000, chargeMs: 0 }));
      const aUp = performance.now();
      // B, a second pod on A's database, is started a window (and B_AFTER_A_MS) after A is
      // up, as step 11 starts its B a TTL later: its process is younger than A's by more than
      // a window, so a keyless record's time counted from its process's start reads past the
      // window on A (laterPodRound).
      let bSpawned = aUp;
      const startedB = kept(
        delay(WINDOW_S * 1000 + B_AFTER_A_MS, undefined, { signal: ended.signal }).then(() => {
          bSpawned = performance.now();
          return ctx.startServer({ env, ownCopy: true, label: 'B', priority: 2000, chargeMs: 0 });
        }),
      );
      // An older payment without a record, as in step 14: a keyless payment's id is then not
      // its record's row number (a Location built from that is caught by keylessLink).
      seedOlderPayment(ctx, a);
      // While B waits to start, on A: the whole-second probe and the retry from a second
      // client address, each with a body of its own, judged after every other check.
      const early = kept(Promise.all([wholeSecondRound(ctx, a), otherClientRound(ctx, a)]));
      const b = await startedB;
      const startedS = ((bSpawned - aUp) / 1000).toFixed(1);
      // The timed round begins once the early rounds are over: their requests do not slow its own.
      const [judgeWholeSecond, judgeOtherClient] = await early;
      // The timed round, made again with new bodies when the machine was too slow to keep
      // its times (judgedInWindow): a verdict on the server, never on the machine's load.
      const timedRound = async (): Promise<void> => {
        const body = ctx.data.payment();
        const bodies = [body, ...Array.from({ length: SPREAD_BODIES - 1 }, () => ctx.data.payment())];

        // The timed requests, from t0: each body's first request SPREAD_MS after the one
        // before and its retry RETRY_AFTER_MS after that; the step's body again on B at
        // OTHER_POD_AT_MS, and once more a window after its first answer.
        await delay(msUntilPhase(ROUND_PHASE_MS), undefined, { signal: ended.signal });
        for (let again = 1; again < PHASE_TRIES && Date.now() % 1000 > ROUND_PHASE_MS + ROUND_PHASE_LATE_MS; again++) {
          await delay(msUntilPhase(ROUND_PHASE_MS), undefined, { signal: ended.signal });
        }
        // The wall clock (epoch ms, as the server reads it) read on either side of t0: the
        // body's record is made no earlier than wallBefore, and t0 is no later than wallAfter + 1
        // on the wall clock (Date.now() cuts to the ms).
        const wallBefore = Date.now();
        const t0 = performance.now();
        const wallAfter = Date.now();
        let firstAnswered = t0;
        const pairs = bodies.map((each, i) => {
          const firstAt = t0 + i * SPREAD_MS;
          const first = payAt(ctx, a, each, firstAt).then((sent) => {
            if (i === 0) firstAnswered = performance.now();
            return sent;
          });
          // RETRY_AFTER_MS after its first request's answer: each pair then spans RETRY_AFTER_MS
          // from its record on, however slowly the server answers (a retry answered a window or
          // more after its first request is the machine's, answeredInWindow).
          const retry = first.then(({ answered }) => payAt(ctx, a, each, answered + RETRY_AFTER_MS));
          return { body: each, first, retry };
        });
        // On B after the first pair's retry is answered (and so judged, its statement read):
        // a charge B makes is never counted against the pair on A.
        const onB = payAt(ctx, b, body, t0 + OTHER_POD_AT_MS, pairs[0].retry);
        // After the body's replays (the pair's retry, then B's): the times kept say whether a
        // window renewed by each replay was still open when this payment was answered.
        const afterWindow = (async () => {
          await Promise.all([pairs[0].first, onB]);
          await delay(Math.max(0, firstAnswered + WINDOW_S * 1000 + AFTER_WINDOW_MS - performance.now()));
          const charged = chargesOf(ctx, a, body);
          const sent = performance.now();
          const exchange = await ctx.pay(a, { body });
          const answered = performance.now();
          const decidedBy = decidedAt(ctx, a, body, sent, answered);
          const chargedThen = chargesOf(ctx, a, body);
          // Its retry, at once: the new window dedupes as the first did.
          const retry = await ctx.pay(a, { body });
          return { charged, exchange, sent, answered, decidedBy, chargedThen, retry, retryAnswered: performance.now() };
        })();
        for (const p of [...pairs.flatMap((pair) => [pair.first, pair.retry]), onB, afterWindow] as Array<Promise<unknown>>) kept(p);

        const { exchange: first } = await pairs[0].first;
        expectStatus(first, 201, t('step.15.first'), t('step.15.first.why'));
        keylessLink(first, a, t('step.15.what.first'));
        const variants: Array<{ body: { user: string; amount: number }; what: string }> = [];
        const apart = kept(apartChecks(ctx, a, startedC, first, variants));

        // Each retry is judged as soon as it is answered (the statement read then, before a
        // later request of the same body can charge), and its verdict given in this order:
        // the step's body on A, the untimed checks, the other pairs, then B. Every pair comes
        // before B: a clock bucket's edge parts one of the pairs, wherever it falls, and is named so.
        const verdict = (part: string, judge: () => void): Promise<unknown> =>
          inPart(part, async () => judge()).then(
            () => undefined,
            (err: unknown) => err,
          );
        const pairVerdicts = pairs.map((pair, i) =>
          Promise.all([pair.first, pair.retry]).then(([{ exchange: firstOf, sent: firstSent }, { exchange: retry, sent, answered }]) =>
            verdict(t('step.15.part.pair', { n: i + 1, count: SPREAD_BODIES, ms: Math.round(sent - firstSent) }), () => {
              expectStatus(firstOf, 201, t('step.15.first'), t('step.15.first.why'));
              keylessLink(firstOf, a, t('step.15.what.first'));
              expectUnmarked(firstOf, t('step.15.what.first'));
              answeredInWindow(answered - firstSent, () => expectKeylessReplay(ctx, a, pair.body, firstOf, retry, a));
            }),
          ),
        );
        const verdictOnB = Promise.all([pairs[0].first, onB]).then(([{ sent: firstSent }, { exchange: retryOnB, sent: sentOnB, answered: answeredOnB }]) =>
          verdict(t('step.15.part.otherPod', { ms: Math.round(sentOnB - t0) }), () => answeredInWindow(answeredOnB - firstSent, () => expectKeylessReplay(ctx, a, body, first, retryOnB, b))),
        );
        for (const p of [...pairVerdicts, verdictOnB]) kept(p);
        const given = async (judged: Promise<unknown>) => {
          const err = await judged;
          if (err !== undefined) throw err;
        };
        // A pair whose body paid anew while another pair, sent again as soon, got its first
        // response back: said as what a window tied to the clock does, beside the replay
        // that did not happen.
        const givenPair = async (i: number): Promise<void> => {
          const err = await pairVerdicts[i];
          if (err === undefined) return;
          const [{ exchange: firstOf }, { exchange: retry }] = await Promise.all([pairs[i].first, pairs[i].retry]);
          const replayed = (await Promise.all(pairVerdicts)).findIndex((v) => v === undefined);
          if (!(err instanceof CheckFailed) || retry.status !== 201 || paymentIdOf(retry) === paymentIdOf(firstOf) || replayed < 0) throw err;
          const [{ sent }, { sent: resent }] = await Promise.all([pairs[replayed].first, pairs[replayed].retry]);
          const note = t('step.15.bucket', { n: replayed + 1, count: SPREAD_BODIES, ms: Math.round(resent - sent) });
          throw new CheckFailed(err.message, err.why, { ...err.evidence, details: [...(err.evidence.details ?? []), note] });
        };
        await givenPair(0);
        const ours = await apart;
        for (let i = 1; i < SPREAD_BODIES; i++) await givenPair(i);
        await given(verdictOnB);
        // The variant users apartChecks left for after the window: new payments of their own.
        for (const variant of variants) {
          const exchange = await ctx.pay(a, { body: variant.body });
          expectNew(exchange, ours, variant.what, a);
          expectUnmarked(exchange, variant.what);
          ours.push(exchange);
        }

        // After the window (counted from the first request, not from its last replay): the same body is a new payment.
        const { charged, exchange: later, sent: laterSent, answered: laterAnswered, decidedBy, chargedThen, retry: laterRetry, retryAnswered } = await afterWindow;
        expectNew(later, ours, t('step.15.what.afterWindow', { window: WINDOW_S }), a);
        expectUnmarked(later, t('step.15.what.afterWindow', { window: WINDOW_S }));
        // A window that slides with every replay is told apart only when this payment was
        // answered (so made) within a window of the body's last replay's sending (so before
        // that replay was made + a window): else the machine was too slow, and the round is
        // made again (a server that slides would have passed by the grader's lateness).
        const lastReplaySent = Math.max((await pairs[0].retry).sent, (await onB).sent);
        if (laterAnswered - lastReplaySent >= WINDOW_S * 1000) {
          throw new Inconclusive(t('step.15.slideUntold', { window: WINDOW_S, ms: Math.round(laterAnswered - lastReplaySent) }));
        }
        if (chargedThen !== charged + 1) {
          throw new CheckFailed(t('step.15.afterWindowCharge', { window: WINDOW_S }), t('step.15.afterWindow.why'), { exchanges: [first, later] });
        }
        // A new payment proves a window of WINDOW_S s and not one read on a clock of whole
        // seconds (a record's time and the clock each cut to the second, over only when that
        // age is more than the window: 2 to 3 s long) only when the server decided it in the
        // window's last whole second, the one WINDOW_S s after the first request's: a grader
        // late to send it into the next second lets such a server pay anew too (the round is made again).
        const windowSecondsEnd = (Math.floor(wallBefore / 1000) + WINDOW_S + 1) * 1000;
        const decideBefore = t0 + (windowSecondsEnd - (wallAfter + 1)) - CLOCKS_APART_MS;
        if (decidedBy >= decideBefore) {
          throw new Inconclusive(
            t('step.15.wholeSecondUntold', { window: WINDOW_S, ms: Math.round(decidedBy - t0), first: wallBefore % 1000, answered: Math.round(firstAnswered - t0), late: WINDOW_S + 1 }),
          );
        }
        await inPart(t('step.15.part.afterWindowRetry'), async () => answeredInWindow(retryAnswered - laterSent, () => expectKeylessReplay(ctx, a, body, later, laterRetry, a, charged + 1, 2)));
        // Every pair replayed. That proves a window and not a clock bucket only when the
        // pairs' spans, as sent, still covered a whole window (modulo the window): a grader
        // late to send bunches them up, and a bucket edge may then fall between them (the
        // round is made again).
        const spans = await Promise.all(pairs.map(async (pair) => [(await pair.first).answered, (await pair.retry).sent] as const));
        const covered = coveredModulo(spans, WINDOW_S * 1000);
        if (covered < WINDOW_S * 1000) throw new Inconclusive(t('step.15.spreadUncovered', { count: SPREAD_BODIES, covered: Math.round(covered), window: WINDOW_S }));
      };
      for (let attempt = 1; ; attempt++) {
        try {
          await timedRound();
          break;
        } catch (err) {
          if (!(err instanceof Inconclusive) || attempt >= TIMED_TRIES) throw err;
          await Promise.allSettled(pending);
        }
      }

      // Every timed request is answered by now: the race holds the database's write lock alone.
      await Promise.allSettled(pending);
      await keylessRace(ctx, a);
      await recordKeyProbe(ctx, a);
      await expectKeylessSwept(ctx, a);
      // Last, so that a server the checks above catch is told their reason: a payment on B
      // (the younger process) retried on A, the whole-second probe, the second client's retry.
      await settled(await laterPodRound(ctx, a, b, startedS), () => laterPodRound(ctx, a, b, startedS));
      await settled(judgeWholeSecond, () => wholeSecondRound(ctx, a));
      await settled(judgeOtherClient, () => otherClientRound(ctx, a));
      return t('step.15.pass', { size: RACE_SIZE, window: WINDOW_S });
    } finally {
      // A start not begun yet is not begun; every other start and every request is over
      // before the check ends, so that the engine stops what came up.
      ended.abort();
      await Promise.allSettled(pending);
    }
  },
  get hints() {
    return [t('step.15.hint.1'), t('step.15.hint.2'), t('step.15.hint.3')];
  },
};
