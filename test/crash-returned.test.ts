/**
 * Step 12's third crash (once charge() returned) is never passed over in silence: a server
 * that does not speak the database's gate passes with a warning that names the crash not
 * tried and why, and a server that answers 201 before its ledger row is written (write-behind)
 * fails, killed right after that answer. Real servers, step 12 alone.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gradeFixture } from './matrix/settle.js';
import { ADVANCED_STEPS } from '../steps/index.js';

const step12 = ADVANCED_STEPS.filter((s) => s.id === '12');

test('a server without the database gate passes 12 and is told its third crash was not tried', async () => {
  const [r] = await gradeFixture('advanced/ok-crash-no-db-gate', step12);
  assert.equal(r.status, 'pass', r.message);
  assert.ok(r.warnings.some((w) => /third crash .* was not tried: the server reported no database statement/.test(w)), r.warnings.join('\n'));
});

test('a write-behind server fails 12: killed right after its 201, the ledger holds no row', async () => {
  const [r] = await gradeFixture('advanced/crash-write-behind', step12);
  assert.equal(r.status, 'fail', r.message);
  assert.match(r.message, /was answered 201 \(payment \d+\) before its ledger row was written/);
});

test('the advanced reference passes 12 with its third crash tried', async () => {
  const [r] = await gradeFixture('advanced/reference', step12);
  assert.equal(r.status, 'pass', r.message);
  assert.ok(!r.warnings.some((w) => /not tried/.test(w)), r.warnings.join('\n'));
});
