/**
 * `idem-lab check` with reporters, run as a real process: exit codes, results files
 * written also when the workspace cannot be graded, the GitHub Actions files, points and
 * required steps from idem-lab.json.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import { XMLValidator } from 'fast-xml-parser';
import { fixtureWorkspace, runCli, runMain, serversUnder, tempDir } from './support.js';
import { RESULTS_SCHEMA, misbehavingWorkspace } from './ci-support.js';

const validResults = new Ajv({ allErrors: true }).compile(RESULTS_SCHEMA);

function readResults(file: string): { status: string; message: string | null; score: number; max_score: number; tests: Array<{ name: string; status: string; message?: string | null }> } {
  const parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  assert.ok(validResults(parsed), JSON.stringify(validResults.errors));
  return parsed;
}

test('reference: json and junit files written, exit 0', async () => {
  const ws = fixtureWorkspace('reference');
  try {
    const out = path.join(ws.dir, 'out', 'results.json');
    const xml = path.join(ws.dir, 'out', 'junit.xml');
    const run = await runCli(['check', '--dir', ws.dir, '--reporter', 'json', '--output', out, '--reporter', `junit=${xml}`]);
    assert.equal(run.exitCode, 0, run.stderr);
    assert.equal(run.stdout, '', 'nothing on stdout: both reports went to files');
    const results = readResults(out);
    assert.deepEqual([results.status, results.message, results.score, results.max_score], ['pass', null, 8, 8]);
    assert.equal(XMLValidator.validate(fs.readFileSync(xml, 'utf8')), true);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    ws.remove();
  }
});

test('starter in GitHub Actions: annotations on stdout, the job summary and the Classroom output appended, exit 1', async () => {
  const ws = fixtureWorkspace('starter');
  const gh = tempDir('idem-lab-gh-');
  try {
    const summary = path.join(gh.dir, 'summary.md');
    const output = path.join(gh.dir, 'output');
    fs.writeFileSync(summary, '# earlier step\n');
    fs.writeFileSync(output, 'other=1\n');
    const run = await runCli(['check', '--reporter', 'github'], {
      cwd: ws.dir,
      env: { GITHUB_ACTIONS: 'true', GITHUB_WORKSPACE: path.dirname(ws.dir), GITHUB_STEP_SUMMARY: summary, GITHUB_OUTPUT: output },
    });
    assert.equal(run.exitCode, 1, run.stderr);
    const workspaceName = path.basename(ws.dir);
    assert.match(run.stdout, new RegExp(`^::error file=${workspaceName}/server\\.py,title=02 replay%3A Replay the stored response::The retry must get`, 'm'));
    assert.match(run.stdout, /^::notice title=idem-lab::3 of 8 steps pass · 3\/8 points · to do: 02, 03, 04, 05, 06$/m);
    const md = fs.readFileSync(summary, 'utf8');
    assert.ok(md.startsWith('# earlier step\n## idem-lab: 3 of 8 steps pass · 3/8 points\n'), 'appended, not overwritten');
    const lines = fs.readFileSync(output, 'utf8').split('\n');
    assert.equal(lines[0], 'other=1');
    const result = JSON.parse(Buffer.from(lines[1].replace(/^result=/, ''), 'base64').toString('utf8'));
    assert.deepEqual([result.version, result.status, result.max_score, result.tests.length], [1, 'fail', 8, 8]);
  } finally {
    ws.remove();
    gh.remove();
  }
});

test('points and required steps from idem-lab.json: only a required failure fails the run', async () => {
  const ws = fixtureWorkspace('starter');
  try {
    fs.writeFileSync(path.join(ws.dir, 'idem-lab.json'), JSON.stringify({ points: { replay: 5, '07': 2 }, required: ['01', '07', '08'] }));
    const out = path.join(ws.dir, 'r.json');
    const run = await runCli(['check', '--dir', ws.dir, '--reporter', `human,json=${out}`]);
    assert.equal(run.exitCode, 0, 'the failing steps are not required');
    assert.match(run.stdout, /✗ 02 replay {2}Replay the stored response {2}0\/5 pt/);
    assert.match(run.stdout, /✓ 07 retry {2}Decide which failures to retry {2}2\/2 pt/);
    assert.match(run.stdout, /3 of 8 steps pass\. To do: 02, 03, 04, 05, 06\. Score: 4 of 13 points\./);
    const results = readResults(out);
    assert.deepEqual([results.status, results.score, results.max_score], ['fail', 4, 13]);
  } finally {
    ws.remove();
  }
});

test('no server.py: the results file is still written with status error, exit 2', async () => {
  const ws = tempDir();
  try {
    const out = path.join(ws.dir, 'results.json');
    const run = await runCli(['check', '--dir', ws.dir, '--reporter', 'json', '--output', out]);
    assert.equal(run.exitCode, 2);
    assert.match(run.stderr, /idem-lab: no workspace at .*there is no server\.py/);
    const results = readResults(out);
    assert.equal(results.status, 'error');
    assert.match(results.message ?? '', /there is no server\.py/);
    assert.equal(results.tests.length, 8);
    assert.ok(results.tests.every((t) => t.status === 'error'));
    const missing = await runCli(['check', '--dir', path.join(ws.dir, 'nowhere'), '--reporter', 'tap']);
    assert.equal(missing.exitCode, 2);
    assert.match(missing.stdout, /^TAP version 13\n1\.\.8\n# no workspace at .*the folder does not exist/);
  } finally {
    ws.remove();
  }
});

test('an unknown step or a broken config with --reporter json: results file with status error, exit 2', async () => {
  const ws = fixtureWorkspace('reference');
  try {
    const out = path.join(ws.dir, 'r.json');
    const unknown = await runCli(['check', '99', '--dir', ws.dir, '--reporter', 'json', '--output', out]);
    assert.equal(unknown.exitCode, 2);
    assert.deepEqual([readResults(out).status, readResults(out).tests.length], ['error', 0]);
    fs.writeFileSync(path.join(ws.dir, 'idem-lab.json'), '{"points": {"02": -1}}');
    const broken = await runCli(['check', '01', '--dir', ws.dir, '--reporter', 'json', '--output', out]);
    assert.equal(broken.exitCode, 2);
    assert.match(readResults(out).message ?? '', /points of step "02" must be a number of 0 or more/);
    const human = await runCli(['check', '01', '--dir', ws.dir]);
    assert.equal(human.exitCode, 2);
    assert.match(human.stderr, /idem-lab: .*idem-lab\.json: the points of step "02"/);
  } finally {
    ws.remove();
  }
});

test('a server that cannot start: results.json says error, as Classroom and the gradebook do (the file tests were graded), each live test says why, exit 1', async () => {
  const ws = misbehavingWorkspace('crash-at-start');
  try {
    const out = path.join(ws.dir, 'r.json');
    const run = await runCli(['check', '--dir', ws.dir, '--reporter', 'json', '--output', out]);
    assert.equal(run.exitCode, 1);
    const results = readResults(out);
    // A server that cannot start is an error of the run in every output (issue 21: Classroom, results.json and the gradebook agree).
    assert.equal(results.status, 'error');
    assert.match(results.message ?? '', /server\.py exited during start-up \(exit code 1\)/);
    assert.match(results.tests[1].message ?? '', /server\.py exited during start-up \(exit code 1\)/);
    const statuses = results.tests.map((t) => t.status);
    assert.deepEqual([statuses[0], statuses[6], statuses[7]], ['pass', 'pass', 'pass'], 'the file tests were graded');
    assert.ok(statuses.slice(1, 6).every((s) => s === statuses[1] && (s === 'fail' || s === 'error')), statuses.join(' '));
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    ws.remove();
  }
});

test('usage errors exit 2 before grading', async () => {
  for (const args of [['--reporter', 'xml'], ['--reporter', 'json,junit'], ['--output', 'x.json'], ['--reporter', 'github=x']]) {
    const run = await runMain(['check', ...args]);
    assert.equal(run.exitCode, 2, args.join(' '));
    assert.match(run.stderr, /^idem-lab: /);
  }
});

test('the entry point reads what a check grades before the command line loads (bin/early.ts)', async () => {
  const { checkTarget } = await import('../bin/early.js');
  const { findWorkspace } = await import('../lab/paths.js');
  const { dir, remove } = tempDir('early-');
  try {
    assert.deepEqual(checkTarget(['check', '--dir', dir, '--sandbox=off']), { workspace: dir, sandbox: 'off' });
    assert.deepEqual(checkTarget(['--lang', 'ko', 'check', '02', `--dir=${dir}`]), { workspace: dir, sandbox: undefined });
    assert.equal(checkTarget(['check', '--sandbox', 'required', '--', '--dir', '/elsewhere'])?.sandbox, 'required');
    assert.equal(checkTarget(['check', '--', '--dir', '/elsewhere'])?.workspace, findWorkspace(), 'after -- nothing is an option');
    // Every other command, and `check` given as another command's argument, begins nothing.
    for (const args of [[], ['start'], ['--lang', 'check'], ['show', 'check'], ['grade', dir]]) assert.equal(checkTarget(args), undefined, args.join(' '));
  } finally {
    remove();
  }
});
