/**
 * Every platform an instructor grades on, run as its consumer runs it: the cohort
 * workflow's shell steps end to end on git repositories (basic and advanced), --before
 * picking each student's last commit before the due date, a regrade of one student into
 * the earlier gradebook, feedback files and the required_passed column; the roster read
 * from roster.txt and from a GitHub Classroom export; Exercism's run.sh (exit 0,
 * results.json, bounded time on a hanging server); Gradescope's run_autograder (its
 * results.json against the spec's schema, visibility from the instructor's config).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { parse } from 'yaml';
import { parse as parseCsv } from 'csv-parse/sync';
import { Ajv } from 'ajv';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { buildWorkspace, FIXTURES_DIR } from '../fixtures/build.js';
import { COHORT_WORKFLOW_PATH, EXERCISM_DIR, GRADESCOPE_DIR } from '../bin/ci.js';
import { readRoster } from '../bin/roster.js';
import { ADVANCED } from '../steps/index.js';
import { runCli, tempDir } from './support.js';
import { npmStandIn, runJob, type Workflow } from './workflow-runner.js';
import { GRADESCOPE_SCHEMA, RESULTS_SCHEMA } from './ci-support.js';

const ajv = new Ajv({ allErrors: true });

let scratch: { dir: string; remove: () => void };
/** Where the students' repositories are served from (file://), as github.server_url. */
let gitBase: string;
/** The due date: alice's reference commit is before it, her starter commit after; bob has only commits after. */
const DUE = '2026-11-30T12:00:00Z';

/** Commits the folder's files with the given committer and author date. */
async function commitAll(dir: string, message: string, date: string): Promise<string> {
  const env = { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date, GIT_AUTHOR_NAME: 's', GIT_AUTHOR_EMAIL: 's@e.test', GIT_COMMITTER_NAME: 's', GIT_COMMITTER_EMAIL: 's@e.test' };
  await execa('git', ['add', '-A'], { cwd: dir });
  await execa('git', ['commit', '--quiet', '-m', message], { cwd: dir, env });
  return (await execa('git', ['rev-parse', 'HEAD'], { cwd: dir })).stdout.trim();
}

let aliceReference: string;

before(async () => {
  scratch = tempDir('idem-lab-platforms-');
  gitBase = path.join(scratch.dir, 'git');
  const alice = path.join(gitBase, 'org', 'lab-alice');
  const bob = path.join(gitBase, 'org', 'lab-bob');
  for (const dir of [alice, bob]) await execa('git', ['init', '--quiet', '-b', 'main', dir]);
  buildWorkspace(alice, 'reference');
  aliceReference = await commitAll(alice, 'done', '2026-11-29T10:00:00Z');
  buildWorkspace(alice, 'starter');
  await commitAll(alice, 'oops, after the due date', '2026-12-02T10:00:00Z');
  buildWorkspace(bob, 'starter');
  await commitAll(bob, 'late', '2026-12-03T10:00:00Z');
});

after(() => scratch.remove());

test('roster: roster.txt and a Classroom export; bad names left out with a reason; an empty roster is a clear error, no phantom student', async () => {
  const text = '# comment\r\norg/lab-alice\r\n\r\norg/lab-alice\n../etc\n  org/lab-bob  \nnot a repo\n';
  const roster = readRoster(text, 'roster.txt');
  assert.deepEqual(roster.repos, ['org/lab-alice', 'org/lab-bob']);
  assert.equal(roster.warnings.length, 2);
  assert.match(roster.warnings.join('\n'), /not a repository owner\/name, skipped: \.\.\/etc/);
  const csv = '\ufeff"identifier","github_username","github_id","name"\n"s1","alice","11","Lee, Alice"\n"s2","","","Bob Unlinked"\n"s3","carol-x","13","Carol"\n';
  assert.throws(() => readRoster(csv, 'classroom_roster.csv'), /GitHub Classroom roster export: name the organization/);
  const fromCsv = readRoster(csv, 'classroom_roster.csv', { org: 'org', assignment: 'lab' });
  assert.deepEqual(fromCsv.repos, ['org/lab-alice', 'org/lab-carol-x'], 'Classroom names assignment repositories <prefix>-<username>');
  assert.match(fromCsv.warnings[0], /s2 has no GitHub account linked yet/);
  assert.deepEqual(readRoster(text, 'r', { only: 'org/lab-bob' }).repos, ['org/lab-bob']);
  assert.throws(() => readRoster(text, 'r', { only: 'org/lab-zed' }), /org\/lab-zed is not in r/);
  const repo = tempDir('idem-lab-roster-');
  try {
    assert.equal((await runCli(['ci', 'init', '--dir', repo.dir, '--cohort', '--package', 'idem-lab@0.1.0'])).exitCode, 0);
    const empty = await runCli(['roster', path.join(repo.dir, 'roster.txt')]);
    assert.equal(empty.exitCode, 2, 'the roster ci init writes names nobody yet');
    assert.equal(empty.stdout, '', 'no phantom student');
    assert.match(empty.stderr, /names no student repository yet: add one owner\/name a line/);
  } finally {
    repo.remove();
  }
});

/** The cohort workflow's repository: ci init --cohort, a roster, the npm stand-in. */
async function cohortRepo(track: 'basic' | 'advanced'): Promise<{ dir: string; workflow: Workflow; npm: string[]; remove: () => void }> {
  const repo = tempDir(`idem-lab-cohort-${track}-`);
  const init = await runCli(['ci', 'init', '--dir', repo.dir, '--cohort', '--shards', '1', '--track', track, '--before', DUE]);
  assert.equal(init.exitCode, 0, init.stderr);
  fs.writeFileSync(path.join(repo.dir, 'roster.txt'), '# the cohort\norg/lab-alice\norg/lab-bob\n');
  const workflow = parse(fs.readFileSync(path.join(repo.dir, COHORT_WORKFLOW_PATH), 'utf8')) as Workflow;
  const npm = npmStandIn(path.join(repo.dir, '..', `${path.basename(repo.dir)}-npm`), path.join(PACKAGE_ROOT, 'node_modules'));
  return { dir: repo.dir, workflow, npm: npm.path, remove: () => { repo.remove(); fs.rmSync(path.join(repo.dir, '..', `${path.basename(repo.dir)}-npm`), { recursive: true, force: true }); } };
}

/** What the runner fills the cohort workflow's expressions with. */
function expressions(inputs: { before?: string; student?: string; run?: string }): Record<string, string> {
  return {
    'matrix.shard': '1',
    'secrets.IDEM_LAB_TOKEN': '',
    'github.server_url': `file://${gitBase}`,
    'inputs.before': inputs.before ?? '',
    'inputs.student': inputs.student ?? '',
    'inputs.gradebook-run': inputs.run ?? '',
  };
}

/** Runs the grade job (without the sandbox install, which needs sudo), then the merge job on its shard. */
async function runCohort(repo: { dir: string; workflow: Workflow; npm: string[] }, inputs: { before?: string; student?: string }) {
  fs.rmSync(path.join(repo.dir, 'submissions'), { recursive: true, force: true });
  fs.rmSync(path.join(repo.dir, 'shards'), { recursive: true, force: true });
  const grade = await runJob(repo.workflow, 'grade', { workspace: repo.dir, path: repo.npm, expressions: expressions(inputs), only: (s) => s.name !== 'Install the sandbox' });
  fs.mkdirSync(path.join(repo.dir, 'shards'));
  const shard = path.join(repo.dir, 'gradebook-shard-1.json');
  if (fs.existsSync(shard)) fs.renameSync(shard, path.join(repo.dir, 'shards', 'gradebook-shard-1.json'));
  const merge = await runJob(repo.workflow, 'merge', { workspace: repo.dir, path: repo.npm, expressions: expressions(inputs) });
  return { grade, merge };
}

test('the cohort workflow\'s shell steps, basic: --before grades alice\'s last commit before the due date, bob (none before) is an error row; a regrade of alice goes into that gradebook', async () => {
  const repo = await cohortRepo('basic');
  try {
    const first = await runCohort(repo, { before: DUE });
    assert.deepEqual(first.grade.map((r) => [r.step.name, r.exitCode]), [['Install idem-lab', 0], ["Clone the students' repositories", 0], ['Grade this shard', 1]], first.grade.map((r) => r.stdout + r.stderr).join('\n'));
    assert.match(first.grade[1].stdout, new RegExp(`org/lab-alice: graded at ${aliceReference}, its last commit before ${DUE}`));
    assert.match(first.grade[1].stdout, /::warning title=idem-lab::org\/lab-bob has no commit before/);
    const head = (await execa('git', ['rev-parse', 'HEAD'], { cwd: path.join(repo.dir, 'submissions', 'org', 'lab-alice') })).stdout.trim();
    assert.equal(head, aliceReference, 'the checkout is that commit, not the later one');
    assert.deepEqual(first.merge.map((r) => [r.step.name, r.exitCode]), [['Install idem-lab', 0], ['Merge the gradebooks', 1]], first.merge.map((r) => r.stderr).join('\n'));
    const book = JSON.parse(fs.readFileSync(path.join(repo.dir, 'gradebook.json'), 'utf8'));
    assert.deepEqual(book.students.map((s: { student: string; status: string; required_passed: boolean }) => [s.student, s.status, s.required_passed]), [['lab-alice', 'pass', true], ['lab-bob', 'error', false]]);
    const csv = parseCsv(fs.readFileSync(path.join(repo.dir, 'gradebook.csv'), 'utf8'), { columns: true }) as Array<Record<string, string>>;
    assert.deepEqual(csv.map((r) => [r.student, r.status, r.required_passed]), [['lab-alice', 'pass', 'yes'], ['lab-bob', 'error', 'no']]);
    const feedback = fs.readFileSync(path.join(repo.dir, 'feedback', 'lab-bob.md'), 'utf8');
    assert.match(feedback, /^# idem-lab: lab\\-bob\n\n\*\*⚠️ error\*\* · 0 of 8 steps pass · 0\/8 points · required steps: not all passed/);
    assert.match(feedback, /> \*\*Could not grade everything:\*\* /);
    assert.match(fs.readFileSync(path.join(repo.dir, 'feedback', 'lab-alice.md'), 'utf8'), /8 of 8 steps pass · 8\/8 points · required steps: all passed/);
    // A regrade of alice alone at her latest commit, into the first run's gradebook.
    fs.mkdirSync(path.join(repo.dir, 'previous'));
    fs.copyFileSync(path.join(repo.dir, 'gradebook.json'), path.join(repo.dir, 'previous', 'gradebook.json'));
    const again = await runCohort(repo, { student: 'org/lab-alice' });
    assert.deepEqual(again.grade.map((r) => r.exitCode), [0, 0, 0], again.grade.map((r) => r.stderr).join('\n'));
    assert.ok(!fs.existsSync(path.join(repo.dir, 'submissions', 'org', 'lab-bob')), 'only the student named is cloned');
    assert.match(again.merge[1].stderr, /Merged 1 gradebook into previous\/gradebook\.json: 2 students\./);
    const updated = JSON.parse(fs.readFileSync(path.join(repo.dir, 'gradebook.json'), 'utf8'));
    assert.deepEqual(updated.students.map((s: { student: string; status: string }) => [s.student, s.status]), [['lab-alice', 'fail'], ['lab-bob', 'error']], 'alice regraded (her latest commit is the starter), bob kept');
  } finally {
    repo.remove();
  }
});

test('the cohort workflow\'s shell steps, advanced: the gradebook has the advanced track\'s steps', async () => {
  const repo = await cohortRepo('advanced');
  try {
    const run = await runCohort(repo, { before: DUE, student: 'org/lab-bob' });
    assert.deepEqual(run.grade.map((r) => r.exitCode), [0, 0, 1], run.grade.map((r) => r.stderr).join('\n'));
    const book = JSON.parse(fs.readFileSync(path.join(repo.dir, 'gradebook.json'), 'utf8'));
    assert.deepEqual(book.steps.map((s: { id: string }) => s.id), ADVANCED.steps.map((s) => s.id));
    assert.deepEqual(book.students.map((s: { student: string; status: string }) => [s.student, s.status]), [['lab-bob', 'error']]);
  } finally {
    repo.remove();
  }
});

/** A folder on PATH with `idem-lab` running this build. */
function idemLabOnPath(dir: string): string {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  fs.symlinkSync(path.join(PACKAGE_ROOT, 'dist', 'bin', 'idem-lab.js'), path.join(bin, 'idem-lab'));
  return bin;
}

test('Exercism: run.sh <slug> <in> <out> writes results.json and exits 0, also for a server that hangs (cut off within 20 s) and without arguments', async () => {
  const repo = tempDir('idem-lab-exercism-');
  try {
    const init = await runCli(['ci', 'init', '--dir', repo.dir, '--exercism']);
    assert.equal(init.exitCode, 0, init.stderr);
    const runSh = path.join(repo.dir, EXERCISM_DIR, 'bin', 'run.sh');
    assert.ok(fs.statSync(runSh).mode & 0o100, 'run.sh is executable');
    assert.match(fs.readFileSync(path.join(repo.dir, EXERCISM_DIR, 'Dockerfile'), 'utf8'), /ENTRYPOINT \["\/opt\/test-runner\/bin\/run\.sh"\]/);
    const env = { PATH: `${idemLabOnPath(repo.dir)}:${process.env.PATH}`, IDEM_LAB_CONFIG: path.join(repo.dir, EXERCISM_DIR, 'idem-lab.json') };
    const validResults = ajv.compile(RESULTS_SCHEMA);
    const hanging = path.join(repo.dir, 'hanging');
    buildWorkspace(hanging, 'reference');
    fs.copyFileSync(path.join(FIXTURES_DIR, 'misbehaving', 'pay-hangs', 'server.py'), path.join(hanging, 'server.py'));
    fs.chmodSync(hanging, 0o555);
    const out = path.join(repo.dir, 'out-hanging');
    const started = Date.now();
    const run = await execa(runSh, ['idempotency', `${hanging}/`, `${out}/`], { env, reject: false });
    const seconds = (Date.now() - started) / 1000;
    assert.equal(run.exitCode, 0, 'always exit code 0');
    const results = JSON.parse(fs.readFileSync(path.join(out, 'results.json'), 'utf8'));
    assert.equal(results.status, 'error', 'Exercism: error, with a message');
    if (results.tests.length > 0) {
      assert.ok(validResults(results), ajv.errorsText(validResults.errors));
      assert.match(results.message, /--time-limit 14 s/, `cut off by its own limit (took ${seconds.toFixed(1)} s)`);
      const statuses = results.tests.map((t: { status: string }) => t.status);
      // The live steps 02-06 hang on /pay: each fails on its request time limit (8 s) or is
      // cut off by the 14 s limit (error), whichever comes first on this machine; the file
      // steps are still graded.
      assert.deepEqual([statuses[0], statuses[6], statuses[7]], ['pass', 'pass', 'pass'], 'the file steps still graded');
      assert.ok(statuses.slice(1, 6).every((s: string) => s === 'fail' || s === 'error'), `02-06 fail or are cut off: ${statuses.join(' ')}`);
      assert.ok(statuses.slice(1, 6).includes('error'), `the time limit cut some live step off: ${statuses.join(' ')}`);
    } else {
      // A machine so loaded that idem-lab did not even finish stopping: run.sh's own result.
      assert.match(results.message, /could not grade this solution in time \(idempotency\)/, `took ${seconds.toFixed(1)} s`);
    }
    const none = await execa(runSh, [], { env, reject: false });
    assert.equal(none.exitCode, 0);
  } finally {
    fs.chmodSync(path.join(repo.dir, 'hanging'), 0o755);
    repo.remove();
  }
});

test('Gradescope: run_autograder grades /autograder/submission with the instructor\'s config into results.json valid against the spec', async () => {
  const repo = tempDir('idem-lab-gradescope-');
  try {
    const init = await runCli(['ci', 'init', '--dir', repo.dir, '--gradescope']);
    assert.equal(init.exitCode, 0, init.stderr);
    assert.match(init.stdout, /zip -r \.\.\/autograder\.zip/);
    const bundle = path.join(repo.dir, GRADESCOPE_DIR);
    assert.deepEqual(fs.readdirSync(bundle).sort(), ['idem-lab-0.1.0.tgz', 'idem-lab.json', 'run_autograder', 'setup.sh'].sort());
    assert.match(fs.readFileSync(path.join(bundle, 'setup.sh'), 'utf8'), /npm install --global --no-fund --no-audit --allow-scripts=better-sqlite3 \/autograder\/source\/idem-lab-0\.1\.0\.tgz/);
    const root = path.join(repo.dir, 'autograder');
    fs.mkdirSync(path.join(root, 'source'), { recursive: true });
    fs.writeFileSync(path.join(root, 'source', 'idem-lab.json'), JSON.stringify({ track: 'basic', points: { '07': 2 }, visibility: { '07': 'hidden', '08': 'after_due_date' } }));
    buildWorkspace(path.join(root, 'submission'), 'starter');
    fs.writeFileSync(path.join(root, 'submission', 'idem-lab.json'), JSON.stringify({ points: { '01': 100 } }));
    const env = { PATH: `${idemLabOnPath(repo.dir)}:${process.env.PATH}`, IDEM_LAB_AUTOGRADER: root, IDEM_LAB_USER: 'root' };
    const run = await execa(path.join(bundle, 'run_autograder'), [], { env, reject: false });
    assert.equal(run.exitCode, 0, run.stderr);
    assert.match(run.stdout, /idem-lab: (student servers run in the bubblewrap sandbox|bubblewrap cannot make namespaces)/, 'it says what confines the servers');
    const results = JSON.parse(fs.readFileSync(path.join(root, 'results', 'results.json'), 'utf8'));
    const valid = ajv.compile(GRADESCOPE_SCHEMA);
    assert.ok(valid(results), ajv.errorsText(valid.errors));
    assert.equal(results.tests.reduce((sum: number, t: { max_score: number }) => sum + t.max_score, 0), 9, 'the instructor\'s points, not the submission\'s');
    assert.deepEqual(results.tests.map((t: { visibility: string }) => t.visibility).slice(6), ['hidden', 'after_due_date']);
    assert.equal(results.score, 4, 'the starter passes 01, 07 (2 points) and 08');
  } finally {
    repo.remove();
  }
});
