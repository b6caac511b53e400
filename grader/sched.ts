/**
 * What the scheduler did with a server's processes, read from /proc (Linux only; elsewhere
 * every answer is "unknown", and callers fall back to what they did before):
 * - whether any of its threads can run now (state R, running or waiting for a CPU, or D,
 *   in the kernel on a disk): while none can, nothing the server does will happen until
 *   something outside it (the grader, a timer, a lock holder) moves; lockstep.ts releases
 *   a wave of statements only then;
 * - how long its threads waited for a CPU and ran (/proc/PID/task/TID/schedstat: ns on
 *   the CPU, ns waiting on a run queue): when a bound runs out while the server was kept
 *   off the CPU, the result says nothing about the server (inconclusive), never its failure.
 * The processes are found by process group (the server's first process leads it) and by
 * the environment the grader gave the instance (a sandbox's processes lead groups of their
 * own): the same rule as the lifecycle's (server.ts processesOf).
 */
import fs from 'node:fs';
import { Starved, STARVED_LAG_MS, type Inconclusive } from './gate.js';
import { t } from '../i18n/index.js';

/** Where to find a server's processes: its process group and the PORT and IDEM_DB it was given. */
export interface SchedTarget {
  pid: number;
  port: number;
  dbPath: string;
}

/** The host pids of a server's live processes (its group, and what carries its PORT and IDEM_DB). Never throws; [] when /proc cannot be read. */
export function serverPids(target: SchedTarget): number[] {
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  const wanted = [`PORT=${target.port}`, `IDEM_DB=${target.dbPath}`];
  const found: number[] = [];
  for (const entry of entries) {
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const text = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z' || fields[0] === 'X') continue;
      if (Number(fields[2]) === target.pid) {
        found.push(pid);
        continue;
      }
      // Only a process whose environment this user may read: the grader's own children.
      const env = fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (wanted.every((w) => env.includes(w))) found.push(pid);
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

/** The thread ids of a process, or [] when it is gone. */
function threadsOf(pid: number): number[] {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).filter((e) => /^\d+$/.test(e)).map(Number);
  } catch {
    return [];
  }
}

/**
 * A watch on one or more servers' threads: which can run now, and their CPU and run-queue
 * time. The pids are looked up when made and again by refresh() (a server may start
 * processes later); the thread lists are read on every question (threads come and go per
 * request).
 */
export class SchedWatch {
  private pids: number[] = [];
  private readonly targets: SchedTarget[];
  /** False where /proc cannot be read (not Linux): then runnable() is always undefined. */
  readonly available: boolean;

  constructor(targets: SchedTarget[]) {
    this.targets = targets;
    this.available = fs.existsSync('/proc/self/task');
    this.refresh();
  }

  /** The pids found by the last lookup (the constructor's or refresh()'s). */
  pidList(): readonly number[] {
    return this.pids;
  }

  /** Looks the servers' processes up again. */
  refresh(): void {
    if (this.available) this.pids = [...new Set(this.targets.flatMap(serverPids))];
  }

  /**
   * How many of the servers' threads can run now (state R or D in /proc/PID/task/TID/stat),
   * or undefined when it cannot be told (no /proc, or no process found).
   */
  runnable(): number | undefined {
    return this.runnableThreads()?.size;
  }

  /**
   * Which of the servers' threads can run now (state R or D), as `pid/tid`, or undefined
   * when it cannot be told (no /proc, or no process found).
   */
  runnableThreads(): Set<string> | undefined {
    if (!this.available || this.pids.length === 0) return undefined;
    const found = new Set<string>();
    for (const pid of this.pids) {
      for (const tid of threadsOf(pid)) {
        try {
          const text = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
          const state = text.charAt(text.lastIndexOf(')') + 2);
          if (state === 'R' || state === 'D') found.add(`${pid}/${tid}`);
        } catch {
          // the thread ended
        }
      }
    }
    return found;
  }

  /**
   * Each live thread's time so far, in ms, by `pid/tid`: on a CPU, and waiting on a run
   * queue for one (runnable but not run: the machine was busy). Undefined without /proc
   * schedstat.
   */
  times(): Map<string, { cpuMs: number; waitMs: number }> | undefined {
    if (!this.available || this.pids.length === 0) return undefined;
    const out = new Map<string, { cpuMs: number; waitMs: number }>();
    for (const pid of this.pids) {
      for (const tid of threadsOf(pid)) {
        const stat = schedstatOf(pid, tid);
        if (stat) out.set(`${pid}/${tid}`, { cpuMs: stat.cpuMs, waitMs: stat.waitMs });
      }
    }
    return out.size > 0 ? out : undefined;
  }
}

/**
 * How long the machine kept a server off the CPU during an interval: started by
 * starveWatch, read by waitedMs() (the growth of its live threads' run-queue time since the
 * start, summed over threads, in ms; a thread that began meanwhile counts whole; 0 when it
 * cannot be told). A thread that ended meanwhile is not counted: the figure is a floor.
 */
export function starveWatch(watch: SchedWatch): { waitedMs(): number } {
  const start = watch.times() ?? new Map<string, { cpuMs: number; waitMs: number }>();
  return {
    waitedMs: () => {
      watch.refresh();
      let waited = 0;
      for (const [id, now] of watch.times() ?? []) waited += Math.max(0, now.waitMs - (start.get(id)?.waitMs ?? 0));
      return waited;
    },
  };
}

/**
 * The share of a CPU below which a runnable thread counts as kept off one, for a bound that
 * a server's own busy thread may also run out (StarveMeter's lowShare): a tenth. A thread
 * that spins beside another of its server's on two cores gets a third or more; a machine
 * with four busy loops on two cores still gives each thread about a quarter; a cgroup that
 * allows 1 ms a second, or a machine far past its cores, gives less.
 */
export const LOW_SHARE = 0.1;

/**
 * How often a StarveMeter that counts only threads kept below LOW_SHARE looks, in ms: long
 * enough that a thread given its fair share of a loaded machine is seen to run between two
 * looks. The kernel may leave a runnable thread waiting a whole scheduling period (24 ms by
 * default) before its turn: looked at every 25 ms, a thread with a quarter of a CPU (four busy
 * loops, each in a session of its own, and two graded servers on two cores) was often seen
 * to get nothing, and 06's pass guard took a correct server for starved.
 */
export const LOW_SHARE_EVERY_MS = 100;

/**
 * The wait for a CPU per turn on one, on average, in ms, from which a thread that had turns
 * between two looks of a lowShare StarveMeter still counts as kept off a CPU (its run-queue
 * time grown over its turns taken, /proc schedstat). A thread that polls (wakes every 20 ms,
 * runs a millisecond, sleeps) or yields can be seen runnable at two looks in a row with
 * little CPU between them while it got every turn it asked for within a few ms: under four
 * busy loops in sessions of their own on two cores, the reference's wait for a claim in
 * flight had five turns between two looks 105 ms apart, 1.2 ms of wait each, and 06's pass
 * guard took it for starved. A thread that shares its CPU with n others waits about n turns
 * of theirs (a few ms each: the kernel's base slice is 0.75 ms times 1 + log2 of the CPUs)
 * and gets a share of 1 / (n + 1): at 15 ms, a share of about a tenth (LOW_SHARE), as the
 * share rule. A thread throttled by a cgroup's quota (1 ms a second; 5 ms every 100 ms)
 * waits most of the quota's period for each first turn in it.
 */
export const LONG_TURN_WAIT_MS = 15;

/** What a StarveMeter saw while a bound ran: how long the server was kept off a CPU, and the grader's own worst event-loop delay, both in ms. */
export interface Starvation {
  /**
   * How long the server's threads could run but did not, in ms, summed over threads: the
   * larger of what the kernel's run-queue time says (/proc schedstat, counted only once a
   * waiting thread runs again) and what samples say (a thread seen runnable, state R, at two
   * samples in a row whose CPU time grew by less than the time between them: throttled or
   * queued, not yet run; with lowShare, only under that share and with no turn on a CPU or
   * turns that waited LONG_TURN_WAIT_MS on average, and no run-queue sum). A thread that sleeps (on a lock, a socket, a timer) or is stopped
   * (state T: SIGSTOP, a debugger) waits for no CPU: a stopped server is its own doing.
   */
  serverWaitMs: number;
  /** The largest lateness of the meter's own timer, in ms: the grader's event loop was that long unable to look. */
  graderLagMs: number;
}

/** What a starvation message says of `seen` ({waited} and {lag} of the *Starved texts): the server's wait for a CPU and the grader's lag, in whole ms. */
export function starvationFigures(seen: Starvation): { waited: number; lag: number } {
  return { waited: Math.round(seen.serverWaitMs), lag: Math.round(seen.graderLagMs) };
}

/**
 * Whether a bound of `boundMs` ms that ran out says nothing about the server: the server
 * waited for a CPU a quarter of the bound or more, or the grader's own event loop lagged
 * that long (at most STARVED_LAG_MS, gate.ts's figure, 1 s). A server that sleeps, hangs on a
 * lock or is stopped is not starved however long it takes: its bound is its failure.
 */
export function starvedFor(seen: Starvation, boundMs: number): boolean {
  const quarter = boundMs / 4;
  return seen.serverWaitMs >= quarter || seen.graderLagMs >= Math.min(quarter, 1000);
}

/**
 * Whether a hold meant to give a server `holdMs` ms with a request in hand (counted from when
 * the request was written: waitUntilStill's `written`) may have given it less: its threads
 * waited for a CPU a quarter of the hold or more, or the grader's own event loop lagged
 * STARVED_LAG_MS (1 s) or more (its meter could not look). Unlike starvedFor, a shorter lag
 * of the grader does not count: once the request is written, it only makes the hold longer.
 * For a pass seen while a hold ran (06's retry on another instance), and a wait's bound run
 * out after its requests were written (waitUntilStill); other bounds are starvedFor's.
 */
export function starvedWhileHeld(seen: Starvation, holdMs: number): boolean {
  return seen.serverWaitMs >= holdMs / 4 || seen.graderLagMs >= STARVED_LAG_MS;
}

/**
 * The Starved a StarveMeter's figures give (`seen`, in ms): said as the grader's own lag
 * (check.starved) when that was the larger, else as the server's wait for a CPU
 * (check.serverStarved). For a bound starvedFor(seen, bound) found starved.
 */
export function starvedError(seen: Starvation): Starved {
  return seen.graderLagMs >= seen.serverWaitMs ? new Starved(t('check.starved', { ms: Math.round(seen.graderLagMs) })) : new Starved(t('check.serverStarved', { ms: Math.round(seen.serverWaitMs) }));
}

/**
 * Whether a wait that ran long says more about the machine than the server: Inconclusive
 * (gate.ts Starved, check.starved) when the grader's own event loop lagged STARVED_LAG_MS or
 * more, or (check.serverStarved) when the server's threads waited `queueMs` ms or more in all
 * for a CPU (`starved`: starveWatch's /proc schedstat sum; a server blocked on a lock sleeps
 * and waits for none, one the machine starved does); else undefined. For a wait with a
 * threshold of its own (steps 05 and 12); starvedFor judges a StarveMeter's Starvation
 * against a bound.
 */
export function starvedVerdict(lag: { worstMs(): number }, starved: { waitedMs(): number } | undefined, queueMs: number): Inconclusive | undefined {
  const worst = lag.worstMs();
  if (worst >= STARVED_LAG_MS) return new Starved(t('check.starved', { ms: Math.round(worst) }));
  const queued = starved?.waitedMs() ?? 0;
  return queued >= queueMs ? new Starved(t('check.serverStarved', { ms: Math.round(queued) })) : undefined;
}

/**
 * Measures starvation while a bound runs: from `delayMs` ms after it is made (0: at once;
 * a request answered sooner costs nothing but a timer) it samples the servers' threads every
 * `everyMs` ms (default 25; LOW_SHARE_EVERY_MS with lowShare) and times its own timer's lateness. `watch` undefined: only the
 * grader's lag is measured. The servers' processes are looked up again every 10 samples
 * (a starting server execs and forks). stop() ends it and returns what it saw; its timers
 * are unref'd (they never keep the process alive).
 */
export class StarveMeter {
  private readonly watch: SchedWatch | undefined;
  private readonly everyMs: number;
  private readonly startTimes: Map<string, { cpuMs: number; waitMs: number }>;
  private last: { at: number; threads: Map<string, ThreadState> } | undefined;
  private sampled = 0;
  private serverWaitMs = 0;
  private graderLagMs = 0;
  private timer: NodeJS.Timeout | undefined;
  private due = 0;
  private stopped = false;
  private seen: Starvation | undefined;
  private readonly lowShare: number | undefined;
  private readonly lookUp: boolean;

  /**
   * @param options.delayMs when the first sample is taken, in ms (default 0);
   *   options.everyMs the time between samples, in ms (default 25, or LOW_SHARE_EVERY_MS when lowShare is set);
   *   options.lowShare when set (0 to 1), only a thread that got less than this share of
   *   the time between two samples on a CPU, and no turn on one or turns that waited
   *   LONG_TURN_WAIT_MS or more on average, counts as waiting, and the kernel's run-queue time is not
   *   summed: threads of the server that spin and share the CPUs with each other (a busy
   *   wait, its own doing) or poll (short turns, each soon given) are not taken for starved,
   *   a thread kept off a CPU is;
   *   options.lookUp false: the servers' processes are not looked up again (the watch's
   *   owner refreshes it), default true
   */
  constructor(watch: SchedWatch | undefined, options: { delayMs?: number; everyMs?: number; lowShare?: number; lookUp?: boolean } = {}) {
    this.watch = watch?.available ? watch : undefined;
    this.everyMs = options.everyMs ?? (options.lowShare === undefined ? 25 : LOW_SHARE_EVERY_MS);
    this.lowShare = options.lowShare;
    this.lookUp = options.lookUp ?? true;
    this.startTimes = this.lowShare === undefined ? (this.watch?.times() ?? new Map()) : new Map();
    this.arm(options.delayMs ?? 0);
  }

  private arm(ms: number): void {
    if (this.stopped) return;
    const due = performance.now() + ms;
    this.due = due;
    this.timer = setTimeout(() => {
      this.graderLagMs = Math.max(this.graderLagMs, performance.now() - due);
      this.sample();
      this.arm(this.everyMs);
    }, ms);
    this.timer.unref();
  }

  /** One look at every thread's state and CPU time; the time between two looks at a thread runnable both times but not on a CPU counts as waiting. */
  private sample(): void {
    if (!this.watch) return;
    if (this.sampled++ % 10 === 0 && this.lookUp) this.watch.refresh();
    const at = performance.now();
    const threads = threadStates(this.watch);
    if (this.last) {
      const dt = at - this.last.at;
      for (const [id, now] of threads) {
        const before = this.last.threads.get(id);
        if (!before || before.state !== 'R' || now.state !== 'R') continue;
        const ran = now.cpuMs - before.cpuMs;
        if (this.lowShare !== undefined) {
          if (ran >= this.lowShare * dt) continue;
          // Turns taken between the looks, each soon after it was asked for: a thread that polls, not one kept off.
          const turns = now.turns - before.turns;
          if (turns > 0 && (now.waitMs - before.waitMs) / turns < LONG_TURN_WAIT_MS) continue;
        }
        this.serverWaitMs += Math.max(0, dt - ran);
      }
    }
    this.last = { at, threads };
  }

  /** Stops measuring and returns what was seen; a later call returns the same, read no more (a `finally` that stops it again costs nothing). */
  stop(): Starvation {
    if (this.seen) return this.seen;
    this.stopped = true;
    clearTimeout(this.timer);
    // A timer still not run though due: the loop was busy up to now.
    this.graderLagMs = Math.max(this.graderLagMs, performance.now() - this.due);
    let queued = 0;
    if (this.watch && this.lowShare === undefined) {
      if (this.lookUp) this.watch.refresh();
      for (const [id, now] of this.watch.times() ?? []) queued += Math.max(0, now.waitMs - (this.startTimes.get(id)?.waitMs ?? 0));
    }
    this.seen = { serverWaitMs: Math.max(queued, this.serverWaitMs), graderLagMs: this.graderLagMs };
    return this.seen;
  }
}

/** One look at a thread: its state letter (/proc stat), and from /proc schedstat its time so far on a CPU and waiting on a run queue, in ms, and its turns on a CPU. */
interface ThreadState {
  state: string;
  cpuMs: number;
  waitMs: number;
  turns: number;
}

/**
 * A thread's /proc schedstat: its time so far on a CPU and waiting on a run queue for one, in
 * ms, and its turns on a CPU; undefined when the thread ended or the file says otherwise.
 */
function schedstatOf(pid: number, tid: number): { cpuMs: number; waitMs: number; turns: number } | undefined {
  try {
    const [cpuNs, waitNs, turns] = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
    return [cpuNs, waitNs, turns].every(Number.isFinite) ? { cpuMs: cpuNs / 1e6, waitMs: waitNs / 1e6, turns } : undefined;
  } catch {
    return undefined;
  }
}

/** Every live thread of the watched servers, by `pid/tid`. */
function threadStates(watch: SchedWatch): Map<string, ThreadState> {
  const out = new Map<string, ThreadState>();
  for (const pid of watch.pidList()) {
    for (const tid of threadsOf(pid)) {
      try {
        const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const sched = schedstatOf(pid, tid);
        if (sched) out.set(`${pid}/${tid}`, { state: stat.charAt(stat.lastIndexOf(')') + 2), ...sched });
      } catch {
        // the thread ended
      }
    }
  }
  return out;
}
