/**
 * When one machine is not enough: `grade --shard K/N` slices the folders in a stable order
 * (the same whatever order they were given in, sizes within one, every folder in exactly
 * one slice, rows named as in one run over all); `gradebook merge` joins the slices and
 * refuses a missing, doubled or foreign shard; and the instructor's cohort workflow, its
 * shell steps run locally as the matrix runs them (clones from local git repositories, two
 * shards in the same runner path, then the merge job), gives the gradebook one run over
 * all gives.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { parse } from 'yaml';
import { parse as parseCsv } from 'csv-parse/sync';
import { buildWorkspace } from '../fixtures/build.js';
import { mergeGradebooks, parseShard, shardOf, type GradebookJson } from '../grader/cohort.js';
import { runningServerCount } from '../grader/server.js';
import { COHORT_WORKFLOW_PATH, ROSTER_FILE } from '../bin/ci.js';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { runCli, serversUnder, tempDir } from './support.js';
import { npmStandIn, runJob, type Workflow } from './workflow-runner.js';

const scratch = tempDir('idem-lab-shards-');

after(() => {
  assert.equal(runningServerCount(), 0);
  assert.deepEqual(serversUnder(scratch.dir), []);
  scratch.remove();
});

test('--shard K/N: a stable order, slices within one of each other, every folder in exactly one, names from the whole cohort', () => {
  const dirs = ['c/alice', 'a/bob', 'b/alice', 'zoe', 'a/carol', 'dan', 'eve'];
  const shuffled = [...dirs].reverse();
  for (const count of [1, 2, 3, 7, 9]) {
    const slices = Array.from({ length: count }, (_, i) => shardOf(dirs, { index: i + 1, count }, '/cohort'));
    assert.deepEqual(
      slices.map((s) => s.dirs),
      Array.from({ length: count }, (_, i) => shardOf(shuffled, { index: i + 1, count }, '/cohort').dirs),
      `${count}: the same slices whatever order the folders came in`,
    );
    const all = slices.flatMap((s) => s.dirs);
    assert.deepEqual([...all].sort(), [...dirs].sort(), `${count}: every folder once`);
    assert.deepEqual(all, [...dirs].sort((a, b) => (path.resolve('/cohort', a) < path.resolve('/cohort', b) ? -1 : 1)), 'slices in path order');
    const sizes = slices.map((s) => s.dirs.length);
    assert.ok(Math.max(...sizes) - Math.min(...sizes) <= 1, `${count}: sizes ${sizes}`);
  }
  const names = Object.fromEntries([1, 2, 3].flatMap((i) => { const s = shardOf(dirs, { index: i, count: 3 }, '/cohort'); return s.dirs.map((d, j) => [d, s.names[j]]); }));
  assert.deepEqual([names['c/alice'], names['b/alice'], names['zoe']], ['c/alice', 'b/alice', 'zoe'], 'two alices keep their paths even in different shards');
  assert.deepEqual([1, 2].map((index) => shardOf(['x'], { index, count: 2 }, '/c').dirs), [[], ['x']], 'more shards than folders: an empty slice');
  assert.deepEqual(parseShard('2/4'), { index: 2, count: 4 });
  for (const bad of ['0/2', '3/2', 'a/b', '1', '1/0', '-1/2', '1.5/2']) assert.throws(() => parseShard(bad), /--shard must be K\/N/, bad);
});

/** A gradebook of one shard with the given students (paths), as `grade --shard` writes it. */
function shardBook(index: number, count: number, total: number, paths: string[], maxScore = 8): GradebookJson {
  return {
    version: 1,
    started_at: `2026-01-0${index}T00:00:00.000Z`,
    ms: 1000 * index,
    jobs: 1,
    max_score: maxScore,
    steps: [{ id: '01', slug: 'duplicate', title: 'x', points: maxScore, required: true }],
    students: paths.map((p) => ({ student: path.basename(p), path: p, status: 'pass', score: 8, max_score: 8, first_failure: '', ms: 5, steps: { '01': { status: 'pass', score: 8 } }, results: { version: 3, status: 'pass', message: null, score: 8, max_score: 8, tests: [] } })),
    shard: { index, count, total },
  };
}

test('gradebook merge: joins the shards in path order; a missing, doubled or foreign shard or a student twice is a usage error', async () => {
  const merged = mergeGradebooks([
    { file: 's2.json', book: shardBook(2, 2, 3, ['/c/c']) },
    { file: 's1.json', book: shardBook(1, 2, 3, ['/c/a', '/c/b']) },
  ]);
  assert.deepEqual(merged.students.map((s) => s.path), ['/c/a', '/c/b', '/c/c']);
  assert.deepEqual([merged.started_at, merged.ms, merged.merged_from, merged.shard], ['2026-01-01T00:00:00.000Z', 2000, 2, undefined]);
  const fails = (books: Array<[string, unknown]>, pattern: RegExp) => assert.throws(() => mergeGradebooks(books.map(([file, book]) => ({ file, book }))), pattern);
  fails([['s1.json', shardBook(1, 3, 3, ['/c/a'])], ['s3.json', shardBook(3, 3, 3, ['/c/c'])]], /the gradebook of shard 2\/3 \(of 3\) is missing/);
  fails([['s1.json', shardBook(1, 2, 3, ['/c/a'])], ['again.json', shardBook(1, 2, 3, ['/c/b'])]], /shard 1\/2 is given twice: again\.json and s1\.json/);
  fails([['s1.json', shardBook(1, 2, 3, ['/c/a'])], ['s2.json', shardBook(2, 2, 3, ['/c/b'], 11)]], /s2\.json was graded with other steps or points than s1\.json/);
  fails([['s1.json', shardBook(1, 2, 3, ['/c/a'])], ['s2.json', shardBook(2, 2, 4, ['/c/b'])]], /another cohort/);
  fails([['s1.json', shardBook(1, 2, 3, ['/c/a'])], ['s2.json', shardBook(2, 2, 3, ['/c/a'])]], /\/c\/a is graded in both s1\.json and s2\.json/);
  fails([['x.json', { version: 2 }]], /x\.json is not a JSON gradebook/);
  const whole = { ...shardBook(1, 1, 1, ['/c/z']), shard: undefined };
  fails([['s1.json', shardBook(1, 2, 3, ['/c/a'])], ['all.json', whole]], /all\.json is a whole cohort's gradebook/);

  const dir = path.join(scratch.dir, 'merge-cli');
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 's1.json'), JSON.stringify(shardBook(1, 2, 3, ['/c/a', '/c/b'])));
  fs.writeFileSync(path.join(dir, 'broken.json'), '{');
  const missing = await runCli(['gradebook', 'merge', 's1.json', '--json', 'out.json'], { cwd: dir });
  assert.equal(missing.exitCode, 2);
  assert.match(missing.stderr, /shard 2\/2 \(of 2\) is missing/);
  assert.ok(!fs.existsSync(path.join(dir, 'out.json')), 'nothing written');
  const notJson = await runCli(['gradebook', 'merge', 'broken.json'], { cwd: dir });
  assert.equal(notJson.exitCode, 2);
  assert.match(notJson.stderr, /broken\.json is not JSON/);
  fs.writeFileSync(path.join(dir, 's2.json'), JSON.stringify(shardBook(2, 2, 3, ['/c/c'])));
  const ok = await runCli(['gradebook', 'merge', 's2.json', 's1.json', '--json', 'out.json', '--csv', 'out.csv'], { cwd: dir });
  assert.equal(ok.exitCode, 0, ok.stderr);
  assert.match(ok.stderr, /Merged 2 gradebooks: 3 students\./);
  assert.deepEqual((parseCsv(fs.readFileSync(path.join(dir, 'out.csv'), 'utf8'), { columns: true }) as Array<{ path: string }>).map((r) => r.path), ['/c/a', '/c/b', '/c/c']);
});

/** A git repository at `dir` holding `files` in one commit. */
async function gitRepo(dir: string): Promise<void> {
  const git = (...args: string[]) => execa('git', ['-c', 'user.name=t', '-c', 'user.email=t@e.test', '-c', 'init.defaultBranch=main', ...args], { cwd: dir });
  await git('init', '--quiet');
  await git('add', '-A');
  await git('commit', '--quiet', '-m', 'lab');
}

/** The parts of a student's gradebook entry that do not vary between runs (keys, ports and times do). */
function steady(book: GradebookJson) {
  return book.students.map((s) => ({ student: s.student, path: s.path, status: s.status, score: s.score, max_score: s.max_score, steps: s.steps }));
}

test('the cohort workflow, its shell steps run locally: two shards on the matrix, then the merge, equal one run over all', async () => {
  // The students' repositories, served by git from local folders (owner/name).
  const remotes = path.join(scratch.dir, 'remotes');
  for (const [repo, solution] of [['class/alice', 'reference'], ['class/bob', 'starter'], ['other/alice', 'no-fingerprint']] as const) {
    buildWorkspace(path.join(remotes, repo), solution);
    await gitRepo(path.join(remotes, repo));
  }
  // The instructor's repository.
  const instructor = path.join(scratch.dir, 'instructor');
  fs.mkdirSync(instructor);
  const init = await runCli(['ci', 'init', '--cohort', '--shards', '2', '--dir', instructor]);
  assert.equal(init.exitCode, 0, init.stderr);
  assert.match(init.stdout, /roster\.txt/);
  fs.appendFileSync(path.join(instructor, ROSTER_FILE), 'class/alice\nclass/bob\n\n# a comment\nother/alice\nclass/gone\n../escape\n');
  fs.writeFileSync(path.join(instructor, 'idem-lab.json'), JSON.stringify({ points: { '02': 2 }, required: ['02'] }));
  const workflow = parse(fs.readFileSync(path.join(instructor, COHORT_WORKFLOW_PATH), 'utf8')) as Workflow;
  assert.deepEqual(workflow.jobs.grade.strategy?.matrix.shard, [1, 2]);
  assert.equal(workflow.jobs.merge.needs, 'grade');
  assert.equal(workflow.jobs.merge.if, 'always()', 'the merge runs when a shard has error rows');

  // Every job of the matrix checks the repository out at the same path, as GitHub's runners do.
  const work = path.join(scratch.dir, 'runner', 'work');
  const checkout = () => {
    fs.rmSync(work, { recursive: true, force: true });
    fs.cpSync(instructor, work, { recursive: true });
  };
  const npm = npmStandIn(path.join(scratch.dir, 'runner-tools'), path.join(PACKAGE_ROOT, 'node_modules'));
  const artifacts = path.join(scratch.dir, 'artifacts');
  fs.mkdirSync(artifacts);
  // A run without inputs (a push or a schedule): no due date, every student, a new gradebook.
  const expressions = { 'secrets.IDEM_LAB_TOKEN': 'not-a-real-token', 'github.server_url': `file://${remotes}`, 'inputs.before': '', 'inputs.student': '', 'inputs.gradebook-run': '' };
  for (const shard of [1, 2]) {
    checkout();
    const runs = await runJob(workflow, 'grade', { workspace: work, path: npm.path, expressions: { ...expressions, 'matrix.shard': String(shard) }, env: { IDEM_LAB_START_TIMEOUT_MS: '4000' } });
    assert.deepEqual(runs.map((r) => [r.step.name, r.exitCode === 0 || r.step.name === 'Grade this shard']), [['Install idem-lab', true], ['Install the sandbox', true], ["Clone the students' repositories", true], ['Grade this shard', true]], runs.map((r) => r.stderr).join('\n'));
    const [, , clone, grade] = runs;
    assert.equal(clone.exitCode, 0, clone.stderr);
    assert.match(clone.stdout, /::warning title=idem-lab::could not clone class\/gone/);
    // idem-lab roster says it on stderr, where GitHub reads workflow commands too.
    assert.match(`${clone.stdout}${clone.stderr}`, /::warning title=idem-lab::roster\.txt: not a repository owner\/name, skipped: \.\.\/escape/);
    assert.doesNotMatch(fs.readFileSync(path.join(work, 'submissions', 'class', 'alice', '.git', 'config'), 'utf8'), /not-a-real-token|extraheader/i, 'the token is not stored in a clone');
    assert.ok([0, 1].includes(grade.exitCode), grade.stderr);
    assert.match(grade.stderr, new RegExp(`Shard ${shard}/2: grading 2 of the 4 workspaces`));
    fs.copyFileSync(path.join(work, `gradebook-shard-${shard}.json`), path.join(artifacts, `gradebook-shard-${shard}.json`));
  }
  // One run over all, at the same path.
  const all = await runCli(['grade', '--config', 'idem-lab.json', '--json', 'all.json', ...['class/alice', 'class/bob', 'class/gone', 'other/alice'].map((r) => `submissions/${r}`)], { cwd: work, env: { IDEM_LAB_START_TIMEOUT_MS: '4000' } });
  assert.equal(all.exitCode, 1, 'class/gone is an error row');
  const whole = JSON.parse(fs.readFileSync(path.join(work, 'all.json'), 'utf8')) as GradebookJson;

  // The merge job: the shards' artifacts downloaded into shards/.
  checkout();
  fs.cpSync(artifacts, path.join(work, 'shards'), { recursive: true });
  const merge = await runJob(workflow, 'merge', { workspace: work, path: npm.path, expressions });
  assert.deepEqual(merge.map((r) => [r.step.name, r.exitCode]), [['Install idem-lab', 0], ['Merge the gradebooks', 1]], merge.map((r) => r.stderr).join('\n'));
  const merged = JSON.parse(fs.readFileSync(path.join(work, 'gradebook.json'), 'utf8')) as GradebookJson;
  assert.ok(fs.existsSync(path.join(work, 'gradebook.csv')));
  assert.deepEqual(steady(merged), steady(whole), 'the merged gradebook equals one run over all');
  assert.deepEqual(merged.students.map((s) => s.student), ['submissions/class/alice', 'bob', 'gone', 'submissions/other/alice'], 'two alices named by their paths, as in one run');
  assert.deepEqual(merged.students.slice(0, 3).map((s) => [s.status, s.score]), [['pass', 9], ['fail', 3], ['error', 0]], 'reference, starter, a repository that could not be cloned');
  assert.equal(merged.students[3].steps['04'].status, 'fail', 'no-fingerprint fails 04');
  assert.equal(merged.max_score, 9, 'the instructor\'s points');
});
