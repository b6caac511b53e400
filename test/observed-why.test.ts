/**
 * The reason a failure gives follows what was observed, not only what the check expected
 * (issue 20): a 500 "database is locked" in step 02 is sqlite's lock, not keys compared
 * wrongly; a 422 to a retry sent to the very process that answered the first cannot be
 * Python's salted hash(); a race whose refused requests still charged is a refusal that
 * falls through, not a check-then-insert.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expectReplay, expectStatus } from '../grader/expect-http.js';
import { commandNames } from '../grader/server.js';
import { CheckFailed } from '../grader/failure.js';
import { doubledWhy } from '../grader/race.js';
import { t } from '../i18n/index.js';
import type { Exchange } from '../grader/types.js';

const payment = { payment_id: 7, user: 'mina_1', amount: 4210, charged_at: '2026-12-01T10:02:25.118Z' };

function exchange(status: number | undefined, body: unknown, server = 'A', port = 4100): Exchange {
  return { server, port, method: 'POST', path: '/pay', key: 'k1', requestBody: '{"user":"mina_1","amount":4210}', status, responseBody: JSON.stringify(body), ms: 5 };
}

/** The CheckFailed `run` throws. */
function failure(run: () => void): CheckFailed {
  try {
    run();
  } catch (err) {
    assert.ok(err instanceof CheckFailed, String(err));
    return err;
  }
  assert.fail('no failure');
}

const OPAQUE = 'Keys are opaque: compare them as sent.';

test('a 500 "database is locked" is explained as sqlite\'s lock, not as what the step expected', () => {
  const err = failure(() => expectStatus(exchange(500, { error: 'internal error: OperationalError: database is locked' }), 201, 'The key must be a payment of its own.', OPAQUE));
  assert.equal(err.why, t('check.serverError.locked.why', { status: 500 }));
  assert.match(err.why, /database is locked/);
  assert.doesNotMatch(err.why, /opaque/);
});

test('any other 5xx is explained as a failure inside the server', () => {
  const err = failure(() => expectStatus(exchange(502, { error: 'KeyError' }), 201, 'expected', OPAQUE));
  assert.equal(err.why, t('check.serverError.why', { status: 502 }));
});

test('a 4xx other than the one expected keeps the reason the step gives', () => {
  const err = failure(() => expectStatus(exchange(400, { error: 'bad' }), 201, 'expected', OPAQUE));
  assert.equal(err.why, OPAQUE);
});

test("a 422 to a retry sent to the process that answered the first is not blamed on Python's salted hash()", () => {
  const first = exchange(201, payment);
  const same = failure(() => expectReplay(first, exchange(422, { error: 'other body' }), 'why'));
  assert.equal(same.why, t('check.replay422.sameProcess.why'));
  assert.doesNotMatch(same.why, /hash\(\)/);
  // Another instance, or the same label restarted on another port: another process, whose hash() may be salted otherwise.
  assert.equal(failure(() => expectReplay(first, exchange(422, { error: 'other body' }, 'B', 4200), 'why')).why, t('check.replay422.why'));
  assert.equal(failure(() => expectReplay(first, exchange(422, { error: 'other body' }, 'A', 4300), 'why')).why, t('check.replay422.why'));
  // A 500 to a retry is the server failing inside.
  assert.equal(failure(() => expectReplay(first, exchange(500, { error: 'database is locked' }), 'why')).why, t('check.serverError.locked.why', { status: 500 }));
});

test('a race that charged more often than it answered 201 is a refusal that fell through to charge()', () => {
  const answers = [exchange(201, payment), ...Array.from({ length: 9 }, () => exchange(409, { error: 'in flight' }))];
  const why = doubledWhy(answers, 3);
  assert.equal(why, t('check.race.refusedCharged.why', { status: 409, charges: 3, paid: 1 }));
  // Every charged request answered 201 (each saw "no key yet"): the check-then-insert reason.
  const all201 = Array.from({ length: 10 }, () => exchange(201, payment));
  assert.equal(doubledWhy(all201, 3), t('check.race.rows.why', { size: 10 }));
});

test('a start-up failure names the server the workspace runs: server.mjs and node for a Node server, not python3 server.py', () => {
  assert.deepEqual(commandNames({ file: '/usr/local/bin/node', args: ['server.mjs'] }), { server: 'server.mjs', command: 'node server.mjs' });
  assert.deepEqual(commandNames({ file: '/usr/bin/python3', args: ['-u', 'server.py'] }), { server: 'server.py', command: 'python3 -u server.py' });
  const exited = t('check.serverExited', { how: 'exit code 1', port: 4100, server: 'server.mjs' });
  assert.match(exited, /^server\.mjs exited/);
  assert.doesNotMatch(t('check.startedAs', { port: 4100, db: '/tmp/lab.db', command: 'node server.mjs' }), /python3/);
});
