/**
 * The one process lifecycle (grader/process.ts) that the grader's servers and the
 * learner's own server share: spawned in a group of its own, waited for within a bounded
 * deadline while an early exit is watched for, stopped by its group with a grace period.
 * Real processes (python3 and sh), real signals, /proc read back.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { KILL_WAIT_MS, STOP_GRACE_MS, endingPolled, procStat, spawnInGroup, stopGroup, waitUntilReady, type Ending } from '../grader/process.js';

/** An Ending for a child of this process: its 'exit' event. */
function endingOf(child: ReturnType<typeof spawnInGroup>): Ending & { ended: () => boolean } {
  let ended = false;
  const exit = once(child, 'exit').then(() => {
    ended = true;
  });
  return {
    ended: () => ended,
    endedWithin: (ms) => Promise.race([exit.then(() => true), delay(ms, false)]),
  };
}

/** Whether `pid` is alive (a zombie counts as gone). */
function alive(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== 'Z';
}

test('the time limits are the server contract\'s: SIGKILL 1.5 s after SIGTERM', () => {
  assert.equal(STOP_GRACE_MS, 1500);
  assert.ok(KILL_WAIT_MS > 0);
});

test('a process is spawned as the leader of its own group; a child it forks is in that group and is stopped with it', async () => {
  // sh forks a sleep and waits for it: the sleep must go with the group.
  const child = spawnInGroup('sh', ['-c', 'sleep 60 & echo $!; wait'], { cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  const ending = endingOf(child);
  const [first] = (await once(child.stdout!, 'data')) as [Buffer];
  const forked = Number(first.toString().trim());
  assert.equal(procStat(child.pid!)?.pgid, child.pid, 'the shell leads its own group');
  assert.equal(procStat(forked)?.pgid, child.pid, 'its child is in that group');
  const stopped = await stopGroup(child.pid!, ending);
  assert.deepEqual(stopped, { graceful: true, ended: true });
  for (let i = 0; i < 40 && alive(forked); i++) await delay(25);
  assert.equal(alive(forked), false, 'the forked sleep was stopped with the group');
});

test('a process that ignores SIGTERM gets SIGKILL once the grace period is over; grace 0 kills at once without SIGTERM', async () => {
  // The handler writes with os.write: a print() there raises "reentrant call inside
  // BufferedWriter" (exit 1) when SIGTERM comes while print("ready") is still inside its
  // flush, after its bytes reached the pipe (1 run in 40 here).
  const stubborn = `import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: os.write(1, b"got SIGTERM\\n"))
print("ready", flush=True)
time.sleep(60)`;
  for (const graceMs of [300, 0]) {
    const child = spawnInGroup('python3', ['-c', stubborn], { cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    const ending = endingOf(child);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    while (!output.includes('ready')) await delay(10);
    let graceSeen: boolean | undefined;
    const stopped = await stopGroup(child.pid!, ending, { graceMs, beforeKill: (graceful) => void (graceSeen = graceful) });
    assert.deepEqual(stopped, { graceful: false, ended: true }, `grace ${graceMs}: output ${JSON.stringify(output)}, exit ${child.exitCode}, signal ${child.signalCode}`);
    assert.equal(graceSeen, false, 'beforeKill ran, before the SIGKILL, told it was not graceful');
    assert.equal(child.signalCode, 'SIGKILL', `grace ${graceMs}: it ended by SIGKILL`);
    await delay(20);
    assert.equal(output.includes('got SIGTERM'), graceMs > 0, `grace ${graceMs}: SIGTERM sent only with a grace period (${JSON.stringify(output)})`);
  }
});

test('waitUntilReady: ready when the probe says so, ended when the process exits first, timeout otherwise', async () => {
  let asked = 0;
  assert.equal(await waitUntilReady({ probe: async () => ++asked >= 3, ended: () => false, timeoutMs: 5000, pollMs: 5 }), 'ready');
  assert.equal(asked, 3);

  const child = spawnInGroup('sh', ['-c', 'exit 3'], { cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  const ending = endingOf(child);
  let probes = 0;
  const readiness = await waitUntilReady({
    probe: async () => {
      probes++;
      return false;
    },
    ended: ending.ended,
    timeoutMs: 10_000,
  });
  assert.equal(readiness, 'ended');
  assert.ok(probes < 400, `it stopped asking once the process had exited (${probes} probes)`);

  let late = 0;
  const since = performance.now();
  assert.equal(await waitUntilReady({ probe: async () => (late++, false), ended: () => false, timeoutMs: 100, pollMs: 10 }), 'timeout');
  assert.ok(performance.now() - since >= 100, 'it waited out the deadline');
  assert.ok(late >= 1, 'and asked meanwhile');
});

test('endingPolled sees a pid end by /proc, and gives up after its time', async () => {
  const child = spawnInGroup('sleep', ['60'], { cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  const pid = child.pid!;
  const ending = endingPolled(() => !alive(pid), 10);
  assert.equal(await ending.endedWithin(50), false, 'still running');
  process.kill(-pid, 'SIGKILL');
  assert.equal(await ending.endedWithin(2000), true, 'gone once killed');
});
