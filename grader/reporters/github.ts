/**
 * The github reporter, for GitHub Actions: the log (one collapsible group per step with
 * its whole verdict), annotations (::error on a step that did not pass, pointing at the
 * learner's file where there is one; ::warning for advice; ::notice with the score), a
 * Markdown table for the job summary ($GITHUB_STEP_SUMMARY), and the `result` output
 * GitHub Classroom's autograding reporter reads ($GITHUB_OUTPUT).
 *
 * Learner-controlled text (server output, response bodies, pasted files) must never
 * become a workflow command. In the log it is printed between ::stop-commands::TOKEN and
 * ::TOKEN:: with a random token it does not contain; in annotations it is escaped as
 * GitHub's toolkit does (% CR LF, and : , in properties), `::` is broken up, and control
 * characters are shown as `\xNN`.
 * (https://docs.github.com/actions/using-workflows/workflow-commands-for-github-actions)
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { formatPoints, notPassed, type GradeReport } from '../grading.js';
import type { StepResult } from '../types.js';
import { plainBody, stepName, stepsPass, truncate, visibleControls } from './plain.js';
import { noWorkflowCommands, visibleDeep } from '../visible.js';

/** Options of the github reporter. */
export interface GithubOptions {
  /**
   * The workspace folder relative to the repository root (posix separators), '' when the
   * workspace is the root: annotations name files as `<workspacePath>/<file>`.
   */
  workspacePath?: string;
  /** The learner's server source, relative to the workspace (e.g. 'server.py'): where a failed live check points. None when absent. */
  serverFile?: string;
  /** The ::stop-commands:: token; a fresh random one when absent (a test may fix it). */
  token?: string;
}

/** What the github reporter produces. */
export interface GithubReport {
  /** Text for stdout (the job log): the groups, then the annotations. */
  log: string;
  /** Markdown to append to the file named by $GITHUB_STEP_SUMMARY. */
  summary: string;
  /** The line to append to the file named by $GITHUB_OUTPUT: `result=<base64>` (see classroomResult). */
  output: string;
}

/** GitHub's limit of annotations of one kind per step. */
const ANNOTATIONS_PER_KIND = 10;
/** Characters of one step's transcript in the job summary. */
const SUMMARY_TRANSCRIPT_CHARS = 10_000;
const MARK = { pass: '✓', fail: '✗', error: '!' } as const;

/**
 * Escapes a workflow command's message as @actions/core does (% CR LF), after showing
 * control characters; `::` and the legacy `##[` are broken up (`: :`, `# #[`) so no
 * reader can take any part of it for a command.
 */
export function escapeData(text: string): string {
  return visibleControls(text)
    .replace(/%/g, '%25')
    .replace(/\r/g, '%0D')
    .replace(/\n/g, '%0A')
    .replace(/::/g, ': :')
    .replace(/##\[/g, '# #[');
}

/** Escapes a workflow command's property value (file=, title=): as escapeData, and `:` `,` too. */
export function escapeProperty(text: string): string {
  return visibleControls(text).replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A').replace(/:/g, '%3A').replace(/,/g, '%2C');
}

/** One annotation line: `::error file=...,title=...::message`. */
function annotation(kind: 'error' | 'warning' | 'notice', message: string, properties: Record<string, string | undefined>): string {
  const props = Object.entries(properties)
    .filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== '')
    .map(([key, value]) => `${key}=${escapeProperty(value)}`)
    .join(',');
  return `::${kind}${props ? ` ${props}` : ''}::${escapeData(message)}`;
}

/** A random token that `text` does not contain. */
function tokenFor(text: string, fixed?: string): string {
  let token = fixed ?? crypto.randomBytes(16).toString('hex');
  while (text.includes(token)) token = crypto.randomBytes(16).toString('hex');
  return token;
}

/** `text` printed with workflow commands off: nothing in it can start one. */
function stopped(text: string, fixedToken?: string): string[] {
  const token = tokenFor(text, fixedToken);
  return [`::stop-commands::${token}`, noWorkflowCommands(text), `::${token}::`];
}

/** The file a failed step points at, relative to the repository root; undefined when none. */
export function annotatedFile(result: StepResult, options: GithubOptions): string | undefined {
  const file = result.failedPart === 'file' ? result.file : result.failedPart === 'live' ? options.serverFile : undefined;
  if (!file) return undefined;
  return path.posix.join(options.workspacePath ?? '', file);
}

/**
 * Text a student controls (a message quoting a response body, a step's file) as Markdown
 * that shows it literally, on one line: every ASCII punctuation character Markdown or its
 * GitHub extensions give a meaning (emphasis, code spans, links and images, headings,
 * lists, tables, strike-through, footnotes, math, bare URLs by their colon) escaped with a backslash (CommonMark: any ASCII
 * punctuation may be), `&` `<` `>` as entities so no HTML or entity is formed, newlines as
 * `<br>`, control characters shown as `\xNN`. For table cells and headings of the summary.
 */
export function markdownText(text: string): string {
  return visibleControls(text)
    .replace(/[\\`*_{}[\]()#+\-.!|~^$:]/g, (ch) => `\\${ch}`)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/\n/g, '<br>');
}

/** Text inside an HTML block of the summary (`<summary>`), where Markdown is not read: entities only, one line. */
function htmlText(text: string): string {
  return visibleControls(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\n/g, ' ');
}

/** A table cell: one line, the text shown as written (markdownText). */
function cell(text: string): string {
  return markdownText(text);
}

/** A fenced code block that `text` cannot close early: the lines of the block, its info string `text`. */
export function fenced(text: string): string[] {
  const safe = noWorkflowCommands(text);
  const longest = Math.max(0, ...(safe.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(Math.max(3, longest + 1));
  return [`${fence}text`, safe, fence];
}

/** `6 of 8 steps pass · 6/8 points`. */
function headline(report: GradeReport): string {
  const passed = report.steps.filter((s) => s.result.status === 'pass').length;
  return `${stepsPass(passed, report.steps.length)} · ${formatPoints(report.score)}/${formatPoints(report.maxScore)} points`;
}

/** What a sandbox that fell back left the servers, and why: for the annotation and the job summary. */
function sandboxFallbackText(sandbox: NonNullable<GradeReport['sandbox']>): string {
  const what = sandbox.confinement === 'off' ? 'The servers ran without a sandbox' : "The servers ran in a sandbox that kept the host's network";
  return `${what} (--sandbox auto fell back: ${sandbox.reason ?? 'no reason given'}). Install bubblewrap where it may make namespaces, or pass --sandbox required to refuse to grade so.`;
}

/** The job summary: a headline, the error when there is one, one table row per step, and the transcript of each step that did not pass. */
export function formatStepSummary(report: GradeReport): string {
  const lines = [`## idem-lab: ${headline(report)}`, ''];
  if (report.status === 'error' && report.message) lines.push(`> **Could not grade everything:** ${cell(report.message)}`, '');
  if (report.sandbox?.fallback) lines.push(`> **Warning, sandbox ${cell(report.sandbox.confinement)}:** ${cell(sandboxFallbackText(report.sandbox))}`, '');
  lines.push('| Step | Result | Points | Required | What the grader found |', '|---|---|---|---|---|');
  for (const { result, points, score, required } of report.steps) {
    const verdict = result.status === 'pass' ? '✅ pass' : result.status === 'fail' ? '❌ fail' : '⚠️ error';
    lines.push(`| ${cell(stepName(result))} | ${verdict} | ${formatPoints(score)}/${formatPoints(points)} | ${required ? 'yes' : 'no'} | ${cell(result.message)} |`);
  }
  for (const { result } of report.steps) {
    if (result.status === 'pass') continue;
    lines.push('', `<details><summary>${htmlText(`${MARK[result.status]} ${stepName(result)}`)}: what was sent and what came back</summary>`, '');
    lines.push(...fenced(truncate(plainBody(result), SUMMARY_TRANSCRIPT_CHARS)), '', '</details>');
  }
  return lines.join('\n') + '\n';
}

/** One test of GitHub Classroom's runner result. */
export interface ClassroomTest {
  name: string;
  status: 'pass' | 'fail' | 'error';
  /** Points earned. */
  score: number;
  /** What went wrong (fail, error) or what was shown (pass). */
  message: string;
  test_code: string;
  /** The learner's file of the step, '' when none. */
  filename: string;
  line_no: number;
  /** Wall time of the step in ms. */
  duration: number;
}

/**
 * The result a GitHub Classroom grader action hands to classroom-resources/autograding-grading-reporter:
 * version 1, status, max_score, tests with their score. `status` is `error` when the run is
 * an error, `fail` when a required step failed, else `pass` (the reporter fails the job on
 * anything but pass, so an optional step's failure does not).
 */
export interface ClassroomResult {
  version: 1;
  status: 'pass' | 'fail' | 'error';
  max_score: number;
  tests: ClassroomTest[];
}

/** The Classroom result of a report (see ClassroomResult). */
export function classroomResult(report: GradeReport): ClassroomResult {
  return visibleDeep({
    version: 1,
    status: report.status === 'error' ? 'error' : report.requiredPassed ? 'pass' : 'fail',
    max_score: report.maxScore,
    tests: report.steps.map(({ result, score }) => ({
      name: stepName(result),
      status: result.status,
      score,
      message: result.message,
      test_code: `idem-lab check ${result.id}`,
      filename: result.file ?? '',
      line_no: 0,
      duration: result.ms,
    })),
  } satisfies ClassroomResult);
}

/** The github reporter (see GithubReport). */
export function formatGithub(report: GradeReport, options: GithubOptions = {}): GithubReport {
  const log: string[] = [];
  for (const { result, points, score } of report.steps) {
    log.push(`::group::${MARK[result.status]} ${stepName(result)} (${formatPoints(score)}/${formatPoints(points)} pt)`);
    log.push(...stopped(plainBody(result), options.token));
    log.push('::endgroup::');
  }
  const errors: string[] = [];
  const warnings: string[] = [];
  if (report.status === 'error' && report.message) errors.push(annotation('error', report.message, { title: 'idem-lab could not grade everything' }));
  // A sandbox that fell back (--sandbox auto) is a warning of its own, first of all.
  if (report.sandbox?.fallback) warnings.push(annotation('warning', sandboxFallbackText(report.sandbox), { title: 'idem-lab: the servers ran without full confinement' }));
  for (const { result, required } of report.steps) {
    if (result.status !== 'pass') {
      const why = result.why ? `\n${result.why}` : '';
      const more = `\nThe log's group "${stepName(result)}" shows what was sent and what came back; idem-lab check ${result.id} runs it again.`;
      errors.push(annotation('error', `${result.message}${why}${more}`, { file: annotatedFile(result, options), title: `${stepName(result)}${required ? '' : ' (optional)'}` }));
    }
    for (const warning of result.warnings) warnings.push(annotation('warning', warning, { file: result.file ? path.posix.join(options.workspacePath ?? '', result.file) : undefined, title: stepName(result) }));
  }
  const todo = notPassed(report);
  const total = `${headline(report)}${todo.length ? ` · to do: ${todo.join(', ')}` : ''}`;
  log.push(...errors.slice(0, ANNOTATIONS_PER_KIND), ...warnings.slice(0, ANNOTATIONS_PER_KIND), annotation('notice', total, { title: 'idem-lab' }));
  const output = `result=${Buffer.from(JSON.stringify(classroomResult(report))).toString('base64')}`;
  return { log: log.join('\n') + '\n', summary: formatStepSummary(report), output: output + '\n' };
}
