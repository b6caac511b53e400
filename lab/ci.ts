/**
 * `idem-lab ci init`: sets up a student template repository for grading in GitHub
 * Actions. Writes .github/workflows/idem-lab.yml from lab/ci/idem-lab.yml (Node 20,
 * Python 3.12, idem-lab check with the github and json reporters, the results file
 * uploaded, the job failing when a required step fails), optionally with GitHub
 * Classroom's autograding reporter; an idem-lab.json with the points when the
 * repository has none; and the lines .gitignore lacks for the runner's files.
 */
import fs from 'node:fs';
import path from 'node:path';
import { SetupError } from '../grader/failure.js';
import { CONFIG_FILE, DEFAULT_POINTS } from '../grader/grading.js';
import { STEPS } from '../steps/index.js';
import { LAB_DIR, PACKAGE_ROOT } from './paths.js';

/** Where the workflow goes, relative to the repository root. */
export const WORKFLOW_PATH = path.join('.github', 'workflows', 'idem-lab.yml');

/** Options of `idem-lab ci init`. */
export interface CiInitOptions {
  /** The template repository's root (default: the current directory). */
  dir?: string;
  /** Add GitHub Classroom's autograding reporter step (and the permissions it needs). */
  classroom?: boolean;
  /** What `npm install --global` installs: default `idem-lab@<this version>`. */
  package?: string;
  /** Overwrite an existing workflow file. */
  force?: boolean;
}

/** This package's version, from its package.json. */
export function packageVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

const CLASSROOM = {
  permissions: '\n  checks: write\n  actions: read',
  if: "\n    if: github.actor != 'github-classroom[bot]'",
  step: [
    '',
    '      - name: Report to GitHub Classroom',
    '        if: always()',
    '        uses: classroom-resources/autograding-grading-reporter@v1',
    '        env:',
    '          IDEMLAB_RESULTS: ${{ steps.idemlab.outputs.result }}',
    '        with:',
    '          runners: idemlab',
  ].join('\n'),
};

/**
 * The workflow file's text.
 * @param options.classroom with GitHub Classroom's reporter; the job is then named
 *   "Autograding Tests", the check run Classroom looks for
 * @param options.package the npm install spec (default `idem-lab@<version>`)
 * @throws SetupError when the package spec holds characters that would break the YAML line
 */
export function workflowText(options: Pick<CiInitOptions, 'classroom' | 'package'> = {}): string {
  const spec = options.package ?? `idem-lab@${packageVersion()}`;
  if (!/^[\w@./:#~^=<>+-]+$/.test(spec)) throw new SetupError(`--package "${spec}" is not an npm install spec (a name@version, a tarball or git URL)`);
  const classroom = options.classroom === true;
  const fill: Record<string, string> = {
    WORKFLOW_NAME: classroom ? 'Autograding Tests' : 'idem-lab',
    JOB_NAME: classroom ? 'Autograding Tests' : 'idem-lab checks',
    PACKAGE: spec,
    CLASSROOM_PERMISSIONS: classroom ? CLASSROOM.permissions : '',
    CLASSROOM_IF: classroom ? CLASSROOM.if : '',
    CLASSROOM_STEP: classroom ? CLASSROOM.step : '',
  };
  const template = fs.readFileSync(path.join(LAB_DIR, 'ci', 'idem-lab.yml'), 'utf8');
  return template.replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
    if (!(key in fill)) throw new Error(`lab/ci/idem-lab.yml has an unknown placeholder {{${key}}}`);
    return fill[key];
  });
}

/** The idem-lab.json `ci init` writes when there is none: every step's points, every step required. */
export function defaultConfigText(): string {
  const config = { points: Object.fromEntries(STEPS.map((s) => [s.id, DEFAULT_POINTS])), required: STEPS.map((s) => s.id) };
  return JSON.stringify(config, null, 2) + '\n';
}

/** What `ciInit` did, paths relative to the repository root. */
export interface CiInitReport {
  written: string[];
  kept: string[];
}

/**
 * Writes the workflow (and idem-lab.json when missing) into the repository at `dir`.
 * @throws SetupError when `dir` is not a folder, or the workflow exists and `force` is not set
 */
export function ciInit(options: CiInitOptions): CiInitReport {
  const root = path.resolve(options.dir ?? process.cwd());
  if (!fs.existsSync(root) || !fs.statSync(root).isDirectory()) throw new SetupError(`${root} is not a folder`);
  const text = workflowText(options);
  const workflow = path.join(root, WORKFLOW_PATH);
  if (fs.existsSync(workflow) && !options.force) {
    throw new SetupError(`${WORKFLOW_PATH} already exists in ${root}; idem-lab ci init --force replaces it`);
  }
  const report: CiInitReport = { written: [], kept: [] };
  fs.mkdirSync(path.dirname(workflow), { recursive: true });
  fs.writeFileSync(workflow, text);
  report.written.push(WORKFLOW_PATH);
  const config = path.join(root, CONFIG_FILE);
  if (fs.existsSync(config)) report.kept.push(CONFIG_FILE);
  else {
    fs.writeFileSync(config, defaultConfigText());
    report.written.push(CONFIG_FILE);
  }
  if (addIgnores(path.join(root, '.gitignore'))) report.written.push('.gitignore');
  return report;
}

/** What a template repository should not commit: the runner's state, the server's log and database, the results file. */
export const IGNORED = ['.idem-lab/', 's.log', '*.db', 'idem-lab-results.json'];

/** Adds the IGNORED lines a .gitignore lacks (creating it); whether it changed. */
function addIgnores(file: string): boolean {
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const have = new Set(text.split(/\r?\n/).map((l) => l.trim()));
  const missing = IGNORED.filter((line) => !have.has(line));
  if (missing.length === 0) return false;
  fs.writeFileSync(file, `${text}${text === '' || text.endsWith('\n') ? '' : '\n'}${missing.join('\n')}\n`);
  return true;
}

/** `idem-lab ci init`: write the files and say what to do next. Returns the exit code (0). */
export function ciInitCommand(options: CiInitOptions): number {
  const report = ciInit(options);
  console.log(`Wrote ${report.written.join(', ')}.`);
  if (report.kept.length) console.log(`Kept the existing ${report.kept.join(', ')}: give it "points" and "required" to weigh the steps.`);
  console.log('Commit them to the template repository: every push then runs idem-lab check with the github and json reporters,');
  console.log('uploads idem-lab-results.json, and fails the job when a required step fails.');
  if (!options.classroom) console.log('For GitHub Classroom, run idem-lab ci init --classroom --force to add its autograding reporter.');
  return 0;
}
