/** msUntilPhase: the wait until a chosen place in the wall clock's second (grader/wall-clock.ts). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { msUntilPhase } from '../grader/wall-clock.js';

test('msUntilPhase waits until the phase comes round, 0 when it is now, never a whole second', () => {
  assert.equal(msUntilPhase(20, 1_700_000_000_000), 20);
  assert.equal(msUntilPhase(20, 1_700_000_000_020), 0);
  assert.equal(msUntilPhase(20, 1_700_000_000_021), 999);
  assert.equal(msUntilPhase(850, 1_700_000_000_900), 950);
  assert.equal(msUntilPhase(500, 1_700_000_000_499), 1);
  for (let now = 1_700_000_000_000; now < 1_700_000_002_000; now += 37) {
    const wait = msUntilPhase(850, now);
    assert.ok(wait >= 0 && wait < 1000);
    assert.equal((now + wait) % 1000, 850);
  }
});
