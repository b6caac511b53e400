/**
 * Grading a cohort: the fixture solutions graded two at a time give the same verdicts as
 * one at a time; broken repositories (no server.py, a server that crashes at start, one
 * that never listens, one that hangs on /pay) become error rows in bounded time while the
 * rest still grade; the CSV and JSON gradebooks read back; nothing is left running.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { buildWorkspace, FIXTURES_DIR, racySteps, referenceFiles, solutionNames } from '../fixtures/build.js';
import { gradeCohort, gradebookCsv, studentNames, type Gradebook } from '../grader/cohort.js';
import { cohortProgress } from '../bin/grade-command.js';
import { defaultGradingConfig, parseGradingConfig } from '../grader/grading.js';
import { runningServerCount } from '../grader/server.js';
import { STEPS } from '../steps/index.js';
import { openWorkspace } from '../lab/workspace.js';
import { runCli, serversUnder, tempDir } from './support.js';
import { RESULTS_SCHEMA } from './ci-support.js';
import { Ajv } from 'ajv';

/** How the basic track's workspaces start their server, as `idem-lab grade` passes it. */
const serverCommand = (workspace: string) => openWorkspace(workspace).command;

const BROKEN = ['crash-at-start', 'never-listens', 'pay-hangs'] as const;

let root: { dir: string; remove: () => void };
let solutions: string[];
let oneByOne: Gradebook;

before(async () => {
  root = tempDir('idem-lab-cohort-');
  // The reference, the starter and every fifth solution: the cohort machinery (ordering,
  // --jobs, gradebooks) is what this file tests; solutions.test.ts grades every fixture.
  const all = solutionNames();
  solutions = all.filter((name, i) => name === 'reference' || name === 'starter' || i % 5 === 0);
  for (const name of solutions) buildWorkspace(path.join(root.dir, name), name);
  for (const name of BROKEN) {
    const dir = path.join(root.dir, name);
    buildWorkspace(dir, 'reference');
    fs.copyFileSync(path.join(FIXTURES_DIR, 'misbehaving', name, 'server.py'), path.join(dir, 'server.py'));
  }
  const noServer = path.join(root.dir, 'no-server');
  fs.mkdirSync(noServer);
  for (const [file, text] of Object.entries(referenceFiles())) fs.writeFileSync(path.join(noServer, file), text);
  oneByOne = await gradeCohort({ dirs: solutions.map((s) => path.join(root.dir, s)), steps: STEPS, serverCommand, config: defaultGradingConfig(), jobs: 1 });
});

after(() => {
  assert.equal(runningServerCount(), 0);
  assert.deepEqual(serversUnder(root.dir), []);
  root.remove();
});

test('one at a time: every solution graded, reference passes, starter fails 02-06', () => {
  assert.deepEqual(oneByOne.rows.map((r) => r.student), solutions);
  const row = (name: string) => oneByOne.rows[solutions.indexOf(name)];
  assert.equal(row('reference').status, 'pass');
  assert.equal(row('reference').score, 8);
  assert.deepEqual(STEPS.map((s) => row('starter').steps[s.id]), ['pass', 'fail', 'fail', 'fail', 'fail', 'fail', 'pass', 'pass']);
  assert.match(row('starter').firstFailure, /^02 replay: Replay the stored response: The retry must get the stored first response back unchanged/);
  // An error row is allowed only where every step in error was inconclusive (the machine was
  // too busy to judge it: grader/gate.ts), never a server that could not start.
  for (const row of oneByOne.rows.filter((r) => r.status === 'error')) {
    const errors = row.report.steps.filter((s) => s.result.status === 'error');
    assert.ok(errors.length > 0 && errors.every((s) => s.result.inconclusive === true), `${row.student}: an error row only for inconclusive steps: ${row.firstFailure}`);
  }
});

test('idem-lab grade --jobs 2: the same verdicts as one at a time; broken repositories are error rows; gradebooks written', async () => {
  const out = path.join(root.dir, 'out');
  const dirs = [...solutions, ...BROKEN, 'no-server'];
  const run = await runCli(['grade', ...dirs, '--jobs', '2', '--csv', path.join(out, 'grades.csv'), '--json', path.join(out, 'grades.json')], {
    cwd: root.dir,
    // The default start and request limits (10 s, 8 s), as a cohort is graded: with 2 s and 3 s a
    // correct server under a load of 10 failed to start in time and was graded a fail.
    // A bound against a hang, not a speed check (npm run bench times the cohort): about 20 workspaces on a loaded 2-core machine.
    timeoutMs: 900_000,
  });
  assert.equal(run.exitCode, 1, `error rows make exit code 1\n${run.stderr}`);
  assert.match(run.stderr, new RegExp(`^\\[${dirs.length}/${dirs.length}\\] `, 'm'), 'a progress line per workspace off a terminal');

  const book = JSON.parse(fs.readFileSync(path.join(out, 'grades.json'), 'utf8'));
  assert.equal(book.jobs, 2);
  assert.deepEqual(book.students.map((s: { student: string }) => s.student), dirs);
  const validResults = new Ajv().compile(RESULTS_SCHEMA);
  // A step inconclusive in either run (status error: the machine was too busy to judge it) has
  // no verdict to compare; there must not be many of them.
  let compared = 0;
  let inconclusive = 0;
  for (const [i, name] of solutions.entries()) {
    const student = book.students[i];
    const judged = STEPS.filter((s) => !racySteps(name).includes(s.id));
    const steady = judged.filter((s) => student.steps[s.id].status !== 'error' && oneByOne.rows[i].steps[s.id] !== 'error');
    compared += judged.length;
    inconclusive += judged.length - steady.length;
    assert.deepEqual(
      steady.map((s) => student.steps[s.id].status),
      steady.map((s) => oneByOne.rows[i].steps[s.id]),
      `${name}: the same verdicts with --jobs 2 as one at a time; with --jobs 2: ${student.first_failure}; one at a time: ${oneByOne.rows[i].firstFailure}`,
    );
    if (steady.length === STEPS.length) assert.equal(student.score, oneByOne.rows[i].score);
    assert.ok(validResults(student.results), `${name}: its results.json is valid`);
  }
  assert.ok(inconclusive * 5 <= compared, `at most a fifth of the steps inconclusive (${inconclusive} of ${compared})`);
  const byName = (name: string) => book.students[dirs.indexOf(name)];
  for (const name of [...BROKEN, 'no-server']) assert.equal(byName(name).status, 'error', `${name} is an error row`);
  assert.match(byName('crash-at-start').first_failure, /^The server could not start.*exited during start-up \(exit code 1\)/);
  assert.match(byName('never-listens').first_failure, /^The server could not start.*did not answer GET \/health with 200 .* within 10 s/);
  assert.match(byName('pay-hangs').first_failure, /^The server answered no request in time \(it hangs\).*got no answer: no answer within 8000 ms/);
  assert.match(byName('no-server').first_failure, /there is no server\.py/);
  for (const name of BROKEN) assert.deepEqual([byName(name).steps['01'].status, byName(name).steps['07'].status], ['pass', 'pass'], `${name}: file steps still graded`);
  // Bounds against a hang, not speed checks (the machine may be loaded): a server that never
  // listens costs the start limit (10 s) a few times, not the workspace's time limit; a
  // hanging server costs a few request limits (8 s) and the held round's bounds (8 s).
  assert.ok(byName('never-listens').ms < 90_000, `a server that never listens costs the start limit a few times (${byName('never-listens').ms} ms)`);
  assert.ok(byName('pay-hangs').ms < 150_000, `a hanging server costs a few request time limits (${byName('pay-hangs').ms} ms)`);

  const csv = parse(fs.readFileSync(path.join(out, 'grades.csv'), 'utf8'), { columns: true }) as Record<string, string>[];
  assert.deepEqual(Object.keys(csv[0]), ['student', 'path', 'status', 'required_passed', ...STEPS.map((s) => `${s.id}-${s.slug}`), 'score', 'max_score', 'first_failure', 'sandbox']);
  assert.equal(csv.length, dirs.length);
  csv.forEach((record, i) => {
    const student = book.students[i];
    assert.equal(record.student, dirs[i]);
    assert.equal(record.path, path.join(root.dir, dirs[i]));
    assert.equal(record.status, student.status);
    assert.deepEqual(STEPS.map((s) => record[`${s.id}-${s.slug}`]), STEPS.map((s) => student.steps[s.id].status));
    assert.equal(Number(record.score), student.score);
    assert.equal(Number(record.max_score), 8);
    assert.equal(record.first_failure, student.first_failure.replace(/\s*\n\s*/g, ' '));
  });

  assert.match(run.stdout, /^student +status +01 02 03 04 05 06 07 08 +score +first failure$/m);
  assert.match(run.stdout, /^reference +pass +(✓ +){8}8\/8 *$/m);
  const errorRows = 4 + book.students.slice(0, solutions.length).filter((s: { status: string }) => s.status === 'error').length;
  assert.match(run.stdout, new RegExp(`${dirs.length} workspaces graded in [\\d.]+ s with --jobs 2: \\d+ pass, \\d+ fail, ${errorRows} error\\.`));
  assert.deepEqual(serversUnder(root.dir), [], 'no server left running');
});

test('--timeout cuts off a workspace that takes too long: an error row, its servers stopped', async () => {
  const out = path.join(root.dir, 'cut.json');
  const started = performance.now();
  const run = await runCli(['grade', 'pay-hangs', '--timeout', '2', '--json', out], { cwd: root.dir, env: { IDEM_LAB_REQUEST_TIMEOUT_MS: '8000' } });
  assert.equal(run.exitCode, 1);
  const [hanging] = JSON.parse(fs.readFileSync(out, 'utf8')).students;
  assert.equal(hanging.status, 'error');
  assert.match(hanging.first_failure, /^Step 02 could not be graded\. Grading was stopped before this step finished: the workspace took longer than 2 s to grade, so it was cut off\.?$/);
  assert.deepEqual([hanging.steps['01'].status, hanging.steps['08'].status], ['pass', 'pass'], 'file steps are still graded');
  // The message above is the evidence that --timeout cut it (not the 8 s request limit); the
  // time it took is a bound against a hang only, loose for a loaded machine.
  assert.ok(hanging.ms < 30_000, `cut off, not left hanging (${hanging.ms} ms)`);
  assert.ok((performance.now() - started) / 1000 < 60);
  assert.deepEqual(serversUnder(path.join(root.dir, 'pay-hangs')), []);
});

test('points from --config weigh every student alike; a bad --jobs is a usage error', async () => {
  const config = parseGradingConfig({ points: { '02': 4 } }, 't', STEPS);
  const book = await gradeCohort({ dirs: [path.join(root.dir, 'no-server')], steps: STEPS, serverCommand, config });
  assert.deepEqual([book.maxScore, book.rows[0].maxScore, book.rows[0].score], [11, 11, 0]);
  const usage = await runCli(['grade', 'x', '--jobs', '0']);
  assert.equal(usage.exitCode, 2);
  assert.match(usage.stderr, /--jobs must be a whole number of 1 or more, not "0"/);
  assert.equal((await runCli(['grade'])).exitCode, 2);
});

test('the gradebook CSV keeps spreadsheets from running a cell as a formula', () => {
  const book: Gradebook = {
    steps: [],
    rows: [{ student: '=HYPERLINK("x")', path: '/w', status: 'fail', requiredPassed: false, steps: {}, score: 0, maxScore: 0, firstFailure: '+1 -2\nnext', ms: 0, sandbox: 'on', report: { steps: [], status: 'fail', score: 0, maxScore: 0, requiredPassed: false } }],
    maxScore: 0,
    jobs: 1,
    ms: 0,
    startedAt: new Date(),
  };
  const [record] = parse(gradebookCsv(book), { columns: true }) as Record<string, string>[];
  assert.equal(record.student, `'=HYPERLINK("x")`);
  assert.equal(record.first_failure, `'+1 -2 next`);
});

test('row names are folder names, paths only where two folders share a name', () => {
  assert.deepEqual(studentNames(['a/alice', 'b/bob', 'c/alice'], '/cohort'), ['a/alice', 'bob', 'c/alice']);
  assert.deepEqual(studentNames(['/x/alice/'], '/cohort'), ['alice']);
});

test('on a terminal the progress is one line rewritten in place', () => {
  const written: string[] = [];
  const stream = { isTTY: true, columns: 60, write: (text: string) => written.push(text) } as unknown as NodeJS.WriteStream;
  const shown = cohortProgress(3, stream);
  shown.start('alice', 1);
  const row = { student: 'alice', status: 'fail', score: 6, maxScore: 8 } as Parameters<typeof shown.row>[0];
  shown.row(row, 1);
  shown.end();
  assert.ok(written.every((w) => w.startsWith('\r\x1b[K') && !w.includes('\n')), JSON.stringify(written));
  assert.match(written[1], /\[1\/3\] 0 running · 0 pass, 1 fail, 0 error · alice: fail 6\/8/);
  assert.ok(written.every((w) => w.length <= 60 + 4), 'cut to the terminal width');
});
