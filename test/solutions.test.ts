/**
 * The fixture matrix: every solution in fixtures/solutions/ graded on all eight steps
 * against the real Python server, with the whole row of verdicts asserted, and each
 * failure's message checked so a wrong solution fails for the right reason.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { grade } from '../grader/engine.js';
import { DEFAULT_COMMAND, runningServerCount, resolveInterpreter } from '../grader/server.js';
import { racySteps, solutionNames } from '../fixtures/build.js';
import { STEPS } from '../steps/index.js';
import { fixtureWorkspace, serversUnder } from './support.js';

type Row = [string, string, string, string, string, string, string, string];
const P = 'pass';

/**
 * Expected verdicts for steps 01..08: 'pass', or a pattern the failure message must match.
 * A pattern starting with '~' marks a real race in a wrong solution outside the step it
 * targets: it may pass or fail from run to run, and when it fails it must be for that reason.
 */
const MATRIX: Record<string, Row> = {
  reference: [P, P, P, P, P, P, P, P],
  starter: [P, 'stored first response back unchanged', 'without an Idempotency-Key header must be refused with 400', 'must be refused with 422', 'must be one and the same response', 'stored first response back unchanged', P, P],
  'process-dict': [P, P, P, P, P, 'stored first response back unchanged', P, P],
  'check-then-insert': [P, P, P, P, 'must be one and the same response', 'split over servers B and C', P, P],
  'thread-lock': [P, P, P, P, P, 'split over servers B and C', P, P],
  'no-fingerprint': [P, P, P, 'must be refused with 422', P, P, P, P],
  'missing-key-charges': [P, P, 'without an Idempotency-Key header must be refused with 400', P, P, P, P, P],
  'empty-key-accepted': [P, P, 'empty Idempotency-Key header must be refused with 400', P, P, P, P, P],
  'replay-as-error': [P, 'first response again \\(HTTP 201\\), not HTTP 409', P, 'first response again \\(HTTP 201\\), not HTTP 409', P, 'first response again \\(HTTP 201\\), not HTTP 409', P, P],
  'replay-fresh-charged-at': [P, 'stored first response back unchanged', P, 'stored first response back unchanged', 'must be one and the same response', 'stored first response back unchanged', P, P],
  'race-losers-500': [P, P, P, P, 'got HTTP 500', 'split over servers B and C.*got HTTP 500', P, P],
  'replay-once': [P, 'stored first response back unchanged', P, P, '~Round \\d: .*(must be one and the same response|must hold 1 row|charge\\(\\) ran)', '~Round \\d: .*(must be one and the same response|must hold 1 row|charge\\(\\) ran)', P, P],
  'replay-from-ledger': [P, 'stored first response back unchanged', P, P, P, P, P, P],
  'charge-before-claim': [P, 'charge\\(\\) ran \\d+ times for user "u1" and amount 1000; it must run once', P, 'charge\\(\\) ran \\d+ times for user "u1" and amount 1000', 'charge\\(\\) ran \\d+ times for user "racer-05-race1-', 'charge\\(\\) ran \\d+ times for user "u6-restart"', P, P],
  'amount-only-fingerprint': [P, P, P, 'another user \\(u2 instead of u1, same amount\\) must be refused with 422', P, P, P, P],
  'narrow-check-then-insert': [P, P, P, P, 'Round 1: .*(must be one and the same response|must hold 1 row)', 'Round 1: .*split over servers B and C', P, P],
};

after(() => {
  assert.equal(runningServerCount(), 0, 'every server the grader started was stopped');
});

test('every solution fixture has an expected row, and every row a fixture', () => {
  assert.deepEqual(Object.keys(MATRIX).sort(), solutionNames().sort());
});

test("a row's '~' cells are exactly the steps its fixture declares racy", () => {
  for (const [solution, row] of Object.entries(MATRIX)) {
    assert.deepEqual(STEPS.filter((_, i) => row[i].startsWith('~')).map((s) => s.id), racySteps(solution), solution);
  }
});

for (const [solution, row] of Object.entries(MATRIX)) {
  const verdict = (v: string) => (v === P ? 'pass' : v.startsWith('~') ? 'pass|fail' : 'fail');
  test(`${solution}: ${row.map((v, i) => `${STEPS[i].id}:${verdict(v)}`).join(' ')}`, async () => {
    const ws = fixtureWorkspace(solution);
    try {
      const results = await grade({ workspace: ws.dir, steps: STEPS, command: await resolveInterpreter(DEFAULT_COMMAND, ws.dir) });
      assert.deepEqual(
        results.map((r, i) => (row[i].startsWith('~') && r.status !== 'error' ? 'pass|fail' : r.status)),
        row.map(verdict),
        results.map((r) => `${r.id} ${r.status}: ${r.message}`).join('\n'),
      );
      results.forEach((result, i) => {
        if (row[i] === P || result.status === 'pass') return;
        assert.match(result.message, new RegExp(row[i].replace(/^~/, '')), `step ${result.id} fails for the right reason`);
        assert.ok(result.why, `step ${result.id} says why it matters`);
        assert.ok(result.exchanges.length > 0, `step ${result.id} shows what was sent and what came back`);
      });
      assert.deepEqual(serversUnder(ws.dir), [], 'no server left running in the workspace');
    } finally {
      ws.remove();
    }
  });
}
