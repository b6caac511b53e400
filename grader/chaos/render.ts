/**
 * The chaos run's table and terminal chart, in the learner's language: the run's numbers
 * side by side, and a histogram of the waits before retries, so the spread full jitter
 * gives them is seen. Columns are aligned by display width (string-width), so Korean and
 * Chinese labels, two columns a character, line up too.
 */
import stringWidth from 'string-width';
import { t } from '../../i18n/index.js';
import { backoffCeilingMs, type BackoffPolicy } from './backoff.js';
import type { ChaosTally } from './tally.js';

/**
 * The characters the charts are drawn with. `unicode` uses box and block characters
 * (│ █ • · – ≤), which Unicode gives East Asian Ambiguous width (UAX #11): a terminal set
 * up for Chinese, Japanese or Korean draws them two columns wide and the charts fall out
 * of line. `ascii` draws the same charts with | # o . - <= instead.
 */
export type Charset = 'unicode' | 'ascii';

const GLYPHS: Record<Charset, { rail: string; bar: string; mark: string; empty: string; dash: string; atMost: string }> = {
  unicode: { rail: '│', bar: '█', mark: '•', empty: '·', dash: '–', atMost: '≤' },
  ascii: { rail: '|', bar: '#', mark: 'o', empty: '.', dash: '-', atMost: '<=' },
};

/**
 * The charset to draw with: `flag` (--ascii) or IDEM_LAB_CHARSET=ascii|unicode when given,
 * else ascii where the terminal's locale (LC_ALL, else LC_CTYPE, else LANG) is Chinese,
 * Japanese or Korean, where ambiguous-width characters are drawn wide, else unicode.
 */
export function chartCharset(flag: boolean | undefined, env: NodeJS.ProcessEnv = process.env): Charset {
  if (flag) return 'ascii';
  const chosen = env.IDEM_LAB_CHARSET?.trim().toLowerCase();
  if (chosen === 'ascii' || chosen === 'unicode') return chosen;
  const locale = env.LC_ALL || env.LC_CTYPE || env.LANG || '';
  return /^(zh|ja|ko)([_.@-]|$)/i.test(locale) ? 'ascii' : 'unicode';
}

/** Pads `text` with spaces to `width` display columns (on the right, or on the left with `left`). */
export function pad(text: string, width: number, left = false): string {
  const fill = ' '.repeat(Math.max(0, width - stringWidth(text)));
  return left ? fill + text : text + fill;
}

/**
 * Rows of cells as aligned lines: each column as wide as its widest cell (display
 * width), numbers (cells of digits, or `-`) aligned right, two spaces between
 * columns, no trailing spaces.
 */
export function formatTable(rows: string[][]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, stringWidth(cell))));
  return rows.map((row) => row.map((cell, i) => pad(cell, widths[i], /^[\d-]+$/.test(cell))).join('  ').trimEnd());
}

/** The longest bar of a histogram, in characters. */
export const BAR_WIDTH = 32;

/**
 * A horizontal histogram of `values` (ms) in buckets of `bucketMs` from 0 up to `maxMs`
 * (a value at or past maxMs goes in the last bucket): one line per bucket, `lo–hi ms`,
 * a bar of █ scaled to the fullest bucket (BAR_WIDTH at most; a bucket with any value
 * gets at least one), and the count. [] for no values.
 * @throws RangeError when bucketMs or maxMs is not positive
 */
export function histogram(values: number[], bucketMs: number, maxMs: number, charset: Charset = 'unicode'): string[] {
  const g = GLYPHS[charset];
  if (!(bucketMs > 0) || !(maxMs > 0)) throw new RangeError('histogram: bucketMs and maxMs must be positive');
  if (values.length === 0) return [];
  const buckets = Math.max(1, Math.ceil(maxMs / bucketMs));
  const counts = Array.from({ length: buckets }, () => 0);
  for (const v of values) counts[Math.min(buckets - 1, Math.max(0, Math.floor(v / bucketMs)))]++;
  const most = Math.max(...counts);
  const labels = counts.map((_, i) => `${i * bucketMs}${g.dash}${Math.min((i + 1) * bucketMs, maxMs)} ms`);
  const width = Math.max(...labels.map((l) => stringWidth(l)));
  return counts.map((n, i) => {
    const bar = n === 0 ? '' : g.bar.repeat(Math.max(1, Math.round((n / most) * BAR_WIDTH)));
    return `${pad(labels[i], width, true)} ${g.rail}${bar}${n > 0 ? ` ${n}` : ''}`;
  });
}

/**
 * A strip per retry number: where each wait fell between 0 and that retry's ceiling
 * (`•` marks, `·` empty), `retry n  ≤ ceiling ms  │··•·•··│`, so that the waits of one
 * retry are seen spread over their whole range rather than on one value.
 */
export function jitterStrips(waitsByRetry: number[][], policy: BackoffPolicy, width = BAR_WIDTH, charset: Charset = 'unicode'): string[] {
  const g = GLYPHS[charset];
  const rows = waitsByRetry.map((waits, retry) => {
    const ceiling = backoffCeilingMs(retry, policy);
    const cells = Array.from({ length: width }, () => g.empty);
    for (const w of waits) cells[Math.min(width - 1, Math.floor((w / ceiling) * width))] = g.mark;
    return [t('chaos.chart.retry', { n: retry + 1 }), `${g.atMost} ${ceiling} ms`, `${g.rail}${cells.join('')}${g.rail} ${waits.length}`];
  });
  return formatTable(rows.filter((_, i) => waitsByRetry[i].length > 0));
}

/** The run's numbers as a two-column table with a note per row where one helps. */
export function formatTally(tally: ChaosTally): string[] {
  const rows: string[][] = [
    [t('chaos.row.payments'), String(tally.payments), ''],
    [`  ${t('chaos.row.paid')}`, String(tally.paid), ''],
    [`  ${t('chaos.row.refused')}`, String(tally.refused), ''],
    [`  ${t('chaos.row.gaveUp')}`, String(tally.gaveUp), ''],
    [t('chaos.row.requests'), String(tally.requests), ''],
    [t('chaos.row.retries'), String(tally.retries), tally.replays > 0 ? t('chaos.note.replays', { n: tally.replays }) : ''],
    [`  ${t('chaos.row.lostRequests')}`, String(tally.lostRequests), t('chaos.note.lostRequests')],
    [`  ${t('chaos.row.lostResponses')}`, String(tally.lostResponses), t('chaos.note.lostResponses')],
    [`  ${t('chaos.row.delayed')}`, String(tally.delayed), ''],
    [t('chaos.row.charges'), tally.charges === undefined ? '-' : String(tally.charges), tally.charges === undefined ? t('chaos.note.noStatement') : ''],
    [t('chaos.row.ledger'), String(tally.ledgerRows), ''],
    [t('chaos.row.duplicates'), String(tally.duplicates), t('chaos.note.duplicates')],
    [t('chaos.row.missing'), String(tally.missing), t('chaos.note.missing')],
  ];
  return formatTable(rows);
}

/**
 * The chart of the waits before retries: a heading that gives the rule, the histogram in
 * buckets of `policy.baseMs` up to the longest ceiling used, and a strip per retry number,
 * each with a line that says how to read it; drawn in `charset` (see chartCharset).
 * @param waitsByRetry the waits before each retry, grouped by retry number (index 0: the first retry)
 */
export function formatWaits(waitsByRetry: number[][], policy: BackoffPolicy, charset: Charset = 'unicode'): string[] {
  const g = GLYPHS[charset];
  const all = waitsByRetry.flat();
  if (all.length === 0) return [t('chaos.chart.none')];
  const used = waitsByRetry.reduce((last, waits, i) => (waits.length > 0 ? i : last), 0);
  const maxMs = backoffCeilingMs(used, policy);
  return [
    t('chaos.chart.heading', { base: policy.baseMs, cap: policy.capMs }),
    ...histogram(all, policy.baseMs, maxMs, charset).map((l) => `  ${l}`),
    `  ${t('chaos.chart.barLegend', { bar: g.bar })}`,
    '',
    ...jitterStrips(waitsByRetry, policy, BAR_WIDTH, charset).map((l) => `  ${l}`),
    `  ${t('chaos.chart.dotLegend', { mark: g.mark, empty: g.empty, rail: g.rail, width: BAR_WIDTH })}`,
  ];
}
