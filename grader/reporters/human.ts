import { Chalk, type ChalkInstance } from 'chalk';
import { BODY_PREVIEW_CHARS, curlCommand, formatExchange, formatLedger } from '../wire.js';
import { language, listOf, t } from '../../i18n/index.js';
import type { Exchange, StepResult } from '../types.js';
import { splitLabel } from '../printed.js';
import { formatPoints, type GradeReport } from '../grading.js';
import { visible, visibleDeep } from '../visible.js';
import { serverTimeZone } from '../seed.js';

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

/** How many lines of a server's output a verdict shows (after repeats are collapsed). */
const SERVER_OUTPUT_LINES = 30;

/**
 * Exchanges with the repeats folded: within a run of consecutive exchanges sending the same
 * request (server, method, path, key, body, other headers, client address), the ones that also came back the same
 * (status, Idempotency-Replayed, body, error) are shown once, at the first, with how many
 * there were. Ten simultaneous requests answered nine times alike read as one line and `×9`.
 * @returns the exchanges to show, in order, each with its count (1 when unrepeated)
 */
export function groupExchanges(exchanges: readonly Exchange[]): { exchange: Exchange; count: number }[] {
  const request = (e: Exchange) => JSON.stringify([e.server, e.method, e.path, e.key ?? null, e.requestBody, e.headers ?? null, e.client ?? null]);
  const answer = (e: Exchange) => JSON.stringify([e.status ?? null, e.replayed ?? null, e.responseBody ?? null, e.error ?? null]);
  const out: { exchange: Exchange; count: number }[] = [];
  let block: { request: string; groups: Map<string, { exchange: Exchange; count: number }> } | undefined;
  for (const exchange of exchanges) {
    if (!block || block.request !== request(exchange)) block = { request: request(exchange), groups: new Map() };
    const group = block.groups.get(answer(exchange));
    if (group) {
      group.count++;
      continue;
    }
    const fresh = { exchange, count: 1 };
    block.groups.set(answer(exchange), fresh);
    out.push(fresh);
  }
  return out;
}

/** The lines Python puts between the tracebacks of one chained exception. */
const CHAIN_LINES = ['During handling of the above exception, another exception occurred:', 'The above exception was the direct cause of the following exception:'];

/** The end (exclusive) of the Python traceback, chained ones included, that starts at `lines[start]`. */
function tracebackEnd(lines: readonly string[], start: number): number {
  let end = start + 1;
  while (end < lines.length && /^\s/.test(lines[end])) end++;
  end = Math.min(end + 1, lines.length); // the exception line
  if (lines[end] === '' && CHAIN_LINES.includes(lines[end + 1] ?? '') && lines[end + 2] === '' && lines[end + 3] === 'Traceback (most recent call last):') {
    return tracebackEnd(lines, end + 3);
  }
  return end;
}

/** A line that starts a record of a server's output: a traceback not chained to one before, or a log line. */
function startsRecord(lines: readonly string[], i: number): boolean {
  if (lines[i] === 'Traceback (most recent call last):') return !CHAIN_LINES.includes(lines[i - 2] ?? '');
  return /^\S+ - - \[/.test(lines[i]);
}

/** A line to show and its place in the output: the index of the line printed, x.5 for a count after it. */
interface Placed {
  at: number;
  text: string;
}

/**
 * One server's lines (texts, with their places in the whole output) collapsed as
 * collapseServerOutput says: repeats left out and counted under their first showing;
 * `ordered`: a log line only when it repeats the log line right before it.
 */
function collapseOne(texts: readonly string[], places: readonly number[], ordered: boolean): Placed[] {
  const out: Placed[] = [];
  const seen = new Map<string, { at: number; count: number }>();
  const counts: { at: number; count: number }[] = [];
  const blocks: { text: string; entry: { at: number; count: number } }[] = [];
  let fragment: { lines: string[]; shown: Placed[] } | undefined;
  // The key of the last log line met (tracebacks aside): a repeat is counted only right after it.
  let lastLine: string | undefined;
  for (let i = 0; i < texts.length; i++) {
    // Lines before the first record: a traceback cut at its start (output is kept as a tail).
    if (i === 0 && !startsRecord(texts, 0)) {
      let end = 0;
      while (end < texts.length && !startsRecord(texts, end)) end++;
      const shown = texts.slice(0, end).map((text, k) => ({ at: places[k], text }));
      fragment = { lines: texts.slice(0, end), shown };
      out.push(...shown);
      i = end - 1;
      continue;
    }
    if (texts[i] === 'Traceback (most recent call last):') {
      const end = tracebackEnd(texts, i);
      const block = texts.slice(i, end);
      const key = `traceback:${block.join('\n')}`;
      const known = seen.get(key);
      if (known) known.count++;
      else {
        out.push(...block.map((text, k) => ({ at: places[i + k], text })));
        const entry = { at: places[end - 1], count: 1 };
        seen.set(key, entry);
        counts.push(entry);
        blocks.push({ text: block.join('\n'), entry });
      }
      i = end - 1;
      continue;
    }
    const key = `line:${texts[i].replace(/\[[^\]]*\]/g, '[]')}`;
    // Counted under the line before only when no other line came between (tracebacks may):
    // a 201, a 422 and a 201 again are shown in that order, not as a 201 twice and a 422.
    const known = texts[i].trim() === '' || (ordered && key !== lastLine) ? undefined : seen.get(key);
    lastLine = key;
    if (known) {
      known.count++;
      continue;
    }
    out.push({ at: places[i], text: texts[i] });
    const entry = { at: places[i], count: 1 };
    counts.push(entry);
    seen.set(key, entry);
  }
  // A cut traceback shown whole later is left out and counted there.
  let shown = out;
  if (fragment && fragment.lines.length > 0) {
    const cut = fragment;
    const whole = blocks.find((b) => b.text.endsWith(cut.lines.join('\n')));
    if (whole) {
      whole.entry.count++;
      shown = out.filter((p) => !cut.shown.includes(p));
    }
  }
  const marks = counts.filter((e) => e.count > 1).map((e) => ({ at: e.at + 0.5, text: `  ${t('report.same', { n: e.count - 1 })}` }));
  return [...shown, ...marks];
}

/**
 * A server's output as lines, each Python traceback shown once: a traceback (from
 * `Traceback (most recent call last):` to its exception line, with the tracebacks chained
 * to it) that repeats one shown before is left out and counted under the first (`×9, the
 * same`), and so is a log line that repeats the log line before it but for its [time stamp]
 * (tracebacks between them aside): a repeat after another log line is shown again, in order,
 * unless that makes more lines than a report shows (SERVER_OUTPUT_LINES): then any repeat of
 * a line shown before is counted under it.
 * The end of a traceback whose beginning was cut off (output is kept as a tail) counts as
 * that traceback when it is shown whole later.
 *
 * Output labelled by server (`[A] …`, printed.ts labelledOutput) is collapsed server by
 * server: a repeat counts only against the same server's lines, and a traceback is one
 * server's lines even when another server printed between them. Every line shown keeps
 * its label, a count is labelled with its server too, and lines stay in print order.
 */
export function collapseServerOutput(text: string): string[] {
  const lines = text.trimEnd().split('\n').map(splitLabel);
  const byServer = new Map<string, { texts: string[]; places: number[] }>();
  lines.forEach((line, at) => {
    const own = byServer.get(line.label) ?? { texts: [], places: [] };
    own.texts.push(line.text);
    own.places.push(at);
    byServer.set(line.label, own);
  });
  const collapsed = (ordered: boolean) =>
    [...byServer]
      .flatMap(([label, own]) => collapseOne(own.texts, own.places, ordered).map((p) => ({ at: p.at, text: label === '' ? p.text : p.text === '' ? `[${label}]` : `[${label}] ${p.text}` })))
      .sort((a, b) => a.at - b.at)
      .map((p) => p.text);
  // In order where it fits what a report shows; lines that keep coming back in turn (a 201, a
  // 409, a 201 ...) would push the rest (a traceback) out, and are then counted under their first.
  const shown = collapsed(true);
  return shown.length <= SERVER_OUTPUT_LINES ? shown : collapsed(false);
}

/** How `formatResult` shows a failure's exchanges. */
export interface ResultOptions {
  /**
   * The port the curl lines send to: the learner's own server (the grader's servers are
   * stopped by then). Default: each exchange's own port.
   */
  replayPort?: number;
  /** The step's worth in points; when given, the header shows `score/points pt`. */
  points?: number;
}

/**
 * One verdict as the learner reads it: a mark, the step, the message; on a failure the
 * reason, what was sent and what came back (each exchange with a curl line that sends it
 * again), the ledger rows, the server's output, and where the hints are. With
 * `options.points` the header shows `score/points pt`. Control characters in any of its
 * texts (a student's output, bodies, ledger cells) are shown as escapes (visible.ts).
 */
export function formatResult(given: StepResult, c: ChalkInstance, options: ResultOptions = {}): string {
  const result = visibleDeep(given);
  const points = options.points;
  const colour = result.status === 'pass' ? c.green : result.status === 'fail' ? c.red : c.yellow;
  const worth = points === undefined ? '' : `  ${t('report.points', { score: formatPoints(result.status === 'pass' ? points : 0), points: formatPoints(points) })}`;
  const lines = [`${colour(MARK[result.status])} ${c.bold(`${result.id} ${result.slug}`)}  ${result.title}${worth}  ${c.dim(`(${result.ms} ms)`)}`];
  lines.push(...indent([result.message]));
  if (result.why) lines.push(...indent([c.dim(t('report.why', { why: result.why }))]));
  lines.push(...indent(result.details.map((d) => `· ${d}`)));
  if (result.status !== 'pass' && result.exchanges.length > 0) {
    lines.push(...indent([c.bold(t('report.exchanges'))]));
    for (const { exchange, count } of groupExchanges(result.exchanges)) {
      const [request, ...answer] = formatExchange(exchange, BODY_PREVIEW_CHARS);
      const curl = c.dim(`$ ${curlCommand(exchange, options.replayPort ?? exchange.port, BODY_PREVIEW_CHARS)}`);
      const same = count > 1 ? [c.dim(t('report.same', { n: count - 1 }))] : [];
      lines.push(...indent([`${c.cyan(`[${exchange.server}]`)} ${request}`, ...indent([curl, ...answer, ...same], '    ')], '      '));
    }
    const replay = options.replayPort !== undefined ? t('report.replay.port', { port: options.replayPort }) : t('report.replay.same');
    // Sent to several servers (a restart, a second instance): one server on one port cannot replay all of it as it was.
    const servers = [...new Set(result.exchanges.map((e) => e.server))];
    const several = servers.length > 1 ? [t('report.replay.servers', { count: servers.length, servers: listOf(servers) })] : [];
    lines.push(...indent([replay, ...several].map((line) => c.dim(line)), '      '));
  }
  if (result.status !== 'pass' && result.ledger) {
    lines.push(...indent([c.bold(t('report.ledger', { count: result.ledger.length }))]));
    lines.push(...indent(result.ledger.length ? formatLedger(result.ledger) : [t('report.ledger.none')], '      '));
  }
  if (result.serverOutput) {
    // A live step's servers ran under the seed's time zone: name it, or the log's local times look wrong.
    const heading = result.seed !== undefined ? t('report.serverOutput.zone', { zone: serverTimeZone(result.seed) }) : t('report.serverOutput');
    lines.push(...indent([c.bold(heading)]));
    lines.push(...indent(collapseServerOutput(result.serverOutput).slice(-SERVER_OUTPUT_LINES), '      '));
  }
  for (const warning of result.warnings) lines.push(...indent([c.yellow(t('report.note', { warning }))]));
  if (result.status === 'fail' && result.failedPart === 'live' && result.seed !== undefined) {
    lines.push(...indent([c.dim(t('report.seed', { seed: result.seed, id: result.id }))]));
  }
  if (result.status === 'fail') lines.push(...indent([c.dim(t('report.stuck', { id: result.id }))]));
  return lines.join('\n');
}

/** What goes between two sentences: a space, but nothing after Chinese full-width punctuation. */
export function sentenceGap(): string {
  return language() === 'zh' ? '' : ' ';
}

/** Width of the progress bar, in characters (one per step when there are up to 20). */
const BAR_MAX = 20;

/**
 * A progress bar, `■■■□□□□□`, one square per step (scaled down past 20 steps).
 * @param done steps passed; @param total steps in the lab
 */
export function progressBar(done: number, total: number): string {
  const width = Math.min(total, BAR_MAX);
  const filled = total === 0 ? 0 : Math.round((done / total) * width);
  return '■'.repeat(filled) + '□'.repeat(width - filled);
}

/** `Progress: 3 of 8 steps pass. ■■■□□□□□`: the learner's whole progress, not one run's. */
export function formatProgress(done: number, total: number, c: ChalkInstance): string {
  return `${t('report.progress', { passed: done, total })}${sentenceGap()}${c.green(progressBar(done, total).replace(/□+$/, ''))}${c.dim(progressBar(done, total).replace(/^■+/, ''))}`;
}

/**
 * The closing line: `6 of 8 steps pass.` with the failing ids; with a report, the score
 * (`Score: 6 of 8 points.`) and, when the run is an error, why.
 */
export function formatSummary(results: StepResult[], c: ChalkInstance, report?: GradeReport): string {
  const passed = results.filter((r) => r.status === 'pass').length;
  const failing = results.filter((r) => r.status !== 'pass').map((r) => r.id);
  const line = t(results.length === 1 ? 'report.summary.one' : 'report.summary.many', { passed, total: results.length });
  let summary = failing.length === 0 ? c.green(line) : `${c.red(line)}${sentenceGap()}${t('report.todo', { ids: listOf(failing) })}`;
  if (report) summary += `${sentenceGap()}${t('report.score', { score: formatPoints(report.score), max: formatPoints(report.maxScore) })}`;
  if (report?.status === 'error' && report.message) summary += `\n${c.yellow(visible(report.message))}`;
  return summary;
}
