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
import path from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { grade } from './engine.js';
import { SetupError } from './failure.js';
import { commandExists } from './check-command.js';
import { formatPoints, isRequired, pointsOf, scoreResults, setupErrorReport, type GradeReport, type GradingConfig } from './grading.js';
import { resultsFile, type ResultsFile } from './reporters/json.js';
import { stepName } from './reporters/plain.js';
import { resolveInterpreter, type ServerCommand } from './server.js';
import type { Sandbox } from './sandbox.js';
import type { Status } from './types.js';
import { openWorkspace } from '../lab/workspace.js';
import type { Step } from '../steps/types.js';

/** How long one workspace may take to grade by default, in ms. */
export const DEFAULT_WORKSPACE_TIMEOUT_MS = 180_000;

/** What to grade and how. */
export interface CohortOptions {
  /** The student workspaces, as given (relative to the current directory or absolute). */
  dirs: readonly string[];
  /** The steps to grade in each, in order. */
  steps: readonly Step[];
  /** Points and required steps, the same for every student (never read from the students' own files). */
  config: GradingConfig;
  /** How many workspaces to grade at once (default 1). */
  jobs?: number;
  /** How long one workspace may take, in ms, before it is cut off as an error (default DEFAULT_WORKSPACE_TIMEOUT_MS). */
  timeoutMs?: number;
  /** The sandbox every server runs in (see sandbox.ts); none when absent. */
  sandbox?: Sandbox;
  /** Called when a workspace starts grading. */
  onStart?(student: string, running: number): void;
  /** Called with each row as soon as its workspace is graded; `done` counts finished rows. */
  onRow?(row: GradebookRow, done: number): void;
}

/** One student's row. */
export interface GradebookRow {
  /** A name for the row: the folder's name, or its path when two folders share a name. */
  student: string;
  /** The workspace's absolute path. */
  path: string;
  /** pass, fail, or error (could not grade, server could not start, cut off after the time limit). */
  status: Status;
  /** The verdict per step id; absent for a step that was not graded. */
  steps: Record<string, Status>;
  score: number;
  maxScore: number;
  /** `02 replay: <message>` for the first step that did not pass, or why the workspace could not be graded; '' when all passed. */
  firstFailure: string;
  /** Wall time of this workspace, in ms. */
  ms: number;
  /** The full report (every verdict with its transcript). */
  report: GradeReport;
}

/** The gradebook: one row per student, in the order the folders were given. */
export interface Gradebook {
  steps: ReadonlyArray<{ id: string; slug: string; title: string; points: number; required: boolean }>;
  rows: GradebookRow[];
  /** Points possible per student. */
  maxScore: number;
  jobs: number;
  /** Wall time of the whole cohort, in ms. */
  ms: number;
  /** When grading started. */
  startedAt: Date;
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

function rowOf(student: string, workspace: string, report: GradeReport, ms: number): GradebookRow {
  return {
    student,
    path: workspace,
    status: report.status,
    steps: Object.fromEntries(report.steps.map((s) => [s.result.id, s.result.status])),
    score: report.score,
    maxScore: report.maxScore,
    firstFailure: firstFailure(report),
    ms: Math.round(ms),
    report,
  };
}

/**
 * Grades one workspace into a row; never throws. No server.py, a missing interpreter or
 * a bad idem-lab.json "server" entry is an error row with the reason; so is a workspace
 * cut off after `timeoutMs` (its running servers are stopped at once).
 */
export async function gradeWorkspace(student: string, dir: string, options: Pick<CohortOptions, 'steps' | 'config' | 'timeoutMs' | 'sandbox'>): Promise<GradebookRow> {
  const started = performance.now();
  const workspace = path.resolve(dir);
  const timeoutMs = options.timeoutMs ?? DEFAULT_WORKSPACE_TIMEOUT_MS;
  const setupError = (message: string) => rowOf(student, workspace, setupErrorReport(message, options.config, options.steps), performance.now() - started);
  let command: ServerCommand;
  try {
    command = openWorkspace(workspace).command;
    if (options.steps.some((s) => s.live) && !commandExists(command.file)) {
      throw new SetupError(`${command.file} is not installed or not on PATH: the live checks run the server with it`);
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
    });
    return rowOf(student, workspace, scoreResults(results, options.config), performance.now() - started);
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
  const names = studentNames(options.dirs);
  const rows: GradebookRow[] = new Array(options.dirs.length);
  let next = 0;
  let done = 0;
  let running = 0;
  const worker = async () => {
    while (next < options.dirs.length) {
      const i = next++;
      running++;
      options.onStart?.(names[i], running);
      rows[i] = await gradeWorkspace(names[i], options.dirs[i], options);
      running--;
      options.onRow?.(rows[i], ++done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, options.dirs.length) }, worker));
  return {
    steps: options.steps.map((s) => ({ id: s.id, slug: s.slug, title: s.title, points: pointsOf(options.config, s.id), required: isRequired(options.config, s.id) })),
    rows,
    maxScore: options.steps.reduce((sum, s) => sum + pointsOf(options.config, s.id), 0),
    jobs,
    ms: Math.round(performance.now() - started),
    startedAt,
  };
}

/** A text cell a spreadsheet would not run as a formula (OWASP: a leading = + - @ tab or CR gets a quote). */
function safeCell(text: string): string {
  return /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
}

/** The columns of the CSV gradebook: student, path, status, one per step (`02-replay`), score, max_score, first_failure. */
export function gradebookColumns(book: Gradebook): string[] {
  return ['student', 'path', 'status', ...book.steps.map((s) => `${s.id}-${s.slug}`), 'score', 'max_score', 'first_failure'];
}

/**
 * The gradebook as CSV (RFC 4180, header line first): one row per student, one column per
 * step holding pass, fail, error or '' (not graded), the score and the first failure.
 */
export function gradebookCsv(book: Gradebook): string {
  const records = book.rows.map((row) => [
    safeCell(row.student),
    safeCell(row.path),
    row.status,
    ...book.steps.map((s) => row.steps[s.id] ?? ''),
    formatPoints(row.score),
    formatPoints(row.maxScore),
    safeCell(row.firstFailure.replace(/\s*\n\s*/g, ' ')),
  ]);
  return stringify(records, { header: true, columns: gradebookColumns(book) });
}

/** One student in the JSON gradebook. */
export interface GradebookJsonStudent {
  student: string;
  path: string;
  status: Status;
  score: number;
  max_score: number;
  first_failure: string;
  ms: number;
  /** Per step id: its verdict and points earned. */
  steps: Record<string, { status: Status; score: number }>;
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
}

/** The gradebook as a JSON object (see GradebookJson). */
export function gradebookJson(book: Gradebook): GradebookJson {
  return {
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
      score: row.score,
      max_score: row.maxScore,
      first_failure: row.firstFailure,
      ms: row.ms,
      steps: Object.fromEntries(row.report.steps.map((s) => [s.result.id, { status: s.result.status, score: s.score }])),
      results: resultsFile(row.report),
    })),
  };
}

const MARK: Record<Status, string> = { pass: '✓', fail: '✗', error: '!' };

/**
 * The gradebook as a terminal table: student, status, a mark per step, score, and the
 * first failure cut to `width` characters in all.
 */
export function formatGradebook(book: Gradebook, width = 120): string {
  const nameWidth = Math.max(7, ...book.rows.map((r) => r.student.length));
  const scoreWidth = Math.max(5, ...book.rows.map((r) => `${formatPoints(r.score)}/${formatPoints(r.maxScore)}`.length));
  const header = `${'student'.padEnd(nameWidth)}  status  ${book.steps.map((s) => s.id).join(' ')}  ${'score'.padEnd(scoreWidth)}  first failure`;
  const lines = [header];
  for (const row of book.rows) {
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
