/**
 * Runs the shell steps of a GitHub Actions job locally, the way the runner does: each
 * `run:` script with `bash --noprofile --norc -eo pipefail` (GitHub's default shell on
 * Linux), the workflow's, the job's and the step's `env:` merged, the variables GitHub
 * sets (GITHUB_ACTIONS, CI, GITHUB_WORKSPACE, RUNNER_TEMP, RUNNER_OS, GITHUB_OUTPUT,
 * GITHUB_STEP_SUMMARY, GITHUB_ENV, GITHUB_PATH pointing at fresh files per step), and
 * what a step writes to GITHUB_OUTPUT, GITHUB_ENV and GITHUB_PATH handed on as the runner
 * does. `${{ }}` expressions are filled from a table the test gives (and the steps'
 * outputs); one not in it fails the run, so nothing is silently left out. `uses:` steps
 * (actions) are not run: the caller stands in for them (the checkout is the folder, Node
 * and Python are this machine's).
 */
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { tempDir } from './support.js';

/** A step of a parsed workflow. */
export interface WorkflowStep {
  id?: string;
  name?: string;
  uses?: string;
  run?: string;
  if?: string;
  env?: Record<string, string>;
  with?: Record<string, unknown>;
}

/** A job of a parsed workflow. */
export interface WorkflowJob {
  name?: string;
  if?: string;
  needs?: string | string[];
  'runs-on': string;
  env?: Record<string, string>;
  strategy?: { 'fail-fast'?: boolean; matrix: Record<string, unknown[]> };
  steps: WorkflowStep[];
}

/** A parsed workflow. */
export interface Workflow {
  name: string;
  on: Record<string, unknown>;
  permissions: Record<string, string>;
  env?: Record<string, string>;
  jobs: Record<string, WorkflowJob>;
}

/** How one run step went. */
export interface StepRun {
  step: WorkflowStep;
  exitCode: number;
  stdout: string;
  stderr: string;
  /** What it appended to $GITHUB_STEP_SUMMARY. */
  summary: string;
  /** Its outputs, from $GITHUB_OUTPUT. */
  outputs: Record<string, string>;
}

/** What to run a job with. */
export interface JobOptions {
  /** The checkout: $GITHUB_WORKSPACE and every step's working directory. */
  workspace: string;
  /** Values of `${{ }}` expressions by their text, e.g. `matrix.shard`, `secrets.IDEM_LAB_TOKEN`. */
  expressions?: Record<string, string>;
  /** Folders put first on PATH (where the stand-ins for actions and installs live). */
  path?: string[];
  /** More variables of the runner's environment. */
  env?: Record<string, string>;
  /** Run only the `run:` steps for which this says true (default all). */
  only?(step: WorkflowStep): boolean;
}

/** `name=value` lines and `name<<DELIM` blocks of a GITHUB_OUTPUT or GITHUB_ENV file. */
export function parseCommandFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const heredoc = /^([^=<]+)<<(.+)$/.exec(lines[i]);
    if (heredoc) {
      const body: string[] = [];
      for (i++; i < lines.length && lines[i] !== heredoc[2]; i++) body.push(lines[i]);
      out[heredoc[1]] = body.join('\n');
      continue;
    }
    const eq = lines[i].indexOf('=');
    if (eq > 0) out[lines[i].slice(0, eq)] = lines[i].slice(eq + 1);
  }
  return out;
}

/** Fills the `${{ expr }}` in `text`; throws for an expression not in `values`. */
export function fillExpressions(text: string, values: Record<string, string>): string {
  return text.replace(/\$\{\{\s*(.*?)\s*\}\}/g, (_, expr: string) => {
    if (!(expr in values)) throw new Error(`the test gives no value for the expression \${{ ${expr} }}`);
    return values[expr];
  });
}

/**
 * Runs the job's `run:` steps in order, as the runner would, and stops at the first that
 * fails unless a later one has `if: always()`. Returns every run step's outcome.
 */
export async function runJob(workflow: Workflow, jobId: string, options: JobOptions): Promise<StepRun[]> {
  const job = workflow.jobs[jobId];
  if (!job) throw new Error(`no job ${jobId}`);
  const scratch = tempDir('idem-lab-runner-');
  const expressions: Record<string, string> = { ...(options.expressions ?? {}) };
  const runs: StepRun[] = [];
  const extraEnv: Record<string, string> = {};
  const extraPath: string[] = [];
  let failed = false;
  try {
    const home = path.join(scratch.dir, 'home');
    const temp = path.join(scratch.dir, 'temp');
    fs.mkdirSync(home);
    fs.mkdirSync(temp);
    for (const [index, step] of job.steps.entries()) {
      if (step.run === undefined) continue;
      if (options.only && !options.only(step)) continue;
      if (failed && step.if !== 'always()') continue;
      const files = Object.fromEntries(['GITHUB_OUTPUT', 'GITHUB_STEP_SUMMARY', 'GITHUB_ENV', 'GITHUB_PATH'].map((name) => [name, path.join(temp, `${name.toLowerCase()}-${index}`)]));
      for (const file of Object.values(files)) fs.writeFileSync(file, '');
      const fill = (env: Record<string, string> | undefined) => Object.fromEntries(Object.entries(env ?? {}).map(([k, v]) => [k, fillExpressions(String(v), expressions)]));
      const script = path.join(temp, `step-${index}.sh`);
      fs.writeFileSync(script, fillExpressions(step.run, expressions));
      const env = {
        PATH: [...(options.path ?? []), ...extraPath, process.env.PATH ?? '/usr/bin:/bin'].join(path.delimiter),
        HOME: home,
        LANG: 'C.UTF-8',
        CI: 'true',
        GITHUB_ACTIONS: 'true',
        GITHUB_WORKSPACE: options.workspace,
        RUNNER_OS: 'Linux',
        RUNNER_TEMP: temp,
        ...files,
        ...(options.env ?? {}),
        ...extraEnv,
        ...fill(workflow.env),
        ...fill(job.env),
        ...fill(step.env),
      };
      const run = await execa('bash', ['--noprofile', '--norc', '-eo', 'pipefail', script], { cwd: options.workspace, env, extendEnv: false, reject: false, timeout: 300_000 });
      const outputs = parseCommandFile(fs.readFileSync(files.GITHUB_OUTPUT, 'utf8'));
      if (step.id) for (const [name, value] of Object.entries(outputs)) expressions[`steps.${step.id}.outputs.${name}`] = value;
      Object.assign(extraEnv, parseCommandFile(fs.readFileSync(files.GITHUB_ENV, 'utf8')));
      extraPath.unshift(...fs.readFileSync(files.GITHUB_PATH, 'utf8').split('\n').filter(Boolean));
      runs.push({ step, exitCode: run.exitCode ?? 1, stdout: String(run.stdout), stderr: String(run.stderr), summary: fs.readFileSync(files.GITHUB_STEP_SUMMARY, 'utf8'), outputs });
      if (run.exitCode !== 0) failed = true;
    }
    return runs;
  } finally {
    scratch.remove();
  }
}

/**
 * The value an action step's `env:` or `with:` entry gets once the steps before it ran:
 * the expressions filled from `values` and the runs' outputs (e.g. the Classroom
 * reporter's IDEMLAB_RESULTS).
 */
export function actionValue(text: string, runs: StepRun[], values: Record<string, string> = {}): string {
  const all: Record<string, string> = { ...values };
  for (const run of runs) if (run.step.id) for (const [k, v] of Object.entries(run.outputs)) all[`steps.${run.step.id}.outputs.${k}`] = v;
  return fillExpressions(text, all);
}

/**
 * A stand-in for `npm install --global [--no-fund --no-audit --allow-scripts=better-sqlite3] FILE.tgz` (the registry is out of reach here): puts
 * `npm` first on PATH that, asked exactly that for a packed idem-lab, unpacks it into a
 * prefix of its own, gives it this repository's node_modules and links its bin, as npm
 * does; anything else it refuses. Returns the folders to put first on PATH and where the
 * installed copy is.
 */
export function npmStandIn(root: string, nodeModules: string): { path: string[]; installed: string } {
  const bin = path.join(root, 'shim');
  const prefix = path.join(root, 'prefix');
  const installed = path.join(prefix, 'lib', 'node_modules', 'idem-lab');
  fs.mkdirSync(bin, { recursive: true });
  fs.mkdirSync(path.join(prefix, 'bin'), { recursive: true });
  const script = `#!/usr/bin/env bash
set -euo pipefail
args=("$@")
if [ "$#" -eq 6 ] && [ "$3" = --no-fund ] && [ "$4" = --no-audit ] && [ "$5" = --allow-scripts=better-sqlite3 ]; then set -- "$1" "$2" "$6"; fi
if [ "$#" -ne 3 ] || [ "$1" != install ] || [ "$2" != --global ] || [ ! -f "$3" ] || [[ "$3" != *.tgz ]]; then
  echo "npm stand-in: only npm install --global [--no-fund --no-audit --allow-scripts=better-sqlite3] FILE.tgz, got: \${args[*]}" >&2
  exit 2
fi
rm -rf '${installed}'
mkdir -p '${installed}'
tar -xzf "$3" -C '${installed}' --strip-components=1
ln -s '${nodeModules}' '${installed}/node_modules'
chmod +x '${installed}/dist/bin/idem-lab.js'
ln -sf '${installed}/dist/bin/idem-lab.js' '${prefix}/bin/idem-lab'
echo "added 1 package from $3"
`;
  fs.writeFileSync(path.join(bin, 'npm'), script, { mode: 0o755 });
  return { path: [bin, path.join(prefix, 'bin')], installed };
}
