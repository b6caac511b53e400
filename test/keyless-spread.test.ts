/**
 * Step 15's timed round proves a window, not a clock bucket, only when its pairs' spans (a
 * first request's answer to its retry's sending), taken modulo the window, cover all of it
 * (coveredModulo): then every grid of bucket edges a window apart, whatever its offset, has
 * an edge inside some pair, which a bucketing server charges twice. A grader late to send
 * bunches the pairs up; the round is then made again (step.15.spreadUncovered), never passed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { coveredModulo, SPREAD_BODIES, WINDOW_S } from '../steps/advanced/15-keyless.js';

const WINDOW_MS = WINDOW_S * 1000;

test('the round as planned covers the whole window: first requests a quarter window apart, each retried half a window after its answer, however slow the answers', () => {
  for (const answeredAfterMs of [15, 600, 900]) {
    const spans = Array.from({ length: SPREAD_BODIES }, (_, i) => [i * 500 + answeredAfterMs, i * 500 + answeredAfterMs + 1000] as const);
    assert.equal(coveredModulo(spans, WINDOW_MS), WINDOW_MS, `answers ${answeredAfterMs} ms late`);
  }
});

test('a grader late to send bunches the pairs up and leaves a gap: less than the window is covered', () => {
  // The first three bodies' retries went out at once after first answers that came late (a stalled loop).
  const spans = [
    [900, 1000],
    [1400, 1500],
    [1900, 2000],
    [1550, 2500],
  ] as const;
  // Modulo 2000: [0, 500] (1550..2500 wraps), [900, 1000], [1400, 1500], [1550, 2000] ([1900, 2000] inside): 1150 ms.
  assert.equal(coveredModulo(spans, WINDOW_MS), 1150);
});

test('a span whose retry was sent before its first answer covers nothing; a span of a whole period covers it all', () => {
  assert.equal(coveredModulo([[100, 50]], WINDOW_MS), 0);
  assert.equal(coveredModulo([], WINDOW_MS), 0);
  assert.equal(coveredModulo([[5, 5 + WINDOW_MS]], WINDOW_MS), WINDOW_MS);
  assert.equal(
    coveredModulo(
      [
        [0, 10],
        [10, 30],
        [2040, 2045],
      ],
      WINDOW_MS,
    ),
    35,
  );
});

test('whenever the spans cover the window modulo its length, every grid of bucket edges a window apart has an edge inside one span, and otherwise some grid has none (1000 random rounds)', () => {
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  let covering = 0;
  let gapped = 0;
  for (let round = 0; round < 1000; round++) {
    const spans = Array.from({ length: SPREAD_BODIES }, (_, i) => {
      const first = i * 500 + random() * 900;
      return [first, first + 100 + random() * 1100] as const;
    });
    const edgeIn = (offset: number) => spans.some(([from, to]) => Array.from({ length: 6 }, (_, k) => offset + (k - 1) * WINDOW_MS).some((e) => e >= from && e <= to));
    if (coveredModulo(spans, WINDOW_MS) >= WINDOW_MS) {
      covering++;
      const offset = random() * WINDOW_MS;
      assert.ok(edgeIn(offset), `spans ${JSON.stringify(spans)} cover the window yet no edge of offset ${offset} lies in one`);
    } else if (coveredModulo(spans, WINDOW_MS) < WINDOW_MS - 2) {
      gapped++;
      // A gap of 2 ms or more: some offset on a 1 ms grid has no edge in any span, and a bucketing server could pass.
      assert.ok(
        Array.from({ length: WINDOW_MS }, (_, ms) => ms + 0.5).some((offset) => !edgeIn(offset)),
        `spans ${JSON.stringify(spans)} leave a gap, found`,
      );
    }
  }
  assert.ok(covering > 100 && gapped > 100, `both kinds of round were drawn (${covering} covering, ${gapped} with a gap)`);
});
