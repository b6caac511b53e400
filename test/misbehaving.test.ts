/**
 * Servers that misbehave still get a verdict, in bounded time, with nothing left running:
 * one that crashes at start, one that never listens, one whose /pay never answers, one
 * that ignores SIGTERM and leaves a child, one that ignores IDEM_DB.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { grade } from '../grader/engine.js';
import { DEFAULT_COMMAND, runningServerCount, resolveInterpreter } from '../grader/server.js';
import { FIXTURES_DIR, serverSource } from '../fixtures/build.js';
import { selectSteps } from '../steps/index.js';
import type { StepResult } from '../grader/types.js';
import { serversUnder, tempDir } from './support.js';

const saved = { ...process.env };
afterEach(() => {
  // Key by key: a new process.env object would no longer reach the real environment (os.tmpdir reads it).
  for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
  Object.assign(process.env, saved);
  assert.equal(runningServerCount(), 0, 'every server the grader started was stopped');
});

/** Grades one step in a temporary copy of a misbehaving server, checking that nothing outlives it. */
async function gradeServer(source: string, stepId = '02'): Promise<{ result: StepResult; dir: string }> {
  const tmp = tempDir('idem-lab-misbehaving-');
  // The grader runs the server from copies in the temporary folder: one of this test's own.
  const copies = path.join(tmp.dir, 'tmp');
  fs.mkdirSync(copies);
  process.env.TMPDIR = copies;
  try {
    fs.writeFileSync(path.join(tmp.dir, 'server.py'), source);
    const [result] = await grade({ workspace: tmp.dir, steps: selectSteps([stepId]), command: await resolveInterpreter(DEFAULT_COMMAND, tmp.dir) });
    assert.deepEqual(serversUnder(copies), [], 'no process of the server is left running');
    return { result, dir: tmp.dir };
  } finally {
    tmp.remove();
  }
}

function misbehaving(name: string): string {
  return fs.readFileSync(path.join(FIXTURES_DIR, 'misbehaving', name, 'server.py'), 'utf8');
}

test('a server that crashes at start fails with its own output shown', async () => {
  const { result } = await gradeServer(misbehaving('crash-at-start'));
  assert.equal(result.status, 'fail');
  assert.match(result.message, /server\.py exited during start-up \(exit code 1\)/);
  assert.match(result.serverOutput ?? '', /RuntimeError: PAYMENT_PROVIDER_URL is not set/);
});

test('a server that never listens on PORT fails once the start limit passes', async () => {
  process.env.IDEM_LAB_START_TIMEOUT_MS = '1500';
  const { result } = await gradeServer(misbehaving('never-listens'));
  assert.equal(result.status, 'fail');
  assert.match(result.message, /did not answer GET \/health with 200 on 127\.0\.0\.1:\d+ within 1\.5 s/);
  assert.match(result.why ?? '', /listen on \$PORT/);
  assert.match(result.serverOutput ?? '', /warming up the cache/);
});

test('a request that never answers fails with a timeout naming the request', async () => {
  process.env.IDEM_LAB_REQUEST_TIMEOUT_MS = '1000';
  const { result } = await gradeServer(misbehaving('pay-hangs'));
  assert.equal(result.status, 'fail');
  assert.match(result.message, /^POST \/pay to server A with key "[0-9a-f-]{36}" got no answer: no answer within 1000 ms\.$/);
  assert.equal(result.exchanges.length, 1);
  assert.equal(result.exchanges[0].status, undefined);
});

test('a server that ignores SIGTERM and forks a child is stopped with its whole group', async () => {
  const { result } = await gradeServer(misbehaving('ignores-sigterm'));
  assert.equal(result.status, 'fail');
  assert.match(result.message, /must charge and answer 201/);
  assert.equal(result.exchanges[0].status, 500);
});

test('a server that ignores IDEM_DB is told so, not graded on an empty ledger', async () => {
  const elsewhere = serverSource('reference').replace('os.environ.get("IDEM_DB", "lab.db")', 'os.path.join(os.path.dirname(os.getcwd()), "mine.db")');
  assert.notEqual(elsewhere, serverSource('reference'), 'the fixture really hard-codes the path');
  const { result } = await gradeServer(elsewhere);
  assert.equal(result.status, 'fail');
  assert.match(result.message, /never created the database the grader named in IDEM_DB/);
});

test('a server that keeps its database in its own folder passes alone, but a second instance from its own copy does not share it', async () => {
  const own = serverSource('reference').replace('os.environ.get("IDEM_DB", "lab.db")', '"lab.db"');
  assert.equal((await gradeServer(own, '02')).result.status, 'pass', 'one instance in its folder is graded on that database');
  const { result } = await gradeServer(own, '06');
  assert.equal(result.status, 'fail');
  assert.match(result.message, /^On another instance: /);
});

test('a daemon that escapes the process group is found by its environment and killed', async () => {
  const { result } = await gradeServer(misbehaving('escapes-group'));
  assert.equal(result.status, 'fail');
  assert.match(result.message, /must charge and answer 201/);
});
