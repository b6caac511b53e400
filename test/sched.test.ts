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
import { LOW_SHARE, SchedWatch, StarveMeter } from '../grader/sched.js';

const linux = fs.existsSync('/proc/self/task') && fs.existsSync('/proc/self/schedstat');

/** How long the meter looks, in ms: ten of its looks (LOW_SHARE_EVERY_MS). */
const LOOK_MS = 1500;

/**
 * Python for a process group on one CPU (the first it may use): its leader forks a busy loop (the same session, so the
 * same autogroup: one weight shared by both), then runs `leader` (Python statements).
 */
function pinnedPair(leader: string): string {
  return [
    'import os, sys',
    'os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})',
    'if os.fork() == 0:',
    '    while True:',
    '        pass',
    'sys.stdout.write("ready\\n"); sys.stdout.flush()',
    leader,
  ].join('\n');
}

/** Runs `source` in a process group of its own, meters the group for LOOK_MS with lowShare, and stops the group (by its pgid). */
async function meterGroup(source: string): Promise<{ serverWaitMs: number; graderLagMs: number }> {
  const child = spawn('python3', ['-c', source], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.stdout!.once('data', () => resolve());
    });
    // The group leader's pid: serverPids finds both processes by it; no PORT or IDEM_DB to match.
    const watch = new SchedWatch([{ pid: child.pid!, port: -1, dbPath: '/nonexistent' }]);
    assert.equal(watch.pidList().length, 2, 'the leader and its busy loop are found by their group');
    const meter = new StarveMeter(watch, { lowShare: LOW_SHARE });
    await delay(LOOK_MS);
    return meter.stop();
  } finally {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

test('a thread that yields beside a busy loop on its CPU (runnable at every look, with little CPU, but each turn soon given) is not taken for starved', { skip: !linux && 'needs /proc schedstat' }, async () => {
  const seen = await meterGroup(pinnedPair('while True:\n    os.sched_yield()'));
  // Without LONG_TURN_WAIT_MS every look but the first counted whole: about LOOK_MS.
  assert.ok(seen.serverWaitMs < LOOK_MS / 4, `counted ${Math.round(seen.serverWaitMs)} ms of wait for a thread that had every turn it asked for`);
});

test('a thread of the lowest weight (SCHED_IDLE) that a busy loop keeps off its CPU is taken for starved', { skip: !linux && 'needs /proc schedstat' }, async () => {
  const seen = await meterGroup(pinnedPair('os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nwhile True:\n    pass'));
  assert.ok(seen.serverWaitMs >= LOOK_MS / 2, `counted only ${Math.round(seen.serverWaitMs)} ms of wait for a thread kept off its CPU`);
});
