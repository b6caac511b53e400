/**
 * Step 15's timed round proves a window, not a clock bucket, only when its pairs' spans (a
 * first request's answer to its retry's sending) cover a whole window without a gap
 * (longestCovered): then every grid of bucket edges a window apart, whatever its offset, has
 * an edge inside some pair, which a bucketing server charges twice. A grader late to send
 * bunches the pairs up; the round is then made again (step.15.spreadUncovered), never passed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { longestCovered, SPREAD_BODIES, WINDOW_S } from '../steps/advanced/15-keyless.js';

const WINDOW_MS = WINDOW_S * 1000;

test('the round as planned covers more than a window: first requests a quarter window apart, each retried half a window on', () => {
  const answeredAfterMs = 15;
  const spans = Array.from({ length: SPREAD_BODIES }, (_, i) => [i * 500 + answeredAfterMs, i * 500 + 1000] as const);
  assert.equal(longestCovered(spans), 2500 - answeredAfterMs);
  assert.ok(longestCovered(spans) >= WINDOW_MS);
});

test('a grader late to send bunches the pairs up and leaves a gap: less than a window is covered', () => {
  // The first three bodies' first answers came 900 ms late (a stalled loop), the retries at once after.
  const spans = [
    [900, 1000],
    [1400, 1500],
    [1900, 2000],
    [1550, 2500],
  ] as const;
  assert.equal(longestCovered(spans), 950);
  assert.ok(longestCovered(spans) < WINDOW_MS);
});

test('a span whose retry was sent before its first answer covers nothing; touching spans join', () => {
  assert.equal(longestCovered([[100, 50]]), 0);
  assert.equal(longestCovered([]), 0);
  assert.equal(
    longestCovered([
      [0, 10],
      [10, 30],
      [40, 45],
    ]),
    30,
  );
});

test('whenever the spans cover a window, every grid of bucket edges a window apart has an edge inside one span (1000 random rounds)', () => {
  let seed = 12345;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  let covering = 0;
  for (let round = 0; round < 1000; round++) {
    const spans = Array.from({ length: SPREAD_BODIES }, (_, i) => {
      const first = i * 500 + random() * 700;
      return [first, first + 100 + random() * 1200] as const;
    });
    if (longestCovered(spans) < WINDOW_MS) continue;
    covering++;
    const offset = random() * WINDOW_MS;
    const edges = Array.from({ length: 6 }, (_, k) => offset + (k - 1) * WINDOW_MS);
    assert.ok(
      spans.some(([from, to]) => edges.some((e) => e >= from && e <= to)),
      `spans ${JSON.stringify(spans)} cover ${longestCovered(spans)} ms yet no edge of offset ${offset} lies in one`,
    );
  }
  assert.ok(covering > 100, `enough covering rounds were drawn (${covering})`);
});
