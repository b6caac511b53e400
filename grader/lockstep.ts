/**
 * Lockstep: the grader lets simultaneous requests' database statements run in waves, so
 * that an interleaving a design is wrong in happens every run, not when the scheduler
 * helps. While a lockstep runs, every statement a server runs outside a transaction waits
 * at its gate (gate.ts, IDEM_DB_GATE); a wave lets every waiting statement run at once,
 * and the next wave comes only when nothing else can happen first:
 * - every statement let run has reported that it ran (none is still executing, or waiting
 *   for sqlite's lock), and
 * - none of the servers' threads can run (sched.ts: no thread in state R or D), seen twice
 *   in a row, a poll apart.
 * So ten requests' look-ups all run before any of their claims (a check-then-insert behind
 * an expiry DELETE charges ten times), and four inserts all run before any of their
 * `SELECT MAX(payment_id)` (all four read the same id). A correct design is not slowed
 * by waiting: the next wave goes as soon as nothing can run. When a let-run statement waits
 * on something the grader holds (a charge at the provider's gate, sqlite's lock held by
 * the grader) and nothing can run for QUIET_MS, the wave goes anyway; and a wave never
 * waits more than BOUND_MS (a server that spins). Those bounds never decide a verdict:
 * they only make an interleaving less forced. A wave that BOUND_MS let go while the
 * machine kept a server's thread off a CPU (below a tenth of one, and its turns long in
 * coming: sched.ts LOW_SHARE, LONG_TURN_WAIT_MS; a server's own busy threads sharing the
 * CPUs, or a poll loop's, are not starved), or the grader lagged, is
 * counted in `starvedWaves`: the round forced less than it meant to, not by the server's
 * doing, and a caller that would pass the round reports it inconclusive instead.
 * Servers that do not speak the gate report no statement: lockstep does nothing to them.
 */
import type { GateStatement, ProviderGate, StatementHold } from './gate.js';
import { LOW_SHARE, SchedWatch, StarveMeter, starvedFor, type SchedTarget } from './sched.js';

/** How often the servers' threads are looked at while statements wait, in ms. */
export const POLL_MS = 2;
/** How long nothing may run while a let-run statement has not reported before the next wave goes anyway, in ms. */
export const QUIET_MS = 60;
/**
 * How many waves a lockstep makes at most; then it holds no more and the servers run
 * freely until it stops (their statements told `go`, so IDEM_DB_MS is not waited). The
 * interleavings it forces (look-ups before claims, inserts before their read-backs) are in
 * a round's first waves; a design that lets one request at a time through (a file lock)
 * would otherwise pay a wave for every statement of every request, on a busy machine
 * several milliseconds each.
 */
export const MAX_WAVES = 40;
/** The longest a wave waits, in ms: a server that keeps a thread busy does not stop the round. */
export const BOUND_MS = 2000;
/** When a wave's starvation meter first looks, in ms after the wave began to wait: far below the quarter of BOUND_MS that counts as starved. */
const METER_DELAY_MS = 100;

/** A running lockstep: its waves so far, stopped by stop(). */
export interface Lockstep {
  /** How many waves went, and how many statements each let run, in order. */
  readonly waves: number[];
  /**
   * How many waves BOUND_MS let go while the servers were starved (waited for a CPU a
   * quarter of BOUND_MS or more, or the grader lagged as long): each forced less than it
   * meant to, and not by the server's doing.
   */
  readonly starvedWaves: number;
  /** The round's requests are all written: from now on a wave may go (before, only after BOUND_MS). */
  arm(): void;
  /** Lets every waiting statement run and holds no more; the servers run freely again. Idempotent. */
  stop(): void;
}

/** One server in a lockstep: its gate and where to find its processes. */
export interface LockstepServer {
  gate: ProviderGate;
  target: SchedTarget;
}

/**
 * Starts a lockstep over `servers` (one or several instances on one database): from now on
 * their statements outside a transaction wait for waves (see the module's comment).
 * The first wave waits for arm(): the caller arms it once every request of the round is
 * written (the kernel then has them; a server thread that reads one can run), so that a
 * grader slow to send on a busy machine does not split the round.
 * @returns the running lockstep; stop it when the round's requests are all answered
 */
export function lockstep(servers: LockstepServer[]): Lockstep {
  const holds: StatementHold[] = servers.map((s) => s.gate.holdStatements());
  const watch = new SchedWatch(servers.map((s) => s.target));
  const waves: number[] = [];
  let stopped = false;
  let armed = false;
  let timer: NodeJS.Timeout | undefined;
  let idleSince: number | undefined;
  let stillSince: number | undefined;
  let waitingSince: number | undefined;
  let lastRefresh = performance.now();
  const released: GateStatement[] = [];
  // Measures starvation over each wave's wait, from its first waiting statement to its release.
  let meter: StarveMeter | undefined;
  let starvedWaves = 0;
  const endWait = (byBound: boolean) => {
    const seen = meter?.stop();
    meter = undefined;
    if (byBound && seen !== undefined && starvedFor(seen, BOUND_MS)) starvedWaves++;
  };

  // Reports a server sent that the grader's event loop has not read yet are not in the
  // gates' lists: a wave decided in a timer goes only after one more turn of the loop (its
  // I/O phase reads them) in which no report came.
  let reports = 0;
  let deciding = false;
  const release = (byBound = false) => {
    if (deciding) return;
    deciding = true;
    const seen = reports;
    setImmediate(() => {
      deciding = false;
      if (stopped) return;
      if (reports !== seen) return schedule();
      go(byBound);
    });
  };
  const go = (byBound: boolean) => {
    const n = holds.reduce((sum, h) => sum + h.releaseWave(), 0);
    if (n > 0) waves.push(n);
    if (waves.length >= MAX_WAVES) for (const h of holds) h.passThrough();
    idleSince = stillSince = waitingSince = undefined;
    endWait(byBound && n > 0);
  };

  const tick = () => {
    timer = undefined;
    if (stopped) return;
    const waiting = holds.flatMap((h) => h.waiting());
    if (waiting.length === 0) {
      idleSince = stillSince = waitingSince = undefined;
      endWait(false);
      return;
    }
    const now = performance.now();
    if (waitingSince === undefined) {
      waitingSince = now;
      // Only a thread kept off a CPU counts: a server's own busy thread is what BOUND_MS is for.
      // The first look comes METER_DELAY_MS in: a wave that goes sooner (most) costs one timer.
      meter = new StarveMeter(watch, { lowShare: LOW_SHARE, lookUp: false, delayMs: METER_DELAY_MS });
    }
    if (now - lastRefresh > 200) {
      watch.refresh();
      lastRefresh = now;
    }
    for (const gate of servers.map((s) => s.gate)) for (const st of gate.statements) if (st.released && !st.ran && !released.includes(st)) released.push(st);
    for (let i = released.length - 1; i >= 0; i--) if (released[i].ran) released.splice(i, 1);
    const runnable = watch.runnable();
    // Where /proc cannot tell, a statement that ran without a next one waiting for QUIET_MS counts as still.
    const still = runnable === 0 || (runnable === undefined && released.length === 0);
    if (still) idleSince ??= now;
    else idleSince = undefined;
    const settled = released.length === 0;
    const gathered = armed;
    if (still && settled && gathered) {
      // Seen still twice in a row, a poll apart: a thread between two system calls is not taken for asleep.
      if (stillSince !== undefined && now - stillSince >= POLL_MS) return release();
      stillSince ??= now;
    } else {
      stillSince = undefined;
    }
    if (now - waitingSince >= BOUND_MS) return release(true);
    if (gathered && idleSince !== undefined && now - idleSince >= QUIET_MS) return release();
    schedule();
  };
  const schedule = () => {
    if (!stopped && !deciding && timer === undefined) timer = setTimeout(tick, POLL_MS);
  };
  const unsubscribe = servers.map((s) =>
    s.gate.onReport(() => {
      reports++;
      schedule();
    }),
  );
  return {
    waves,
    get starvedWaves() {
      return starvedWaves;
    },
    arm: () => {
      armed = true;
      // What was seen before the requests were written says nothing about them.
      idleSince = stillSince = undefined;
      schedule();
    },
    stop: () => {
      if (stopped) return;
      stopped = true;
      if (timer) clearTimeout(timer);
      endWait(false);
      for (const off of unsubscribe) off();
      for (const h of holds) h.release();
    },
  };
}
