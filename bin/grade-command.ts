/**
 * `idem-lab grade DIR... [--jobs N] [--csv FILE] [--json FILE] [--config FILE] [--timeout S]`:
 * grade a cohort of student workspaces into a gradebook (see cohort.ts). Prints a progress
 * line on a terminal (a line per workspace otherwise) on stderr and the gradebook table
 * on stdout; writes the CSV and JSON gradebooks when asked.
 */
import path from 'node:path';
import {
  feedbackMarkdown,
  feedbackNames,
  formatGradebook,
  gradebookCsv,
  gradebookJson,
  gradeCohort,
  parseShard,
  readAndMergeGradebooks,
  shardOf,
  tableOf,
  updateGradebook,
  DEFAULT_WORKSPACE_TIMEOUT_MS,
  type GradebookJson,
  type GradebookRow,
} from '../grader/cohort.js';
import { t } from '../i18n/index.js';
import { visible } from '../grader/visible.js';
import { SetupError } from '../grader/failure.js';
import { defaultGradingConfig, formatPoints, readGradingConfig } from '../grader/grading.js';
import { installExitHooks } from '../grader/cleanup.js';
import { runLimitsOf, sandboxFor, sandboxWarning } from './shared/check.js';
import { writeFile } from '../grader/reporters/index.js';
import { allSteps, configForTrack, configTrack, resolveTrack } from './shared/tracks.js';
import { openWorkspace } from '../lab/workspace.js';
import { outputOf, type Output } from './shared/output.js';

/** Options of `idem-lab grade`. */
export interface GradeCommandOptions {
  /** --jobs: workspaces graded at once (a whole number from 1). */
  jobs?: string;
  /** --csv FILE: the gradebook as CSV. */
  csv?: string;
  /** --json FILE: the gradebook as JSON, with every student's results. */
  json?: string;
  /** --config FILE: points and required steps for every student; default one point each, all required. */
  config?: string;
  /** --timeout SECONDS: how long one workspace may take before it is cut off (an error row). */
  timeout?: string;
  /** --shard K/N: grade only the K-th of N slices of the folders (see shardOf); the gradebook records the slice. */
  shard?: string;
  /** --sandbox auto|required|off (default required: grading runs strangers' code), see sandbox.ts. */
  sandbox?: string;
  /** --track ID: the track whose steps are graded (default: the --config file's "track", else basic). */
  track?: string;
  /** --feedback DIR: one Markdown feedback file per student (see cohort.ts feedbackMarkdown). */
  feedback?: string;
  /** Where the gradebook (out.log) and the progress (out.error) go; default the process's stdout and stderr. */
  out?: Output;
}

/** Exit codes of `idem-lab grade`. */
export const GRADE_EXIT = { graded: 0, errors: 1, usage: 2 } as const;

function wholeNumber(value: string | undefined, name: string, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || (name === '--jobs' && !Number.isInteger(n))) {
    throw new SetupError(t(name === '--jobs' ? 'grade.badWhole' : 'grade.badNumber', { name, min, value }));
  }
  return n;
}


/** Where cohortProgress writes: process.stderr, or any stream with a write (then a line per workspace unless isTTY). */
export interface ProgressStream {
  isTTY?: boolean;
  /** Its width in columns, for a terminal (default 100). */
  columns?: number;
  write(text: string): unknown;
}

/**
 * Progress of a cohort on `stream` (stderr): one line rewritten in place on a terminal, cut
 * to its width; a line per finished workspace otherwise.
 */
export function cohortProgress(total: number, stream: ProgressStream = process.stderr) {
  const counts = { pass: 0, fail: 0, error: 0 };
  let running = 0;
  let done = 0;
  const tty = stream.isTTY === true;
  const line = (text: string) => {
    if (tty) stream.write(`\r\x1b[K${text.slice(0, (stream.columns || 100) - 1)}`);
    else stream.write(`${text}\n`);
  };
  const status = (last?: GradebookRow) =>
    `[${done}/${total}] ${running} running · ${counts.pass} pass, ${counts.fail} fail, ${counts.error} error${last ? ` · ${visible(last.student)}: ${last.status} ${formatPoints(last.score)}/${formatPoints(last.maxScore)}` : ''}`;
  return {
    start(_student: string, now: number) {
      running = now;
      if (tty) line(status());
    },
    row(row: GradebookRow, finished: number) {
      done = finished;
      running = Math.max(0, running - 1);
      counts[row.status]++;
      if (tty) line(status(row));
      else line(`[${done}/${total}] ${visible(row.student)}: ${row.status} ${formatPoints(row.score)}/${formatPoints(row.maxScore)} (${(row.ms / 1000).toFixed(1)} s)`);
    },
    end() {
      if (tty) stream.write('\r\x1b[K');
    },
  };
}

/**
 * Grades the workspaces and reports. Exit code: 0 every workspace was graded (whatever
 * its verdicts), 1 some are error rows (could not grade, server could not start, cut off),
 * 2 a usage error (nothing graded).
 * @throws SetupError for a usage error: no folder, a bad --jobs/--timeout, a bad --config
 */
export async function gradeCommand(dirs: string[], options: GradeCommandOptions): Promise<number> {
  if (dirs.length === 0) throw new SetupError(t('grade.noDirs'));
  const jobs = wholeNumber(options.jobs, '--jobs', 1);
  const timeoutMs = Math.round(wholeNumber(options.timeout, '--timeout', DEFAULT_WORKSPACE_TIMEOUT_MS / 1000, 0.001) * 1000);
  const track = options.track === undefined && options.config ? (configTrack(options.config) ?? resolveTrack(undefined)) : resolveTrack(options.track);
  const STEPS = track.steps;
  const config = configForTrack(options.config ? readGradingConfig(options.config, allSteps()) : defaultGradingConfig(), track);
  const shard = options.shard === undefined ? undefined : parseShard(options.shard);
  const slice = shard ? shardOf(dirs, shard) : { dirs, names: undefined };
  const runLimits = runLimitsOf();
  // Every server runs in a sandbox that hides every student's folder, its own included (it runs in a copy).
  const choice = STEPS.some((s) => s.live) ? await sandboxFor(options.sandbox, 'required', dirs.map((d) => path.resolve(d))) : undefined;
  const sandbox = choice?.sandbox;
  installExitHooks();
  const out = outputOf(options);
  const warning = sandboxWarning(choice);
  if (warning) out.error(`idem-lab: ${warning}`);
  if (shard) out.error(t('cohort.shard.slice', { shard: `${shard.index}/${shard.count}`, count: slice.dirs.length, total: dirs.length }));
  // On the process's stderr, rewritten in place on a terminal; on a captured output, a line per workspace on its complaints side.
  const shown = cohortProgress(slice.dirs.length, out.errStream ?? { write: (text) => out.error(text.replace(/\n$/, '')) });
  const book = await gradeCohort({
    dirs: slice.dirs,
    names: slice.names,
    steps: STEPS,
    serverCommand: (workspace) => openWorkspace(workspace).command,
    config,
    jobs,
    timeoutMs,
    limits: runLimits,
    sandbox,
    ...(choice ? { confinement: choice } : {}),
    onStart: shown.start,
    onRow: shown.row,
    ...(shard ? { shard: { ...shard, total: dirs.length } } : {}),
  });
  shown.end();
  out.log(formatGradebook(book, out.columns || 120));
  if (options.csv) writeFile(options.csv, gradebookCsv(book));
  if (options.json || options.feedback) {
    const json = gradebookJson(book);
    if (options.json) writeFile(options.json, JSON.stringify(json, null, 2) + '\n');
    if (options.feedback) writeFeedback(options.feedback, json);
  }
  return book.rows.some((r) => r.status === 'error') ? GRADE_EXIT.errors : GRADE_EXIT.graded;
}

/** Writes one feedback file per student into `dir` (see cohort.ts feedbackMarkdown, feedbackNames). */
export function writeFeedback(dir: string, book: GradebookJson): void {
  const names = feedbackNames(book.students.map((s) => s.student));
  book.students.forEach((student, i) => writeFile(path.join(dir, names[i]), feedbackMarkdown(student, book.steps)));
}

/** Options of `idem-lab gradebook merge`. */
export interface MergeCommandOptions {
  /** --update FILE: an earlier gradebook the merged rows go into (a regrade of some students). */
  update?: string;
  /** --feedback DIR: one Markdown feedback file per student. */
  feedback?: string;
  /** --json FILE: the merged gradebook as JSON. */
  json?: string;
  /** --csv FILE: the merged gradebook as CSV. */
  csv?: string;
  /** Where the table (out.log) and the summary line (out.error) go; default the process's stdout and stderr. */
  out?: Output;
}

/**
 * `idem-lab gradebook merge FILE...`: joins the JSON gradebooks of a cohort's shards into
 * one (see mergeGradebooks), prints its table and writes it as JSON and CSV when asked.
 * Exit code: 0 merged and every workspace graded, 1 merged with error rows (as `grade`),
 * 2 a usage error (nothing written): a file that is not a gradebook, a shard missing or
 * given twice, shards graded with other points.
 * @throws SetupError for the usage errors
 */
export function mergeCommand(files: string[], options: MergeCommandOptions): number {
  if (files.length === 0) throw new SetupError(t('gradebook.merge.none'));
  let merged = readAndMergeGradebooks(files);
  if (options.update) merged = updateGradebook(readAndMergeGradebooks([options.update]), merged, { base: options.update, fresh: files.join(', ') });
  const out = outputOf(options);
  out.log(formatGradebook(tableOf(merged), out.columns || 120));
  const gradebooks = files.length === 1 ? t('gradebook.merge.oneBook') : t('gradebook.merge.books', { count: files.length });
  const students = merged.students.length === 1 ? t('gradebook.merge.oneStudent') : t('gradebook.merge.students', { count: merged.students.length });
  out.error(t(options.update ? 'gradebook.merge.updated' : 'gradebook.merge.done', { gradebooks, students, file: options.update ?? '' }));
  if (options.json) writeFile(options.json, JSON.stringify(merged, null, 2) + '\n');
  if (options.csv) writeFile(options.csv, gradebookCsv(merged));
  if (options.feedback) writeFeedback(options.feedback, merged);
  return merged.students.some((s) => s.status === 'error') ? GRADE_EXIT.errors : GRADE_EXIT.graded;
}
