import { setTimeout as delay } from 'node:timers/promises';
import { expect } from '../../grader/failure.js';
import { commandKey, describeResponse, headerKey, parsePaste } from '../../grader/paste.js';
import { t } from '../../i18n/index.js';
import { CheckFailed } from '../../grader/failure.js';
import { RACE_SIZE, Unanswered, judgedBeforeStarved, raceRound, where } from '../../grader/race.js';
import { Inconclusive, Starved, startLagMonitor, type GateCharge, type LagMonitor } from '../../grader/gate.js';
import { rowsForKey } from '../../grader/ledger.js';
import { SchedWatch, starvationFigures, starvedFor, starvedVerdict, starveWatch } from '../../grader/sched.js';
import { isDeepStrictEqual } from 'node:util';
import { responseJson, type PayRequest } from '../../grader/http.js';
import { expectCharges, expectRows, expectStatus, paymentOf, starvedExchange } from '../../grader/expect-http.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange, LedgerRow } from '../../grader/types.js';
import type { TestData } from '../../grader/seed.js';
import type { Step } from '../../grader/track.js';

/** How many rounds of simultaneous requests the live check sends to one server. */
export const RACE_ROUNDS = 3;

/** Payments with keys of their own sent beside a race round's duplicates. */
export const OTHER_KEYS = 3;

/**
 * The simulated database round trip of the latency round, in ms (IDEM_DB_MS): longer than
 * ten simultaneous one-statement writes take to get through the database one by one, so
 * that a look-up made after such a write still happens before any of the ten has claimed
 * the key.
 */
export const DB_LATENCY_MS = 250;

/**
 * Payments with keys of their own, sent with others at once: each must succeed (201),
 * each with its own payment_id.
 * @throws CheckFailed naming the first that did not; Starved when it ran out of time starved
 */
function expectOthers(extra: Exchange[]): void {
  const failed = extra.find((e) => e.status !== 201);
  // One that ran out of time while the machine starved the server or the grader says nothing.
  if (failed?.starved) throw starvedExchange(failed);
  if (failed) {
    throw new CheckFailed(
      t('step.05.othersFailed', { count: extra.length, status: String(failed.status ?? failed.error), ms: failed.ms }),
      t('step.05.othersFailed.why'),
      { exchanges: extra },
    );
  }
  const ids = new Set(extra.map((e) => paymentOf(e).payment_id));
  if (ids.size !== extra.length) {
    throw new CheckFailed(t('step.05.othersSame', { count: extra.length }), t('step.05.othersFailed.why'), { exchanges: extra });
  }
}

/**
 * Sends one race round together with OTHER_KEYS payments with keys of their own, all at
 * once, and checks that those all succeed, each with its own payment_id. Whether they wait
 * for each other is the held round's question, asked with the provider's gate, not timed here.
 * @throws CheckFailed naming what went wrong
 */
async function roundWithOthers(ctx: LiveContext, server: ServerInstance, round: number | string): Promise<void> {
  const others = Array.from({ length: OTHER_KEYS }, () => ({ key: ctx.freshKey(), body: ctx.data.payment() }));
  const { extra } = await raceRound(ctx, [server], round, {}, others);
  expectOthers(extra);
}

/**
 * The latency round, on a server with IDEM_DB_MS: RACE_SIZE duplicates of one payment and
 * OTHER_KEYS payments with keys of their own, at once. The four charges are held at the
 * provider's gate until all four have reached it and then let go in one instant, so the
 * four ledger inserts come together, each followed by its database round trip: a payment
 * id read back with `SELECT MAX(payment_id)` (or any look-up after another payment's
 * write) gives all four the same id every time, and the audit names it.
 * @throws CheckFailed naming what went wrong; Starved when the four were not all held
 *   within HELD_BOUND_MS while the machine kept the server off a CPU (nothing was forced)
 */
async function latencyRound(ctx: LiveContext, server: ServerInstance): Promise<void> {
  const data = ctx.data.fork('latency');
  const payment = { key: data.key(), body: data.payment() };
  const others = Array.from({ length: OTHER_KEYS }, () => ({ key: data.key(), body: data.payment() }));
  const bodies = [payment.body, ...others.map((o) => o.body)];
  const gate = ctx.gate(server);
  const hold = gate.hold((c) => bodies.some((b) => chargeOf(b)(c)));
  // Let go once all four are held, or after the bound (a server that lines them up is the
  // held round's to name). Whether all four were held, and how starved the server was
  // meanwhile: a bound run out on a busy machine forced nothing.
  let allHeld = false;
  const meter = ctx.starveMeter([server]);
  void gate.until((cs) => bodies.every((b) => cs.some(chargeOf(b))), HELD_BOUND_MS).then((held) => {
    allHeld = held;
    hold.release();
  });
  try {
    const { extra } = await judgedBeforeStarved(raceRound(
      ctx,
      [server],
      'latency',
      {
        name: t('step.05.latencyRound', { ms: DB_LATENCY_MS }),
        payment,
        lockstep: true,
        // A server right for one instance that lines the ten up behind a lock (a file or a
        // thread lock around look-up and claim) answers the last after about 7.5 s.
        timeouts: { connectMs: ctx.slowDatabaseTimeouts().connectMs, answerMs: ctx.slowDatabaseTimeouts().answerMs + HELD_BOUND_MS },
      },
      others,
    ), (round) => expectOthers(round.extra));
    expectOthers(extra);
    // No payment shared an id. That proves something only when the four charges were held
    // together, or could not be because the server lines them up (not starved: its own
    // doing); a bound that ran out while the machine starved the server forced nothing.
    const seen = meter.stop();
    if (!allHeld && starvedFor(seen, HELD_BOUND_MS)) {
      throw new Starved(t('step.05.latencyStarved', { s: HELD_BOUND_MS / 1000, ...starvationFigures(seen) }));
    }
  } finally {
    meter.stop();
    hold.release();
  }
}

/**
 * How many payments with keys of their own the held round holds at the provider beside the
 * raced one: with the raced charge, four charges are held open at once, so a limit of four
 * charges at a time or fewer (a slot pool, a lock striped four ways) lets no further
 * payment through, every time.
 */
export const HELD_OTHERS = 3;

/**
 * The generous bound on whatever the held round waits for, in ms: a charge reaching the
 * provider, a payment answered while others are held. It never decides: a server that makes
 * a payment wait for a held charge waits until the grader lets go, however long that is.
 */
export const HELD_BOUND_MS = 8000;

/**
 * How long the raced charge is held at least, from the moment it reached the provider, in
 * ms: a duplicate that gives up waiting after a second or so does it while held.
 */
export const HOLD_AT_LEAST_MS = 2000;

/** How long a request with the raced key and another body may take to be answered before the raced charge is let go, in ms; one still waiting then is judged once let go. */
const CONFLICT_GRACE_MS = 250;

/** How many times the held round is tried when the grader itself was too starved to tell. */
export const HELD_TRIES = 3;

/** A request sent and not yet awaited, with its answer once it came and whether that came while the gate held its charges. */
interface Sent {
  req: PayRequest;
  answer: Promise<Exchange>;
  got?: Exchange;
  whileHeld?: boolean;
}

/** Whether a gate's charge is the charge of `body`. */
const chargeOf = (body: { user: string; amount: number }) => (c: { user: string; amount: number }) => c.user === body.user && c.amount === body.amount;

/** A request of the held round as a failure names it: `POST /pay to server A with key "…"` (each of its requests has a key). */
function described(server: ServerInstance, req: PayRequest): string {
  return t('check.describe', { method: 'POST', path: '/pay', server: server.label, key: t('check.describe.key', { key: JSON.stringify(req.key) }) });
}

/** What the provider's gate saw, one line per charge, for a failure's evidence: `gate: user "..." amount N, held` (or `let go`). */
function gateSaw(charges: GateCharge[]): string[] {
  return charges.map((c) => `gate: user ${JSON.stringify(c.user)} amount ${c.amount}${c.key === undefined ? '' : ` key ${JSON.stringify(c.key)}`}, ${c.waitingAt !== undefined ? 'held' : 'let go'}`);
}

/**
 * A bound ran out: when the grader's own event loop lagged STARVED_LAG_MS or more
 * meanwhile, the result says nothing about the server (Inconclusive); else `failure`.
 */
function boundRanOut(lag: LagMonitor, failure: () => CheckFailed, starved?: { waitedMs(): number }): Error {
  return starvedVerdict(lag, starved, SERVER_STARVED_MS) ?? failure();
}

/**
 * How long the held round's server may have waited for a CPU, summed over its threads, in
 * ms, before a bound that ran out says more about the machine than the server: half the
 * bound. A server that makes a payment wait for a held charge sleeps meanwhile.
 */
export const SERVER_STARVED_MS = HELD_BOUND_MS / 2;

/**
 * The held round, on a server of its own (its provider's gate in the grader's hand, see
 * gate.ts). Every question is asked while the grader holds charges open, so that the
 * answer is seen, not timed:
 * 1. RACE_SIZE duplicates of one payment (the raced one) at once; its charge reaches the
 *    provider and is held there;
 * 2. HELD_OTHERS payments with keys of their own (one of them the raced user's own second
 *    payment); each must reach the provider while the raced charge is held (a lock or a
 *    transaction held across charge(), a lock per user, a limit of fewer than four charges
 *    stop one), and is held there too;
 * 3. with four charges held, one more payment must be answered 201 (a limit of four
 *    charges at a time, a lock striped four ways hold it back);
 * 4. a retry of the raced key and a request with its key and another amount: the retry
 *    answered 409 or kept waiting, the other body 422 or 409 (now or once let go); neither
 *    charged, nor the raced payment twice;
 * 5. after HOLD_AT_LEAST_MS every charge is let go: every duplicate and the retry answered
 *    while held got 409, every one still waiting gets the first response (201, the same),
 *    the others each their own payment.
 * A bound that runs out while the grader was starved is retried (HELD_TRIES in all), then
 * said to be inconclusive (exit 2), never the learner's failure.
 * @throws CheckFailed naming the event seen; Inconclusive when the machine was too busy
 */
async function heldRound(ctx: LiveContext, server: ServerInstance): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const bodies: Array<{ user: string; amount: number }> = [];
    try {
      return await heldRoundOnce(ctx, server, ctx.data.fork(`held-${attempt}`), bodies);
    } catch (err) {
      if (!(err instanceof Inconclusive) || attempt >= HELD_TRIES) throw err;
      // A try given up on is judged by nothing, the final audit included: its requests may
      // still be in flight, or end unanswered when the servers stop, with their charges made.
      ctx.leaveOut(bodies);
    }
  }
}

/**
 * One try of the held round (see heldRound), with the data of `data`; `bodies` gets every
 * payment body the try sends, as soon as it is drawn.
 */
async function heldRoundOnce(ctx: LiveContext, server: ServerInstance, data: TestData, bodies: Array<{ user: string; amount: number }>): Promise<void> {
  const gate = ctx.gate(server);
  const name = t('step.05.heldRound');
  const { connectMs, answerMs } = ctx.timeouts();
  const timeouts = { connectMs, answerMs: answerMs + 3 * HELD_BOUND_MS + HOLD_AT_LEAST_MS };
  const raced = { key: data.key(), body: data.payment() };
  const others = Array.from({ length: HELD_OTHERS }, () => ({ key: data.key(), body: data.payment() }));
  // One of them is the raced payment's user's own second payment: a lock per user held across charge() holds it back.
  others[1].body.user = raced.body.user;
  const free = { key: data.key(), body: data.payment() };
  let otherAmount = data.amount();
  while (otherAmount === raced.body.amount) otherAmount = data.amount();
  const conflictBody = { user: raced.body.user, amount: otherAmount };
  bodies.push(raced.body, ...others.map((o) => o.body), free.body, conflictBody);
  const held = [raced.body, ...others.map((o) => o.body)];
  const hold = gate.hold((c) => held.some((b) => chargeOf(b)(c)));
  const lag = startLagMonitor();
  const starved = starveWatch(new SchedWatch([{ pid: server.pid, port: server.port, dbPath: server.dbPath }]));
  let released = false;
  const sent: Sent[] = [];
  const send = (req: PayRequest): Sent => {
    const s: Sent = { req, answer: ctx.pay(server, req, timeouts) };
    void s.answer.then((e) => {
      s.got = e;
      s.whileHeld = !released;
    });
    sent.push(s);
    return s;
  };
  const said = { name, count: HELD_OTHERS, seconds: HELD_BOUND_MS / 1000 };
  // What each failure names as seen: which request the grader held open when another was not answered, reached the provider, or was answered.
  const racedOne = described(server, raced);
  const seenNever = () => t('step.05.seen.never', { request: racedOne });
  const conflictOne = `${racedOne} (${t('check.charges.userAmount', { user: JSON.stringify(conflictBody.user), amount: conflictBody.amount })})`;
  try {
    // 1. The raced payment's duplicates, at once; its charge must reach the provider.
    const dupes = Array.from({ length: RACE_SIZE }, () => send(raced));
    // Reached, or every duplicate answered without it (a charge() that does not report at the gate): no need to wait out the bound.
    const allAnswered = Promise.all(dupes.map((d) => d.answer)).then(() => false);
    const reached = await Promise.race([gate.until((cs) => cs.some(chargeOf(raced.body)), HELD_BOUND_MS), allAnswered]);
    if (!reached && dupes.every((d) => d.got !== undefined) && !gate.charges.some(chargeOf(raced.body))) {
      const answered = dupes.map((d) => d.got!);
      throw new CheckFailed(t('step.05.heldNeverCharged', { ...said, answered: answered.length, size: RACE_SIZE }) + seenNever(), t('step.05.heldGate.why'), { exchanges: answered });
    }
    if (!reached && !gate.charges.some(chargeOf(raced.body))) {
      throw boundRanOut(lag, () => {
        const answered = dupes.filter((d) => d.got !== undefined).map((d) => d.got!);
        return new CheckFailed(t('step.05.heldNeverCharged', { ...said, answered: answered.length, size: RACE_SIZE }) + seenNever(), t('step.05.heldGate.why'), { exchanges: answered.length > 0 ? answered : undefined });
      }, starved);
    }
    const racedAt = performance.now();
    // 2. Payments with keys of their own: each must reach the provider while the raced charge is held.
    const otherSent = others.map(send);
    if (!(await gate.until((cs) => others.every((o) => cs.some(chargeOf(o.body))), HELD_BOUND_MS))) {
      throw boundRanOut(lag, () => {
        const missing = others.filter((o) => !gate.charges.some(chargeOf(o.body)));
        const reached = held.filter((b) => gate.charges.some(chargeOf(b))).length;
        return new CheckFailed(
          t('step.05.heldBlocked', { ...said, missing: missing.map((m) => JSON.stringify(m.key)).join(', '), reached, sameUser: missing.length === 1 && missing[0] === others[1] ? t('step.05.heldSameUser') : '' }) +
            t('step.05.seen.notReached', { request: described(server, missing[0]), holder: racedOne }),
          t('step.05.serialised.why'),
          { details: gateSaw(gate.charges), ...(otherSent.some((s) => s.got) ? { exchanges: otherSent.filter((s) => s.got).map((s) => s.got!) } : {}) },
        );
      }, starved);
    }
    // 3. With four charges held, one more payment must go through.
    const freeSent = send(free);
    const freeAnswered = await Promise.race([freeSent.answer.then(() => true), delay(HELD_BOUND_MS, undefined, { ref: false }).then(() => false)]);
    if (!freeAnswered) {
      const holders = [raced, ...others].map((r) => JSON.stringify(r.key)).join(t('list.separator'));
      throw boundRanOut(
        lag,
        () =>
          new CheckFailed(
            t('step.05.heldFree', { ...said, held: held.length, charged: gate.charges.some(chargeOf(free.body)) ? t('step.05.heldFree.charged') : t('step.05.heldFree.notCharged') }) +
              t('step.05.seen.notAnswered', { request: described(server, free), holders }),
            t('step.05.serialised.why'),
            { details: gateSaw(gate.charges) },
          ),
        starved,
      );
    }
    if (freeSent.got!.status !== 201) {
      const status = String(freeSent.got!.status ?? freeSent.got!.error);
      throw new CheckFailed(t('step.05.heldFreeStatus', { ...said, held: held.length, status }) + t('step.05.seen.answered', { request: described(server, free), status, holder: racedOne }), t('step.05.othersFailed.why'), { exchanges: [freeSent.got!] });
    }
    // 4. A retry of the raced key and another body under it, while its charge is held.
    const retry = send(raced);
    const conflict = send({ key: raced.key, body: conflictBody });
    const left = HOLD_AT_LEAST_MS - (performance.now() - racedAt);
    if (left > 0) await delay(left);
    // Give the conflicting request its bound to be answered, while still held (a server may keep it waiting: then it is judged once let go).
    await Promise.race([conflict.answer, delay(CONFLICT_GRACE_MS, undefined, { ref: false })]);
    const racedCharges = gate.charges.filter(chargeOf(raced.body));
    if (racedCharges.length > 1) {
      throw new CheckFailed(
        t('step.05.heldTwice', { name, n: racedCharges.length, size: RACE_SIZE }) + t('step.05.seen.chargedAgain', { request: racedOne, n: racedCharges.length }),
        t('check.race.rows.why', { size: RACE_SIZE }),
        { exchanges: dupes.filter((d) => d.got).map((d) => d.got!), details: gateSaw(gate.charges) },
      );
    }
    if (gate.charges.some(chargeOf(conflictBody))) {
      throw new CheckFailed(
        t('step.05.heldConflictCharged', { name, amount: conflictBody.amount }) + t('step.05.seen.charged', { request: conflictOne, holder: racedOne }),
        t('step.05.conflictInFlight.why'),
        { exchanges: conflict.got ? [conflict.got] : undefined, details: gateSaw(gate.charges) },
      );
    }
    // Every duplicate (and the retry) answered while held: only 409 is right, the payment is not made yet.
    const early = [...dupes, retry].filter((d) => d.got !== undefined && d.got.status !== 409);
    if (early.length > 0) {
      const e = early[0].got!;
      throw new CheckFailed(
        t('step.05.heldEarly', { name, count: early.length, status: String(e.status ?? e.error), ms: e.ms }) + t('step.05.seen.answered', { request: racedOne, status: String(e.status ?? e.error), holder: racedOne }),
        e.status === 201 ? t('step.05.heldEarly201.why') : t('check.race.broken.why'),
        { exchanges: early.map((d) => d.got!) },
      );
    }
    if (conflict.got !== undefined && conflict.got.status !== 422 && conflict.got.status !== 409) {
      const status = String(conflict.got.status ?? conflict.got.error);
      throw new CheckFailed(t('step.05.heldConflict', { name, status }) + t('step.05.seen.answered', { request: conflictOne, status, holder: racedOne }), t('step.05.conflictInFlight.why'), { exchanges: [conflict.got] });
    }
  } finally {
    released = true;
    hold.release();
    lag.stop();
  }
  // 5. Let go: every waiter gets the first response.
  await Promise.all(sent.map((s) => s.answer));
  const answers = sent.filter((s) => s.req === raced).map((s) => s.got!);
  const rows = rowsForKey(ctx.ledger(server), raced.key);
  const charges = (ctx.charges(server) ?? []).filter(chargeOf(raced.body));
  if (rows.length > 1 || charges.length > 1) {
    throw new CheckFailed(t('check.race.doubled', { name, charges: charges.length, rows: rows.length, size: RACE_SIZE, where: where([server]) }), t('check.race.rows.why', { size: RACE_SIZE }), { exchanges: answers, ledger: rows });
  }
  const late = sent.filter((s) => s.req === raced && !s.whileHeld).map((s) => s.got!);
  const firsts = late.filter((e) => e.status === 201);
  // A 409 is a right answer too: a waiter that looked while the first request was still
  // writing its answer (just after the charge was let go) is told to retry (ok-409-in-flight,
  // ok-begin-immediate in a sandbox).
  const wrong = late.filter((e) => e.status !== 409 && (e.status !== 201 || !isDeepStrictEqual(responseJson(e), responseJson(firsts[0]))));
  if (firsts.length === 0 || wrong.length > 0) {
    const e = wrong[0] ?? late[0];
    const status = String(e?.status ?? e?.error);
    throw new CheckFailed(t('step.05.heldWaiters', { name, count: late.length, status }) + t('step.05.seen.afterRelease', { request: racedOne, status, holder: racedOne }), t('check.race.broken.why'), { exchanges: wrong.length > 0 ? wrong : late });
  }
  const refused = sent.find((s) => s.req.body === conflictBody)!.got!;
  if (refused.status !== 422 && refused.status !== 409) {
    const status = String(refused.status ?? refused.error);
    throw new CheckFailed(t('step.05.heldConflict', { name, status }) + t('step.05.seen.afterRelease', { request: conflictOne, status, holder: racedOne }), t('step.05.conflictInFlight.why'), { exchanges: [refused] });
  }
  expectOthers(sent.filter((s) => others.some((o) => o === s.req) || s.req === free).map((s) => s.got!));
  const why = t('check.race.rows.why', { size: RACE_SIZE });
  expectRows(ctx, raced.key, 1, answers, why, server);
  expectCharges(ctx, raced.body, 1, answers, why, server);
}

/** A line that sends requests at once: a shell loop, `&`, xargs -P, parallel, or a load tool (hey, oha, ab). */
const LOOP = /\bfor\b|\bwhile\b|\bseq\b|\bxargs\b|\bparallel\b|\bhey\b|\boha\b|\bab\s+-|&\s*($|[;)]|pids|done)/;

/**
 * The raced key in a paste: the key of a probe, or of a request to /pay, started in a loop,
 * in the background or by a load tool: a probe's key argument (its options passed over), or
 * the Idempotency-Key header on the line (curl, hey, httpie, xh). Undefined when no such
 * line names one key. Lines continued with `\` are read as one.
 */
function racedKey(lines: string[]): string | undefined {
  // Each command's lines are joined once, at most 64 of them: re-joining a growing command per line would cost its square.
  const parts: string[][] = [];
  let continued = false;
  for (const line of lines) {
    const last = parts[parts.length - 1];
    if (continued && last.length < 64) last.push(line);
    else parts.push([line]);
    continued = /\\\s*$/.test(line);
  }
  const commands = parts.map((p) => p.map((line, i) => (i < p.length - 1 ? line.replace(/\\\s*$/, ' ') : line)).join(''));
  for (const line of commands) {
    if (!LOOP.test(line)) continue;
    const command = line.replace(/^.*?\bdo\b\s*/, '');
    const found = [commandKey(command), headerKey(command)];
    const key = found.find((k): k is string => typeof k === 'string' && k !== '' && !k.includes('$'));
    if (key !== undefined) return key;
  }
  return undefined;
}

/** The keys with more than one ledger row, each with its count. */
function repeatedKeys(ledger: LedgerRow[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const row of ledger) if (row.idempotency_key) counts.set(row.idempotency_key, (counts.get(row.idempotency_key) ?? 0) + 1);
  return [...counts].filter(([, n]) => n > 1);
}

const showLoop = () => t('step.05.showLoop');

/**
 * Step 05: ten simultaneous requests with one key make one ledger row. Live: several
 * rounds, each with a fresh key; every answer the same 201 or 409 while in flight (lab sheet, step 5).
 */
export const step: Step = {
  id: '05',
  slug: 'race',
  get title() {
    return t('step.05.title');
  },
  file: {
    name: '05-race.txt',
    check(text) {
      const paste = parsePaste(text);
      const read = racedKey(paste.lines);
      expect(paste.ledger.length > 0, t('step.05.file.noLedger'), t('step.05.file.noLedger.why'), {
        details: paste.responses.map(describeResponse),
      });
      const key = read ?? 'race';
      if (read === undefined) {
        // No loop line names the key: the lab sheet's key `race`, if the ledger shows it and nothing contradicts it.
        const race = paste.ledger.filter((row) => row.idempotency_key === 'race').length;
        const repeated = repeatedKeys(paste.ledger).filter(([k]) => k !== 'race');
        const several = repeated.map(([k, n]) => t('step.05.file.several', { key: JSON.stringify(k), n })).join(t('list.separator'));
        expect(
          race > 0,
          t('step.05.file.noKey', { several: several ? t('step.05.file.noKey.several', { several }) : '', showLoop: showLoop() }),
          t('step.05.file.noKey.why'),
          { ledger: paste.ledger },
        );
        expect(
          race > 1 || repeated.length === 0,
          t('step.05.file.unread', { several, showLoop: showLoop() }),
          t('step.05.file.unread.why'),
          { ledger: paste.ledger },
        );
      }
      const rows = paste.ledger.filter((row) => row.idempotency_key === key);
      expect(
        rows.length === 1,
        t('step.05.file.rows', { key: JSON.stringify(key), count: rows.length }),
        t('step.05.file.rows.why'),
        { ledger: rows.length > 0 ? rows : paste.ledger },
      );
      return t('step.05.file.pass', { key: JSON.stringify(key) });
    },
  },
  cost: 2,
  async live(ctx) {
    // Three servers, each on a database of its own, so that each round is judged alone: A
    // the rounds at the run's own provider latency, B the held round (its charges held at
    // the provider's gate), C a slow database round trip. B and C start their rounds as
    // soon as they are up.
    const settled = (run: Promise<unknown>): Promise<unknown> =>
      run.then(
        () => undefined,
        (err: unknown) => err,
      );
    // All three at once: the queue of starts orders them with every other step's by the
    // work that waits for each once it is up.
    const heldDone = settled(ctx.startServer({ ownDatabase: true, priority: HOLD_AT_LEAST_MS }).then((server) => heldRound(ctx, server)));
    const main = ctx.startServer({ priority: 800 });
    // The look-up of a check-then-insert behind another write (an expiry DELETE, an audit
    // row) is not held by a lock; a database round trip widens its window.
    const latencyDone = settled(ctx.startServer({ dbMs: DB_LATENCY_MS, dbGate: true, ownDatabase: true, priority: 3 * DB_LATENCY_MS }).then((latent) => latencyRound(ctx, latent)));
    const failures: unknown[] = [];
    let server: ServerInstance | undefined;
    try {
      server = await main;
      // One payment first, so a server that sets the database up on its first request has done so.
      const warmUp = await ctx.pay(server, { key: ctx.freshKey(), body: ctx.data.payment() });
      expectStatus(warmUp, 201, t('step.05.warmUp'), t('step.05.warmUp.why'));
      await raceRound(ctx, [server], 1, { lockDatabase: true });
      for (let round = 2; round <= RACE_ROUNDS; round++) await roundWithOthers(ctx, server, round);
    } catch (err) {
      failures.push(err);
    }
    failures.push(await latencyDone, await heldDone);
    // A failure the grader saw is said before one where a bound ran out (requests unanswered:
    // a lock striped four ways holds the slow-database round's charges back too, and the held
    // round names the cause), and both before an inconclusive part.
    const failure =
      failures.find((f) => f !== undefined && !(f instanceof Inconclusive) && !(f instanceof Unanswered)) ??
      failures.find((f) => f !== undefined && !(f instanceof Inconclusive)) ??
      failures.find((f) => f !== undefined);
    if (failure !== undefined) throw failure;
    return t('step.05.pass', { rounds: RACE_ROUNDS + 2, size: RACE_SIZE, where: where([server!]) });
  },
  get hints() {
    return [t('step.05.hint.1'), t('step.05.hint.2'), t('step.05.hint.3')];
  },
};
