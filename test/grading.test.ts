/**
 * Points, required steps and the run's status; the engine's verdict when the server
 * cannot start, and a grading run cut short by an abort signal.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_STEP_CONCURRENCY, grade } from '../grader/engine.js';
import { SetupError } from '../grader/failure.js';
import { parseGradingConfig, defaultGradingConfig, scoreResults, setupErrorReport } from '../grader/grading.js';
import { DEFAULT_COMMAND, runningServerCount, resolveInterpreter, serversStarted } from '../grader/server.js';
import { requestsInFlight } from '../grader/http.js';
import { STEPS } from '../steps/index.js';
import { serversUnder } from './support.js';
import { misbehavingWorkspace, verdict } from './ci-support.js';

after(() => {
  assert.equal(runningServerCount(), 0, 'every server the grader started was stopped');
});

test('a grading config names steps by id or slug, with non-negative points', () => {
  const config = parseGradingConfig({ server: ['python3', 'server.py'], points: { '2': 2, race: 3.5, '08': 0 }, required: ['replay', '05', '5'] }, 'idem-lab.json', STEPS);
  assert.deepEqual(config.points, { '02': 2, '05': 3.5, '08': 0 });
  assert.deepEqual(config.required, ['02', '05']);
  assert.deepEqual(parseGradingConfig({}, 'x.json', STEPS).points, {});
  assert.equal(parseGradingConfig({}, 'x.json', STEPS).required, undefined);
});

test('a wrong grading config is a setup error naming the file and the entry', () => {
  assert.throws(() => parseGradingConfig({ points: { '09': 1 } }, 'g.json', STEPS), (err: Error) => err instanceof SetupError && /g\.json.*unknown step "09"/.test(err.message));
  assert.throws(() => parseGradingConfig({ points: { '02': -1 } }, 'g.json', STEPS), /points of step "02" must be a number of 0 or more/);
  assert.throws(() => parseGradingConfig({ points: { '02': '2' } }, 'g.json', STEPS), /must be a number/);
  assert.throws(() => parseGradingConfig({ points: [1, 2] }, 'g.json', STEPS), /"points" must be an object/);
  assert.throws(() => parseGradingConfig({ required: '02' }, 'g.json', STEPS), /"required" must be a list/);
  assert.throws(() => parseGradingConfig([], 'g.json', STEPS), /must hold a JSON object/);
});

test('scores sum the points of passed steps; the status is fail when any step fails', () => {
  const config = parseGradingConfig({ points: { '02': 2, '03': 3 }, required: ['02'] }, 'c', STEPS);
  const report = scoreResults([verdict('01', 'pass'), verdict('02', 'pass'), verdict('03', 'fail')], config);
  assert.equal(report.status, 'fail');
  assert.equal(report.score, 3);
  assert.equal(report.maxScore, 6);
  assert.equal(report.requiredPassed, true, 'only 02 is required, and it passed');
  assert.deepEqual(report.steps.map((s) => [s.points, s.score, s.required]), [[1, 1, false], [2, 2, true], [3, 0, false]]);
  assert.equal(report.message, undefined);
  const all = scoreResults([verdict('01', 'pass'), verdict('02', 'fail')], defaultGradingConfig());
  assert.equal(all.requiredPassed, false, 'every step is required by default');
  assert.equal(scoreResults([verdict('01', 'pass')], defaultGradingConfig()).status, 'pass');
});

test('the run is an error when a step could not be graded or the server never started', () => {
  const errored = scoreResults([verdict('01', 'pass'), verdict('02', 'error', 'The grader could not grade this step: boom')], defaultGradingConfig());
  assert.equal(errored.status, 'error');
  assert.match(errored.message ?? '', /Step 02 could not be graded\. The grader could not grade this step: boom/);
  const notStarted = scoreResults([verdict('01', 'pass'), verdict('02', 'fail', 'server.py exited during start-up', { startFailed: true })], defaultGradingConfig());
  assert.equal(notStarted.status, 'error');
  assert.match(notStarted.message ?? '', /^The server could not start.*exited during start-up/);
  assert.equal(notStarted.score, 1, 'the steps that passed keep their points');
  const noAnswer = { server: 'A', port: 1, method: 'POST' as const, path: '/pay', requestBody: '{}', error: 'no answer within 8000 ms', ms: 8000 };
  const answered = { ...noAnswer, status: 201, error: undefined };
  const hung = scoreResults([verdict('01', 'pass'), verdict('02', 'fail', 'POST /pay got no answer', { exchanges: [noAnswer] }), verdict('05', 'fail', 'x', { exchanges: [noAnswer, noAnswer] })], defaultGradingConfig());
  assert.equal(hung.status, 'error');
  assert.match(hung.message ?? '', /^The server answered no request in time \(it hangs\), so its steps could not be checked\. POST \/pay got no answer/);
  const slow = scoreResults([verdict('02', 'pass', 'ok', { exchanges: [answered] }), verdict('05', 'fail', 'x', { exchanges: [noAnswer] })], defaultGradingConfig());
  assert.equal(slow.status, 'fail', 'a server that answered something is graded, not an error');
  const setup = setupErrorReport('no server.py', defaultGradingConfig(), STEPS);
  assert.equal(setup.status, 'error');
  assert.equal(setup.steps.length, STEPS.length);
  assert.ok(setup.steps.every((s) => s.result.status === 'error' && s.result.message === 'no server.py'));
  assert.equal(setup.maxScore, STEPS.length);
  assert.equal(setup.score, 0);
});

test('a server that crashes at start: every live step fails marked startFailed, the file steps still grade', async () => {
  const ws = misbehavingWorkspace('crash-at-start');
  try {
    const results = await grade({ workspace: ws.dir, steps: STEPS, command: await resolveInterpreter(DEFAULT_COMMAND, ws.dir), stopAfterStartFailure: true });
    assert.deepEqual(results.map((r) => r.status), ['pass', 'fail', 'fail', 'fail', 'fail', 'fail', 'pass', 'pass']);
    for (const r of results.slice(1, 6)) {
      assert.equal(r.startFailed, true, `${r.id} is marked startFailed`);
      assert.equal(r.failedPart, 'live');
      assert.match(r.message, /exited during start-up/);
      assert.match(r.serverOutput ?? '', /PAYMENT_PROVIDER_URL is not set/);
    }
    const tried = results.filter((r) => r.startFailed && !r.details.some((d) => /^Not started again for this step: the server could not start in step 0[2-6]\.$/.test(d)));
    assert.ok(tried.length >= 1 && tried.length <= DEFAULT_STEP_CONCURRENCY, `only the steps begun together tried to start it (${tried.map((r) => r.id)})`);
    assert.equal(scoreResults(results, defaultGradingConfig()).status, 'error');
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    ws.remove();
  }
});

test('without stopAfterStartFailure every live step tries to start the server itself', async () => {
  const ws = misbehavingWorkspace('crash-at-start');
  try {
    const results = await grade({ workspace: ws.dir, steps: STEPS.filter((s) => ['02', '03'].includes(s.id)), command: await resolveInterpreter(DEFAULT_COMMAND, ws.dir) });
    assert.ok(results.every((r) => r.startFailed && r.details.every((d) => !/Not started again/.test(d))));
  } finally {
    ws.remove();
  }
});

test('a server that answers /health but hangs on /pay: an abort stops it at once, live steps become errors, file steps still grade', async () => {
  const ws = misbehavingWorkspace('pay-hangs');
  // The abort comes once step 02's POST /pay is held by the server: a server was seen
  // ready and a request has been on its way for a whole second (a readiness poll of a warm-up
  // server ends at once; the held POST never does), not at a fixed time, which a loaded
  // machine may reach before the server is even up.
  const abort = new AbortController();
  const startsBefore = serversStarted();
  let heldSince: number | undefined;
  const watcher = setInterval(() => {
    if (serversStarted() <= startsBefore || requestsInFlight() === 0) heldSince = undefined;
    else if (heldSince === undefined) heldSince = performance.now();
    else if (performance.now() - heldSince >= 1000) {
      clearInterval(watcher);
      abort.abort(new Error('the time limit of this test run'));
    }
  }, 20);
  try {
    const results = await grade({ workspace: ws.dir, steps: STEPS, command: await resolveInterpreter(DEFAULT_COMMAND, ws.dir), signal: abort.signal });
    assert.deepEqual(results.map((r) => r.status), ['pass', 'error', 'error', 'error', 'error', 'error', 'pass', 'pass']);
    // Stopped by the abort, not by the 8 s request time limit (whose message is "no answer within").
    for (const r of results.slice(1, 6)) assert.match(r.message, /^Grading was stopped before this step finished: .*time/i);
    assert.ok(results.some((r) => r.exchanges.length > 0), 'the stopped step keeps what was sent');
    const report = scoreResults(results, defaultGradingConfig());
    assert.equal(report.status, 'error');
    assert.equal(report.score, 3);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    clearInterval(watcher);
    ws.remove();
  }
});

test("a run's time limits are read once and passed down (GradeOptions.limits): the engine and every step use them, not the environment read later", async () => {
  const ws = misbehavingWorkspace('pay-hangs');
  const saved = process.env.IDEM_LAB_REQUEST_TIMEOUT_MS;
  // The environment says something no limit can be: a step that read it would fail to
  // start a server or send a request (an Error), not time out after the run's 1.2 s.
  process.env.IDEM_LAB_REQUEST_TIMEOUT_MS = 'soon';
  try {
    const [result] = await grade({ workspace: ws.dir, steps: STEPS.filter((s) => s.id === '02'), command: await resolveInterpreter(DEFAULT_COMMAND, ws.dir), limits: { startMs: 10_000, requestMs: 1200 } });
    assert.equal(result.status, 'fail', result.message);
    assert.match(result.message, /got no answer: no answer within 1200 ms\.$/);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    if (saved === undefined) delete process.env.IDEM_LAB_REQUEST_TIMEOUT_MS;
    else process.env.IDEM_LAB_REQUEST_TIMEOUT_MS = saved;
    ws.remove();
  }
});
