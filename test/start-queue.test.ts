/**
 * The queue of server starts (grader/server.ts startSlot): at most START_SLOTS at once,
 * served by priority among those asked for together, and a slot not given back is freed
 * after SLOT_HOLD_MS. No server is started: the queue is tested alone.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { SLOT_HOLD_MS, START_SLOTS, startSlot } from '../grader/server.js';

test('starts asked for together get the slots by priority, at most START_SLOTS at once; the next goes when one is given back', async () => {
  const granted: number[] = [];
  const releases = new Map<number, () => void>();
  // START_SLOTS + 2 starts asked for in the same turn, lowest priority first.
  const asked = Array.from({ length: START_SLOTS + 2 }, (_, i) =>
    startSlot(i).then((release) => {
      granted.push(i);
      releases.set(i, release);
    }),
  );
  await delay(20);
  const highest = Array.from({ length: START_SLOTS }, (_, i) => START_SLOTS + 1 - i);
  assert.deepEqual(granted, highest, 'the highest priorities first, and no more than START_SLOTS');
  releases.get(highest[0])!();
  releases.get(highest[0])!(); // again is harmless: it frees one slot, not two
  await delay(20);
  assert.deepEqual(granted, [...highest, 1], 'one slot given back lets exactly the next in');
  for (const release of releases.values()) release();
  await Promise.all(asked);
  assert.deepEqual([...granted].sort((a, b) => a - b), Array.from({ length: START_SLOTS + 2 }, (_, i) => i));
  for (const release of releases.values()) release();
});

test('a slot not given back is free again after SLOT_HOLD_MS', { timeout: 10 * SLOT_HOLD_MS }, async () => {
  // The hold timer does not keep a process alive (a real start's own timers do): this one does.
  const alive = setTimeout(() => undefined, 10 * SLOT_HOLD_MS);
  const held = await Promise.all(Array.from({ length: START_SLOTS }, () => startSlot(0)));
  let waited = false;
  const next = startSlot(0).then((release) => {
    waited = true;
    return release;
  });
  await delay(SLOT_HOLD_MS / 2);
  assert.equal(waited, false, 'every slot is taken');
  // Nothing gives a slot back: the start gets one only because the hold time ran out.
  (await next)();
  for (const release of held) release();
  clearTimeout(alive);
});
