/**
 * `idem-lab ci init`: sets up grading in GitHub Actions.
 *
 * - In a student template repository: .github/workflows/idem-lab.yml (Node 20, Python
 *   3.12, idem-lab check with the github and json reporters, the results file uploaded,
 *   the job failing when a required step fails), optionally in the shape of GitHub
 *   Classroom's own autograding template (`--classroom`).
 * - In an instructor's repository (`--cohort`): .github/workflows/idem-lab-cohort.yml,
 *   which clones the students' repositories named in roster.txt, grades them in N shards
 *   on a GitHub Actions matrix (`idem-lab grade --shard K/N`) and merges the shards'
 *   gradebooks (`idem-lab gradebook merge`).
 *
 * Both install idem-lab without a registry entry for it: `ci init` packs the running
 * idem-lab (`npm pack` of its package root) into `.idem-lab/idem-lab-<version>.tgz` and
 * the workflow installs that file; `--package SPEC` installs SPEC instead. The workflow is
 * emitted with the `yaml` library, every string value double-quoted, so a spec holding
 * `@ # ~ >= :` reads back as written. Values from the command line go only into `env:`,
 * never into a `run:` script or a `${{ }}` expression.
 * Also writes an idem-lab.json with the points when the repository has none, and the
 * .gitignore lines it lacks.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { Document, isScalar, visit, type Scalar } from 'yaml';
import { SetupError } from '../grader/failure.js';
import { CONFIG_FILE, DEFAULT_POINTS } from '../grader/grading.js';
import { listOf, t } from '../i18n/index.js';
import { STEPS } from '../steps/index.js';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { outputOf, type Output } from './output.js';

/** Where the student workflow goes, relative to the repository root. */
export const WORKFLOW_PATH = path.join('.github', 'workflows', 'idem-lab.yml');
/** Where the instructor's cohort workflow goes, relative to the repository root. */
export const COHORT_WORKFLOW_PATH = path.join('.github', 'workflows', 'idem-lab-cohort.yml');
/** The instructor's list of student repositories, one `owner/name` a line (`#` comments). */
export const ROSTER_FILE = 'roster.txt';
/** The folder of the packed idem-lab in the repository (the runner's state folder; see IGNORED). */
export const PACKED_DIR = '.idem-lab';
/** The step id whose `result` output GitHub Classroom's reporter reads (letters and digits only: the reporter's rule). */
export const CLASSROOM_RUNNER = 'idemlab';
/** The job id of GitHub Classroom's own template, which Classroom looks for. */
export const CLASSROOM_JOB = 'run-autograding-tests';
/** Shards of the cohort workflow when --shards is not given. */
export const DEFAULT_SHARDS = 4;
/** GitHub's limit of jobs in one matrix. */
export const MAX_SHARDS = 256;

/** Options of `idem-lab ci init`. */
export interface CiInitOptions {
  /** The repository's root (default: the current directory). */
  dir?: string;
  /** The workflow in the shape of GitHub Classroom's template, with its autograding reporter. */
  classroom?: boolean;
  /** What `npm install --global` installs: default the packed running idem-lab. */
  package?: string;
  /** Write the instructor's cohort workflow instead of the student one. */
  cohort?: boolean;
  /** --shards N: matrix jobs of the cohort workflow (default DEFAULT_SHARDS). */
  shards?: string | number;
  /** Overwrite an existing workflow file. */
  force?: boolean;
  /** Where `ci init` says what it wrote (default: stdout). */
  out?: Output;
}

/** This package's version, from its package.json. */
export function packageVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

/** The packed idem-lab's file name, `idem-lab-<version>.tgz` (npm pack's own name for it). */
export function tarballName(version = packageVersion()): string {
  return `idem-lab-${version}.tgz`;
}

/** The spec the workflow installs by default: the packed file, relative to the repository root. */
export function defaultPackageSpec(): string {
  return `./${PACKED_DIR}/${tarballName()}`;
}

/**
 * Checks an npm install spec given with --package.
 * @throws SetupError when it is empty or holds a control character or a newline (which no spec has)
 */
function checkSpec(spec: string): string {
  // eslint-disable-next-line no-control-regex
  if (spec.trim() === '' || /[\u0000-\u001f\u007f]/.test(spec)) throw new SetupError(t('ci.badPackage', { spec: JSON.stringify(spec) }));
  return spec;
}

/**
 * The number of shards from --shards.
 * @throws SetupError unless a whole number from 1 to MAX_SHARDS
 */
export function shardCount(value: string | number | undefined): number {
  if (value === undefined) return DEFAULT_SHARDS;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_SHARDS) throw new SetupError(t('ci.badShards', { value: String(value), max: MAX_SHARDS }));
  return n;
}

/** A workflow step as the yaml library stringifies it. */
type Step = Record<string, unknown>;

const SETUP: Step[] = [
  // The job's token is not left in .git/config, where a student's server could read it.
  { uses: 'actions/checkout@v4', with: { 'persist-credentials': false } },
  { uses: 'actions/setup-node@v4', with: { 'node-version': '20' } },
  { uses: 'actions/setup-python@v5', with: { 'python-version': '3.12' } },
  { name: 'Install idem-lab', run: 'npm install --global "$IDEM_LAB_PACKAGE"' },
];

/**
 * The YAML text of a workflow object: string values double-quoted (scripts of several
 * lines as literal blocks), `key:` for a null value, a blank line before each top-level
 * key, `comment` as the leading comment and `stepComments` before the steps they name
 * (by [job id, step index]).
 */
function emit(workflow: Record<string, unknown>, comment: string, stepComments: Array<[string, number, string]> = []): string {
  const doc = new Document(workflow, { aliasDuplicateObjects: false });
  doc.commentBefore = comment;
  visit(doc, {
    Scalar(_key, node: Scalar) {
      if (typeof node.value === 'string' && node.value.includes('\n')) node.type = 'BLOCK_LITERAL';
    },
  });
  const top = doc.contents as unknown as { items: Array<{ key: { spaceBefore?: boolean } }> };
  top.items.forEach((pair, i) => {
    if (i > 0 && isScalar(pair.key)) pair.key.spaceBefore = true;
  });
  for (const [job, index, text] of stepComments) {
    const node = doc.getIn(['jobs', job, 'steps', index], true) as { commentBefore?: string } | undefined;
    if (node) node.commentBefore = text;
  }
  return doc.toString({ defaultStringType: 'QUOTE_DOUBLE', defaultKeyType: 'PLAIN', nullStr: '', lineWidth: 0 });
}

const CHECK_COMMENT = ' Fails the job when a required step fails (exit code 1) or the lab cannot be\n graded (exit code 2); the results file is written either way.';

/**
 * The student workflow's text.
 * @param options.classroom in the shape of GitHub Classroom's template: the workflow named
 *   "Autograding Tests", triggered by push and repository_dispatch, the job id
 *   `run-autograding-tests` (skipping Classroom's own first commit), with the permissions
 *   and the last step of classroom-resources/autograding-grading-reporter, which reads the
 *   check step's `result` output (weighted points: see classroomResult)
 * @param options.package the npm install spec (default: the packed file, defaultPackageSpec)
 * @throws SetupError when the package spec is empty or holds a control character
 */
export function workflowText(options: Pick<CiInitOptions, 'classroom' | 'package'> = {}): string {
  const spec = checkSpec(options.package ?? defaultPackageSpec());
  const classroom = options.classroom === true;
  const steps: Step[] = [
    ...SETUP,
    { name: 'Check the steps', id: CLASSROOM_RUNNER, run: 'idem-lab check --reporter github --reporter json --output idem-lab-results.json' },
    { name: 'Upload the results', if: 'always()', uses: 'actions/upload-artifact@v4', with: { name: 'idem-lab-results', path: 'idem-lab-results.json', 'if-no-files-found': 'warn' } },
  ];
  if (classroom) {
    steps.push({
      name: 'Report to GitHub Classroom',
      if: 'always()',
      uses: 'classroom-resources/autograding-grading-reporter@v1',
      env: { [`${CLASSROOM_RUNNER.toUpperCase()}_RESULTS`]: `\${{ steps.${CLASSROOM_RUNNER}.outputs.result }}` },
      with: { runners: CLASSROOM_RUNNER },
    });
  }
  const job: Record<string, unknown> = classroom
    ? { 'runs-on': 'ubuntu-latest', if: "github.actor != 'github-classroom[bot]'" }
    : { name: 'idem-lab checks', 'runs-on': 'ubuntu-latest' };
  Object.assign(job, { 'timeout-minutes': 15, env: { IDEM_LAB_PACKAGE: spec }, steps });
  const jobId = classroom ? CLASSROOM_JOB : 'grade';
  const workflow = {
    name: classroom ? 'Autograding Tests' : 'idem-lab',
    on: classroom ? { push: null, repository_dispatch: null, workflow_dispatch: null } : { push: null, pull_request: null, workflow_dispatch: null },
    permissions: classroom ? { checks: 'write', actions: 'read', contents: 'read' } : { contents: 'read' },
    jobs: { [jobId]: job },
  };
  const comment = [
    ' Grades the lab in this repository on every push with the checks learners run',
    ' themselves (idem-lab check). Written by `idem-lab ci init`; edit as you need.',
    ' Points and required steps: idem-lab.json ("points", "required"). The student controls',
    ' this repository, this file included: marks that count come from `idem-lab grade`.',
    ' IDEM_LAB_PACKAGE: what npm installs (the packed idem-lab committed beside this file,',
    ' an npm version, a tarball URL or a git URL).',
  ].join('\n');
  return emit(workflow, comment, [[jobId, SETUP.length, CHECK_COMMENT]]);
}

/** The clone step of the cohort workflow: every `owner/name` of roster.txt into submissions/owner/name. */
const CLONE_SCRIPT = `mkdir -p submissions
# The token is handed to git for each clone, never stored in a clone's .git/config,
# so no student's server can read it from its folder.
auth=""
if [ -n "\${IDEM_LAB_TOKEN:-}" ]; then
  auth="AUTHORIZATION: basic $(printf 'x-access-token:%s' "$IDEM_LAB_TOKEN" | base64 | tr -d '\\n')"
fi
grep -Ev '^[[:space:]]*(#|$)' ${ROSTER_FILE} | tr -d '\\r' | while read -r repo; do
  if ! printf '%s\\n' "$repo" | grep -Eq '^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$' || printf '%s\\n' "$repo" | grep -q '\\.\\.'; then
    echo "::warning title=idem-lab::${ROSTER_FILE}: not a repository owner/name, skipped: $repo"
    continue
  fi
  if ! git -c "http.extraHeader=$auth" clone --quiet --depth 1 "$IDEM_LAB_GIT_BASE/$repo" "submissions/$repo"; then
    # An empty folder: the student gets an error row ("no server.py") instead of vanishing.
    echo "::warning title=idem-lab::could not clone $repo: it is graded as an error row"
    rm -rf "submissions/$repo"
    mkdir -p "submissions/$repo"
  fi
done
`;

/**
 * The sandbox step of the cohort workflow: `idem-lab grade` runs every student's server in
 * bubblewrap and refuses to grade without it, so it is installed when missing, and Ubuntu
 * 24.04's AppArmor rule that keeps unprivileged user namespaces from programs without a
 * profile (which bubblewrap needs) is lifted on the throw-away runner.
 */
const SANDBOX_SCRIPT = `if ! command -v bwrap >/dev/null 2>&1; then
  sudo apt-get update -q
  sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap
fi
if [ "$(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null)" = "1" ]; then
  sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0
fi
`;

const GRADE_SCRIPT = `idem-lab grade --shard "$SHARD_INDEX/$SHARD_COUNT" --jobs 2 --config idem-lab.json \\
  --json "gradebook-shard-$SHARD_INDEX.json" submissions/*/*
`;

const MERGE_SCRIPT = `idem-lab gradebook merge shards/*.json --json gradebook.json --csv gradebook.csv
`;

/**
 * The instructor's cohort workflow: on workflow_dispatch, `shards` matrix jobs each install
 * the sandbox (bubblewrap), clone
 * the repositories of roster.txt (with the IDEM_LAB_TOKEN secret when set), grade their
 * slice with `idem-lab grade --shard K/N --config idem-lab.json` and upload its gradebook;
 * a last job merges them with `idem-lab gradebook merge` and uploads gradebook.json and
 * gradebook.csv. The shard jobs do not stop each other (fail-fast off), and the merge runs
 * even when a shard has error rows (its exit code 1).
 * @throws SetupError for a bad --package or --shards
 */
export function cohortWorkflowText(options: Pick<CiInitOptions, 'package' | 'shards'> = {}): string {
  const spec = checkSpec(options.package ?? defaultPackageSpec());
  const shards = shardCount(options.shards);
  const upload = (name: string, file: string): Step => ({ name: `Upload ${file}`, if: 'always()', uses: 'actions/upload-artifact@v4', with: { name, path: file, 'if-no-files-found': 'error' } });
  const workflow = {
    name: 'idem-lab cohort',
    on: { workflow_dispatch: null },
    permissions: { contents: 'read' },
    env: { IDEM_LAB_PACKAGE: spec },
    jobs: {
      grade: {
        name: 'Grade shard ${{ matrix.shard }}',
        'runs-on': 'ubuntu-latest',
        'timeout-minutes': 120,
        strategy: { 'fail-fast': false, matrix: { shard: Array.from({ length: shards }, (_, i) => i + 1) } },
        env: { SHARD_INDEX: '${{ matrix.shard }}', SHARD_COUNT: String(shards) },
        steps: [
          ...SETUP,
          { name: 'Install the sandbox', run: SANDBOX_SCRIPT },
          { name: "Clone the students' repositories", env: { IDEM_LAB_TOKEN: '${{ secrets.IDEM_LAB_TOKEN }}', IDEM_LAB_GIT_BASE: '${{ github.server_url }}' }, run: CLONE_SCRIPT },
          { name: 'Grade this shard', run: GRADE_SCRIPT },
          upload('gradebook-shard-${{ matrix.shard }}', 'gradebook-shard-${{ matrix.shard }}.json'),
        ],
      },
      merge: {
        name: 'Merge the gradebooks',
        needs: 'grade',
        if: 'always()',
        'runs-on': 'ubuntu-latest',
        'timeout-minutes': 15,
        steps: [
          ...SETUP.filter((s) => s.uses !== 'actions/setup-python@v5'),
          { uses: 'actions/download-artifact@v4', with: { pattern: 'gradebook-shard-*', path: 'shards', 'merge-multiple': true } },
          { name: 'Merge the gradebooks', run: MERGE_SCRIPT },
          { name: 'Upload the gradebook', if: 'always()', uses: 'actions/upload-artifact@v4', with: { name: 'gradebook', path: 'gradebook.json\ngradebook.csv\n', 'if-no-files-found': 'error' } },
        ],
      },
    },
  };
  const comment = [
    ' Grades a cohort: every repository in roster.txt (one owner/name a line), in shards',
    ' on a matrix of runners (idem-lab grade --shard K/N), then one gradebook from them all',
    ' (idem-lab gradebook merge): the artifact "gradebook" holds gradebook.json and .csv.',
    ' Written by `idem-lab ci init --cohort`. Points and required steps: idem-lab.json here,',
    " never the students' own. Secret IDEM_LAB_TOKEN: a token that can read the students'",
    ' repositories (not needed for public ones). Run it from the Actions tab.',
  ].join('\n');
  return emit(workflow, comment);
}

/** The idem-lab.json `ci init` writes when there is none: every step's points, every step required. */
export function defaultConfigText(): string {
  const config = { points: Object.fromEntries(STEPS.map((s) => [s.id, DEFAULT_POINTS])), required: STEPS.map((s) => s.id) };
  return JSON.stringify(config, null, 2) + '\n';
}

/** The roster.txt `ci init --cohort` writes when there is none. */
export function defaultRosterText(): string {
  return "# The students' repositories to grade, one owner/name a line, e.g.\n# my-classroom/idempotency-lab-alice\n";
}

/** What `ciInit` did, paths relative to the repository root. */
export interface CiInitReport {
  written: string[];
  kept: string[];
}

/**
 * Packs the running idem-lab (`npm pack` of PACKAGE_ROOT, its scripts not run, so an
 * installed copy packs too) into `<root>/.idem-lab/idem-lab-<version>.tgz`.
 * @returns the tarball's path relative to `root`
 * @throws SetupError when npm cannot pack it (the message says to use --package)
 */
export async function packInto(root: string): Promise<string> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-lab-pack-'));
  try {
    const run = await execa('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: PACKAGE_ROOT, reject: false, timeout: 120_000, env: { npm_config_update_notifier: 'false', npm_config_fund: 'false' } });
    let file: string | undefined;
    try {
      file = (JSON.parse(run.stdout) as Array<{ filename: string }>)[0]?.filename;
    } catch {
      file = undefined;
    }
    if (run.exitCode !== 0 || !file || !fs.existsSync(path.join(tmp, path.basename(file)))) {
      const why = String(run.stderr ?? '') || String(run.message ?? '');
      throw new SetupError(t('ci.packFailed', { root: PACKAGE_ROOT, error: why.trim().split('\n').slice(-3).join(' ') }));
    }
    const target = path.join(root, PACKED_DIR, tarballName());
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.copyFileSync(path.join(tmp, path.basename(file)), target);
    return path.relative(root, target);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Writes the workflow (the cohort one with `cohort`), idem-lab.json when missing (and
 * roster.txt for a cohort), the packed idem-lab unless `package` is given, and the
 * .gitignore lines; into the repository at `dir`.
 * @throws SetupError when `dir` is not a folder, the workflow exists and `force` is not
 *   set, an option is bad, or npm cannot pack idem-lab
 */
export async function ciInit(options: CiInitOptions): Promise<CiInitReport> {
  const root = path.resolve(options.dir ?? process.cwd());
  if (!fs.existsSync(root) || !fs.statSync(root).isDirectory()) throw new SetupError(t('cli.notFolder', { dir: root }));
  if (options.cohort && options.classroom) throw new SetupError(t('ci.cohortClassroom'));
  const relative = options.cohort ? COHORT_WORKFLOW_PATH : WORKFLOW_PATH;
  const text = options.cohort ? cohortWorkflowText(options) : workflowText(options);
  const workflow = path.join(root, relative);
  if (fs.existsSync(workflow) && !options.force) throw new SetupError(t('ci.exists', { file: relative, dir: root }));
  const report: CiInitReport = { written: [], kept: [] };
  if (options.package === undefined) report.written.push(await packInto(root));
  fs.mkdirSync(path.dirname(workflow), { recursive: true });
  fs.writeFileSync(workflow, text);
  report.written.push(relative);
  const extras: Array<[string, () => string]> = [[CONFIG_FILE, defaultConfigText]];
  if (options.cohort) extras.push([ROSTER_FILE, defaultRosterText]);
  for (const [name, make] of extras) {
    const file = path.join(root, name);
    if (fs.existsSync(file)) report.kept.push(name);
    else {
      fs.writeFileSync(file, make());
      report.written.push(name);
    }
  }
  if (addIgnores(path.join(root, '.gitignore'), options.cohort ? [...IGNORED, ...COHORT_IGNORED] : IGNORED)) report.written.push('.gitignore');
  return report;
}

/**
 * What a repository should not commit: the runner's state folder but the packed idem-lab
 * in it (`.idem-lab/*` with `!.idem-lab/idem-lab-*.tgz`: git cannot re-include a file of
 * an ignored folder, so the folder itself is not ignored), the server's log and database,
 * the results file.
 */
export const IGNORED = [`${PACKED_DIR}/*`, `!${PACKED_DIR}/idem-lab-*.tgz`, 's.log', '*.db', 'idem-lab-results.json'];
/** What an instructor's cohort repository should not commit besides: the clones and gradebooks. */
export const COHORT_IGNORED = ['submissions/', 'shards/', 'gradebook*.json', 'gradebook.csv'];

/**
 * Adds the lines a .gitignore lacks (creating it); a line `.idem-lab/` or `.idem-lab`,
 * which would hide the packed idem-lab, becomes `.idem-lab/*`. Whether it changed.
 */
function addIgnores(file: string, wanted: readonly string[]): boolean {
  const before = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const lines = before === '' ? [] : before.replace(/\r?\n$/, '').split(/\r?\n/);
  const fixed = lines.map((l) => (l.trim() === `${PACKED_DIR}/` || l.trim() === PACKED_DIR || l.trim() === `/${PACKED_DIR}/` ? `${PACKED_DIR}/*` : l));
  const have = new Set(fixed.map((l) => l.trim()));
  const after = [...fixed, ...wanted.filter((line) => !have.has(line))];
  const text = after.length ? after.join('\n') + '\n' : '';
  if (text === before) return false;
  fs.writeFileSync(file, text);
  return true;
}

/** `idem-lab ci init`: write the files and say what to do next. Returns the exit code (0). */
export async function ciInitCommand(options: CiInitOptions): Promise<number> {
  const report = await ciInit(options);
  const out = outputOf(options);
  out.log(t('ci.wrote', { files: listOf(report.written) }));
  if (report.kept.length) out.log(t('ci.kept', { files: listOf(report.kept) }));
  if (options.cohort) {
    out.log(t('ci.next.cohort', { roster: ROSTER_FILE }));
    return 0;
  }
  out.log(t('ci.next'));
  if (!options.classroom) out.log(t('ci.next.classroom'));
  return 0;
}
