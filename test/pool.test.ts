/**
 * grader/pool.ts runPool, the one worker pool of the engine, the cohort, chaos and the soak:
 * every index once, never more at once than asked, in the order given, stopping when told.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { runPool } from '../grader/pool.js';

test('runPool runs every index once, at most N at once, and takes them in the order given', async () => {
  const taken: number[] = [];
  let running = 0;
  let most = 0;
  await runPool(7, 3, async (i) => {
    taken.push(i);
    running++;
    most = Math.max(most, running);
    await delay(5 + (i % 3) * 5);
    running--;
  }, { order: [6, 5, 4, 3, 2, 1, 0] });
  assert.deepEqual(taken, [6, 5, 4, 3, 2, 1, 0]);
  assert.equal(most, 3);
});

test('runPool with concurrency 0 or below still runs one at a time, and with no items runs nothing', async () => {
  const taken: number[] = [];
  let running = 0;
  let most = 0;
  await runPool(3, 0, async (i) => {
    running++;
    most = Math.max(most, running);
    taken.push(i);
    await delay(2);
    running--;
  });
  assert.deepEqual(taken, [0, 1, 2]);
  assert.equal(most, 1);
  let ran = 0;
  await runPool(0, 4, async () => {
    ran++;
  });
  assert.equal(ran, 0);
});

test('runPool stops taking items once stop() says so; the ones taken finish', async () => {
  const done: number[] = [];
  let stop = false;
  await runPool(10, 2, async (i) => {
    if (i === 3) stop = true;
    await delay(2);
    done.push(i);
  }, { stop: () => stop });
  assert.deepEqual([...done].sort((a, b) => a - b), [0, 1, 2, 3, 4].filter((i) => done.includes(i)));
  assert.ok(done.length <= 5 && done.includes(3) && !done.includes(9), `done: ${done}`);
});

test('runPool rejects with the first error a task throws', async () => {
  await assert.rejects(runPool(4, 2, async (i) => {
    await delay(1);
    if (i === 1) throw new Error('task 1 broke');
  }), /task 1 broke/);
});
