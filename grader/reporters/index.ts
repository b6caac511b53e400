/**
 * Choosing reporters and sending a report where each one goes. The reporters themselves
 * are pure functions in this folder; this module is the only one that writes.
 *
 *   human   the terminal report (default), on stdout, verdicts as they come
 *   json    results.json (Exercism v3 + points), to a file or stdout
 *   junit   JUnit XML valid against Surefire's schema, to a file or stdout
 *   junit-ant   JUnit XML valid against Ant's schema; junit-file: junit with testcase `file`
 *   gradescope  Gradescope's results.json, to a file or stdout
 *   tap     TAP 13, to a file or stdout
 *   github  GitHub Actions: log groups and annotations on stdout, the job summary to
 *           $GITHUB_STEP_SUMMARY, the Classroom `result` to $GITHUB_OUTPUT (each when set)
 */
import { listOf, t } from '../../i18n/index.js';
import fs from 'node:fs';
import path from 'node:path';
import { SetupError } from '../failure.js';
import type { GradeReport } from '../grading.js';
import { formatGithub, type GithubOptions } from './github.js';
import { formatJson } from './json.js';
import { formatJunit } from './junit.js';
import { formatGradescope } from './gradescope.js';
import { formatTap } from './tap.js';

/** The reporters there are. */
export const REPORTER_NAMES = ['human', 'json', 'junit', 'junit-ant', 'junit-file', 'gradescope', 'tap', 'github'] as const;
/** One of REPORTER_NAMES. */
export type ReporterName = (typeof REPORTER_NAMES)[number];

/** Reporters that write one document, to a file or to stdout. */
const DOCUMENT_REPORTERS: readonly ReporterName[] = ['json', 'junit', 'junit-ant', 'junit-file', 'gradescope', 'tap'];

/** A reporter that writes one document (see DOCUMENT_REPORTERS). */
export type DocumentReporter = 'json' | 'junit' | 'junit-ant' | 'junit-file' | 'gradescope' | 'tap';

/**
 * The items of `--reporter` values: each value split at the commas that begin another
 * reporter (`,NAME` or `,NAME=`), so a comma inside a FILE path stays in it
 * (`junit=out,v2.xml,json` is junit=out,v2.xml and json).
 */
export function reporterItems(values: readonly string[]): string[] {
  const items: string[] = [];
  for (const value of values) {
    const parts = value.split(',');
    let current: string | undefined;
    for (const part of parts) {
      const head = part.trim().split('=')[0].toLowerCase();
      const starts = (REPORTER_NAMES as readonly string[]).includes(head) || current === undefined || !current.includes('=');
      if (starts) {
        if (current !== undefined) items.push(current);
        current = part;
      } else current += `,${part}`;
    }
    if (current !== undefined) items.push(current);
  }
  return items.map((v) => v.trim()).filter((v) => v !== '');
}

/** A chosen reporter and where its document goes: a file path, or undefined for stdout. */
export interface ReporterChoice {
  name: ReporterName;
  file?: string;
}

/**
 * Reads `--reporter` values (each `NAME` or `NAME=FILE`, several per value with commas; a
 * comma in FILE stays there, see reporterItems)
 * and `--output FILE` into choices; `human` when none is named. `--output` is where the
 * one json, junit or tap reporter without its own `=FILE` writes. At most one reporter
 * may write to stdout besides human and github, which share it.
 * @throws SetupError (a usage error) for an unknown name, a repeated one, FILE on human or
 *   github, an --output nothing writes to or that two reporters would share, or two
 *   documents on stdout
 */
export function chooseReporters(values: readonly string[], output?: string): ReporterChoice[] {
  const choices: ReporterChoice[] = [];
  for (const item of reporterItems(values)) {
    const eq = item.indexOf('=');
    const name = (eq < 0 ? item : item.slice(0, eq)).toLowerCase();
    const file = eq < 0 ? undefined : item.slice(eq + 1);
    if (!(REPORTER_NAMES as readonly string[]).includes(name)) {
      throw new SetupError(t('reporter.unknown', { name, names: listOf(REPORTER_NAMES) }));
    }
    if (choices.some((c) => c.name === name)) throw new SetupError(t('reporter.twice', { name }));
    if (file !== undefined && !DOCUMENT_REPORTERS.includes(name as ReporterName)) {
      throw new SetupError(t(name === 'github' ? 'reporter.noFile.github' : 'reporter.noFile', { name, names: DOCUMENT_REPORTERS.join(', ') }));
    }
    if (file === '') throw new SetupError(t('reporter.emptyFile', { name }));
    choices.push(file === undefined ? { name: name as ReporterName } : { name: name as ReporterName, file });
  }
  if (choices.length === 0) choices.push({ name: 'human' });
  if (output !== undefined) {
    const open = choices.filter((c) => DOCUMENT_REPORTERS.includes(c.name) && c.file === undefined);
    if (open.length === 0) throw new SetupError(t('reporter.outputAlone', { output }));
    if (open.length > 1) throw new SetupError(t('reporter.outputShared', { names: listOf(open.map((c) => c.name)), second: open[1].name }));
    open[0].file = output;
  }
  const toStdout = choices.filter((c) => DOCUMENT_REPORTERS.includes(c.name) && c.file === undefined);
  const shared = choices.filter((c) => c.name === 'human' || c.name === 'github');
  if (toStdout.length > 1 || (toStdout.length === 1 && shared.length > 0)) {
    const names = [...toStdout, ...shared].map((c) => c.name).join(' and ');
    throw new SetupError(t('reporter.stdoutShared', { names, first: toStdout[0].name }));
  }
  return choices;
}

/** Where the github reporter writes besides stdout, read from the GitHub Actions environment. */
export interface GithubFiles {
  /** $GITHUB_STEP_SUMMARY: the job summary file, appended to. */
  stepSummary?: string;
  /** $GITHUB_OUTPUT: the step outputs file, appended to. */
  output?: string;
}

/** What writeReports needs besides the report. */
export interface WriteOptions {
  /** Options of the github reporter (paths for annotations). */
  github?: GithubOptions;
  /** The GitHub Actions files; from the environment when absent. */
  githubFiles?: GithubFiles;
  /** Where stdout goes (default: process.stdout). */
  stdout?: (text: string) => void;
}

/** The GitHub Actions files named by the environment. */
export function githubFilesFromEnv(env: NodeJS.ProcessEnv = process.env): GithubFiles {
  const files: GithubFiles = {};
  if (env.GITHUB_STEP_SUMMARY) files.stepSummary = env.GITHUB_STEP_SUMMARY;
  if (env.GITHUB_OUTPUT) files.output = env.GITHUB_OUTPUT;
  return files;
}

/**
 * Writes `text` to `file` (UTF-8), making its folder first.
 * @throws SetupError naming the file and why it could not be written (reporter.cannotWrite)
 */
export function writeFile(file: string, text: string): void {
  try {
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    fs.writeFileSync(file, text);
  } catch (err) {
    throw new SetupError(t('reporter.cannotWrite', { file, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message }));
  }
}

function appendFile(file: string, text: string): void {
  try {
    fs.appendFileSync(file, text);
  } catch (err) {
    throw new SetupError(t('reporter.cannotAppend', { file, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message }));
  }
}

/** The document of a document reporter; `paths` (the github reporter's options) say where junit-file's `file` attributes point. */
export function formatDocument(name: DocumentReporter, report: GradeReport, paths: GithubOptions = {}): string {
  if (name === 'json') return formatJson(report);
  if (name === 'gradescope') return formatGradescope(report);
  if (name === 'junit' || name === 'junit-ant' || name === 'junit-file') {
    const flavour = name === 'junit' ? 'surefire' : name === 'junit-ant' ? 'ant' : 'file';
    return formatJunit(report, { flavour, timestamp: new Date(), workspacePath: paths.workspacePath, serverFile: paths.serverFile });
  }
  return formatTap(report);
}

/**
 * Writes the report with every chosen reporter except human (which the caller prints as
 * verdicts come): documents to their files or stdout; github to stdout and, when set, the
 * job summary and step output files. Every reporter is tried even when one cannot write.
 * @throws SetupError naming the first file that could not be written
 */
export function writeReports(report: GradeReport, choices: readonly ReporterChoice[], options: WriteOptions = {}): void {
  const stdout = options.stdout ?? ((text: string) => void process.stdout.write(text));
  let firstError: unknown;
  const attempt = (action: () => void) => {
    try {
      action();
    } catch (err) {
      firstError ??= err;
    }
  };
  for (const choice of choices) {
    if (choice.name === 'human') continue;
    if (choice.name === 'github') {
      const github = formatGithub(report, options.github);
      const files = options.githubFiles ?? githubFilesFromEnv();
      stdout(github.log);
      if (files.stepSummary) attempt(() => appendFile(files.stepSummary as string, github.summary));
      if (files.output) attempt(() => appendFile(files.output as string, github.output));
      continue;
    }
    const text = formatDocument(choice.name as DocumentReporter, report, options.github);
    if (choice.file === undefined) stdout(text);
    else attempt(() => writeFile(choice.file as string, text));
  }
  if (firstError) throw firstError;
}
