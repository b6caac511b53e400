/**
 * The advanced track's fixture matrix: every solution of fixtures/advanced/ (and the basic
 * reference and the starter) graded on steps 09 on against the real server, each step's
 * verdict asserted and each failure's message matched, so a wrong solution fails for its
 * reason and every correct design passes. The advanced reference passes the basic track too.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { gradeFixture, reasonText, verdictReport } from './settle.js';
import { runningServerCount } from '../../grader/server.js';
import { advancedSolutionNames, racySteps } from '../../fixtures/build.js';
import { ADVANCED_MATRIX, NEEDS_FAKE_CLOCK } from '../../fixtures/advanced-matrix.js';
import { fakeClockLibrary } from '../../grader/fake-clock.js';
import { ADVANCED_STEPS, STEPS } from '../../steps/index.js';
import { decisiveOnly, rowsOf, type Shard } from './shard.js';

/**
 * Defines the advanced matrix's tests for one shard: the bookkeeping test and the advanced
 * reference on the basic track in shard 0, every `of`-th row graded on steps 09 on.
 */
export function advancedMatrix(shard: Shard): void {
  after(() => {
    assert.equal(runningServerCount(), 0, 'every server the grader started was stopped');
  });

  if (shard.index === 0) {
    test('every advanced fixture has an expected row; every row names known steps; a wrong one fails a step', () => {
      const names = Object.keys(ADVANCED_MATRIX).filter((n) => n.startsWith('advanced/'));
      assert.deepEqual(names.sort(), advancedSolutionNames());
      const ids = ADVANCED_STEPS.map((s) => s.id);
      for (const [solution, row] of Object.entries(ADVANCED_MATRIX)) {
        for (const id of Object.keys(row)) assert.ok(ids.includes(id), `${solution}: step ${id} is a step of the advanced track`);
        const correct = solution === 'advanced/reference' || solution.startsWith('advanced/ok-');
        if (solution.startsWith('advanced/')) assert.equal(Object.keys(row).length === 0, correct, `${solution}: ${correct ? 'passes every step' : 'fails at least one step'}`);
      }
    });

    test('the advanced reference passes the basic track too: the advanced contract extends the basic one', async () => {
      const results = await gradeFixture('advanced/reference', STEPS);
      assert.deepEqual(results.map((r) => `${r.id} ${r.status}`), STEPS.map((s) => `${s.id} pass`), results.map((r) => `${r.id} ${r.status}: ${r.message}`).join('\n'));
    });
  }

  for (const [solution, row] of rowsOf(Object.entries(ADVANCED_MATRIX), shard)) {
    // A step the solution's own `# racy: NN` line names (a real race outside the step it
    // targets, as in the basic matrix) is graded but its verdict not compared.
    const racy = solution.includes('/') ? racySteps(solution) : [];
    // Quick lane (decisiveOnly): a wrong fixture on the steps it must fail only.
    const failing = ADVANCED_STEPS.filter((s) => row[s.id] && !racy.includes(s.id));
    const graded = decisiveOnly() && failing.length > 0 ? failing : ADVANCED_STEPS;
    const judged = graded.filter((s) => !racy.includes(s.id));
    // A row only a moved clock catches is skipped where libfaketime is missing (the step passes it over then).
    const skip = NEEDS_FAKE_CLOCK.has(solution) && !fakeClockLibrary() ? 'libfaketime is not installed (apt-get install faketime)' : false;
    test(`${solution}: ${graded.map((s) => `${s.id}:${racy.includes(s.id) ? 'racy' : row[s.id] ? 'fail' : 'pass'}`).join(' ')}`, { skip }, async () => {
      const all = await gradeFixture(solution, graded);
      const results = all.filter((r) => !racy.includes(r.id));
      assert.deepEqual(
        results.map((r) => `${r.id} ${r.status}`),
        judged.map((s) => `${s.id} ${row[s.id] ? 'fail' : 'pass'}`),
        verdictReport(all),
      );
      for (const result of results) {
        const pattern = row[result.id];
        if (!pattern) continue;
        assert.match(reasonText(result, 'advanced'), new RegExp(pattern), `step ${result.id} fails for the right reason\n${verdictReport([result])}`);
        assert.ok(result.why, `step ${result.id} says why it matters`);
        assert.ok(result.exchanges.length > 0 || result.details.length > 0, `step ${result.id} shows what was sent and what came back`);
      }
    });
  }
}
