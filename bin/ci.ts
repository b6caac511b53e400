/**
 * `idem-lab ci init`: sets up grading in GitHub Actions.
 *
 * - In a student template repository: .github/workflows/idem-lab.yml (Node's current LTS,
 *   Python 3.12, idem-lab check with the github and json reporters, the results file
 *   uploaded, the job failing when a required step fails), optionally in the shape of
 *   GitHub Classroom's own autograding template (`--classroom`). The track (`--track`)
 *   goes into the committed idem-lab.json and the workflow; the workflow pins the
 *   points, required steps, visibility and track by their SHA-256 (`check
 *   --config-sha256`), so that a student who edits idem-lab.json gets an error, not marks.
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
import { CONFIG_FILE, DEFAULT_POINTS, parseGradingConfig, readGradingConfig } from '../grader/grading.js';
import { listOf, t } from '../i18n/index.js';
import { DEFAULT_TRACK, TRACKS } from '../steps/index.js';
import type { Track } from '../grader/track.js';
import { allSteps, configDigest, configTrack, resolveTrack } from './shared/tracks.js';
import { PACKAGE_ROOT } from '../lab/paths.js';
import { outputOf, type Output } from './shared/output.js';

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
  /** Write Gradescope's autograder (gradescope/: setup.sh, run_autograder, idem-lab.json, the packed idem-lab) instead. */
  gradescope?: boolean;
  /** Write an Exercism test runner (exercism/: bin/run.sh, Dockerfile, idem-lab.json, the packed idem-lab) instead. */
  exercism?: boolean;
  /** --shards N: matrix jobs of the cohort workflow (default DEFAULT_SHARDS). */
  shards?: string | number;
  /** --track ID: the track the repository is graded on (default: idem-lab.json's, else basic). */
  track?: string;
  /** --before DATE: with --cohort, grade each student's last commit before DATE (git's date syntax, e.g. 2026-12-01T23:59:00Z). */
  before?: string;
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

/**
 * The Node.js major the workflows install: the current Active LTS line (Node 24 since
 * October 2025; Node 20 reached its end of life in April 2026, https://nodejs.org/en/about/previous-releases).
 */
export const NODE_LTS = '24';

/**
 * The actions the workflows use, each at its first major whose action.yml runs on node24
 * (GitHub runs node20 actions on node24 since June 2026, with a deprecation warning).
 */
export const ACTIONS = {
  checkout: 'actions/checkout@v6',
  setupNode: 'actions/setup-node@v6',
  setupPython: 'actions/setup-python@v6',
  upload: 'actions/upload-artifact@v6',
  download: 'actions/download-artifact@v7',
  classroomReporter: 'classroom-resources/autograding-grading-reporter@v1',
} as const;

/**
 * The install step. npm 11.16 and later list every dependency install script not allowed
 * by name (`allowScripts`), and npm 12 blocks them; a global install has no package.json
 * of its own to allow them in, so the flag `--allow-scripts=better-sqlite3` allows the
 * one script idem-lab needs (better-sqlite3's, which fetches or builds the ledger's
 * native driver) for this install: npm neither warns nor skips it. An older npm ignores
 * the flag with a warning and runs the script as it always did. An npm that skipped it
 * anyway would leave better-sqlite3 without its native module: every live step then ends
 * in error naming the missing better_sqlite3.node, the run is an error (exit code 2) and
 * no live step earns a point; nothing passes without it.
 * (npm/cli#9469: `--allow-scripts` is the mechanism for global installs.)
 */
export const INSTALL = 'npm install --global --no-fund --no-audit --allow-scripts=better-sqlite3 "$IDEM_LAB_PACKAGE"';

const SETUP: Step[] = [
  // The job's token is not left in .git/config, where a student's server could read it.
  { uses: ACTIONS.checkout, with: { 'persist-credentials': false } },
  { uses: ACTIONS.setupNode, with: { 'node-version': NODE_LTS } },
  { uses: ACTIONS.setupPython, with: { 'python-version': '3.12' } },
  { name: 'Install idem-lab', run: INSTALL },
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

/** The check step: the pinned track and config, the github and json reporters. */
const CHECK_SCRIPT = 'idem-lab check --track "$IDEM_LAB_TRACK" --config-sha256 "$IDEM_LAB_CONFIG_SHA256" --reporter github --reporter json --output idem-lab-results.json';

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
export function workflowText(options: Pick<CiInitOptions, 'classroom' | 'package' | 'track'> & { configSha256?: string } = {}): string {
  const spec = checkSpec(options.package ?? defaultPackageSpec());
  const classroom = options.classroom === true;
  const track = resolveTrack(options.track ?? DEFAULT_TRACK.id);
  const pin = options.configSha256 ?? defaultConfigDigest(track);
  const steps: Step[] = [
    ...SETUP,
    { name: 'Check the steps', id: CLASSROOM_RUNNER, run: CHECK_SCRIPT },
    { name: 'Upload the results', if: 'always()', uses: ACTIONS.upload, with: { name: 'idem-lab-results', path: 'idem-lab-results.json', 'if-no-files-found': 'warn' } },
  ];
  if (classroom) {
    steps.push({
      name: 'Report to GitHub Classroom',
      if: 'always()',
      uses: ACTIONS.classroomReporter,
      env: { [`${CLASSROOM_RUNNER.toUpperCase()}_RESULTS`]: `\${{ steps.${CLASSROOM_RUNNER}.outputs.result }}` },
      with: { runners: CLASSROOM_RUNNER },
    });
  }
  const job: Record<string, unknown> = classroom
    ? { 'runs-on': 'ubuntu-latest', if: "github.actor != 'github-classroom[bot]'" }
    : { name: 'idem-lab checks', 'runs-on': 'ubuntu-latest' };
  Object.assign(job, { 'timeout-minutes': 15, env: { IDEM_LAB_PACKAGE: spec, IDEM_LAB_TRACK: track.id, IDEM_LAB_CONFIG_SHA256: pin }, steps });
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
    ` IDEM_LAB_TRACK: the track graded (${TRACKS.map((tr) => tr.id).join(' or ')}), also "track" in idem-lab.json.`,
    ' IDEM_LAB_CONFIG_SHA256 pins the points, required steps, visibility and track of',
    ' idem-lab.json: if they change, the check stops with an error and no points. After',
    ' changing them yourself, run `idem-lab ci init --force` again to pin the new ones.',
    ' A student can change this file too, but not unseen: it is in the history, and',
    ' GitHub Classroom flags changes to .github/. Marks that count: `idem-lab grade`.',
    ' IDEM_LAB_PACKAGE: what npm installs (the packed idem-lab committed beside this file,',
    ' an npm version, a tarball URL or a git URL).',
  ].join('\n');
  return emit(workflow, comment, [[jobId, SETUP.length, CHECK_COMMENT]]);
}

/**
 * The clone step of the cohort workflow: `idem-lab roster` reads the roster (roster.txt, or
 * a GitHub Classroom roster export with IDEM_LAB_ORG and IDEM_LAB_ASSIGNMENT), checks every
 * name and keeps only IDEM_LAB_STUDENT when set; each repository is cloned into
 * submissions/owner/name, at its last commit before IDEM_LAB_BEFORE when set (git's
 * committer date, `git rev-list --before`), else at its default branch's head.
 */
const CLONE_SCRIPT = `mkdir -p submissions
# The token is handed to git for each clone, never stored in a clone's .git/config,
# so no student's server can read it from its folder.
auth=""
if [ -n "\${IDEM_LAB_TOKEN:-}" ]; then
  auth="AUTHORIZATION: basic $(printf 'x-access-token:%s' "$IDEM_LAB_TOKEN" | base64 | tr -d '\\n')"
fi
idem-lab roster "$IDEM_LAB_ROSTER" --org "\${IDEM_LAB_ORG:-}" --assignment "\${IDEM_LAB_ASSIGNMENT:-}" --only "\${IDEM_LAB_STUDENT:-}" > "$RUNNER_TEMP/repos.txt"
while read -r repo; do
  dir="submissions/$repo"
  if [ -z "\${IDEM_LAB_BEFORE:-}" ]; then
    if git -c "http.extraHeader=$auth" clone --quiet --depth 1 "$IDEM_LAB_GIT_BASE/$repo" "$dir"; then continue; fi
  elif git -c "http.extraHeader=$auth" clone --quiet --no-checkout "$IDEM_LAB_GIT_BASE/$repo" "$dir"; then
    commit="$(git -C "$dir" rev-list -n 1 --first-parent --before="$IDEM_LAB_BEFORE" HEAD || true)"
    if [ -n "$commit" ] && git -C "$dir" -c advice.detachedHead=false checkout --quiet "$commit"; then
      echo "$repo: graded at $commit, its last commit before $IDEM_LAB_BEFORE"
      continue
    fi
    echo "::warning title=idem-lab::$repo has no commit before $IDEM_LAB_BEFORE: it is graded as an error row"
  fi
  # An empty folder: the student gets an error row ("no server.py") instead of vanishing.
  echo "::warning title=idem-lab::could not clone $repo: it is graded as an error row"
  rm -rf "$dir"
  mkdir -p "$dir"
done < "$RUNNER_TEMP/repos.txt"
`;

/**
 * The sandbox step of the cohort workflow: `idem-lab grade` runs every student's server in
 * bubblewrap and refuses to grade without it, so it is installed when missing, and Ubuntu
 * 24.04's AppArmor rule that keeps unprivileged user namespaces from programs without a
 * profile (which bubblewrap needs) is lifted on the throw-away runner. libfaketime comes
 * with it: step 11 moves a server's clock a day on with it (without it, that round is
 * passed over with a warning).
 */
const SANDBOX_SCRIPT = `if ! command -v bwrap >/dev/null 2>&1 || ! ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1; then
  sudo apt-get update -q
  sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap faketime
fi
if [ "$(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null)" = "1" ]; then
  sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0
fi
`;

/** The grade step: the workspaces cloned (a glob that matches none is no phantom workspace). */
const GRADE_SCRIPT = `shopt -s nullglob
workspaces=(submissions/*/*)
idem-lab grade --shard "$SHARD_INDEX/$SHARD_COUNT" --jobs 2 --track "$IDEM_LAB_TRACK" --config idem-lab.json \\
  --json "gradebook-shard-$SHARD_INDEX.json" "\${workspaces[@]}"
`;

/** The merge step: the shards joined, into the previous run's gradebook when one is named (a regrade). */
const MERGE_SCRIPT = `update=()
if [ -f previous/gradebook.json ]; then update=(--update previous/gradebook.json); fi
idem-lab gradebook merge shards/*.json "\${update[@]}" --json gradebook.json --csv gradebook.csv --feedback feedback
`;

/**
 * Checks a --before date: git's approxidate reads almost anything, so only the forms an
 * instructor means are taken: an ISO 8601 date, or date and time (with an offset or Z).
 * @throws SetupError for anything else
 */
export function checkBefore(value: string): string {
  const text = value.trim();
  const iso = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?$/.test(text);
  if (!iso || Number.isNaN(Date.parse(text.replace(' ', 'T')))) throw new SetupError(t('ci.badBefore', { value }));
  return text;
}

/**
 * The instructor's cohort workflow: on workflow_dispatch (inputs `before`: grade the last
 * commit before this date, default --before; `student`: grade only this owner/name;
 * `gradebook-run`: the id of an earlier run whose gradebook the new rows go into),
 * `shards` matrix jobs each install the sandbox (bubblewrap), clone the repositories of
 * the roster (with the IDEM_LAB_TOKEN secret when set), grade their slice with `idem-lab
 * grade --shard K/N --track T --config idem-lab.json` and upload its gradebook; a last job
 * merges them with `idem-lab gradebook merge` (into the earlier gradebook with --update)
 * and uploads gradebook.json, gradebook.csv and a feedback file per student. The shard
 * jobs do not stop each other (fail-fast off), and the merge runs even when a shard has
 * error rows (its exit code 1).
 * @throws SetupError for a bad --package, --shards, --track or --before
 */
export function cohortWorkflowText(options: Pick<CiInitOptions, 'package' | 'shards' | 'track' | 'before'> = {}): string {
  const spec = checkSpec(options.package ?? defaultPackageSpec());
  const shards = shardCount(options.shards);
  const track = resolveTrack(options.track ?? DEFAULT_TRACK.id);
  const before = options.before === undefined ? '' : checkBefore(options.before);
  const upload = (name: string, file: string): Step => ({ name: `Upload ${file}`, if: 'always()', uses: ACTIONS.upload, with: { name, path: file, 'if-no-files-found': 'error' } });
  const workflow = {
    name: 'idem-lab cohort',
    on: {
      workflow_dispatch: {
        inputs: {
          before: { description: 'Grade each student\'s last commit before this date (e.g. 2026-12-01T23:59:00Z); empty: the latest', type: 'string', required: false, default: before },
          student: { description: 'Grade only this repository (owner/name) of the roster; empty: everyone', type: 'string', required: false, default: '' },
          'gradebook-run': { description: 'Put the new rows into the gradebook of this earlier run (its run id); empty: a new gradebook', type: 'string', required: false, default: '' },
        },
      },
    },
    permissions: { contents: 'read', actions: 'read' },
    env: { IDEM_LAB_PACKAGE: spec, IDEM_LAB_TRACK: track.id },
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
          {
            name: "Clone the students' repositories",
            env: {
              IDEM_LAB_TOKEN: '${{ secrets.IDEM_LAB_TOKEN }}',
              IDEM_LAB_GIT_BASE: '${{ github.server_url }}',
              IDEM_LAB_ROSTER: ROSTER_FILE,
              IDEM_LAB_ORG: '',
              IDEM_LAB_ASSIGNMENT: '',
              IDEM_LAB_BEFORE: '${{ inputs.before }}',
              IDEM_LAB_STUDENT: '${{ inputs.student }}',
            },
            run: CLONE_SCRIPT,
          },
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
          ...SETUP.filter((s) => s.uses !== ACTIONS.setupPython),
          { uses: ACTIONS.download, with: { pattern: 'gradebook-shard-*', path: 'shards', 'merge-multiple': true } },
          { name: 'Download the earlier gradebook', if: "inputs.gradebook-run != ''", uses: ACTIONS.download, with: { name: 'gradebook', path: 'previous', 'run-id': '${{ inputs.gradebook-run }}', 'github-token': '${{ github.token }}' } },
          { name: 'Merge the gradebooks', run: MERGE_SCRIPT },
          { name: 'Upload the gradebook', if: 'always()', uses: ACTIONS.upload, with: { name: 'gradebook', path: 'gradebook.json\ngradebook.csv\nfeedback/\n', 'if-no-files-found': 'error' } },
        ],
      },
    },
  };
  const comment = [
    ' Grades a cohort: every repository in roster.txt (one owner/name a line), in shards',
    ' on a matrix of runners (idem-lab grade --shard K/N), then one gradebook from them all',
    ' (idem-lab gradebook merge): the artifact "gradebook" holds gradebook.json, .csv and',
    ' feedback/<student>.md. Written by `idem-lab ci init --cohort`. Points and required',
    " steps: idem-lab.json here, never the students' own; IDEM_LAB_TRACK: the track graded.",
    ' A GitHub Classroom roster export instead of roster.txt: set IDEM_LAB_ROSTER to the',
    ' .csv file, IDEM_LAB_ORG to the organization and IDEM_LAB_ASSIGNMENT to the',
    " assignment's repository prefix. Secret IDEM_LAB_TOKEN: a token that can read the",
    " students' repositories (not needed for public ones). Run it from the Actions tab.",
  ].join('\n');
  return emit(workflow, comment);
}

/** The idem-lab.json `ci init` writes when there is none: the track, every step's points, every step required. */
export function defaultConfigText(track: Track = DEFAULT_TRACK): string {
  const config = { track: track.id, points: Object.fromEntries(track.steps.map((s) => [s.id, DEFAULT_POINTS])), required: track.steps.map((s) => s.id) };
  return JSON.stringify(config, null, 2) + '\n';
}

/** The digest a workflow pins for the default config of `track` (see defaultConfigText, tracks.ts configDigest). */
export function defaultConfigDigest(track: Track = DEFAULT_TRACK): string {
  return configDigest(parseGradingConfig(JSON.parse(defaultConfigText(track)), CONFIG_FILE, allSteps()), track);
}

/** The roster.txt `ci init --cohort` writes when there is none. */
export function defaultRosterText(): string {
  return "# The students' repositories to grade, one owner/name a line, e.g.\n# my-classroom/idempotency-lab-alice\n";
}

/** What `ciInit` did, paths relative to the repository root. */
export interface CiInitReport {
  written: string[];
  kept: string[];
  /** The track graded (the id). */
  track?: string;
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

/** Where `ci init --gradescope` writes the autograder's files, relative to the repository root. */
export const GRADESCOPE_DIR = 'gradescope';
/** Where `ci init --exercism` writes the test runner's files, relative to the repository root. */
export const EXERCISM_DIR = 'exercism';
/** Exercism's bound on one test run, in s (https://exercism.org/docs/building/tooling/test-runners/interface). */
export const EXERCISM_SECONDS = 20;

/**
 * Gradescope's setup.sh (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
 * run once, as root, when the autograder image is built from the zip, whose files are in
 * /autograder/source. Installs Node's LTS, Python, bubblewrap and the packed idem-lab, and
 * a user without rights the grading runs as.
 */
export function gradescopeSetupText(): string {
  return `#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image from the zip.
# Written by \`idem-lab ci init --gradescope\`.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q ca-certificates curl gnupg python3 bubblewrap faketime
curl -fsSL https://deb.nodesource.com/setup_${NODE_LTS}.x | bash -
apt-get install -y -q nodejs
# npm 12 runs no dependency's install script unless allowed: better-sqlite3's builds the ledger's driver.
npm install --global --no-fund --no-audit --allow-scripts=better-sqlite3 /autograder/source/${tarballName()}
# The grading runs as this user: a student's server cannot change idem-lab, the config or
# /autograder/results, which stay root's.
id idemlab >/dev/null 2>&1 || useradd --create-home --shell /usr/sbin/nologin idemlab
idem-lab --version
`;
}

/**
 * Gradescope's run_autograder: run for each submission (in /autograder/submission); writes
 * /autograder/results/results.json with the gradescope reporter. The grading runs as the
 * user idemlab, which may not write the results folder: root copies its results file there
 * afterwards, and writes an error result itself when there is none (idem-lab could not run).
 */
export function gradescopeRunText(track: Track): string {
  return `#!/usr/bin/env bash
# Gradescope runs this for each submission. Written by \`idem-lab ci init --gradescope\`.
# Points, required steps and visibility: /autograder/source/idem-lab.json (yours, not the
# student's). The student's files: /autograder/submission.
set -uo pipefail
root="\${IDEM_LAB_AUTOGRADER:-/autograder}"
user="\${IDEM_LAB_USER:-idemlab}"
work="$(mktemp -d)"
out="$(mktemp -d)"
cp -a "$root/submission/." "$work/"
chown -R "$user": "$work" "$out"
# What confines a student's server: bubblewrap when this container may make namespaces,
# else only this throw-away container and the user $user (which cannot change idem-lab,
# the config or the results, but shares its user with the grading run).
if runuser -u "$user" -- bwrap --unshare-all --die-with-parent --ro-bind / / true 2>/dev/null; then
  echo "idem-lab: student servers run in the bubblewrap sandbox"
else
  echo "idem-lab: bubblewrap cannot make namespaces in this container: student servers run as the user $user, confined by the container only"
fi
runuser -u "$user" -- env HOME="$work" idem-lab check --dir "$work" --track ${track.id} \\
  --config "$root/source/idem-lab.json" --sandbox auto --reporter gradescope="$out/results.json"
mkdir -p "$root/results"
if [ -f "$out/results.json" ] && [ ! -L "$out/results.json" ]; then
  cp "$out/results.json" "$root/results/results.json"
else
  printf '%s\\n' '{"score": 0, "execution_time": 0, "visibility": "visible", "output": "idem-lab could not grade this submission: see the autograder output.", "stdout_visibility": "visible", "tests": []}' > "$root/results/results.json"
fi
rm -rf "$work" "$out"
`;
}

/**
 * Exercism's test-runner entry point, bin/run.sh <slug> <input-dir> <output-dir>
 * (https://exercism.org/docs/building/tooling/test-runners/interface): writes
 * <output-dir>/results.json (version 3), exits 0 whatever the verdict, and finishes within
 * EXERCISM_SECONDS: idem-lab check stops itself EXERCISM_SECONDS - 6 s after it started
 * (--time-limit: its servers stopped, the unfinished steps errors, results.json written),
 * and `timeout` ends it at EXERCISM_SECONDS - 2 s in any case (killed a second later),
 * after which run.sh writes an error result itself: a loaded machine can cost the
 * details, never the bound.
 */
export function exercismRunText(track: Track): string {
  return `#!/usr/bin/env bash
# Exercism's test runner: run.sh <exercise-slug> <input-dir> <output-dir>.
# Written by \`idem-lab ci init --exercism\`. Always exits 0; writes <output-dir>/results.json.
set -uo pipefail
if [ "$#" -lt 3 ]; then
  echo "usage: run.sh <exercise-slug> <input-dir> <output-dir>" >&2
  exit 0
fi
slug="$1"
input="\${2%/}"
output="\${3%/}"
mkdir -p "$output"
results="$output/results.json"
rm -f "$results"
# The input folder is read-only to the runner: the solution is graded in a copy.
work="$(mktemp -d)"
cp -a "$input/." "$work/"
timeout --kill-after=1 ${EXERCISM_SECONDS - 2} idem-lab check --dir "$work" --track ${track.id} --config "\${IDEM_LAB_CONFIG:-/opt/idem-lab/idem-lab.json}" \\
  --sandbox auto --time-limit ${EXERCISM_SECONDS - 6} --reporter json="$results" > "$output/idem-lab.log" 2>&1
if [ ! -s "$results" ]; then
  printf '%s\\n' '{"version": 3, "status": "error", "message": "idem-lab could not grade this solution in time ('"$slug"'): the server may hang at start-up.", "tests": []}' > "$results"
fi
rm -rf "$work"
exit 0
`;
}

/** Exercism's Dockerfile for the runner image: Node's LTS, Python, bubblewrap, the packed idem-lab and the config. */
export function exercismDockerfileText(): string {
  return `# The idem-lab test runner image for Exercism. Written by \`idem-lab ci init --exercism\`.
FROM node:${NODE_LTS}-bookworm-slim
RUN apt-get update -q && apt-get install -y -q --no-install-recommends python3 bubblewrap faketime coreutils && rm -rf /var/lib/apt/lists/*
COPY ${tarballName()} idem-lab.json /opt/idem-lab/
RUN npm install --global --no-fund --no-audit --allow-scripts=better-sqlite3 /opt/idem-lab/${tarballName()}
COPY bin/run.sh /opt/test-runner/bin/run.sh
WORKDIR /opt/test-runner
ENTRYPOINT ["/opt/test-runner/bin/run.sh"]
`;
}

/**
 * Adds `"track"` to an idem-lab.json that names none (a kept config, written before
 * --track), so that a checkout follows the track the workflow grades.
 * @throws SetupError when it names another track than `track`
 */
function settleTrack(file: string, track: Track, given: boolean): Track {
  const named = configTrack(file);
  if (named && named.id !== track.id) {
    if (given) throw new SetupError(t('ci.otherTrack', { file: CONFIG_FILE, named: named.id, track: track.id }));
    return named;
  }
  if (!named && track.id !== DEFAULT_TRACK.id) {
    const raw = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    fs.writeFileSync(file, JSON.stringify({ track: track.id, ...raw }, null, 2) + '\n');
  }
  return track;
}

/**
 * Writes the workflow (the cohort one with `cohort`; the Gradescope autograder or the
 * Exercism runner with `gradescope` or `exercism`), idem-lab.json when missing (with the
 * track; and roster.txt for a cohort), the packed idem-lab unless `package` is given, and
 * the .gitignore lines; into the repository at `dir`. The student workflow pins the
 * config's digest (see tracks.ts configDigest).
 * @throws SetupError when `dir` is not a folder, the output exists and `force` is not
 *   set, an option is bad, the kept idem-lab.json is wrong or names another track than
 *   --track, or npm cannot pack idem-lab
 */
export async function ciInit(options: CiInitOptions): Promise<CiInitReport> {
  const root = path.resolve(options.dir ?? process.cwd());
  if (!fs.existsSync(root) || !fs.statSync(root).isDirectory()) throw new SetupError(t('cli.notFolder', { dir: root }));
  const platforms = (['classroom', 'cohort', 'gradescope', 'exercism'] as const).filter((p) => options[p]);
  if (platforms.length === 2 && options.cohort && options.classroom) throw new SetupError(t('ci.cohortClassroom'));
  if (platforms.length > 1) throw new SetupError(t('ci.onePlatform', { given: platforms.map((p) => `--${p}`).join(', ') }));
  if (options.before !== undefined && !options.cohort) throw new SetupError(t('ci.beforeCohort'));
  if (options.package !== undefined && (options.gradescope || options.exercism)) throw new SetupError(t('ci.packageBundled'));
  const given = options.track !== undefined;
  let track = resolveTrack(options.track ?? DEFAULT_TRACK.id);
  const bundle = options.gradescope ? GRADESCOPE_DIR : options.exercism ? EXERCISM_DIR : undefined;
  const base = bundle ? path.join(root, bundle) : root;
  const relative = options.cohort ? COHORT_WORKFLOW_PATH : bundle ? path.join(bundle, options.gradescope ? 'run_autograder' : path.join('bin', 'run.sh')) : WORKFLOW_PATH;
  const main = path.join(root, relative);
  if (fs.existsSync(main) && !options.force) throw new SetupError(t('ci.exists', { file: relative, dir: root }));
  if (options.cohort || !bundle) checkSpec(options.package ?? defaultPackageSpec());
  if (options.cohort) shardCount(options.shards);
  if (options.before !== undefined) checkBefore(options.before);
  const report: CiInitReport = { written: [], kept: [] };
  const configs: string[] = [];
  fs.mkdirSync(base, { recursive: true });
  const extras: Array<[string, string]> = [[path.join(base, CONFIG_FILE), defaultConfigText(track)]];
  if (options.cohort) extras.push([path.join(root, ROSTER_FILE), defaultRosterText()]);
  for (const [file, text] of extras) {
    const name = path.relative(root, file);
    if (fs.existsSync(file)) report.kept.push(name);
    else {
      fs.writeFileSync(file, text);
      configs.push(name);
    }
  }
  const configFile = path.join(base, CONFIG_FILE);
  track = settleTrack(configFile, track, given);
  const config = readGradingConfig(configFile, allSteps());
  if (bundle) {
    const packed = await packInto(root);
    const target = path.join(bundle, tarballName());
    fs.renameSync(path.join(root, packed), path.join(root, target));
    if (fs.readdirSync(path.join(root, PACKED_DIR)).length === 0) fs.rmdirSync(path.join(root, PACKED_DIR));
    report.written.push(target);
  } else if (options.package === undefined) report.written.push(await packInto(root));
  const files: Array<[string, string, boolean]> = options.gradescope
    ? [
        [path.join(bundle as string, 'setup.sh'), gradescopeSetupText(), true],
        [relative, gradescopeRunText(track), true],
      ]
    : options.exercism
      ? [
          [relative, exercismRunText(track), true],
          [path.join(bundle as string, 'Dockerfile'), exercismDockerfileText(), false],
        ]
      : [[relative, options.cohort ? cohortWorkflowText({ ...options, track: track.id }) : workflowText({ ...options, track: track.id, configSha256: configDigest(config, track) }), false]];
  for (const [name, text, executable] of files) {
    const file = path.join(root, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text, executable ? { mode: 0o755 } : {});
    if (executable) fs.chmodSync(file, 0o755);
    report.written.push(name);
  }
  report.written.push(...configs);
  report.track = track.id;
  if (!bundle && addIgnores(path.join(root, '.gitignore'), options.cohort ? [...IGNORED, ...COHORT_IGNORED] : IGNORED)) report.written.push('.gitignore');
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
  out.log(t('ci.track', { track: report.track ?? DEFAULT_TRACK.id }));
  if (options.cohort) {
    out.log(t(options.package === undefined ? 'ci.next.cohort' : 'ci.next.cohort.package', { roster: ROSTER_FILE }));
    return 0;
  }
  if (options.gradescope) {
    out.log(t('ci.next.gradescope', { dir: GRADESCOPE_DIR }));
    return 0;
  }
  if (options.exercism) {
    out.log(t('ci.next.exercism', { dir: EXERCISM_DIR, seconds: EXERCISM_SECONDS }));
    return 0;
  }
  out.log(t(options.package === undefined ? 'ci.next' : 'ci.next.package', { spec: options.package ?? '' }));
  out.log(t('ci.student'));
  if (!options.classroom) out.log(t('ci.next.classroom'));
  return 0;
}
