/**
 * Step 12's third crash (once charge() returned) is never passed over in silence: a server
 * that does not speak the database's gate is crashed under the grader's write lock (and
 * told that the crash between two of its writes was not tried); a server that answers 201
 * before its ledger row is written (write-behind, with or without the gate) or before its
 * COMMIT fails, killed right after that answer; a server that answers 503 while its write
 * is unfinished passes. Real servers, step 12 alone.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gradeFixture } from './matrix/settle.js';
import { ADVANCED_STEPS } from '../steps/index.js';
import { opensTransaction } from '../steps/advanced/12-crash.js';

const step12 = ADVANCED_STEPS.filter((s) => s.id === '12');

test('a BEGIN opens a transaction, after blanks and comments, in any case; other statements do not', () => {
  for (const sql of ['BEGIN IMMEDIATE', '  begin', '-- record it\nBEGIN TRANSACTION', '/* x */ Begin;']) assert.ok(opensTransaction(sql), sql);
  for (const sql of ['COMMIT', 'INSERT INTO ledger VALUES (1)', 'SELECT "BEGIN"', 'BEGINNING']) assert.ok(!opensTransaction(sql), sql);
});

test('a server without the database gate passes 12, crashed under the write lock, and is told the crash between its writes was not tried', async () => {
  const [r] = await gradeFixture('advanced/ok-crash-no-db-gate', step12);
  assert.equal(r.status, 'pass', r.message);
  assert.ok(
    r.warnings.some((w) => /reported no database statement at the gate .* third crash, once charge\(\) returned, was made another way: while the grader held the database's write lock.* was not tried/.test(w)),
    r.warnings.join('\n'),
  );
});

test('a write-behind server fails 12: killed right after its 201, the ledger holds no row', async () => {
  const [r] = await gradeFixture('advanced/crash-write-behind', step12);
  assert.equal(r.status, 'fail', r.message);
  assert.match(r.message, /was answered 201 \(payment \d+\) before its ledger row was written/);
});

test('a write-behind server whose request checks its claim after charge() fails 12: the writer held, killed right after its 201', async () => {
  const [r] = await gradeFixture('advanced/crash-write-behind-checked', step12);
  assert.equal(r.status, 'fail', r.message);
  assert.match(r.message, /was answered 201 \(payment \d+\) before its ledger row was written/);
});

test('a write-behind server without the database gate fails 12: answered 201 while the grader held the write lock', async () => {
  const [r] = await gradeFixture('advanced/crash-write-behind-no-gate', step12);
  assert.equal(r.status, 'fail', r.message);
  assert.match(r.message, /was answered 201 \(payment \d+\) while the grader held the database's write lock/);
});

test('a server that commits after its answer fails 12: its COMMIT held, killed at its answer, the ledger holds no row', async () => {
  const [r] = await gradeFixture('advanced/crash-commit-after-answer', step12);
  assert.equal(r.status, 'fail', r.message);
  assert.match(r.message, /was answered 201 \(payment \d+\) before its ledger row was written/);
});

test('a server that answers 503 while its write is unfinished passes 12: the crash is judged by its retries', async () => {
  const [r] = await gradeFixture('advanced/ok-crash-503-when-slow', step12);
  assert.equal(r.status, 'pass', r.message);
});

test('the advanced reference passes 12 with its third crash tried', async () => {
  const [r] = await gradeFixture('advanced/reference', step12);
  assert.equal(r.status, 'pass', r.message);
  assert.ok(!r.warnings.some((w) => /not tried/.test(w)), r.warnings.join('\n'));
});
