/**
 * `idem-lab ci init`: the workflow it writes is valid YAML that installs Node and Python,
 * runs the checks with the github and json reporters, uploads the results file and fails
 * when a required step fails; its check command really works; the Classroom variant wires
 * the runner output to the reporter; the instructors' guide shows the exact file.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { IGNORED, packageVersion, workflowText, WORKFLOW_PATH } from '../lab/ci.js';
import { chooseReporters } from '../grader/reporters/index.js';
import { fixtureWorkspace, runCli, tempDir } from './support.js';

interface Step {
  id?: string;
  name?: string;
  uses?: string;
  run?: string;
  if?: string;
  with?: Record<string, string>;
  env?: Record<string, string>;
}
interface Workflow {
  name: string;
  on: Record<string, unknown>;
  permissions: Record<string, string>;
  jobs: Record<string, { name: string; if?: string; 'runs-on': string; env: Record<string, string>; steps: Step[] }>;
}

function checkStep(steps: Step[]): Step {
  const step = steps.find((s) => s.run?.startsWith('idem-lab check'));
  assert.ok(step, 'a step runs idem-lab check');
  return step;
}

test('the workflow installs Node 20 and Python, checks with the github and json reporters, uploads the results', () => {
  const workflow = parse(workflowText()) as Workflow;
  assert.deepEqual(Object.keys(workflow.on).sort(), ['pull_request', 'push', 'workflow_dispatch']);
  assert.deepEqual(workflow.permissions, { contents: 'read' });
  const [job] = Object.values(workflow.jobs);
  assert.equal(job['runs-on'], 'ubuntu-latest');
  assert.equal(job.env.IDEM_LAB_PACKAGE, `idem-lab@${packageVersion()}`);
  const uses = job.steps.map((s) => s.uses?.replace(/@.*/, ''));
  for (const action of ['actions/checkout', 'actions/setup-node', 'actions/setup-python', 'actions/upload-artifact']) assert.ok(uses.includes(action), action);
  assert.equal(job.steps.find((s) => s.uses?.startsWith('actions/setup-node'))?.with?.['node-version'], '20');
  assert.match(job.steps.find((s) => s.uses?.startsWith('actions/setup-python'))?.with?.['python-version'] ?? '', /^3\./);
  const install = job.steps.find((s) => s.run?.startsWith('npm install --global'));
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

test('--classroom: the reporter step reads the check step\'s result output, with the permissions it needs', () => {
  const workflow = parse(workflowText({ classroom: true, package: 'https://example.test/idem-lab-0.1.0.tgz' })) as Workflow;
  const [job] = Object.values(workflow.jobs);
  assert.equal(job.name, 'Autograding Tests');
  assert.equal(job.env.IDEM_LAB_PACKAGE, 'https://example.test/idem-lab-0.1.0.tgz');
  assert.deepEqual(workflow.permissions, { contents: 'read', checks: 'write', actions: 'read' });
  const check = checkStep(job.steps);
  const reporter = job.steps.find((s) => s.uses?.startsWith('classroom-resources/autograding-grading-reporter@'));
  assert.ok(reporter);
  assert.equal(reporter.if, 'always()');
  const runner = reporter.with?.runners ?? '';
  assert.equal(runner, check.id, 'the runner is the check step');
  assert.equal(reporter.env?.[`${runner.toUpperCase()}_RESULTS`], `\${{ steps.${check.id}.outputs.result }}`, 'the env name the reporter reads');
  assert.throws(() => workflowText({ package: 'x\n  evil: 1' }), /not an npm install spec/);
});

test('ci init writes the workflow, idem-lab.json and .gitignore lines, and replaces a workflow only with --force', async () => {
  const repo = tempDir('idem-lab-template-');
  try {
    fs.writeFileSync(path.join(repo.dir, '.gitignore'), 'node_modules/\ns.log');
    const first = await runCli(['ci', 'init', '--dir', repo.dir]);
    assert.equal(first.exitCode, 0, first.stderr);
    assert.equal(fs.readFileSync(path.join(repo.dir, WORKFLOW_PATH), 'utf8'), workflowText());
    const config = JSON.parse(fs.readFileSync(path.join(repo.dir, 'idem-lab.json'), 'utf8'));
    assert.deepEqual(config.required, ['01', '02', '03', '04', '05', '06', '07', '08']);
    assert.equal(config.points['05'], 1);
    assert.equal(fs.readFileSync(path.join(repo.dir, '.gitignore'), 'utf8'), `node_modules/\ns.log\n${IGNORED.filter((l) => l !== 's.log').join('\n')}\n`);
    const again = await runCli(['ci', 'init', '--dir', repo.dir, '--classroom']);
    assert.equal(again.exitCode, 2);
    assert.match(again.stderr, /already exists .* --force replaces it/);
    fs.writeFileSync(path.join(repo.dir, 'idem-lab.json'), '{"points": {"02": 5}}');
    const forced = await runCli(['ci', 'init', '--dir', repo.dir, '--classroom', '--force']);
    assert.equal(forced.exitCode, 0);
    assert.match(fs.readFileSync(path.join(repo.dir, WORKFLOW_PATH), 'utf8'), /autograding-grading-reporter/);
    assert.equal(fs.readFileSync(path.join(repo.dir, 'idem-lab.json'), 'utf8'), '{"points": {"02": 5}}', 'an existing config is kept');
    assert.match(forced.stdout, /Kept the existing idem-lab\.json/);
  } finally {
    repo.remove();
  }
});

test('the workflow\'s check step, run as the job runs it on a passing repository: exit 0, results file and Classroom output', async () => {
  const repo = fixtureWorkspace('reference');
  const gh = tempDir('idem-lab-gh-');
  try {
    assert.equal((await runCli(['ci', 'init', '--dir', repo.dir, '--classroom'])).exitCode, 0);
    const job = Object.values((parse(fs.readFileSync(path.join(repo.dir, WORKFLOW_PATH), 'utf8')) as Workflow).jobs)[0];
    const args = checkStep(job.steps).run?.split(/\s+/).slice(1) ?? [];
    const output = path.join(gh.dir, 'output');
    const run = await runCli(args, { cwd: repo.dir, env: { GITHUB_ACTIONS: 'true', GITHUB_WORKSPACE: repo.dir, GITHUB_OUTPUT: output, GITHUB_STEP_SUMMARY: path.join(gh.dir, 'summary') } });
    assert.equal(run.exitCode, 0, run.stdout + run.stderr);
    const results = JSON.parse(fs.readFileSync(path.join(repo.dir, 'idem-lab-results.json'), 'utf8'));
    assert.deepEqual([results.status, results.score, results.max_score], ['pass', 8, 8]);
    const result = JSON.parse(Buffer.from(fs.readFileSync(output, 'utf8').replace(/^result=/, ''), 'base64').toString('utf8'));
    assert.deepEqual([result.status, result.max_score], ['pass', 8]);
  } finally {
    repo.remove();
    gh.remove();
  }
});

test('the instructors\' guide shows the exact workflow file', () => {
  const guide = fs.readFileSync(path.join(PACKAGE_ROOT, 'docs', 'instructors.md'), 'utf8');
  const block = /This is the exact file it writes, `\.github\/workflows\/idem-lab\.yml`:\n\n```yaml\n([\s\S]*?)```\n/.exec(guide);
  assert.ok(block, 'the guide has the workflow block');
  assert.equal(block[1], workflowText());
});
