import path from 'node:path';
import { CheckFailed, ServerStartFailed, expect, inPart, withNote } from '../../grader/failure.js';
import { t } from '../../i18n/index.js';
import { describeResponse, parsePaste, paymentId, type PastedResponse } from '../../grader/paste.js';
import { describeRequest, expectCharges, expectReplay, expectRows, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { LOCK_HOLD_MS, RACE_SIZE, judgedBeforeStarved, raceRound, waitUntilStill } from '../../grader/race.js';
import { chargeUnderWay, sendPending } from '../../grader/in-flight.js';
import { Starved } from '../../grader/gate.js';
import { LOW_SHARE, starvationFigures, starvedWhileHeld, type Starvation } from '../../grader/sched.js';
import type { Step } from '../../grader/track.js';
import type { CheckDatabase, LiveContext } from '../../grader/context.js';
import type { Exchange } from '../../grader/types.js';
import type { ServerInstance } from '../../grader/server.js';

const RESTART = /restart|\bstop\b|\bkill\b|server\.py|재시작|다시 시작|重启|重新启动/i;

/**
 * The simulated database round trip of the split race on a slow database, in ms
 * (IDEM_DB_MS): longer than two requests sent at once take to reach two instances, so
 * that a look-up after another write on one instance happens before the other's claim,
 * also on a loaded machine (at 150 ms a per-process lock behind an expiry DELETE passed 1
 * run in 100 with two busy loops); as step 05's DB_LATENCY_MS.
 */
export const SPLIT_DB_MS = 250;

/**
 * How long the first request's charge stays held at least while its retry is on another
 * instance, in ms, unless the retry is answered first: long enough for the retry to look at
 * the claim (and take it over, if it would), and, as step 05's HOLD_AT_LEAST_MS, past a
 * duplicate that gives up waiting after a second or so.
 */
export const IN_FLIGHT_HOLD_MS = 2000;
/**
 * How much longer than IN_FLIGHT_HOLD_MS the charge stays held at most while a server still
 * has a thread that can run (the retry not yet at its wait), in ms: a bound, never what
 * decides. With IN_FLIGHT_HOLD_MS, far below the 30 s a claim in flight stays young by
 * default (IDEM_LOCK_S, docs/server-contract.md), so no take-over is the server's right.
 */
export const IN_FLIGHT_STILL_BOUND_MS = 3000;

/** What the slow split's requests may take beyond slowDatabaseTimeouts, in ms: the waves of a lockstep on a busy machine. */
export const LOCKSTEP_SLACK_MS = 8000;

/**
 * RACE_SIZE simultaneous requests with one key split over two instances (each from a copy
 * of its own) of a database of their own whose every statement outside a transaction
 * answers SPLIT_DB_MS late, sent while the grader holds that database's write lock for
 * LOCK_HOLD_MS. The locked round on B and C forces a race only on a look-up that is the
 * first statement; here a look-up after another write (an expiry DELETE, an audit row)
 * still happens on both instances before either claims, and so does one made in a
 * transaction of its own that ends before the claim (BEGIN IMMEDIATE, look-up, COMMIT,
 * then the claim): held at their first write, both instances go on together when the
 * lock goes. Without the lock, on a loaded machine, one instance's request now and then
 * reached its look-up only after the other had claimed (3 runs in 100). A claim made
 * atomic only within one process (a threading.Lock) charges twice every time.
 * @throws CheckFailed as raceRound
 */
async function slowDatabaseSplit(ctx: LiveContext): Promise<void> {
  const database = ctx.newDatabase();
  // D first, E once D is up, as a deployment's pods start: the first sets the new database
  // up. Two starts at once on a fresh file race at their set-up, and a correct server that
  // switches it to WAL when it starts then fails on "database is locked" (ok-wal-mode
  // exited once in 100 runs); B and C start on a database A has set up.
  // Theirs is the check's longest chain (E's start, the held lock and about four slow
  // statements once D is up): D goes first in the queue of starts, and E when it asks.
  const rest = LOCK_HOLD_MS + 4 * SPLIT_DB_MS;
  // Both speak the database's gate when their frame does: the round then runs in lockstep
  // (grader/lockstep.ts) instead of waiting out SPLIT_DB_MS per statement.
  const d = await ctx.startServer({ database, dbMs: SPLIT_DB_MS, dbGate: true, label: 'D', priority: SPLIT_DB_MS + rest });
  const e = await ctx.startServer({ database, dbMs: SPLIT_DB_MS, dbGate: true, label: 'E', priority: rest });
  const servers = [d, e];
  // A correct server behind a file lock answers the last of the ten after about 5 s on a
  // quiet machine; in lockstep on a busy one, a wave per statement takes longer: a bound, never what decides.
  const slow = ctx.slowDatabaseTimeouts();
  const timeouts = { connectMs: slow.connectMs, answerMs: slow.answerMs + LOCKSTEP_SLACK_MS };
  // Nothing else in this round: a payment of another key ahead of the raced one in a
  // process's lock would let the other instance claim first, and the race would be lost.
  const beside = () => expectNothingBeside(ctx, database, ctx.exchanges.slice(-3));
  await judgedBeforeStarved(raceRound(ctx, servers, 1, { data: ctx.data.fork('slow-split'), timeouts, lockDatabase: true, lockstep: true }), beside);
  beside();
}

/**
 * The restart and the second instance on the check's database: A pays; A is stopped and
 * its folder put back as the learner's files with only the database and the statement
 * kept (renewCopies); B restarts there, as a redeployed pod, and C starts from a copy of
 * the workspace of its own, as a second pod that shares only the database. The retry on
 * B replays; a payment on B replays on C; a race split over B and C while the database's
 * write lock is held charges once; a retry on C while B's charge is under way does not
 * charge again (inFlightElsewhere).
 * @throws CheckFailed naming the part that failed
 */
async function restartAndShare(ctx: LiveContext, started: Promise<ServerInstance>): Promise<void> {
  const a = await started;
  const key = ctx.freshKey();
  const body = ctx.data.payment();
  const first = await ctx.pay(a, { key, body });
  expectStatus(first, 201, t('check.first201'), t('step.06.first201.why'));
  paymentOf(first);
  expectNothingBeside(ctx, undefined, [first]);
  await ctx.stopServer(a);
  ctx.renewCopies();
  const [b, c] = await Promise.all([ctx.startServer({ priority: 500 }), ctx.startServer({ ownCopy: true, priority: 500 })]);
  await inPart(t('step.06.part.restart'), async () => {
    const WHY_RESTART = t('step.06.restart.why');
    const retry = await ctx.pay(b, { key, body });
    expectReplay(first, retry, WHY_RESTART);
    expectRows(ctx, key, 1, [first, retry], WHY_RESTART);
    expectCharges(ctx, body, 1, [first, retry], WHY_RESTART);
  });
  await inPart(t('step.06.part.shared'), async () => {
    const WHY_SHARED = t('step.06.shared.why');
    const key2 = ctx.freshKey();
    const shared = ctx.data.payment();
    const onB = await ctx.pay(b, { key: key2, body: shared });
    expectStatus(onB, 201, t('check.first201'), WHY_SHARED);
    paymentOf(onB);
    const onC = await ctx.pay(c, { key: key2, body: shared });
    expectReplay(onB, onC, WHY_SHARED);
    expectRows(ctx, key2, 1, [onB, onC], WHY_SHARED);
    expectCharges(ctx, shared, 1, [onB, onC], WHY_SHARED);
  });
  await inPart(t('step.06.part.split'), async () => {
    // One round, sent while the database's write lock is held: every look-up comes before
    // any claim, so a claim that is not atomic across processes charges twice every time.
    // (A look-up after another write is raced on the slow database, slowDatabaseSplit.)
    await raceRound(ctx, [b, c], 1, { lockDatabase: true });
  });
  await inPart(t('step.06.part.inFlight'), () => inFlightElsewhere(ctx, b, c));
  expectNothingBeside(ctx, undefined, ctx.exchanges.slice(-3));
}

/**
 * A retry on another instance while the first request still charges: B pays and the grader
 * holds its charge at the provider's gate once the money moved (chargeUnderWay); the same
 * request then goes to C. The hold lasts until C answered or both servers are still (C's
 * retry at its wait: a poll, a lock), at least IN_FLIGHT_HOLD_MS from when the retry was
 * written (a grader that lagged before it wrote holds no less for it) and at most
 * IN_FLIGHT_STILL_BOUND_MS more; B's request gets that much longer to be answered. C must
 * neither charge nor record the payment again: it waits and replays B's answer, or answers
 * 409; one charge and one ledger row. A claim that only the process that made it trusts
 * (one made elsewhere taken for a crashed server's and claimed again, at once or after less
 * than the hold) charges twice here every time; the split races catch it only when their
 * timing lets C look while B charges (adv9-inflight-by-process passed 06 in 4 of 6 runs,
 * inflight-foreign-lease in 10 of 10, without this part).
 * @throws CheckFailed when B was answered with no charge at the provider's gate (a charge()
 *   that does not report there), or a second charge, a second ledger row or a wrong answer
 *   was seen; Starved when the servers or the grader were kept off a CPU while the charge
 *   was held (C's retry neither answered nor at its wait within the bound, or a pass seen
 *   while C waited for a CPU or the grader could not look: sched.ts starvedWhileHeld; C may
 *   not have looked at the claim yet), or as chargeUnderWay; what was
 *   seen is judged first, a second charge is evidence still
 */
async function inFlightElsewhere(ctx: LiveContext, b: ServerInstance, c: ServerInstance): Promise<void> {
  const req = { key: ctx.freshKey(), body: ctx.data.payment() };
  const usual = ctx.timeouts();
  const owner = await chargeUnderWay(
    ctx,
    b,
    req,
    'moved',
    (answer) =>
      new CheckFailed(t('step.06.inFlight.noCharge', { request: describeRequest(answer), status: String(answer.status ?? t('check.audit.noAnswer')) }), t('step.06.inFlight.noCharge.why'), {
        exchanges: [answer],
      }),
    { ...usual, answerMs: usual.answerMs + IN_FLIGHT_HOLD_MS + IN_FLIGHT_STILL_BOUND_MS },
  );
  let heldStarved: Starved | undefined;
  // Whether the machine let C look at the claim while it was held: a pass seen while it did
  // not says nothing. C's threads only: B's request waits at the gate, whatever the machine does.
  const meter = ctx.starveMeter([c], { lowShare: LOW_SHARE });
  const starvedText = (seen: Starvation) =>
    t('step.06.inFlightStarved', { server: b.label, other: c.label, s: ((IN_FLIGHT_HOLD_MS + IN_FLIGHT_STILL_BOUND_MS) / 1000).toFixed(1), ...starvationFigures(seen) });
  const retry = sendPending(ctx, c, req);
  try {
    await waitUntilStill(ctx, [b, c], { written: retry.written, until: retry.answer, minMs: IN_FLIGHT_HOLD_MS, boundMs: IN_FLIGHT_STILL_BOUND_MS, starved: starvedText });
  } catch (err) {
    if (!(err instanceof Starved)) throw err;
    heldStarved = err;
  } finally {
    owner.hold.release();
    meter.stop();
  }
  const [first, again] = await Promise.all([owner.answer, retry.answer]);
  const why = t('step.06.inFlight.why');
  // A second charge or ledger row is evidence however starved the machine was.
  expectCharges(ctx, req.body, 1, [first, again], why, b);
  expectRows(ctx, req.key, 1, [first, again], why, b);
  if (heldStarved) throw heldStarved;
  expectStatus(first, 201, t('check.first201'), why);
  paymentOf(first);
  if (again.status !== 409) expectReplay(first, again, why);
  const seen = meter.stop();
  if (starvedWhileHeld(seen, IN_FLIGHT_HOLD_MS)) {
    throw new Starved(t('step.06.inFlightPassStarved', { server: b.label, other: c.label, ...starvationFigures(seen) }));
  }
}

/**
 * Instances share only the database (docs/server-contract.md): a server that created
 * anything beside IDEM_DB (LiveContext.createdBeside: a lock file, a cache, a folder of
 * per-key files; sqlite's -wal, -shm and -journal and the statement excepted) keeps state
 * there that the contract does not share between instances, however well it works here.
 * @param database the database (default: the check's own)
 * @throws CheckFailed naming what was created
 */
function expectNothingBeside(ctx: LiveContext, database: CheckDatabase | undefined, exchanges: Exchange[]): void {
  const created = ctx.createdBeside(database);
  if (created.length > 0) {
    throw new CheckFailed(t('step.06.beside', { files: created.map((f) => path.basename(f)).join(', ') }), t('step.06.beside.why'), { exchanges, details: created });
  }
}

/**
 * Step 06: what the server remembers survives a restart and is shared by every instance
 * on the same database: a retry after a restart, or on another instance, replays; a race
 * split over two instances charges once (lab sheet, step 6).
 */
export const step: Step = {
  id: '06',
  slug: 'persist',
  get title() {
    return t('step.06.title');
  },
  file: {
    name: '06-persist.txt',
    check(text, notes) {
      const paste = parsePaste(text);
      const paid = paste.responses.filter((r) => r.status === 201 && paymentId(r) !== undefined);
      const byId = new Map<number, PastedResponse[]>();
      for (const r of paid) byId.set(paymentId(r) as number, [...(byId.get(paymentId(r) as number) ?? []), r]);
      const repeated = [...byId.values()].find((rs) => rs.length >= 2);
      expect(
        repeated !== undefined,
        t('step.06.file.noRepeat'),
        t('step.06.file.noRepeat.why'),
        { details: paste.responses.map(describeResponse) },
      );
      const [first, ...later] = repeated;
      const same = later.find((r) => r.body?.charged_at === first.body?.charged_at);
      expect(
        same !== undefined,
        t('step.06.file.rebuilt', { id: String(paymentId(first)) }),
        t('step.06.file.rebuilt.why'),
        { details: repeated.map(describeResponse) },
      );
      const between = paste.lines.slice(first.line, same.line - 1);
      if (!between.some((line) => RESTART.test(line))) {
        notes.warn(t('step.06.file.showRestart'));
      }
      return t('step.06.file.pass', { id: String(paymentId(first)), first: first.line, second: same.line });
    },
  },
  cost: 4,
  async live(ctx) {
    // A's part takes about three seconds once it is up: a payment, the restart, the other instance, a race, a retry while a charge is held.
    const a = ctx.startServer({ priority: 1000 });
    // Beside everything below (D is served before A in the queue of starts, E once D is
    // up): a split race on instances D and E of a database of their own (the restart leaves
    // the pods of another database running). When A could not start either, A's failure is
    // said first.
    const slowSplit = inPart(t('step.06.part.slowSplit', { ms: SPLIT_DB_MS }), () => slowDatabaseSplit(ctx)).then(
      () => undefined,
      (err: unknown) => ({ err }),
    );
    let failure: unknown;
    try {
      await restartAndShare(ctx, a);
    } catch (err) {
      failure = err;
    }
    // Awaited whatever happened, so none of its servers comes up after the step has ended.
    const split = await slowSplit;
    // Both failed: the first is said, the other named beside it (it ran on D and E meanwhile);
    // a server that could not start is said as such alone. A failure seen on D and E is said
    // before an inconclusive part on A's side: what was observed is evidence still.
    if (failure instanceof CheckFailed && !(failure instanceof ServerStartFailed) && split?.err instanceof CheckFailed) {
      throw withNote(failure, t('check.alsoFailed', { message: split.err.message }));
    }
    if (failure !== undefined && !(failure instanceof CheckFailed) && split?.err instanceof CheckFailed) throw split.err;
    if (failure !== undefined) throw failure;
    if (split) throw split.err;
    return t('step.06.pass', { size: RACE_SIZE });
  },
  get hints() {
    return [t('step.06.hint.1'), t('step.06.hint.2'), t('step.06.hint.3')];
  },
};
