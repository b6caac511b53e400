/**
 * What a StarveMeter that counts only threads kept off a CPU (lowShare, as 06's pass guard, a
 * held wait and the lockstep's waves use it) takes for starved, on real threads the kernel
 * schedules: a process group of two processes pinned to one CPU, one of them a busy loop.
 * Beside it, a thread that yields (runnable at every look, little CPU, but a turn soon after
 * each it asks for: as a poll loop's wait) is not starved; a thread of the lowest weight
 * (SCHED_IDLE) that the loop keeps off the CPU is. Linux only (/proc schedstat).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { LOW_SHARE, SchedWatch, StarveMeter, type Starvation } from '../grader/sched.js';

const linux = fs.existsSync('/proc/self/task') && fs.existsSync('/proc/self/schedstat');

/** How long the meter looks, in ms: fifteen of its looks (LOW_SHARE_EVERY_MS). */
const LOOK_MS = 1500;

/** How long the group may take to say it is ready, in ms: a bound, python3's start on a busy machine. */
const READY_BOUND_MS = 20_000;

/**
 * Python for a process group on one CPU (the first it may use): its leader forks a busy loop
 * (the same session, so the same autogroup: one weight shared by both), then runs `leader`
 * (Python statements that end in a call of forever(step)). Each ends itself once its parent
 * is gone (checked every 100 rounds: a yield beside the busy loop may take a slice of it),
 * as busyLoopSource: a test killed before its `finally` leaves nothing.
 */
function pinnedPair(leader: string): string {
  return [
    'import os, sys',
    'os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})',
    'def forever(step):',
    '    parent = os.getppid()',
    '    while True:',
    '        for _ in range(100):',
    '            step()',
    '        if os.getppid() != parent:',
    '            os._exit(0)',
    'if os.fork() == 0:',
    '    forever(lambda: None)',
    'sys.stdout.write("ready\\n"); sys.stdout.flush()',
    leader,
  ].join('\n');
}

/** A thread's schedstat: ms on a CPU, ms waiting on a run queue, turns on a CPU. */
function schedstat(pid: number): { cpuMs: number; waitMs: number; turns: number } {
  const [cpuNs, waitNs, turns] = fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ').map(Number);
  return { cpuMs: cpuNs / 1e6, waitMs: waitNs / 1e6, turns };
}

/**
 * Runs `source` in a process group of its own, meters the group for LOOK_MS with lowShare,
 * and stops the group (by its pgid).
 * @returns what the meter saw, and the leader's share of a CPU and its turns meanwhile
 * @throws when the group did not say it was ready within READY_BOUND_MS, or ended first
 */
async function meterGroup(source: string): Promise<{ seen: Starvation; leaderShare: number; leaderTurns: number }> {
  const child = spawn('python3', ['-c', source], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve, reject) => {
      const bound = setTimeout(() => reject(new Error(`the group did not say it was ready within ${READY_BOUND_MS} ms`)), READY_BOUND_MS);
      const settle = (err?: Error) => {
        clearTimeout(bound);
        if (err) reject(err);
        else resolve();
      };
      child.once('error', settle);
      child.once('exit', (code, signal) => settle(new Error(`the group ended before it was ready (${signal ?? code})`)));
      child.stdout!.once('data', () => settle());
    });
    // The group leader's pid: serverPids finds both processes by it; no PORT or IDEM_DB to match.
    const watch = new SchedWatch([{ pid: child.pid!, port: -1, dbPath: '/nonexistent' }]);
    assert.equal(watch.pidList().length, 2, 'the leader and its busy loop are found by their group');
    const before = schedstat(child.pid!);
    const at = performance.now();
    const meter = new StarveMeter(watch, { lowShare: LOW_SHARE });
    await delay(LOOK_MS);
    const seen = meter.stop();
    const after = schedstat(child.pid!);
    return { seen, leaderShare: (after.cpuMs - before.cpuMs) / (performance.now() - at), leaderTurns: after.turns - before.turns };
  } finally {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

test('a thread that yields beside a busy loop on its CPU (runnable at every look, with little CPU, but each turn soon given) is not taken for starved', { skip: !linux && 'needs /proc schedstat' }, async (t) => {
  const { seen, leaderShare, leaderTurns } = await meterGroup(pinnedPair('forever(os.sched_yield)'));
  // Where the kernel gives a yielding thread a tenth of the CPU or more, the share rule alone passes it: nothing is tested here.
  if (leaderShare >= LOW_SHARE || leaderTurns === 0) return t.skip(`this kernel gave the yielding thread ${(leaderShare * 100).toFixed(0)}% of its CPU in ${leaderTurns} turns`);
  // Without LONG_TURN_WAIT_MS every look but the first counted whole: about LOOK_MS.
  assert.ok(seen.serverWaitMs < LOOK_MS / 4, `counted ${Math.round(seen.serverWaitMs)} ms of wait for a thread that had ${leaderTurns} turns at ${(leaderShare * 100).toFixed(1)}% of its CPU`);
});

test('a thread of the lowest weight (SCHED_IDLE) that a busy loop keeps off its CPU is taken for starved', { skip: !linux && 'needs /proc schedstat' }, async () => {
  const { seen, leaderShare } = await meterGroup(pinnedPair('os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nforever(lambda: None)'));
  assert.ok(seen.serverWaitMs >= LOOK_MS / 2, `counted only ${Math.round(seen.serverWaitMs)} ms of wait for a thread kept to ${(leaderShare * 100).toFixed(1)}% of its CPU`);
});
