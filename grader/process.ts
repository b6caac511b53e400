/**
 * One lifecycle for every payment server idem-lab runs, the grader's servers under test
 * (server.ts) and the learner's own server (lab/runner.ts): spawned in a process group of
 * its own (or a sandbox, whose first process leads the group), waited for until it is
 * ready within a bounded deadline while watching for an early exit, and stopped by its
 * group: SIGTERM, a bounded grace period, then SIGKILL, then a bounded wait for it to be
 * gone. Nothing here is signalled by name, and nothing waits without a limit.
 *
 * The time limits are the server contract's (docs/server-contract.md, "How it is started"):
 * SIGKILL 1.5 s after SIGTERM, and GET /health within IDEM_LAB_START_TIMEOUT_MS.
 */
import fs from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { limits } from './limits.js';

/**
 * How long a server has to exit after SIGTERM before its group gets SIGKILL, in ms: the
 * server contract's 1.5 s (a server must exit within a second of SIGTERM).
 */
export const STOP_GRACE_MS = 1500;

/**
 * How long, in ms, a stop waits for the process to be gone once its group got SIGKILL.
 * A process that outlives that (one not ours to signal, or stuck in the kernel) is
 * reported, not waited for.
 */
export const KILL_WAIT_MS = 1500;

/** How often a readiness probe is repeated while a server starts, in ms (after each failed probe). */
export const READY_POLL_MS = 25;

/**
 * How long a server may take, from its spawn, to answer GET /health with 200, in ms:
 * IDEM_LAB_START_TIMEOUT_MS, default 10000 (limits.ts).
 * @throws Error when IDEM_LAB_START_TIMEOUT_MS (or another limit) is set to something other than a positive whole number
 */
export function readyTimeoutMs(): number {
  return limits().startMs;
}

/** How a process is spawned into a group of its own. */
export interface GroupSpawn {
  /** Its working folder. */
  cwd: string;
  /** Its whole environment (nothing of this process's is added to it). */
  env: NodeJS.ProcessEnv;
  /**
   * stdin, stdout and stderr, as node:child_process takes them: `'pipe'` to read its
   * output, a file descriptor to have it write a file itself (it then outlives this
   * process without losing output). Default: stdin ignored, stdout and stderr piped.
   */
  stdio?: StdioOptions;
}

/**
 * Spawns `file args` as the leader of a new process group (setsid: detached), so the
 * group, and only it, is reached by `killGroup(child.pid, ...)`. node:child_process, not
 * execa: execa's import alone takes about a tenth of a second, a twentieth of a whole
 * check. A file that cannot be run gives a child without a pid and an 'error' event
 * (a listener is attached here, so it never throws); its 'exit' or 'error' says it ended.
 */
export function spawnInGroup(file: string, args: readonly string[], options: GroupSpawn): ChildProcess {
  const child = spawn(file, args, { cwd: options.cwd, env: options.env, detached: true, stdio: options.stdio ?? ['ignore', 'pipe', 'pipe'] });
  child.on('error', () => {
    // reported by the pid being undefined, or by the caller's own 'error' listener
  });
  return child;
}

/**
 * Sends `signal` to the process group led by `pid` (a process spawned by spawnInGroup).
 * @returns false when there is no such group (it is gone); never throws
 */
export function killGroup(pid: number, signal: NodeJS.Signals): boolean {
  if (pid <= 0) return false;
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** How the lifecycle learns that a process has ended. */
export interface Ending {
  /** Resolves true once the process has ended, or false when it has not within `ms` ms. Never rejects. */
  endedWithin(ms: number): Promise<boolean>;
}

/**
 * An Ending for a process known only by what can be read about it (a pid from a state
 * file, not a child of this process): `ended()` asked every `pollMs` ms (default 25).
 */
export function endingPolled(ended: () => boolean, pollMs = READY_POLL_MS): Ending {
  return {
    async endedWithin(ms: number): Promise<boolean> {
      const deadline = performance.now() + ms;
      while (!ended()) {
        if (performance.now() >= deadline) return false;
        await delay(Math.min(pollMs, Math.max(1, deadline - performance.now())));
      }
      return true;
    },
  };
}

/** How `waitUntilReady` ended: the probe said ready, the process ended first, or the deadline passed. */
export type Readiness = 'ready' | 'ended' | 'timeout';

/**
 * Asks `probe` (GET /health, say) until it answers true, the process has ended, or
 * `timeoutMs` ms have passed since `since` (a performance.now() time, default now: the
 * limit counts from the spawn, not from a wait before the first probe). A probe must be
 * bounded itself (its own connect and answer limits); none is started after the deadline.
 * Probes are `pollMs` ms apart (default READY_POLL_MS).
 */
export async function waitUntilReady(options: { probe: () => Promise<boolean>; ended: () => boolean; timeoutMs: number; since?: number; pollMs?: number }): Promise<Readiness> {
  const deadline = (options.since ?? performance.now()) + options.timeoutMs;
  while (performance.now() < deadline) {
    if (options.ended()) return 'ended';
    const ready = await options.probe();
    if (ready) return 'ready';
    await delay(options.pollMs ?? READY_POLL_MS);
  }
  return options.ended() ? 'ended' : 'timeout';
}

/** What `stopGroup` saw: whether the process exited within the grace period, and whether it was gone in the end. */
export interface Stopped {
  /** It exited on SIGTERM within the grace period. */
  graceful: boolean;
  /** It was gone when the stop returned (false: it outlived SIGKILL by KILL_WAIT_MS). */
  ended: boolean;
}

/**
 * Stops the process group led by `pid`: SIGTERM, up to `graceMs` (default STOP_GRACE_MS)
 * for the process to end, then SIGKILL to the group in any case (the leader may be gone
 * while children it forked live on; once it is gone its pid is not handed out again while
 * its group has members, so this reaches only them), then up to `killWaitMs` (default
 * KILL_WAIT_MS) for it to be gone. `graceMs` 0 kills at once, without SIGTERM: for a
 * server nothing more is asked of (a sandboxed one at the end of a step). `beforeKill`
 * runs between the grace period and SIGKILL, e.g. to find processes that left the group.
 * Never throws (unless beforeKill does).
 */
export async function stopGroup(
  pid: number,
  ending: Ending,
  options: { graceMs?: number; killWaitMs?: number; beforeKill?: (graceful: boolean) => Promise<void> | void } = {},
): Promise<Stopped> {
  const graceMs = options.graceMs ?? STOP_GRACE_MS;
  let graceful = false;
  if (graceMs > 0) {
    killGroup(pid, 'SIGTERM');
    graceful = await ending.endedWithin(graceMs);
  }
  await options.beforeKill?.(graceful);
  killGroup(pid, 'SIGKILL');
  const ended = graceful || (await ending.endedWithin(options.killWaitMs ?? KILL_WAIT_MS));
  return { graceful, ended };
}

/**
 * A process's state letter, process group and start time (field 22, clock ticks after
 * boot) from /proc/PID/stat (proc(5)); undefined when there is no such process. The
 * command name in field 2 may hold spaces and parentheses, so the fields are counted
 * from its last ')'. Linux only. Never throws.
 */
export function procStat(pid: number): { state: string; pgid: number; startTicks: number } | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const startTicks = Number(fields[19]);
    if (!Number.isFinite(startTicks)) return undefined;
    return { state: fields[0], pgid: Number(fields[2]), startTicks };
  } catch {
    return undefined;
  }
}
