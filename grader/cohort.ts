/**
 * Grading a cohort: many student workspaces (each a checkout of a student repository),
 * N at a time, into a gradebook with one row per student. Workspaces are isolated from
 * each other as every check already is: each server gets its own free port (never one
 * another running server holds, see server.ts) and a fresh database in its own temporary
 * folder. A broken workspace (no server.py, a server that never starts, one that hangs)
 * becomes an error row and the others still grade: a server that cannot start costs the
 * start time limit once (stopAfterStartFailure), and a whole workspace is cut off after
 * `timeoutMs`, its servers stopped.
 */
import { runPool } from './pool.js';
import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { grade } from './engine.js';
import { SetupError } from './failure.js';
import { formatPoints, isRequired, pointsOf, scoreResults, setupErrorReport, visibilityOf, type GradeReport, type GradingConfig, type Visibility } from './grading.js';
import { fenced, markdownText } from './reporters/github.js';
import { resultsFile, type ResultsFile } from './reporters/json.js';
import { stepName, stepsPass } from './reporters/plain.js';
import { commandExists, resolveInterpreter, type ServerCommand } from './server.js';
import type { Confinement, Sandbox, SandboxChoice } from './sandbox.js';
import type { Status } from './types.js';
import { listOf, t } from '../i18n/index.js';
import { visible, visibleDeep } from './visible.js';
import type { Step } from './track.js';
import type { Limits } from './limits.js';

/** How long one workspace may take to grade by default, in ms. */
export const DEFAULT_WORKSPACE_TIMEOUT_MS = 180_000;

/** What to grade and how. */
export interface CohortOptions {
  /** The student workspaces, as given (relative to the current directory or absolute). */
  dirs: readonly string[];
  /** The steps to grade in each, in order (a track's). */
  steps: readonly Step[];
  /**
   * How to start a workspace's server: the lab reads the workspace's own config (for the
   * basic track, lab/workspace.ts openWorkspace). The engine knows no workspace layout.
   * @throws SetupError for a workspace that cannot be graded (no server file, a bad config): an error row
   */
  serverCommand(workspace: string): ServerCommand;
  /** Points and required steps, the same for every student (never read from the students' own files). */
  config: GradingConfig;
  /** How many workspaces to grade at once (default 1). */
  jobs?: number;
  /** How long one workspace may take, in ms, before it is cut off as an error (default DEFAULT_WORKSPACE_TIMEOUT_MS). */
  timeoutMs?: number;
  /** The sandbox every server runs in (see sandbox.ts); none when absent. */
  sandbox?: Sandbox;
  /** The run's time limits, in ms (a server's start, a request's answer), the same for every workspace; default: the environment's, read once per workspace. */
  limits?: Limits;
  /**
   * How confined the servers are and why not fully (sandbox.ts chooseSandboxFor), for each
   * row's `sandbox` column; by default `on` with a sandbox that has a network of its own,
   * `host-network` with one that keeps the host's, else `off`.
   */
  confinement?: Pick<SandboxChoice, 'confinement' | 'reason' | 'fallback'>;
  /** Called when a workspace starts grading. */
  onStart?(student: string, running: number): void;
  /** Called with each row as soon as its workspace is graded; `done` counts finished rows. */
  onRow?(row: GradebookRow, done: number): void;
  /** The rows' names, one per dir (default: studentNames(dirs)); a shard passes the names computed over the whole cohort. */
  names?: readonly string[];
  /** Which slice of the cohort this is (`grade --shard K/N`); absent for a whole cohort. */
  shard?: Shard;
}

/** One slice of a cohort: the `index`-th (from 1) of `count` slices of `total` workspaces. */
export interface Shard {
  index: number;
  count: number;
  /** How many workspaces the whole cohort has. */
  total: number;
}

/** One student's row. */
export interface GradebookRow {
  /** A name for the row: the folder's name, or its path when two folders share a name. */
  student: string;
  /** The workspace's absolute path. */
  path: string;
  /** pass, fail, or error (could not grade, server could not start, cut off after the time limit). */
  status: Status;
  /** Whether every required step passed: what `check`'s exit code and GitHub Classroom's pass go by. */
  requiredPassed: boolean;
  /** The verdict per step id; absent for a step that was not graded. */
  steps: Record<string, Status>;
  score: number;
  maxScore: number;
  /** `02 replay: <message>` for the first step that did not pass, or why the workspace could not be graded; '' when all passed. */
  firstFailure: string;
  /** Wall time of this workspace, in ms. */
  ms: number;
  /** How confined its servers were (sandbox.ts Confinement); the reason, when less than `on`, is in report.sandbox. */
  sandbox: Confinement;
  /** The full report (every verdict with its transcript). */
  report: GradeReport;
}

/** A step of the gradebook: what it is worth, whether it is required and who sees its verdict. */
export interface GradebookStep {
  id: string;
  slug: string;
  title: string;
  points: number;
  required: boolean;
  /** Absent in gradebooks written before visibility existed: visible. */
  visibility?: Visibility;
}

/** The gradebook: one row per student, in the order the folders were given. */
export interface Gradebook {
  steps: ReadonlyArray<GradebookStep>;
  rows: GradebookRow[];
  /** Points possible per student. */
  maxScore: number;
  jobs: number;
  /** Wall time of the whole cohort, in ms. */
  ms: number;
  /** When grading started. */
  startedAt: Date;
  /** The slice of the cohort graded, when this is one shard. */
  shard?: Shard;
}

/**
 * Row names: each folder's base name, or its path relative to the current directory when
 * two folders have the same base name.
 */
export function studentNames(dirs: readonly string[], cwd = process.cwd()): string[] {
  const absolute = dirs.map((d) => path.resolve(cwd, d));
  const bases = absolute.map((d) => path.basename(d) || d);
  return absolute.map((d, i) => (bases.filter((b) => b === bases[i]).length > 1 ? path.relative(cwd, d) || '.' : bases[i]));
}


function firstFailure(report: GradeReport): string {
  if (report.status === 'error' && report.message) return report.message;
  const failed = report.steps.find((s) => s.result.status !== 'pass');
  return failed ? `${stepName(failed.result)}: ${failed.result.message}` : '';
}

/** How confined a cohort's servers are (CohortOptions.confinement, else from its sandbox). */
function confinementOf(options: Pick<CohortOptions, 'sandbox' | 'confinement'>): NonNullable<CohortOptions['confinement']> {
  if (options.confinement) return options.confinement;
  if (!options.sandbox) return { confinement: 'off', reason: '--sandbox off', fallback: false };
  return options.sandbox.network === 'private' ? { confinement: 'on', fallback: false } : { confinement: 'host-network', fallback: false };
}

function rowOf(student: string, workspace: string, report: GradeReport, ms: number, confinement: NonNullable<CohortOptions['confinement']>): GradebookRow {
  report.sandbox = confinement;
  return {
    student,
    path: workspace,
    status: report.status,
    requiredPassed: report.status !== 'error' && report.requiredPassed,
    steps: Object.fromEntries(report.steps.map((s) => [s.result.id, s.result.status])),
    score: report.score,
    maxScore: report.maxScore,
    firstFailure: firstFailure(report),
    ms: Math.round(ms),
    sandbox: confinement.confinement,
    report,
  };
}

/**
 * Grades one workspace into a row; never throws. No server.py, a missing interpreter or
 * a bad idem-lab.json "server" entry is an error row with the reason; so is a workspace
 * cut off after `timeoutMs` (its running servers are stopped at once).
 */
export async function gradeWorkspace(student: string, dir: string, options: Pick<CohortOptions, 'steps' | 'config' | 'timeoutMs' | 'sandbox' | 'confinement' | 'serverCommand' | 'limits'>): Promise<GradebookRow> {
  const started = performance.now();
  const workspace = path.resolve(dir);
  const timeoutMs = options.timeoutMs ?? DEFAULT_WORKSPACE_TIMEOUT_MS;
  const confinement = confinementOf(options);
  const setupError = (message: string) => rowOf(student, workspace, setupErrorReport(message, options.config, options.steps), performance.now() - started, confinement);
  let command: ServerCommand;
  try {
    command = options.serverCommand(workspace);
    if (options.steps.some((s) => s.live) && !commandExists(command.file, workspace)) {
      throw new SetupError(t('cli.noInterpreter', { file: command.file }));
    }
  } catch (err) {
    return setupError((err as Error).message);
  }
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`the workspace took longer than ${formatPoints(timeoutMs / 1000)} s to grade, so it was cut off`)), timeoutMs);
  try {
    const results = await grade({
      workspace,
      command: { ...(await resolveInterpreter(command, workspace)), ...(options.sandbox ? { sandbox: options.sandbox } : {}) },
      steps: options.steps,
      stopAfterStartFailure: true,
      signal: controller.signal,
      ...(options.limits ? { limits: options.limits } : {}),
    });
    return rowOf(student, workspace, scoreResults(results, options.config), performance.now() - started, confinement);
  } catch (err) {
    return setupError(`The grader failed on this workspace: ${(err as Error).message ?? String(err)}`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Grades every workspace, `jobs` at a time, and returns the gradebook with rows in the
 * order the folders were given. Never throws for a student's workspace.
 */
export async function gradeCohort(options: CohortOptions): Promise<Gradebook> {
  const startedAt = new Date();
  const started = performance.now();
  const jobs = Math.max(1, Math.floor(options.jobs ?? 1));
  const names = options.names ?? studentNames(options.dirs);
  const rows: GradebookRow[] = new Array(options.dirs.length);
  let done = 0;
  let running = 0;
  await runPool(options.dirs.length, jobs, async (i) => {
    running++;
    options.onStart?.(names[i], running);
    rows[i] = await gradeWorkspace(names[i], options.dirs[i], options);
    running--;
    options.onRow?.(rows[i], ++done);
  });
  return {
    steps: options.steps.map((s) => ({ id: s.id, slug: s.slug, title: s.title, points: pointsOf(options.config, s.id), required: isRequired(options.config, s.id), visibility: visibilityOf(options.config, s.id) })),
    rows,
    maxScore: options.steps.reduce((sum, s) => sum + pointsOf(options.config, s.id), 0),
    jobs,
    ms: Math.round(performance.now() - started),
    startedAt,
    ...(options.shard ? { shard: options.shard } : {}),
  };
}

/**
 * Parses `--shard K/N`: the K-th (1 ≤ K ≤ N) of N slices.
 * @throws SetupError when `text` is not two whole numbers K/N with 1 ≤ K ≤ N
 */
export function parseShard(text: string): { index: number; count: number } {
  const m = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(text);
  const index = m ? Number(m[1]) : NaN;
  const count = m ? Number(m[2]) : NaN;
  if (!m || count < 1 || index < 1 || index > count) throw new SetupError(t('cohort.shard.bad', { value: text }));
  return { index, count };
}

/**
 * The K-th of N slices of a cohort, in a stable order: the folders sorted by absolute path
 * (code-unit order, the same on every machine and locale, whatever order a shell glob gave),
 * cut into N contiguous slices whose sizes differ by at most one (slice K holds the indices
 * from floor((K-1)·L/N) up to floor(K·L/N)). Row names are computed over the whole cohort,
 * so a shard's rows are named as in one run over all. A slice may be empty (N > L).
 */
export function shardOf(dirs: readonly string[], shard: { index: number; count: number }, cwd = process.cwd()): { dirs: string[]; names: string[] } {
  const names = studentNames(dirs, cwd);
  const order = dirs
    .map((dir, i) => ({ dir, name: names[i], key: path.resolve(cwd, dir) }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const from = Math.floor(((shard.index - 1) * order.length) / shard.count);
  const to = Math.floor((shard.index * order.length) / shard.count);
  const slice = order.slice(from, to);
  return { dirs: slice.map((e) => e.dir), names: slice.map((e) => e.name) };
}

/** A text cell a spreadsheet would not run as a formula (OWASP: a leading = + - @ tab or CR gets a quote). */
function safeCell(text: string): string {
  return /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
}

/** The columns of the CSV gradebook: student, path, status, required_passed, one per step (`02-replay`), score, max_score, first_failure, sandbox. */
export function gradebookColumns(book: Pick<Gradebook, 'steps'>): string[] {
  return ['student', 'path', 'status', 'required_passed', ...book.steps.map((s) => `${s.id}-${s.slug}`), 'score', 'max_score', 'first_failure', 'sandbox'];
}

/**
 * Whether every required step of a JSON gradebook's row passed (its `required_passed`, or
 * for a gradebook written before that field, from its steps): false for an error row.
 */
export function requiredPassedOf(row: Pick<GradebookJsonStudent, 'status' | 'steps'> & { required_passed?: boolean }, steps: ReadonlyArray<Pick<GradebookStep, 'id' | 'required'>>): boolean {
  if (row.required_passed !== undefined) return row.required_passed;
  return row.status !== 'error' && steps.every((s) => !s.required || row.steps[s.id]?.status === 'pass');
}

/**
 * The gradebook as CSV (RFC 4180, header line first): one row per student, its status,
 * whether every required step passed (yes/no), one column per step holding pass, fail,
 * error or '' (not graded), the score and the first failure.
 * Takes a gradebook or its JSON form (a merged one, see mergeGradebooks).
 */
export function gradebookCsv(book: Gradebook | GradebookJson): string {
  const json = 'rows' in book ? gradebookJson(book) : visibleDeep(book);
  const records = json.students.map((row) => [
    safeCell(row.student),
    safeCell(row.path),
    row.status,
    requiredPassedOf(row, json.steps) ? 'yes' : 'no',
    ...json.steps.map((s) => row.steps[s.id]?.status ?? ''),
    formatPoints(row.score),
    formatPoints(row.max_score),
    safeCell(row.first_failure.replace(/\s*\n\s*/g, ' ')),
    // on, host-network or off, with why when it fell back: `off (bwrap: No permissions to create new namespace)`
    safeCell(row.sandbox === undefined ? '' : row.sandbox_reason && row.sandbox !== 'on' ? `${row.sandbox} (${row.sandbox_reason})` : row.sandbox),
  ]);
  return stringify(records, { header: true, columns: gradebookColumns(json) });
}

/** One student in the JSON gradebook. */
export interface GradebookJsonStudent {
  student: string;
  path: string;
  status: Status;
  /** Whether every required step passed (see GradebookRow.requiredPassed); absent in gradebooks written before it. */
  required_passed?: boolean;
  score: number;
  max_score: number;
  first_failure: string;
  ms: number;
  /** Per step id: its verdict and points earned. */
  steps: Record<string, { status: Status; score: number }>;
  /** How confined the student's servers were: on, host-network or off (absent in gradebooks written before it was recorded). */
  sandbox?: Confinement;
  /** Why `sandbox` is less than on (bwrap's complaint, or `--sandbox off`). */
  sandbox_reason?: string;
  /** The student's results.json (Exercism v3 + points), with every message and transcript. */
  results: ResultsFile;
}

/** The JSON gradebook. */
export interface GradebookJson {
  version: 1;
  started_at: string;
  ms: number;
  jobs: number;
  max_score: number;
  steps: Gradebook['steps'];
  students: GradebookJsonStudent[];
  /** The slice of the cohort this gradebook holds (`grade --shard K/N`); absent for a whole cohort or a merged one. */
  shard?: Shard;
  /** How many shards a merged gradebook was joined from (`gradebook merge`). */
  merged_from?: number;
}

/** The gradebook as a JSON object (see GradebookJson). */
export function gradebookJson(book: Gradebook): GradebookJson {
  // Every text a student controls (folder names, messages, transcripts) with its control characters shown (visible.ts).
  return visibleDeep({
    version: 1,
    started_at: book.startedAt.toISOString(),
    ms: book.ms,
    jobs: book.jobs,
    max_score: book.maxScore,
    steps: book.steps,
    students: book.rows.map((row) => ({
      student: row.student,
      path: row.path,
      status: row.status,
      required_passed: row.requiredPassed,
      score: row.score,
      max_score: row.maxScore,
      first_failure: row.firstFailure,
      ms: row.ms,
      steps: Object.fromEntries(row.report.steps.map((s) => [s.result.id, { status: s.result.status, score: s.score }])),
      sandbox: row.sandbox,
      ...(row.sandbox !== 'on' && row.report.sandbox?.reason ? { sandbox_reason: row.report.sandbox.reason } : {}),
      results: resultsFile(row.report),
    })),
    ...(book.shard ? { shard: book.shard } : {}),
  } satisfies GradebookJson);
}

/** Code-unit order of two strings: the same on every machine and in every locale. */
function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Checks that `value` (parsed from `file`) looks like a JSON gradebook of `idem-lab grade`.
 * @throws SetupError naming the file and what is wrong
 */
function asGradebookJson(value: unknown, file: string): GradebookJson {
  const book = value as Partial<GradebookJson> | null;
  const ok =
    book !== null &&
    typeof book === 'object' &&
    book.version === 1 &&
    Array.isArray(book.steps) &&
    Array.isArray(book.students) &&
    typeof book.max_score === 'number' &&
    book.students.every((s) => s !== null && typeof s === 'object' && typeof s.path === 'string' && typeof s.student === 'string');
  if (!ok) throw new SetupError(t('gradebook.merge.notGradebook', { file }));
  return book as GradebookJson;
}

/**
 * Joins the JSON gradebooks of the shards of one cohort (`idem-lab grade --shard K/N
 * --json FILE`, one per K) into the gradebook one run over the whole cohort would write:
 * the students in the shards' order (by absolute path), the same steps, points and
 * max_score; `started_at` the earliest, `ms` the longest shard (they run side by side),
 * `jobs` the largest. Gradebooks without a `shard` (whole runs) are joined as they are.
 * @param books each gradebook with the file it came from (for messages)
 * @throws SetupError when a file is not a gradebook, the shards were graded with other
 *   steps or points, a shard is missing or given twice, or a student is in two of them
 */
export function mergeGradebooks(books: ReadonlyArray<{ file: string; book: unknown }>): GradebookJson {
  if (books.length === 0) throw new SetupError(t('gradebook.merge.none'));
  const parsed = books.map(({ file, book }) => ({ file, book: asGradebookJson(book, file) }));
  const [first] = parsed;
  for (const { file, book } of parsed.slice(1)) {
    if (JSON.stringify(book.steps) !== JSON.stringify(first.book.steps) || book.max_score !== first.book.max_score) {
      throw new SetupError(t('gradebook.merge.otherConfig', { file, first: first.file }));
    }
  }
  const sharded = parsed.filter((p) => p.book.shard !== undefined);
  if (sharded.length > 0) {
    if (sharded.length !== parsed.length) throw new SetupError(t('gradebook.merge.mixed', { file: parsed.find((p) => p.book.shard === undefined)?.file ?? '' }));
    const { count, total } = first.book.shard as Shard;
    const seen = new Map<number, string>();
    for (const { file, book } of parsed) {
      const shard = book.shard as Shard;
      if (shard.count !== count || shard.total !== total) throw new SetupError(t('gradebook.merge.otherCohort', { file, first: first.file }));
      const twice = seen.get(shard.index);
      if (twice !== undefined) throw new SetupError(t('gradebook.merge.twice', { shard: `${shard.index}/${count}`, file, other: twice }));
      seen.set(shard.index, file);
    }
    const missing = Array.from({ length: count }, (_, i) => i + 1).filter((i) => !seen.has(i));
    if (missing.length > 0) throw new SetupError(t('gradebook.merge.missing', { shards: listOf(missing.map((i) => `${i}/${count}`)), count }));
  }
  const students = parsed.flatMap((p) => p.book.students.map((s) => ({ s, file: p.file })));
  const where = new Map<string, string>();
  for (const { s, file } of students) {
    const other = where.get(s.path);
    if (other !== undefined) throw new SetupError(t('gradebook.merge.duplicate', { path: s.path, file, other }));
    where.set(s.path, file);
  }
  return {
    version: 1,
    started_at: parsed.map((p) => p.book.started_at).sort(byCodeUnits)[0],
    ms: Math.max(...parsed.map((p) => p.book.ms)),
    jobs: Math.max(...parsed.map((p) => p.book.jobs)),
    max_score: first.book.max_score,
    steps: first.book.steps,
    students: students.map((e) => e.s).sort((a, b) => byCodeUnits(a.path, b.path)),
    merged_from: parsed.length,
  };
}

/**
 * Reads and merges gradebook files (see mergeGradebooks).
 * @throws SetupError when a file cannot be read or is not JSON, and as mergeGradebooks
 */
export function readAndMergeGradebooks(files: readonly string[]): GradebookJson {
  return mergeGradebooks(
    files.map((file) => {
      let text: string;
      try {
        text = fs.readFileSync(file, 'utf8');
      } catch (err) {
        throw new SetupError(t('gradebook.merge.unreadable', { file, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message }));
      }
      try {
        return { file, book: JSON.parse(text) as unknown };
      } catch (err) {
        throw new SetupError(t('gradebook.merge.notJson', { file, error: (err as Error).message }));
      }
    }),
  );
}

/**
 * Puts the rows of `fresh` (a regrade of some students, `grade ... --json`, or merged
 * shards) into `base` (an earlier gradebook of the whole cohort): a row of `fresh`
 * replaces the row of `base` with the same path, or is added; the rest of `base` stays.
 * The students end in path order, as mergeGradebooks leaves them.
 * @param files the files they came from, for messages
 * @throws SetupError when either is not a gradebook, or they were graded with other steps or points
 */
export function updateGradebook(base: unknown, fresh: unknown, files: { base: string; fresh: string }): GradebookJson {
  const old = asGradebookJson(base, files.base);
  const young = asGradebookJson(fresh, files.fresh);
  if (JSON.stringify(old.steps) !== JSON.stringify(young.steps) || old.max_score !== young.max_score) {
    throw new SetupError(t('gradebook.merge.otherConfig', { file: files.fresh, first: files.base }));
  }
  const byPath = new Map(old.students.map((s) => [s.path, s]));
  for (const s of young.students) byPath.set(s.path, s);
  const { shard: _shard, ...rest } = old;
  return { ...rest, students: [...byPath.values()].sort((a, b) => byCodeUnits(a.path, b.path)) };
}

const FEEDBACK_MARK: Record<Status, string> = { pass: '✅ pass', fail: '❌ fail', error: '⚠️ error' };

/**
 * One student's feedback as Markdown: the status, whether the required steps passed, the
 * score, one table row per step and, for each step that did not pass, what the grader
 * found (the message, what was sent and what came back). A step whose visibility is
 * `hidden` shows as hidden, without its verdict or details. Student-controlled text
 * (messages quoting a response body) is shown literally (markdownText, fenced blocks).
 */
export function feedbackMarkdown(row: GradebookJsonStudent, steps: ReadonlyArray<GradebookStep>): string {
  const tests = new Map(row.results.tests.map((test) => [String(test.task_id).padStart(2, '0'), test]));
  const graded = steps.filter((s) => row.steps[s.id] !== undefined);
  const passed = graded.filter((s) => row.steps[s.id].status === 'pass').length;
  const lines = [
    `# idem-lab: ${markdownText(row.student)}`,
    '',
    `**${FEEDBACK_MARK[row.status]}** · ${stepsPass(passed, graded.length)} · ${formatPoints(row.score)}/${formatPoints(row.max_score)} points · required steps: ${requiredPassedOf(row, steps) ? 'all passed' : 'not all passed'}`,
    '',
  ];
  if (row.status === 'error' && row.results.message) lines.push(`> **Could not grade everything:** ${markdownText(row.results.message)}`, '');
  lines.push('| Step | Result | Points | Required |', '|---|---|---|---|');
  for (const step of steps) {
    const verdict = row.steps[step.id];
    const hidden = step.visibility === 'hidden';
    const result = hidden ? 'hidden' : verdict ? FEEDBACK_MARK[verdict.status] : 'not graded';
    const points = hidden ? `?/${formatPoints(step.points)}` : `${formatPoints(verdict?.score ?? 0)}/${formatPoints(step.points)}`;
    lines.push(`| ${markdownText(`${step.id} ${step.slug}: ${step.title}`)} | ${result} | ${points} | ${step.required ? 'yes' : 'no'} |`);
  }
  for (const step of steps) {
    const test = tests.get(step.id);
    if (step.visibility === 'hidden' || !test || test.status === 'pass') continue;
    lines.push('', `## ${markdownText(test.name)}: ${test.status}`, '', ...fenced(test.message ?? ''));
  }
  return lines.join('\n') + '\n';
}

/**
 * The file name of a student's feedback: the row's name with every character but letters,
 * digits, `_ . -` as `_` (a name may be a path, see studentNames), `.md` added; a name
 * taken already gets `-2`, `-3` ...
 */
export function feedbackNames(students: readonly string[]): string[] {
  const taken = new Set<string>();
  return students.map((student) => {
    const stem = student.replace(/[^A-Za-z0-9_.-]/g, '_').replace(/^\.+/, '_') || '_';
    let name = `${stem}.md`;
    for (let n = 2; taken.has(name); n++) name = `${stem}-${n}.md`;
    taken.add(name);
    return name;
  });
}

/** The rows formatGradebook shows, from a JSON gradebook (a merged one). */
export function tableOf(json: GradebookJson): TableBook {
  return {
    steps: json.steps,
    ms: json.ms,
    jobs: json.jobs,
    rows: json.students.map((s) => ({
      student: s.student,
      status: s.status,
      steps: Object.fromEntries(Object.entries(s.steps).map(([id, v]) => [id, v.status])),
      score: s.score,
      maxScore: s.max_score,
      firstFailure: s.first_failure,
    })),
  };
}

/** What formatGradebook shows: a gradebook, or one read back from JSON (tableOf). */
export interface TableBook {
  steps: Gradebook['steps'];
  rows: ReadonlyArray<Pick<GradebookRow, 'student' | 'status' | 'steps' | 'score' | 'maxScore' | 'firstFailure'>>;
  ms: number;
  jobs: number;
}

const MARK: Record<Status, string> = { pass: '✓', fail: '✗', error: '!' };

/**
 * The gradebook as a terminal table: student, status, a mark per step, score, and the
 * first failure cut to `width` characters in all.
 */
export function formatGradebook(book: TableBook, width = 120): string {
  const rows = book.rows.map((r) => ({ ...r, student: visible(r.student), firstFailure: visible(r.firstFailure) }));
  const nameWidth = Math.max(7, ...rows.map((r) => r.student.length));
  const scoreWidth = Math.max(5, ...rows.map((r) => `${formatPoints(r.score)}/${formatPoints(r.maxScore)}`.length));
  const header = `${'student'.padEnd(nameWidth)}  status  ${book.steps.map((s) => s.id).join(' ')}  ${'score'.padEnd(scoreWidth)}  first failure`;
  const lines = [header];
  for (const row of rows) {
    const marks = book.steps.map((s) => (row.steps[s.id] ? MARK[row.steps[s.id]] : '·').padEnd(2)).join(' ');
    const start = `${row.student.padEnd(nameWidth)}  ${row.status.padEnd(6)}  ${marks}  ${`${formatPoints(row.score)}/${formatPoints(row.maxScore)}`.padEnd(scoreWidth)}  `;
    const failure = row.firstFailure.replace(/\s+/g, ' ');
    const room = Math.max(20, width - start.length);
    lines.push(start + (failure.length > room ? `${failure.slice(0, room - 1)}…` : failure));
  }
  const counts = (['pass', 'fail', 'error'] as const).map((s) => `${book.rows.filter((r) => r.status === s).length} ${s}`).join(', ');
  lines.push(`${book.rows.length} workspace${book.rows.length === 1 ? '' : 's'} graded in ${(book.ms / 1000).toFixed(1)} s with --jobs ${book.jobs}: ${counts}.`);
  return lines.join('\n');
}
