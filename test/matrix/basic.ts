/**
 * The fixture matrix: every solution in fixtures/solutions/ graded on all eight steps
 * against the real server (Python, or Node.js for a .mjs solution), with the whole row of
 * verdicts asserted, and each failure's message checked so a wrong solution fails for the
 * right reason. Every correct design (ok-*) passes all eight.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { gradeFixture, reasonText, verdictReport } from './settle.js';
import { runningServerCount } from '../../grader/server.js';
import { racySteps, solutionNames } from '../../fixtures/build.js';
import { MATRIX, WARNINGS } from '../../fixtures/matrix.js';
import { STEPS } from '../../steps/index.js';
import { decisiveOnly, rowsOf, type Shard } from './shard.js';

const P = 'pass';

/**
 * Defines the basic matrix's tests for one shard: the row-and-fixture bookkeeping tests in
 * shard 0, and every `of`-th row graded on all eight steps.
 */
export function basicMatrix(shard: Shard): void {
  after(() => {
    assert.equal(runningServerCount(), 0, 'every server the grader started was stopped');
  });

  if (shard.index === 0) {
    test('every solution fixture has an expected row, and every row a fixture', () => {
      assert.deepEqual(Object.keys(MATRIX).sort(), solutionNames().sort());
    });

    test("a row's '~' cells are exactly the steps its fixture declares racy", () => {
      for (const [solution, row] of Object.entries(MATRIX)) {
        assert.deepEqual(STEPS.filter((_, i) => row[i].startsWith('~')).map((s) => s.id), racySteps(solution), solution);
      }
    });
  }

  for (const [solution, row] of rowsOf(Object.entries(MATRIX), shard)) {
    const verdict = (v: string) => (v === P ? 'pass' : v.startsWith('~') ? 'pass|fail' : 'fail');
    // Quick lane (decisiveOnly): a wrong fixture on the steps it must fail only.
    const failing = STEPS.filter((_, i) => row[i] !== P && !row[i].startsWith('~'));
    const graded = decisiveOnly() && failing.length > 0 ? failing : STEPS;
    const cells = graded.map((s) => row[STEPS.indexOf(s)]);
    test(`${solution}: ${cells.map((v, i) => `${graded[i].id}:${verdict(v)}`).join(' ')}`, async () => {
      const results = await gradeFixture(solution, graded);
      assert.deepEqual(
        results.map((r, i) => (cells[i].startsWith('~') && r.status !== 'error' ? 'pass|fail' : r.status)),
        cells.map(verdict),
        verdictReport(results),
      );
      results.forEach((result, i) => {
        if (cells[i] === P || result.status === 'pass') return;
        assert.match(reasonText(result, 'basic'), new RegExp(cells[i].replace(/^~/, '')), `step ${result.id} fails for the right reason\n${verdictReport([result])}`);
        assert.ok(result.why, `step ${result.id} says why it matters`);
        assert.ok(result.exchanges.length > 0 || result.details.length > 0, `step ${result.id} shows what was sent and what came back`);
        if (result.seed !== undefined) assert.ok(Number.isInteger(result.seed), `step ${result.id} names its seed`);
      });
      for (const [id, pattern] of Object.entries(WARNINGS[solution] ?? {})) {
        if (!graded.some((s) => s.id === id)) continue;
        const warnings = results.find((r) => r.id === id)?.warnings ?? [];
        assert.ok(warnings.some((w) => new RegExp(pattern).test(w)), `step ${id} warns: ${pattern}\n${warnings.join('\n')}`);
      }
    });
  }
}
