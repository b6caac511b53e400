import { Chalk, type ChalkInstance } from 'chalk';
import { formatExchange, formatLedger } from '../wire.js';
import { BODY_PREVIEW_CHARS } from '../wire.js';
import type { StepResult } from '../types.js';
import { formatPoints, type GradeReport } from '../grading.js';

/**
 * A chalk that colours only when `stream` is a terminal and NO_COLOR is unset or empty
 * (https://no-color.org), and FORCE_COLOR is not set to override.
 */
export function colourFor(stream: NodeJS.WriteStream): ChalkInstance {
  const noColor = process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '';
  const forced = process.env.FORCE_COLOR !== undefined && process.env.FORCE_COLOR !== '0';
  return new Chalk({ level: noColor ? 0 : forced || stream.isTTY ? 1 : 0 });
}

const MARK = { pass: '✓', fail: '✗', error: '!' } as const;

/** Indents every line, also the lines inside a multi-line string (a message quoting a server's output). */
function indent(lines: string[], by = '    '): string[] {
  return lines.flatMap((line) => line.split('\n')).map((line) => (line === '' ? line : by + line));
}

/**
 * One verdict as the learner reads it: a mark, the step, the message; on a failure the
 * reason, what was sent and what came back, the ledger rows, the server's output, and
 * where the hints are.
 * @param points the step's worth; when given, the header shows `score/points pt`
 */
export function formatResult(result: StepResult, c: ChalkInstance, points?: number): string {
  const colour = result.status === 'pass' ? c.green : result.status === 'fail' ? c.red : c.yellow;
  const worth = points === undefined ? '' : `  ${formatPoints(result.status === 'pass' ? points : 0)}/${formatPoints(points)} pt`;
  const lines = [`${colour(MARK[result.status])} ${c.bold(`${result.id} ${result.slug}`)}  ${result.title}${worth}  ${c.dim(`(${result.ms} ms)`)}`];
  lines.push(...indent([result.message]));
  if (result.why) lines.push(...indent([c.dim(`Why it matters: ${result.why}`)]));
  lines.push(...indent(result.details.map((d) => `· ${d}`)));
  if (result.status !== 'pass' && result.exchanges.length > 0) {
    lines.push(...indent([c.bold('What was sent and what came back:')]));
    for (const exchange of result.exchanges) {
      const [request, ...answer] = formatExchange(exchange, BODY_PREVIEW_CHARS);
      lines.push(...indent([`${c.cyan(`[${exchange.server}]`)} ${request}`, ...indent(answer, '    ')], '      '));
    }
  }
  if (result.status !== 'pass' && result.ledger) {
    lines.push(...indent([c.bold(`Ledger rows (${result.ledger.length}):`)]));
    lines.push(...indent(result.ledger.length ? formatLedger(result.ledger) : ['(none)'], '      '));
  }
  if (result.serverOutput) {
    lines.push(...indent([c.bold('The server printed (last lines):')]));
    lines.push(...indent(result.serverOutput.trimEnd().split('\n').slice(-15), '      '));
  }
  for (const warning of result.warnings) lines.push(...indent([c.yellow(`note: ${warning}`)]));
  if (result.status === 'fail') lines.push(...indent([c.dim(`Stuck? idem-lab hint ${result.id}`)]));
  return lines.join('\n');
}

/**
 * The closing line: `6 of 8 steps pass.` with the failing ids; with a report, the score
 * (`Score: 6 of 8 points.`) and, when the run is an error, why.
 */
export function formatSummary(results: StepResult[], c: ChalkInstance, report?: GradeReport): string {
  const passed = results.filter((r) => r.status === 'pass').length;
  const failing = results.filter((r) => r.status !== 'pass').map((r) => r.id);
  const line = `${passed} of ${results.length} step${results.length === 1 ? '' : 's'} pass${results.length === 1 ? 'es' : ''}.`;
  let summary = failing.length === 0 ? c.green(line) : `${c.red(line)} To do: ${failing.join(', ')}.`;
  if (report) summary += ` Score: ${formatPoints(report.score)} of ${formatPoints(report.maxScore)} point${report.maxScore === 1 ? '' : 's'}.`;
  if (report?.status === 'error' && report.message) summary += `\n${c.yellow(report.message)}`;
  return summary;
}
