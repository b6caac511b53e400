import { setTimeout as delay } from 'node:timers/promises';
import { CheckFailed, inPart } from '../../grader/failure.js';
import { describeCharge, describeRequest, expectCharges, expectReplay, expectRows, expectStatus, paymentOf, starvedExchange } from '../../grader/expect-http.js';
import { Inconclusive, Starved, startLagMonitor, type GateCharge, type ProviderGate } from '../../grader/gate.js';
import { notReplayed, saysReplayed } from './09-replayed.js';
import { waitUntilStill } from '../../grader/race.js';
import { chargeUnderWay, sendPending, type Pending } from '../../grader/in-flight.js';
import { linkTarget, paymentPath } from './14-state.js';
import { SchedWatch, starvationFigures, starvedError, starvedFor, starvedVerdict, starveWatch, type Starvation } from '../../grader/sched.js';
import { t } from '../../i18n/index.js';
import type { CheckDatabase, LiveContext } from '../../grader/context.js';
import type { PayRequest } from '../../grader/http.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';

/** IDEM_LOCK_S of the crashed deployments (A then B, G then H, each pair on its database), in s: a claim older than this is abandoned. */
export const CRASH_LOCK_S = 2;
/**
 * How long, in IDEM_LOCK_S, a try may be kept waiting past the claim's abandonment before
 * the take-over counts as late (LATE_TAKEOVER - 1 times IDEM_LOCK_S: judgeTakeover's timed
 * rule). A server that waits three times IDEM_LOCK_S in a poll loop is kept waiting there.
 */
export const LATE_TAKEOVER = 2;
/**
 * How old, in IDEM_LOCK_S, a claim may be at most when a retry is still told 409: by then it
 * is surely abandoned (its age is measured from when its charge reached the provider's gate,
 * later than the claim was made, so never more than its real age; the half IDEM_LOCK_S
 * beyond it, a second, is far more than any clock's step). A server that takes over only at
 * twice IDEM_LOCK_S ("a margin") and answers 409 until then is told apart by it; this rule
 * is causal, not timed: the server decides after the try was sent.
 */
export const TOLD_409_LATE = 1.5;
/**
 * Where the grader crashes a server in the middle of a payment (gate.ts): `before`, held at
 * the provider before the money moved (the take-over must charge: a take-over that only
 * writes the row pays nothing); `after`, held once the money moved and before charge()
 * returned (the take-over must not charge again); `returned`, once charge() returned, held
 * at the database's gate while the server records the payment (crashReturned: right after
 * its ledger row was written or at its COMMIT, for a server that speaks IDEM_DB_GATE; else
 * under the grader's write lock, at its answer; the take-over must find what was written
 * and neither charge nor record the payment again).
 */
export const CRASH_POINTS = ['after', 'before', 'returned'] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];
/** How long a killed server's processes may take to be gone before its folder is put back, in ms. */
const KILLED_WITHIN_MS = 10_000;
/**
 * The most time a charge is awaited at the provider's gate, in ms: a bound, not what decides;
 * the run's request limit (LiveContext.limits.requestMs, IDEM_LAB_REQUEST_TIMEOUT_MS, 8000 by default), as
 * long as any request of the check is awaited.
 */
const gateBoundMs = (ctx: LiveContext): number => ctx.limits.requestMs;
/** How long, beyond IDEM_LOCK_S, the retries after the crash may take to get their 201, in ms: far less than the default IDEM_LOCK_S of 30 s. */
export const RECOVERY_BOUND_MS = 4000;
/** The retrying client's delay between two tries, in ms, and its most tries. */
export const RETRY_DELAY_MS = 100;
export const MAX_TRIES = 60;
/**
 * The live deployment's window per attempt, in ms: its IDEM_LOCK_S is this plus
 * LIVE_LOCK_MARGIN_S, so that its claim stays young while another server starts and the
 * retries are sent (the owner's charge is held at the provider's gate meanwhile; no
 * IDEM_PROVIDER_REPLY_MS is set). A second attempt, twice as long, is made only when the
 * machine was too slow for the first (the owner answered after its claim had aged past
 * IDEM_LOCK_S); its verdict stands.
 */
export const LIVE_WINDOWS_MS = [2000, 4000] as const;
/** How long the live claim's charge stays held at least from when both retries were written, in ms, unless they are all answered first, and never past the claim's youth (liveClaim): long enough for each to look at the claim (and take it over, if it would). */
export const LIVE_HOLD_MS = 1000;
/**
 * How much longer than LIVE_HOLD_MS the live claim's charge stays held at most while a
 * server still has a thread that can run (the retries not yet at their wait), in ms. It
 * never decides: a bound run out on a starved server is inconclusive, one that keeps a CPU
 * busy gets the charge let go.
 */
export const LIVE_STILL_BOUND_MS = 3000;
/** How much of the live claim's IDEM_LOCK_S is left for its owner to answer once the hold ends, in ms: the hold never runs into it. */
export const LIVE_ANSWER_MARGIN_MS = 500;
/** IDEM_LOCK_S of the live deployment exceeds its window by this much, in s: its claim stays young while it charges. */
export const LIVE_LOCK_MARGIN_S = 2;

/** 12's failure for a request to be crashed in that was answered with no charge under way. */
function noChargeToCrash(answer: Exchange): CheckFailed {
  return new CheckFailed(
    t('step.12.noCharge', { request: describeRequest(answer), status: String(answer.status ?? t('check.audit.noAnswer')) }),
    t('step.12.noCharge.why'),
    { exchanges: [answer] },
  );
}

/** The crashed deployments' settings. */
const CRASH_ENV = { IDEM_LOCK_S: String(CRASH_LOCK_S) };

/** A payment of the crashed deployment: its key and body. */
type Payment = PayRequest & { key: string; body: { user: string; amount: number } };

/**
 * The crash: a server pays and is killed (SIGKILL) while the grader holds its charge at the
 * provider's gate at `point`: before the money moved, or once it moved and before charge()
 * returned. The killed request must get no answer.
 * @returns the payment, the killed request's exchange and when its charge reached the gate
 * @throws CheckFailed when the charge never began or the request was answered anyway
 */
async function crashAt(ctx: LiveContext, a: ServerInstance, point: CrashPoint): Promise<{ req: Payment; lost: Exchange; chargedAt: number }> {
  const data = ctx.data.fork(`crash-${point}`);
  const req = { key: data.key(), body: data.payment() };
  const inFlight = await chargeUnderWay(ctx, a, req, point === 'before' ? 'start' : 'moved', noChargeToCrash);
  await a.kill();
  inFlight.hold.release();
  const lost = await inFlight.answer;
  if (lost.status !== undefined) {
    throw new CheckFailed(t('step.12.answeredEarly', { request: describeRequest(lost), status: lost.status }), t('step.12.answeredEarly.why'), {
      exchanges: [lost],
    });
  }
  return { req, lost, chargedAt: inFlight.chargedAt };
}

/** Whether a database statement's text inserts into the contract's ledger table (after leading blanks and comments). */
export function insertsLedgerRow(sql: string): boolean {
  const text = sql.replace(/^(\s+|--[^\n]*\n|\/\*[\s\S]*?\*\/)*/, '');
  return /^(insert|replace)\s+(or\s+\w+\s+)?into\s+(main\.)?["`\[]?ledger\b/i.test(text);
}

/**
 * The thread (as the server reported it at the database's gate) that ran the last statement
 * reported before `charge` reached the gate: the paying request's own (its claim), so its
 * statements after charge() returned are told from a background thread's.
 */
function threadOf(gate: ProviderGate, charge: GateCharge): number | undefined {
  const before = gate.statements.filter((st) => st.reportedAt <= charge.startedAt);
  return before[before.length - 1]?.thread;
}

/**
 * How the crash once charge() returned is made (crashPlan): `at`, killed at the request
 * thread's statement of that index after charge() returned; `afterAnswer`, killed right
 * after its answer, while every statement it runs after charge() waits (a server that runs
 * none between charge() and its answer: it recorded the payment before charging, records
 * it on a thread of its own, or answers first and writes afterwards; `requestRuns`: the
 * request thread ran statements after charge() but a thread new to this payment wrote
 * too, so only the new threads' statements wait); `locked`, for a
 * server that speaks no database's gate, killed at its answer while the grader holds the
 * database's write lock (crashLocked).
 */
type ReturnedPlan = { at: number } | { afterAnswer: true; requestRuns?: boolean } | { locked: true };

/** A crash made: the payment, the killed request's exchange (no answer, or the answer it got just before the kill) and when its charge reached the gate (performance.now() ms). */
interface Crash {
  req: Payment;
  lost: Exchange;
  chargedAt: number;
  /** How the server's writes after charge() were held while it was killed (crashReturned): at the database's gate (default), by the grader's write lock, or not at all (crashLocked could not take the lock). */
  heldBy?: 'gate' | 'lock' | 'none';
}

/** Whether a database statement's text opens a transaction (BEGIN, after leading blanks and comments). */
export function opensTransaction(sql: string): boolean {
  return /^begin\b/i.test(sql.replace(/^(\s+|--[^\n]*\n|\/\*[\s\S]*?\*\/)*/, ''));
}

/**
 * Where a crash once charge() returned is made, learned from a payment of the server's own
 * (`probe`, graded by nothing else): its request thread's statements reported after the
 * money moved and before its answer came. The crash comes at the statement after the one
 * that inserts the ledger row, when the server writes it outside a transaction and runs
 * more after it (the payment half recorded: its ledger row and nothing after it, whatever
 * the server writes next, its record's status or a clean-up); else at its first statement
 * after charge() (a server that records in a transaction it opens then: its BEGIN; or
 * that transaction's COMMIT, see crashReturned). When the request ran no statement
 * before its answer, the crash comes right after its answer (`afterAnswer`), and so it does
 * when a thread that had run no statement before this payment ran some between charge()
 * and the answer (a writer of its own: `requestRuns`, the request thread's statements
 * run, a server that hands the payment over and answers without waiting for the write is
 * killed at its answer); when the
 * server reported no statement at all (IDEM_DB_GATE is optional), `locked`.
 * @returns the plan
 * @throws CheckFailed when the probe was not answered 201 (a new key's payment, charged
 *   with nothing held: it must be the payment); Inconclusive as chargeUnderWay
 */
async function crashPlan(ctx: LiveContext, server: ServerInstance, probe: Payment): Promise<ReturnedPlan> {
  const gate = ctx.gate(server);
  const paying = await chargeUnderWay(ctx, server, probe, 'moved', noChargeToCrash);
  const thread = threadOf(gate, paying.hold.held[0]);
  const from = gate.statements.length;
  paying.hold.release();
  const lag = startLagMonitor();
  const starved = starveWatch(new SchedWatch([{ pid: server.pid, port: server.port, dbPath: server.dbPath }]));
  const answer = await paying.answer.finally(() => lag.stop());
  // No answer within the request bound while the grader or the server was kept off a CPU says more about the machine.
  if (answer.status === undefined && answer.errorCode === 'timeout') {
    if (answer.starved) throw starvedExchange(answer);
    const machine = starvedVerdict(lag, starved, STARVED_QUEUE_MS);
    if (machine) throw machine;
  }
  if (answer.status !== 201 || paying.doneAt === undefined) {
    throw new CheckFailed(
      t('step.12.probeStatus', { request: describeRequest(answer), server: server.label, status: String(answer.status ?? t('check.audit.noAnswer')) }),
      t('step.12.probeStatus.why'),
      { exchanges: [answer], details: ctx.chargesFor(probe.body, server).map(describeCharge) },
    );
  }
  if (gate.statements.length === 0) return { locked: true };
  const after = gate.statements.slice(from).filter((st) => thread !== undefined && st.thread === thread && st.reportedAt < paying.doneAt!);
  if (after.length === 0) return { afterAnswer: true };
  const seen = new Set(gate.statements.slice(0, from).map((st) => st.thread));
  if (gate.statements.slice(from).some((st) => st.thread !== thread && !seen.has(st.thread) && st.reportedAt < paying.doneAt!)) return { afterAnswer: true, requestRuns: true };
  const ledger = after.findIndex((st) => insertsLedgerRow(st.sql));
  return { at: ledger >= 0 && ledger + 1 < after.length ? ledger + 1 : 0 };
}

/** How long the third crash waits for a server without the database's gate to answer while the grader holds its database's write lock, in ms. */
export const lockedBoundMs = gateBoundMs;

/**
 * The crash once charge() returned on a server that speaks no database's gate: its charge
 * is held once the money moved, the grader takes the database's write lock (BEGIN
 * IMMEDIATE on a connection of its own, not waited for), lets the charge go, and kills the
 * server (SIGKILL) as soon as its answer comes, or after lockedBoundMs(ctx): while the lock
 * is held, nothing the server writes after charge() can be committed, so a 201 that came
 * meanwhile was answered before its ledger row was durable, unless the row was written
 * before the charge (recover looks for it). When the lock cannot be taken at once, the
 * server itself holds a write transaction across its charge (its writes after charge()
 * commit with its claim or not at all): it is killed at its answer or the bound, unlocked.
 * @returns the crash, `heldBy` saying whether the write lock was held ('lock') or not ('none')
 * @throws CheckFailed when the charge never began; Inconclusive as chargeUnderWay
 */
async function crashLocked(ctx: LiveContext, j: ServerInstance, req: Payment): Promise<Crash> {
  const inFlight = await chargeUnderWay(ctx, j, req, 'moved', noChargeToCrash);
  let unlock: (() => void) | undefined;
  try {
    unlock = ctx.holdWriteLock(j, 0);
  } catch {
    unlock = undefined;
  }
  try {
    inFlight.hold.release();
    const bound = new AbortController();
    await Promise.race([inFlight.answer, delay(lockedBoundMs(ctx), undefined, { signal: bound.signal }).catch(() => undefined)]);
    bound.abort();
    await j.kill();
  } finally {
    unlock?.();
  }
  return { req, lost: await inFlight.answer, chargedAt: inFlight.chargedAt, heldBy: unlock !== undefined ? 'lock' : 'none' };
}

/**
 * The crash once charge() returned (`returned`): on a server started with the database's
 * gate, a payment's charge is held once the money moved; then every database statement is
 * held at the gate (and the statements that end a transaction) and the charge let go, so
 * charge() returns and the server records the payment. With a plan `at` (crashPlan), every
 * statement is let run but the request thread's at that index, and the server is killed
 * (SIGKILL) while it waits; when that statement opens a transaction (its BEGIN) and the
 * server has reported a transaction's end by then (IDEM_DB_GATE=ends; the lab's frame does,
 * and the trial payment's COMMIT came long before), the BEGIN runs and the server is
 * killed at the statement that ends that transaction (its COMMIT): every write of the
 * transaction made, none durable, and a server that answers before its COMMIT is killed
 * at that answer. With `afterAnswer`, the statements of the request thread and
 * of every thread the server had not run statements on before this payment (one started to
 * write it) wait, and the server is killed as soon as its answer comes. Either way, a
 * server that answers first is killed at its answer, with what it runs after it waiting;
 * one that neither reaches its statement nor answers within gateBoundMs(ctx) is killed
 * wherever it waits (still a crash once charge() returned). With `locked` (no statement
 * reported), crashLocked. The money moved and the provider's statement has it; what the
 * server wrote before the kill stays. The answer that came before the kill, if one did, is
 * the payment's answer: a 201's ledger row must be there (recover); any other answer told
 * the client nothing was promised, and the retries decide.
 * @returns the crash, and the warning to give when it was made by crashLocked (the crash
 *   between two of the server's writes was not tried)
 * @throws CheckFailed when the charge never began or the probe was not answered 201;
 *   Inconclusive when the bound ran out while the grader was starved
 */
async function crashReturned(ctx: LiveContext, j: ServerInstance): Promise<Crash & { warning?: string }> {
  const data = ctx.data.fork('crash-returned');
  const plan = await crashPlan(ctx, j, { key: data.key(), body: data.payment() });
  const req = { key: data.key(), body: data.payment() };
  if ('locked' in plan) {
    const crash = await crashLocked(ctx, j, req);
    const how = t(crash.heldBy === 'lock' ? 'step.12.locked.held' : 'step.12.locked.busy', { seconds: lockedBoundMs(ctx) / 1000 });
    return { ...crash, warning: t('step.12.locked', { how }) };
  }
  const gate = ctx.gate(j);
  // Threads that ran statements before this payment: a background one (a sweeper, a single writer) goes on.
  const earlier = new Set(gate.statements.map((st) => st.thread));
  const inFlight = await chargeUnderWay(ctx, j, req, 'moved', noChargeToCrash);
  const thread = threadOf(gate, inFlight.hold.held[0]);
  const from = gate.statements.length;
  const statements = gate.holdStatements({ ends: true });
  // Whether the crash comes at the COMMIT of the transaction the chosen statement opens, decided when that statement arrives.
  let toCommit: boolean | undefined;
  const reached = () => {
    if ('at' in plan) {
      const mine = gate.statements.slice(from).filter((st) => st.thread === thread);
      if (mine.length > plan.at) {
        toCommit ??= opensTransaction(mine[plan.at].sql) && gate.statements.some((st) => st.ends === true);
        const target = toCommit ? mine.find((st, i) => i > plan.at && st.ends === true) : mine[plan.at];
        if (target !== undefined && !target.released) return true;
      }
      // Every other statement runs: the request's earlier writes, and any background thread's.
      statements.releaseWave();
    } else {
      statements.releaseWave((st) => (st.thread === thread && plan.requestRuns === true) || (st.thread !== thread && earlier.has(st.thread)));
    }
    return false;
  };
  try {
    inFlight.hold.release();
    // Until the statement waits, the answer comes or the bound runs out, whichever is first (no timer is left behind).
    await new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        off();
        resolve();
      };
      const timer = setTimeout(finish, gateBoundMs(ctx));
      const off = gate.onReport(() => {
        if (reached()) finish();
      });
      void inFlight.answer.then(finish);
      if (reached()) finish();
    });
    // Killed while its statement waits, right after its answer, or where it waits once the bound ran out.
    await j.kill();
  } finally {
    statements.release();
  }
  return { req, lost: await inFlight.answer, chargedAt: inFlight.chargedAt };
}

/**
 * The inconclusive verdict on retries that found the key still in flight (or unanswered)
 * at their deadline while the machine starved the server or the grader: the take-over may
 * simply not have had a CPU in time. undefined when nothing starved (`last` ran out of time
 * starved, or starvedFor the bound `boundMs`): the server is judged.
 */
function starvedRetries(seen: Starvation, boundMs: number, last: Exchange | undefined): Starved | undefined {
  if (last?.starved) return starvedExchange(last);
  if (!starvedFor(seen, boundMs)) return undefined;
  return starvedError(seen);
}

/**
 * A client's retries of `req` on `server` while its key is in flight: again every
 * RETRY_DELAY_MS after each 409, until another answer, MAX_TRIES tries or `deadline` (a
 * performance.now() time, in ms) for sending one, each try given the request limit to be answered. `sentAt` and
 * `answeredAt` get each try's sending and answer times (performance.now(), ms).
 * @returns every try's exchange, in order
 */
async function retryWhileInFlight(ctx: LiveContext, server: ServerInstance, req: Payment, deadline: number, sentAt: number[] = [], answeredAt: number[] = []): Promise<Exchange[]> {
  const tries: Exchange[] = [];
  while (tries.length < MAX_TRIES) {
    const left = Math.round(deadline - performance.now());
    if (left <= 0) break;
    sentAt.push(performance.now());
    // The deadline decides whether another try is sent, never how long a try sent before it
    // may take to be answered: a take-over answered just after it is still an answer.
    const retry = await ctx.pay(server, req, { connectMs: 2000, answerMs: ctx.limits.requestMs });
    tries.push(retry);
    answeredAt.push(performance.now());
    if (retry.status !== 409) break;
    await delay(RETRY_DELAY_MS);
  }
  return tries;
}

/**
 * Whether the crashed claim was taken over in time, judged by what the server said, not by
 * how fast it said it:
 * - a try answered 409 that was sent when the claim was surely TOLD_409_LATE times
 *   IDEM_LOCK_S old fails: the server, deciding after the try came, knew the claim was
 *   abandoned (its age is counted from when its charge reached the provider's gate, later
 *   than the claim was made, so never overstated, whatever the machine's load);
 * - a try that was kept waiting (LATE_TAKEOVER - 1) times IDEM_LOCK_S after the claim was
 *   abandoned (or after it was sent, if later) fails only when neither the grader's event
 *   loop nor the server's threads were kept waiting for a CPU meanwhile (sched.ts); else
 *   the step is inconclusive (exit 2), never the learner's failure. The try's wait ends
 *   when its take-over charge reached the provider's gate (`takeoverAt`), when that came
 *   while it waited: the charge and the writes after it are not the server's deciding. This
 *   one is still a judgement of time: the run-queue time of threads that ended (each
 *   request's own) is gone from /proc, so before failing it the step times a new payment on
 *   the same server (`yardstick`, ms): a wait that the server's own time for a payment
 *   could explain is inconclusive, not late (a full run at load 11 saw a correct take-over
 *   answered 5.9 s after the claim, IDEM_LOCK_S 2). A server that waits in a poll loop
 *   decides out of the grader's sight; judging it causally needs its polls' statements at
 *   the database's gate.
 * @throws CheckFailed naming the late try; Inconclusive when the machine was too busy to tell
 */
async function judgeTakeover(
  tries: Exchange[],
  sentAt: number[],
  answeredAt: number[],
  chargedAt: number,
  lag: { worstMs(): number },
  starved: { waitedMs(): number },
  lost: Exchange,
  last: Exchange,
  takeoverAt: number | undefined,
  yardstick: () => Promise<number>,
): Promise<void> {
  const lockMs = CRASH_LOCK_S * 1000;
  const fail = (i: number, times: number) =>
    new CheckFailed(
      t('step.12.lateTakeover', { age: ((answeredAt[i] - chargedAt) / 1000).toFixed(1), lock: CRASH_LOCK_S, times, status: String(tries[i].status ?? t('check.audit.noAnswer')) }),
      t('step.12.stuck.why'),
      { exchanges: [lost, tries[i], last] },
    );
  const told409 = tries.findIndex((e, i) => e.status === 409 && sentAt[i] - chargedAt >= TOLD_409_LATE * lockMs);
  if (told409 >= 0) throw fail(told409, TOLD_409_LATE);
  const decidedAt = (i: number) => (takeoverAt !== undefined && takeoverAt >= sentAt[i] && takeoverAt <= answeredAt[i] ? takeoverAt : answeredAt[i]);
  const waitedMs = (i: number) => decidedAt(i) - Math.max(sentAt[i], chargedAt + lockMs);
  const waited = tries.findIndex((_, i) => waitedMs(i) >= (LATE_TAKEOVER - 1) * lockMs);
  if (waited < 0) return;
  const machine = starvedVerdict(lag, starved, STARVED_QUEUE_MS);
  if (machine) throw machine;
  const own = await yardstick();
  if (waitedMs(waited) - own < (LATE_TAKEOVER - 1) * lockMs) throw new Starved(t('step.12.slowPayment', { ms: Math.round(own) }));
  throw fail(waited, LATE_TAKEOVER);
}

/**
 * How long a server's threads may have waited for a CPU (summed, /proc schedstat) while a
 * try was kept waiting before that wait says more about the machine than the server, in ms.
 */
export const STARVED_QUEUE_MS = 250;

/**
 * The retries after the crash on B: a client retries on 409 every RETRY_DELAY_MS until a
 * 201, for at most IDEM_LOCK_S + RECOVERY_BOUND_MS; then one charge, one ledger row, and a
 * later retry replays that payment.
 * @throws CheckFailed naming what broke (money moved twice first); Starved when the retries
 *   ran out while the machine starved the server or the grader (starvedRetries)
 */
async function recover(ctx: LiveContext, b: ServerInstance, crash: Crash, point: CrashPoint): Promise<{ tries: number; ms: number }> {
  const { req, lost, chargedAt } = crash;
  // Answered 201 before it was killed (crashReturned): the answer promised a payment, so its ledger row must be there.
  if (lost.status === 201 && !ctx.ledger(b).some((row) => row.idempotency_key === req.key)) {
    throw new CheckFailed(
      t(crash.heldBy === 'lock' ? 'step.12.writeBehind.locked' : crash.heldBy === 'none' ? 'step.12.writeBehind.killed' : 'step.12.writeBehind', {
        request: describeRequest(lost),
        id: String(paymentOf(lost).payment_id),
        key: JSON.stringify(req.key),
      }),
      t('step.12.writeBehind.why'),
      { exchanges: [lost], details: ctx.chargesFor(req.body, b).map(describeCharge) },
    );
  }
  const started = performance.now();
  const deadline = started + CRASH_LOCK_S * 1000 + RECOVERY_BOUND_MS;
  const sentAt: number[] = [];
  const answeredAt: number[] = [];
  const lag = startLagMonitor();
  const starved = starveWatch(new SchedWatch([{ pid: b.pid, port: b.port, dbPath: b.dbPath }]));
  const meter = ctx.starveMeter([b]);
  const tries = await retryWhileInFlight(ctx, b, req, deadline, sentAt, answeredAt).finally(() => lag.stop());
  const seen = meter.stop();
  const ms = Math.round(performance.now() - started);
  const last = tries[tries.length - 1];
  // Money moved twice is said first: it is the bug, whatever the retries were answered.
  const charges = ctx.chargesFor(req.body, b);
  if (charges.length > 1) {
    throw new CheckFailed(
      t('step.12.twoCharges', { what: t('check.charges.userAmount', { user: JSON.stringify(req.body.user), amount: req.body.amount }), n: charges.length }),
      t('step.12.twoCharges.why'),
      { exchanges: [lost, ...tries.slice(-3)], details: charges.map((c) => describeCharge(c) + (c.key === undefined ? t('step.12.noKey') : t('step.12.withKey', { key: JSON.stringify(c.key) }))) },
    );
  }
  if (last === undefined || last.status === 409 || last.errorCode === 'timeout') {
    const inconclusive = starvedRetries(seen, deadline - started, last);
    if (inconclusive) throw inconclusive;
    throw new CheckFailed(
      t('step.12.stuck', { tries: tries.length, seconds: (ms / 1000).toFixed(1), lock: CRASH_LOCK_S, last: last?.status === 409 ? '409' : t('check.audit.noAnswer') }),
      t('step.12.stuck.why'),
      { exchanges: [lost, ...tries.slice(-3)] },
    );
  }
  expectStatus(last, 201, t('step.12.retryStatus', { status: String(last.status) }), t('step.12.stuck.why'));
  paymentOf(last);
  // The take-over's own charge (none when the crashed one had returned and was recorded): when it reached the provider's gate.
  const takeoverAt = ctx.gate(b).charges.find((c) => c.user === req.body.user && c.amount === req.body.amount && c.startedAt >= started)?.startedAt;
  const yardstick = async () => {
    const data = ctx.data.fork('crash-yardstick');
    const sent = performance.now();
    await ctx.pay(b, { key: data.key(), body: data.payment() });
    return performance.now() - sent;
  };
  await judgeTakeover(tries, sentAt, answeredAt, chargedAt, lag, starved, lost, last, takeoverAt, yardstick);
  const why = t(point === 'before' ? 'step.12.onceBefore.why' : point === 'returned' ? 'step.12.onceReturned.why' : 'step.12.once.why');
  if (point === 'before' && ctx.chargesFor(req.body, b).length === 0) {
    throw new CheckFailed(t('step.12.takeoverUnpaid', { server: b.label }), why, { exchanges: [lost, last] });
  }
  expectCharges(ctx, req.body, 1, [lost, last], why, b);
  expectRows(ctx, req.key, 1, [lost, last], why, b);
  // The take-over's 201 is the payment's first answer; a later retry is its replay, and says so.
  // (Crashed once charge() returned, the server may have recorded the payment whole before
  // it died: its retry is then rightly a replay.)
  if (point !== 'returned') notReplayed(last, t('step.12.recovered'));
  // Answered 201 just before the kill: the retry gets that same payment back, not another one.
  if (lost.status === 201) expectReplay(lost, last, t('step.12.writeBehind.why'));
  const later = await ctx.pay(b, req);
  expectReplay(last, later, t('step.12.replay.why'));
  expectSameLink(last, later, b);
  if (!saysReplayed(later)) {
    throw new CheckFailed(t('step.09.unmarked', { what: t('step.12.laterRetry'), value: later.replayed ?? t('step.09.noHeader') }), t('step.09.unmarked.why'), { exchanges: [last, later] });
  }
  return { tries: tries.length, ms };
}

/**
 * A charge that outlasts IDEM_LOCK_S: on B, a new key's charge is held at the provider's
 * gate once the money moved (chargeUnderWay), so a client retries (on 409, every
 * RETRY_DELAY_MS) and takes the claim over once it is older than IDEM_LOCK_S, while its owner
 * is still charging. When the owner's charge returns, the claim is no longer its own: it
 * must not finish it. Its answer is 409 or the same payment as the retries'; one charge,
 * one ledger row, and a later retry replays.
 * @throws CheckFailed naming what broke
 */
async function slowOwner(ctx: LiveContext, b: ServerInstance): Promise<void> {
  const data = ctx.data.fork('slow-owner');
  const req = { key: data.key(), body: data.payment() };
  // The owner's charge is held once the money moved until a retry has taken the claim over (or the retries end).
  const owner = await chargeUnderWay(ctx, b, req, 'moved', noChargeToCrash);
  const deadline = performance.now() + CRASH_LOCK_S * 1000 + RECOVERY_BOUND_MS;
  const meter = ctx.starveMeter([b]);
  const tries = await retryWhileInFlight(ctx, b, req, deadline).finally(() => owner.hold.release());
  const seen = meter.stop();
  const answer = await owner.answer;
  const last = tries[tries.length - 1];
  const why = t('step.12.slow.why');
  const rows = ctx.ledger(b).filter((row) => row.idempotency_key === req.key);
  if (rows.length > 1) {
    throw new CheckFailed(t('step.12.slowTwice', { rows: rows.length, server: b.label, lock: CRASH_LOCK_S }), why, { exchanges: [answer, ...tries.slice(-3)], ledger: rows });
  }
  if (last === undefined || last.status === 409 || last.errorCode === 'timeout') {
    const inconclusive = starvedRetries(seen, CRASH_LOCK_S * 1000 + RECOVERY_BOUND_MS, last);
    if (inconclusive) throw inconclusive;
    throw new CheckFailed(
      t('step.12.slowStuck', { tries: tries.length, seconds: ((CRASH_LOCK_S * 1000 + RECOVERY_BOUND_MS) / 1000).toFixed(1), lock: CRASH_LOCK_S, last: last?.status === 409 ? '409' : t('check.audit.noAnswer') }),
      t('step.12.stuck.why'),
      { exchanges: [answer, ...tries.slice(-3)] },
    );
  }
  expectStatus(last, 201, t('step.12.retryStatus', { status: String(last.status) }), why);
  paymentOf(last);
  if (answer.status !== 409) {
    expectStatus(answer, 201, t('step.12.slowOwner', { status: String(answer.status) }), why);
    expectReplay(last, answer, why);
  }
  expectCharges(ctx, req.body, 1, [answer, ...tries], why, b);
  expectRows(ctx, req.key, 1, [answer, ...tries], why, b);
  const later = await ctx.pay(b, req);
  expectReplay(last, later, t('step.12.replay.why'));
  expectSameLink(last, later, b);
}

/**
 * Requires the 201 of the retry that took a claim over (the payment's first answer) to
 * carry the Location its later replay carries (both on `on`, resolved as a client follows
 * them: linkTarget). A replay without Location, or one that links elsewhere than the
 * payment's own path (/payments/{id}) while the take-over links there, is step 14's to
 * judge: only a take-over without the Location its replay has, or one that leads
 * elsewhere while the replay leads to the payment, fails here.
 * @throws CheckFailed naming both headers
 */
function expectSameLink(takeover: Exchange, replay: Exchange, on: ServerInstance): void {
  if (replay.location === undefined || replay.location.trim() === '') return;
  if (takeover.location === undefined || takeover.location.trim() === '') {
    throw new CheckFailed(t('step.12.takeoverNoLocation', { location: replay.location }), t('step.12.takeoverLocation.why'), { exchanges: [takeover, replay] });
  }
  const own = paymentPath(Number(paymentOf(takeover).payment_id));
  const target = (location: string) => {
    const link = linkTarget(location, on.port);
    return 'target' in link ? link.target : undefined;
  };
  if (target(replay.location) === own && target(takeover.location) !== own) {
    throw new CheckFailed(t('step.12.takeoverLocation', { first: takeover.location, location: replay.location }), t('step.12.takeoverLocation.why'), { exchanges: [takeover, replay] });
  }
}

/** IDEM_LOCK_S of the live deployment of an attempt, in s. */
const liveLockS = (attempt: number) => LIVE_WINDOWS_MS[attempt] / 1000 + LIVE_LOCK_MARGIN_S;
/** The live deployment's settings of an attempt. */
const liveEnv = (attempt: number) => ({ IDEM_LOCK_S: String(liveLockS(attempt)) });

/**
 * A claim younger than IDEM_LOCK_S belongs to a live request. On a database of its own,
 * server C pays, and its charge is held at the provider's gate once the money moved; then
 * server D starts on the same database (a pod restarted while
 * another one is charging: a server that clears every claim in flight at start-up clears
 * C's), and one retry goes to C and one to D at once; the charge is let go once both are
 * answered or both servers are still (waitUntilStill, at least LIVE_HOLD_MS from their
 * write, never past the claim's youth: a hold cut there is no evidence of a pass). The first
 * request must be answered 201, each retry with that same payment or 409, with one charge
 * and one ledger row, and a later retry on D replays it.
 * @returns how the retries were answered ('409', '201', or both), or undefined when the
 *   set-up did not hold (D came up after C had answered, or C answered after its claim had
 *   aged past IDEM_LOCK_S, or the retries, unanswered, were held less than LIVE_HOLD_MS
 *   before the claim's youth ran out) and `judge` is false: then nothing was judged
 * @throws CheckFailed naming what broke; Starved when the servers, starved, were not still
 *   within the hold's bound, or when a judged attempt passed with its retries held short
 */
async function liveClaim(ctx: LiveContext, attempt: number, judge: boolean, started?: { c: ServerInstance; database: CheckDatabase }): Promise<string | undefined> {
  const window = LIVE_WINDOWS_MS[attempt];
  const lock = liveLockS(attempt);
  const env = liveEnv(attempt);
  const database = started?.database ?? ctx.newDatabase();
  const [first, second] = attempt === 0 ? ['C', 'D'] : ['E', 'F'];
  const c = started?.c ?? (await ctx.startServer({ database, env, label: first, priority: 3000 + window }));
  let d!: ServerInstance;
  const data = ctx.data.fork(`live-${attempt}`);
  const req = { key: data.key(), body: data.payment() };
  // C's charge is held once the money moved while D starts and the retries are sent and looked at.
  const owner = await chargeUnderWay(ctx, c, req, 'moved', noChargeToCrash);
  let retries: Pending[] = [];
  let heldStarved: Starved | undefined;
  // Set once both retries are written (writtenAt, performance.now() ms) and once both are answered.
  let writtenAt: number | undefined;
  let answered = false;
  // How long the retries had with the claim when it was let go (ms), and whether that was
  // short: unanswered, less than LIVE_HOLD_MS (the claim's youth ran out first: D started
  // late, or the grader lagged before it wrote them), so that a retry that takes over a young
  // claim only after waiting on it a while may not have had that while.
  let heldMs = 0;
  let heldShort = false;
  try {
    const d0 = await ctx.startServer({ database, env, label: second, priority: 2000 + window });
    d = d0;
    retries = [sendPending(ctx, c, req), sendPending(ctx, d0, req)];
    const written = Promise.all(retries.map((r) => r.written)).then(() => {
      writtenAt = performance.now();
    });
    const until = Promise.all(retries.map((r) => r.answer)).then(() => {
      answered = true;
    });
    // Held until both retries are answered, or both servers are still (each retry at its
    // wait: a poll loop, a lock), at least LIVE_HOLD_MS from when both were written (a grader
    // that lagged before it wrote them holds no less for it): a hold let go on a timer before
    // a starved server had looked at a retry saw nothing of what it does with a young claim.
    // Never past the claim's youth (less LIVE_ANSWER_MARGIN_MS for the owner to answer): a
    // claim held older than IDEM_LOCK_S may be taken over, and judges nothing.
    const youthEnd = owner.sentAt + lock * 1000 - LIVE_ANSWER_MARGIN_MS;
    try {
      await waitUntilStill(ctx, [c, d0], {
        written,
        until,
        minMs: LIVE_HOLD_MS,
        boundMs: LIVE_STILL_BOUND_MS,
        endBy: youthEnd,
        starved: (seen) => t('step.12.liveHeldStarved', { server: c.label, other: d0.label, s: ((performance.now() - (writtenAt ?? owner.sentAt)) / 1000).toFixed(1), ...starvationFigures(seen) }),
      });
    } catch (err) {
      if (!(err instanceof Starved)) throw err;
      heldStarved = err;
    }
    heldMs = writtenAt === undefined ? 0 : performance.now() - writtenAt;
    heldShort = !answered && heldMs < LIVE_HOLD_MS;
  } finally {
    owner.hold.release();
  }
  const answer = await owner.answer;
  const answers = await Promise.all(retries.map((r) => r.answer));
  const young = owner.doneAt !== undefined && owner.doneAt - owner.sentAt < lock * 1000;
  // The retries were not all seen at their wait while the claim was held, the servers starved:
  // the second attempt (judge) says so; the first gives way to it, as when the claim aged.
  if (heldStarved && judge) throw heldStarved;
  if (!judge && (retries.length === 0 || !young || heldStarved || heldShort)) {
    // Given up on without a verdict: its payment (charged once or twice, on rows of its own
    // body) is no evidence either way, so the final audit leaves it out.
    ctx.leaveOut([req.body]);
    await Promise.all([ctx.stopServer(c), ctx.stopServer(d)]);
    return undefined;
  }
  let verdict: string;
  try {
    verdict = await judgeLiveClaim(ctx, req, c, d, lock, answer, answers);
  } catch (err) {
    // Unless the claim outlived IDEM_LOCK_S before its owner answered (the machine kept the
    // grader or the servers off a CPU while D started): a take-over was then the server's
    // right, so what it shows can fail only as inconclusive, never as the learner's fail.
    if (young || !(err instanceof CheckFailed)) throw err;
    throw new Starved(t('step.12.liveAged', { server: c.label, other: d.label, lock, seconds: (((owner.doneAt ?? performance.now()) - owner.sentAt) / 1000).toFixed(1) }));
  }
  // A failure seen in a short hold is evidence still (the claim was young throughout); a pass is not.
  if (heldShort) throw new Starved(t('step.12.liveHeldShort', { server: c.label, other: d.label, ms: Math.round(heldMs), hold: LIVE_HOLD_MS, lock }));
  return verdict;
}

/**
 * The verdict on a live claim (liveClaim): the owner's answer 201, each retry that payment or
 * 409, one charge and one ledger row, a later retry on `d` replays it.
 * @returns how the retries were answered ('409', '201', or both)
 * @throws CheckFailed naming what broke
 */
async function judgeLiveClaim(ctx: LiveContext, req: Payment, c: ServerInstance, d: ServerInstance, lock: number, answer: Exchange, answers: Exchange[]): Promise<string> {
  expectStatus(answer, 201, t('step.12.liveRobbed', { server: c.label, other: d.label, lock, status: String(answer.status) }), t('step.12.liveRobbed.why'));
  paymentOf(answer);
  for (const retry of answers) {
    if (retry.status === 409) continue;
    expectStatus(retry, 201, t('step.12.liveRetry', { status: String(retry.status) }), t('step.12.liveRobbed.why'));
    expectReplay(answer, retry, t('step.12.liveRobbed.why'));
  }
  const why = t('step.12.liveOnce.why');
  expectCharges(ctx, req.body, 1, [answer, ...answers], why, c);
  expectRows(ctx, req.key, 1, [answer, ...answers], why, c);
  const later = await ctx.pay(d, req);
  expectReplay(answer, later, t('step.12.replay.why'));
  const statuses = [...new Set(answers.map((r) => String(r.status)))].sort();
  return statuses.join('/');
}

/**
 * Step 12 (advanced track): a claim left in flight by a crash is recovered, a live one is
 * not. The essay's crash between the charge and the stored response: the server is killed
 * (SIGKILL) after the provider charged and before charge() returned, restarted on the same
 * database and statement, and a retry must be answered 201 within IDEM_LOCK_S and a bound
 * (a claim older than IDEM_LOCK_S is taken over), with one charge (charge() gets the
 * record's key, as Stripe's API takes an idempotency key, so the provider moves the money
 * once) and one ledger row; on the restarted server, a charge that outlasts IDEM_LOCK_S is
 * taken over by a retry and its owner, once its charge returns, must not finish the claim
 * (still one row). The same crash is made before the money moved (on G, then H: the
 * take-over must charge) and once charge() returned, while the payment is recorded (on J,
 * then K: crashReturned; J's own payment, which must be answered 201, shows where): on a
 * server that speaks the database's gate, right after the ledger row was written or at the
 * COMMIT of the transaction that records it; a server that answers first, or with no
 * statement after charge(), is killed right after its answer, and its ledger row must be
 * there; a server without the gate is killed at its answer or a bound while the grader
 * holds the database's write lock, with a warning that the crash between two of its writes
 * was not tried. The take-over must neither charge nor record the payment again, and its
 * 201 carries the Location its later replay carries (expectSameLink). Beside
 * it, on a database of its own, a retry while another
 * server is still charging, and a server started then, must not take that younger claim
 * over: the first request keeps its payment (docs/server-contract.md, "The advanced track").
 */
export const step: Step = {
  id: '12',
  slug: 'crash',
  get title() {
    return t('step.12.title');
  },
  cost: 3,
  async live(ctx: LiveContext) {
    // The crashed deployments (A on the check's database, G on one of its own) and C first,
    // outside the parts: a server that cannot start at all is said as such.
    const liveDatabase = ctx.newDatabase();
    const beforeDatabase = ctx.newDatabase();
    const returnedDatabase = ctx.newDatabase();
    const starts = await Promise.allSettled([
      ctx.startServer({ env: CRASH_ENV, label: 'A', priority: 2000 }),
      ctx.startServer({ database: beforeDatabase, env: CRASH_ENV, label: 'G', priority: 2000 }),
      ctx.startServer({ database: liveDatabase, env: liveEnv(0), label: 'C', priority: 3000 + LIVE_WINDOWS_MS[0] }),
      ctx.startServer({ database: returnedDatabase, env: CRASH_ENV, dbGate: 'ends', label: 'J', priority: 2000 }),
    ]);
    for (const start of starts) if (start.status === 'rejected') throw start.reason;
    const [a, g, c, j] = starts.map((start) => (start as PromiseFulfilledResult<ServerInstance>).value);
    const settle = <T>(run: Promise<T>) => run.then((value) => ({ value }), (err: unknown) => ({ err }));
    const crashName = (point: CrashPoint) => t(point === 'before' ? 'step.12.part.crashBefore' : point === 'returned' ? 'step.12.part.crashReturned' : 'step.12.part.crash');
    const crash = settle(
      (async () => {
        // The three crashes at once (after the money moved on A, before it moved on G, once
        // charge() returned on J); the folders are put back as the learner's with only the
        // databases and statements kept (a restarted pod keeps its volume only), and B, H
        // and K start there.
        const [after, before, returned] = await Promise.all([
          inPart(crashName('after'), () => crashAt(ctx, a, 'after')),
          inPart(crashName('before'), () => crashAt(ctx, g, 'before')),
          inPart(crashName('returned'), () => crashReturned(ctx, j)),
        ]);
        // Crashed under the database's write lock (no gate): the crash between two writes, not tried, is said.
        if (returned.warning) ctx.warn(returned.warning);
        // Killed (or stopped), their processes may take a moment to be reaped on a busy machine: the folders are put back once they are gone.
        await Promise.all([a, g, j].map((server) => server.endedWithin(KILLED_WITHIN_MS)));
        ctx.renewCopies();
        const [b, h, k] = await Promise.all([
          ctx.startServer({ env: CRASH_ENV, label: 'B', priority: 1500 }),
          ctx.startServer({ database: beforeDatabase, env: CRASH_ENV, label: 'H', priority: 1500 }),
          ctx.startServer({ database: returnedDatabase, env: CRASH_ENV, label: 'K', priority: 1500 }),
        ]);
        // Beside the retries, on B: a charge that outlasts IDEM_LOCK_S while its owner lives.
        const [recovered, recoveredBefore, slow, recoveredReturned] = await Promise.all([
          settle(inPart(crashName('after'), () => recover(ctx, b, after, 'after'))),
          settle(inPart(crashName('before'), () => recover(ctx, h, before, 'before'))),
          settle(inPart(t('step.12.part.slow', { lock: CRASH_LOCK_S }), () => slowOwner(ctx, b))),
          settle(inPart(crashName('returned'), () => recover(ctx, k, returned, 'returned'))),
        ]);
        if ('err' in recovered) throw recovered.err;
        if ('err' in recoveredBefore) throw recoveredBefore.err;
        if ('err' in slow) throw slow.err;
        if ('err' in recoveredReturned) throw recoveredReturned.err;
        return recovered.value;
      })(),
    );
    const live = settle(inPart(t('step.12.part.live'), async () => (await liveClaim(ctx, 0, false, { c, database: liveDatabase })) ?? (await liveClaim(ctx, 1, true))));
    const [crashed, lived] = await Promise.all([crash, live]);
    // A failure seen is said before an inconclusive part.
    const errors = [crashed, lived].filter((r): r is { err: unknown } => 'err' in r).map((r) => r.err);
    const failure = errors.find((e) => !(e instanceof Inconclusive)) ?? errors[0];
    if (failure !== undefined) throw failure;
    const crashedValue = (crashed as { value: { tries: number; ms: number } }).value;
    return t('step.12.pass', { tries: crashedValue.tries, seconds: (crashedValue.ms / 1000).toFixed(1), lock: CRASH_LOCK_S, how: (lived as { value: string | undefined }).value ?? '' });
  },
  get hints() {
    return [t('step.12.hint.1'), t('step.12.hint.2'), t('step.12.hint.3')];
  },
};
