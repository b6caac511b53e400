import { setTimeout as delay } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { CheckFailed } from './failure.js';
import { t } from '../i18n/index.js';
import { responseJson, type PayRequest } from './http.js';
import { describeCharge, expectCharges, expectRows, starvedExchange } from './expect-http.js';
import { rowsForKey } from './ledger.js';
import type { LiveContext } from './context.js';
import type { ServerInstance } from './server.js';
import type { Exchange } from './types.js';
import type { TestData } from './seed.js';
import { BOUND_MS as LOCKSTEP_BOUND_MS, type Lockstep } from './lockstep.js';
import { LOW_SHARE, starvationFigures, starvedFor, starvedWhileHeld, type Starvation } from './sched.js';
import { Starved } from './gate.js';

/** Requests per race round: the lab sheet's ten simultaneous requests. */
export const RACE_SIZE = 10;

/** How long a locked round holds the database's write lock at least while its requests arrive, in ms. */
export const LOCK_HOLD_MS = 250;

/**
 * The longest a locked round keeps the write lock past LOCK_HOLD_MS, in ms, waiting for
 * every request to be written and the servers to be still (no thread of theirs can run:
 * each request is at its wait for the lock, or answered). It never decides: a server that
 * keeps a CPU busy while it waits gets the lock let go after it.
 */
export const LOCK_STILL_BOUND_MS = 3000;

/** What a race round returns: its key and payment body, and the extra requests' exchanges, in order. */
export interface RaceResult {
  key: string;
  body: { user: string; amount: number };
  extra: Exchange[];
}

/** How a race round is run. */
export interface RaceOptions extends Omit<Forcing, 'holds'> {
  /** What the round is called in its verdicts; default `Round N`. */
  name?: string;
  /** The round's key and payment, when the caller must know them before the round ends; default: fresh ones. */
  payment?: { key: string; body: { user: string; amount: number } };
  /** The stream the fresh key and payment come from; default the check's (ctx.data). A round run beside other parts of its step takes a fork, so that a seed replays it. */
  data?: TestData;
}

/** How sendForced forces simultaneous requests into the interleaving a design is wrong in. */
export interface Forcing {
  /**
   * Hold the database's write lock (the first server's database) for LOCK_HOLD_MS while the
   * requests arrive, so every look-up that comes before the server's first write happens
   * before any claim: a check-then-insert whose look-up is its first statement charges
   * more than once every time instead of now and then.
   */
  lockDatabase?: boolean;
  /**
   * Run the requests in lockstep (lockstep.ts): the servers' statements outside a
   * transaction go in waves, each once nothing else can run, so that every request's
   * look-up runs before any claim (and every insert before any read-back), whatever the
   * machine's load; the first wave goes once every request is written. Only servers
   * started with `dbGate` that speak the database's gate are held; others run as without it.
   */
  lockstep?: boolean;
  /** Holds of the caller's (a charge held at the provider's gate, say), released once every answer is in (or the sending failed), before the lockstep stops. */
  holds?: ReadonlyArray<{ release(): void }>;
  /** Time limits of the requests; default ctx.timeouts(). */
  timeouts?: { connectMs: number; answerMs: number };
}

/**
 * Sends `requests` all at once (ctx.paySimultaneously: request i to servers[i % n]) while
 * the grader forces the interleaving `forcing` names: the database's write lock held from
 * before the first request until all are written and wait (holdUntilStill), the statements
 * in lockstep armed once all are written. Whatever happens (even when the lock cannot be taken), the lock is released,
 * then `holds`, then the lockstep stopped.
 * @returns the exchanges, in request order, and the lockstep's waves (statements let run
 *   in each, in order) and how many of them its bound let go while the servers were starved
 *   (Lockstep.starvedWaves) when it ran in lockstep
 * @throws Error when the write lock cannot be taken (see LiveContext.holdWriteLock); Starved
 *   as holdUntilStill
 */
export async function sendForced(
  ctx: LiveContext,
  servers: ServerInstance[],
  requests: PayRequest[],
  forcing: Forcing = {},
): Promise<{ exchanges: Exchange[]; waves?: readonly number[]; starvedWaves?: number }> {
  let release: (() => void) | undefined;
  let lock: Lockstep | undefined;
  try {
    // The servers share one database: the first one's.
    release = forcing.lockDatabase ? ctx.holdWriteLock(servers[0]) : undefined;
    lock = forcing.lockstep ? ctx.lockstep(servers) : undefined;
    const armed = lock;
    let allWritten!: () => void;
    const written = new Promise<void>((resolve) => (allWritten = resolve));
    const onWritten = armed || release ? () => (armed?.arm(), allWritten()) : undefined;
    const answers = ctx.paySimultaneously(servers, requests, forcing.timeouts ?? ctx.timeouts(), onWritten);
    if (release) {
      // Kept until every request is written and waits (or the bound), at least LOCK_HOLD_MS:
      // a lock let go on a timer while the requests were still on their way forced nothing.
      try {
        await holdUntilStill(ctx, servers, written);
      } finally {
        release();
        release = undefined;
      }
    }
    return { exchanges: await answers, waves: lock?.waves, starvedWaves: lock?.starvedWaves };
  } finally {
    release?.();
    for (const hold of forcing.holds ?? []) hold.release();
    lock?.stop();
  }
}

/**
 * Waits, while the grader holds the database's write lock, until the round's requests are
 * all written and the servers are still, at least LOCK_HOLD_MS and at most
 * LOCK_STILL_BOUND_MS past it (waitUntilStill).
 * @throws Starved (check.race.lockStarved) when the bound ran out while the machine kept the
 *   servers off a CPU (or the grader lagged): the requests may not have reached their wait,
 *   nothing was forced
 */
async function holdUntilStill(ctx: LiveContext, servers: ServerInstance[], written: Promise<void>): Promise<void> {
  await waitUntilStill(ctx, servers, {
    written,
    minMs: LOCK_HOLD_MS,
    boundMs: LOCK_STILL_BOUND_MS,
    starved: (seen) => t('check.race.lockStarved', { s: (LOCK_HOLD_MS + LOCK_STILL_BOUND_MS) / 1000, ...starvationFigures(seen) }),
  });
}

/** What waitUntilStill waits for, and how long. */
export interface StillWait {
  /** Settles once every request the caller sent is written (the kernel has them); default: already. */
  written?: Promise<unknown>;
  /** Once this settles (every answer in, say), the wait ends at once. */
  until?: Promise<unknown>;
  /**
   * How long to wait at least, in ms: from when `written` settled (a grader that lagged
   * before its requests were written holds no less for it), or from the call without it.
   */
  minMs: number;
  /** How long to wait at most past minMs, in ms. */
  boundMs: number;
  /**
   * When the wait ends at the latest, performance.now() ms, however much of minMs and
   * boundMs is left (12's live claim, held no longer than its youth). A wait cut before
   * minMs ran out says nothing of starvation: the caller judges what so short a hold saw.
   */
  endBy?: number;
  /** The Starved message when the bound ran out while the servers were starved. */
  starved: (seen: Starvation) => string;
}

/**
 * Waits while the grader holds something the servers' requests wait for (the database's
 * write lock, a charge at the provider's gate) until those requests are all written and the
 * servers are still: no thread can run at two looks in a row, 25 ms apart (each request is
 * at its wait, or answered), but for threads that could run before the requests were
 * written and at every look since (a timer's busy sweep, a background job: they handle none
 * of them). At least `minMs` from when the requests were written (StillWait.minMs), at most
 * `boundMs` past it; ends at once when `until` settles. Where /proc cannot tell, `minMs`
 * from when they were written. Never past `endBy` when given. A bound run out on a
 * server that kept a thread busy (its own doing) just ends the wait.
 * @throws Starved with `starved(seen)` when the bound ran out while the machine kept the
 *   servers off a CPU (or the grader lagged: a second or more once the requests were
 *   written, sched.ts starvedWhileHeld; a quarter of the bound without `written`): the
 *   requests may not have reached their wait
 */
export async function waitUntilStill(ctx: LiveContext, servers: ServerInstance[], wait: StillWait): Promise<void> {
  let start = performance.now();
  // Only a thread kept off a CPU counts: a server that spins while it waits runs the bound out by its own doing.
  const meter = ctx.starveMeter(servers, { lowShare: LOW_SHARE });
  const watch = ctx.schedWatch(servers);
  let busyBefore = watch.runnableThreads();
  let ended = false;
  const stop = new AbortController();
  const end = () => {
    ended = true;
    stop.abort();
  };
  wait.until?.then(end, end);
  const pause = (ms: number) => delay(ms, undefined, { signal: stop.signal }).catch(() => undefined);
  try {
    // Every timer is cleared once the wait ends (stop, in finally): a check leaves no timer behind.
    // When a wait counted from `from` ends at the latest: its bound, or endBy.
    const endFrom = (from: number) => Math.min(from + wait.minMs + wait.boundMs, wait.endBy ?? Infinity);
    if (wait.written) {
      // Counted from the write only when it came: never written within the whole wait, the bound has run out.
      const written = await Promise.race([wait.written.then(() => true), pause(Math.max(0, endFrom(start) - start)).then(() => false)]);
      if (written) start = performance.now();
    }
    const until = endFrom(start);
    const minUntil = Math.min(start + wait.minMs, until);
    await pause(Math.max(0, minUntil - performance.now()));
    let still = 0;
    while (performance.now() < until) {
      if (ended) return;
      const runnable = watch.runnableThreads();
      if (runnable === undefined) return;
      busyBefore = new Set([...(busyBefore ?? [])].filter((id) => runnable.has(id)));
      const others = [...runnable].filter((id) => !busyBefore!.has(id)).length;
      still = others === 0 ? still + 1 : 0;
      if (still >= 2) return;
      await pause(25);
    }
    if (ended) return;
    const seen = meter.stop();
    // A bound of nothing (the caller had no time left to wait, or endBy cut it) says nothing
    // either way. Once the requests were written, a lag of the grader's only made the wait longer.
    const boundMs = until - minUntil;
    const starved = wait.written ? starvedWhileHeld(seen, boundMs) : starvedFor(seen, boundMs);
    if (boundMs > 0 && starved) throw new Starved(wait.starved(seen));
  } finally {
    stop.abort();
    meter.stop();
  }
}

/**
 * A race round that passed its own rules while its lockstep forced less than it meant to (a
 * wave let go by the bound while the servers were starved, Lockstep.starvedWaves): Starved,
 * with the round's result, so that the caller first judges what else its requests showed
 * (the extra requests' answers, what the servers wrote): a failure seen is evidence still.
 */
export class StarvedRound extends Starved {
  constructor(
    message: string,
    readonly result: RaceResult,
  ) {
    super(message);
    this.name = 'StarvedRound';
  }
}


/**
 * Awaits a race round; when it ends StarvedRound, runs `judge` on its result first (it
 * throws what the caller's own rules see there: a failure observed is evidence, not luck),
 * then throws the StarvedRound.
 * @throws what `judge` throws, else what the round throws
 */
export async function judgedBeforeStarved(round: Promise<RaceResult>, judge: (result: RaceResult) => void): Promise<RaceResult> {
  try {
    return await round;
  } catch (err) {
    if (err instanceof StarvedRound) judge(err.result);
    throw err;
  }
}

/**
 * A race round's failure in which requests got no answer within their time limit: a bound
 * ran out, so a step that saw another of its parts fail for a cause it observed (a charge
 * held back at the provider's gate) says that one first.
 */
export class Unanswered extends CheckFailed {}

/** `split over servers B and C` or `on one server`. */
export function where(servers: ServerInstance[]): string {
  return servers.length > 1 ? t('check.race.splitOver', { servers: servers.map((s) => s.label).join(t('check.race.and')) }) : t('check.race.oneServer');
}

/**
 * One race round: RACE_SIZE requests with one fresh key and a payment of their own, sent
 * all at once, spread over `servers` in turn, together with `extra` requests (sent in the
 * same instant, judged by the caller). Passes when the ledger holds one row for the key,
 * charge() ran once for its payment, every answer is the same 201 or a 409 for a request
 * still in flight, and at least one is a 201. A round that charged more than once says so
 * before anything else: that is the bug.
 * @returns the key and the payment body used, and the extra requests' exchanges, in order
 * @throws CheckFailed naming the first broken rule, with the round's exchanges; StarvedRound
 *   (with that result) when it passed but a lockstep wave was let go starved
 */
export async function raceRound(
  ctx: LiveContext,
  servers: ServerInstance[],
  round: number | string,
  options: RaceOptions = {},
  extra: PayRequest[] = [],
): Promise<RaceResult> {
  const data = options.data ?? ctx.data;
  const key = options.payment?.key ?? data.key();
  const body = options.payment?.body ?? data.payment();
  const name = options.name ?? t('check.race.round', { round });
  const requests = [...Array.from({ length: RACE_SIZE }, () => ({ key, body })), ...extra];
  const { exchanges: all, waves, starvedWaves = 0 } = await sendForced(ctx, servers, requests, options);
  const exchanges = all.slice(0, RACE_SIZE);
  const at = where(servers);
  const rows = rowsForKey(ctx.ledger(servers[0]), key);
  const charges = ctx.chargesFor(body, servers[0]);
  // What the grader did to force the interleaving and what the provider then did, named in each failure of the round.
  const seenFacts = { key: JSON.stringify(key), charges: charges.length };
  const seen =
    (options.lockDatabase ? t('check.race.seen.locked', { ...seenFacts, ms: LOCK_HOLD_MS }) : '') +
    (waves ? t('check.race.seen.waves', { ...seenFacts, waves: waves.length, statements: waves.reduce((sum, n) => sum + n, 0) }) : '');
  if (rows.length > 1 || charges.length > 1) {
    throw new CheckFailed(
      t('check.race.doubled', { name, charges: charges.length, rows: rows.length, size: RACE_SIZE, where: at }) + seen,
      doubledWhy(exchanges, charges.length),
      { exchanges, ledger: rows, details: charges.map(describeCharge) },
    );
  }
  const unanswered = exchanges.filter((e) => e.error !== undefined);
  // Unanswered only because the machine starved the server or the grader: unclear, not its failure.
  if (unanswered.length > 0 && unanswered.every((e) => e.starved)) throw starvedExchange(unanswered[0]);
  if (unanswered.length > 0) {
    throw new Unanswered(
      t('check.race.unanswered', { name, count: unanswered.length, size: RACE_SIZE, where: at, error: String(unanswered[0].error) }) + seen,
      t('check.race.unanswered.why'),
      { exchanges: unanswered },
    );
  }
  const broken = exchanges.filter((e) => e.status !== 201 && e.status !== 409);
  if (broken.length > 0) {
    throw new CheckFailed(
      t('check.race.broken', { name, size: RACE_SIZE, where: at, count: broken.length, status: String(broken[0].status), ms: broken[0].ms }) + seen,
      t('check.race.broken.why'),
      { exchanges: broken },
    );
  }
  const successes = exchanges.filter((e) => e.status === 201);
  if (successes.length === 0) {
    throw new CheckFailed(t('check.race.noSuccess', { name, size: RACE_SIZE, where: at }) + seen, t('check.race.noSuccess.why'), { exchanges });
  }
  const firstBody = responseJson(successes[0]);
  const different = successes.filter((e) => !isDeepStrictEqual(responseJson(e), firstBody));
  if (different.length > 0) {
    throw new CheckFailed(t('check.race.different', { name, count: successes.length, where: at }) + seen, t('check.race.different.why'), {
      exchanges: [successes[0], ...different],
    });
  }
  const why = t('check.race.rows.why', { size: RACE_SIZE });
  expectRows(ctx, key, 1, exchanges, why, servers[0]);
  expectCharges(ctx, body, 1, exchanges, why, servers[0]);
  // Passed: that proves something only when the lockstep forced its waves; one let go by
  // its bound while the machine starved the servers forced less, by luck, not by design.
  const result = { key, body, extra: all.slice(RACE_SIZE) };
  if (starvedWaves > 0) throw new StarvedRound(t('check.race.wavesStarved', { name, count: starvedWaves, s: LOCKSTEP_BOUND_MS / 1000 }), result);
  return result;
}

/**
 * Why a race that charged more than once matters, by what its answers were: more charges
 * than answers 201 means a request that was refused (409, or another status) still
 * reached charge(), a refusal that falls through; otherwise every charged request saw "no
 * key yet" (a check-then-insert).
 * @param charges how many charges the provider made for the raced body
 */
export function doubledWhy(exchanges: Exchange[], charges: number): string {
  const paid = exchanges.filter((e) => e.status === 201).length;
  const refused = exchanges.find((e) => e.status !== undefined && e.status !== 201);
  if (refused && charges > paid) return t('check.race.refusedCharged.why', { status: refused.status!, charges, paid });
  return t('check.race.rows.why', { size: RACE_SIZE });
}
