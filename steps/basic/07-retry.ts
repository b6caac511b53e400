import { CheckFailed, expect } from '../../grader/failure.js';
import { sentences, statements, wordCount, type Statement } from '../../grader/markdown.js';
import { listOf, t } from '../../i18n/index.js';
import type { Step } from '../../grader/track.js';
import { anyOf, pattern, phraseSource, WORDS, type Phrase, type Words } from './words/index.js';

/** A failure a client may meet. */
export type Outcome = 'timeout' | '400' | '401' | '403' | '404' | '409' | '422' | '429' | '500' | '502' | '503' | '504';

/**
 * Whether a client should retry each outcome, from the essay's table: retry what may have
 * been temporary (no answer, 5xx, 429 after Retry-After), never what will answer the same
 * again (400, 404, 422). `strict` verdicts fail the step when contradicted (DESIGN.md's
 * list); the others only warn. 409 (in flight) is left to the learner.
 */
const TRUTH: Partial<Record<Outcome, { retry: boolean; strict: boolean }>> = {
  timeout: { retry: true, strict: true },
  '503': { retry: true, strict: true },
  '400': { retry: false, strict: true },
  '422': { retry: false, strict: true },
  '500': { retry: true, strict: false },
  '502': { retry: true, strict: false },
  '504': { retry: true, strict: false },
  '429': { retry: true, strict: false },
  '404': { retry: false, strict: false },
  '401': { retry: false, strict: false },
  '403': { retry: false, strict: false },
};

const CODE = /\b(400|401|403|404|409|422|429|500|502|503|504)\b/g;

/** Marks that say retry, or do not, in any language. */
const YES_MARKS = ['✅', '✔', '✓', '√', '⭕'];
const NO_MARKS = ['❌', '✗', '✘', '🚫', '×'];
const marks = (list: string[]) => list.map((m) => m.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');

/** The end of a clause: nothing but a mark or the end follows. */
const CLAUSE_END = String.raw`(?=\s*(?:$|[,.;:!?)，。；：！？）]))`;

/** How far from the retry word a futile phrase may stand (the table's gap). */
function gapSource(w: Words): string {
  const gap = w.retry.gap;
  // Whole words, never across a mark: `retrying [the same request] won't help`.
  if ('words' in gap) return String.raw`(?:\s+(?!-+\s)[^\s.;:,!?—–()]+){0,${gap.words}}?\s+`;
  return `[^${gap.stopAt.replace(/[\]\\^-]/g, '\\$&')}]{0,${gap.chars}}?`;
}

/** The "do not retry" phrases of one language's table (steps/words). */
function negatives(w: Words): RegExp[] {
  const sep = w.spaced ? String.raw`\s+` : String.raw`\s*`;
  const again = anyOf(w.retry.again, w);
  const out: string[] = [];
  if (w.retry.notBefore.length) {
    const between = w.retry.between.length ? `(?:${anyOf(w.retry.between, w)}${sep})?` : '';
    out.push(`${anyOf(w.retry.notBefore, w)}${sep}${between}${again}`);
  }
  if (w.retry.notAfter.length) out.push(`${again}${sep}${anyOf(w.retry.notAfter, w)}`);
  if (w.retry.no.length) out.push(anyOf(w.retry.no, w));
  for (const f of w.retry.futile) {
    out.push(`${anyOf(f.after ?? w.retry.again, w)}${gapSource(w)}${anyOf(f.then, w)}${f.clauseEnd ? CLAUSE_END : ''}`);
  }
  return out.map((source) => new RegExp(source, 'gi'));
}

/**
 * Verdict words and phrases, built from the word tables (steps/words; a negative phrase
 * wins over the positive word it contains: earliest, then longest). Bare yes/no,
 * always/never, 是/否 are not among them: they are a verdict only as a whole cell or right
 * after the response (`400: no`), see bareVerdict.
 */
const NEGATIVE = [...WORDS.flatMap(negatives), new RegExp(marks(NO_MARKS), 'g')];
const POSITIVE = [
  ...WORDS.flatMap((w) => [w.retry.again, w.retry.yes].filter((g) => g.length).map((g) => new RegExp(anyOf(g, w), 'gi'))),
  new RegExp(marks(YES_MARKS), 'g'),
];

/** No response at all, in any language (matched anywhere: `ReadTimeout`). */
const TIMEOUT = pattern(WORDS, (w) => w.timeout, 'gi', false);
const TIMEOUT_TEST = new RegExp(TIMEOUT.source, 'i');

/** A whole-answer word of any table, as an expression (a single letter not when a word goes on: `n-th`, `x.y`). */
function bareSource(words: string[]): string {
  return words
    .sort((a, b) => b.length - a.length)
    .map((word) => phraseSource(word, { spaced: false, bounded: false }) + (word.length === 1 ? String.raw`(?![-'’.]\w)` : ''))
    .join('|');
}
const lower = (list: Phrase[]) => new Set(list.map((p) => (typeof p === 'string' ? p : p.say).toLowerCase()));
const BARE_YES_WORDS = WORDS.flatMap((w) => w.retry.bareYes).map(String);
const BARE_NO_WORDS = WORDS.flatMap((w) => w.retry.bareNo).map(String);

/** A bare verdict word: yes / no, always / never, O / X, 예 / 아니오, 是 / 否. */
const BARE_WORD = new RegExp(
  String.raw`^\s*(${bareSource([...BARE_YES_WORDS, ...BARE_NO_WORDS, '⭕'])})(?![A-Za-z0-9/\uac00-\ud7a3\u4e00-\u9fff])`,
  'i',
);
const BARE_POSITIVE = new Set([...lower(BARE_YES_WORDS), '⭕']);
/** Bare words that also begin ordinary phrases (`no way to know`, `never arrives`, `always fails`). */
const AMBIGUOUS = lower(WORDS.flatMap((w) => w.retry.ambiguous));
/** What follows such a word when it begins a phrase, not a verdict, even in a verdict cell. */
const PHRASE_GOES_ON = new RegExp(String.raw`^\s+(?:${pattern(WORDS, (w) => w.retry.goesOn).source})`, 'i');

/**
 * The verdict a bare word at the start of text gives. Strictly (a line, or a first look at
 * a cell) yes/no, always/never, O/X count only before a mark or the end (`No,`, `never.`,
 * `X (요청 오류)`), so `no way to know` is no verdict; loosely (a verdict cell) also before
 * more words (`Always with backoff`), unless they go on as a phrase (`No way to know`).
 * The length read is returned too, to leave the word out of the reason.
 */
function bareVerdict(text: string, loose: boolean): { retry: boolean; length: number } | undefined {
  const m = BARE_WORD.exec(text);
  if (!m) return undefined;
  const after = text.slice(m[0].length);
  if (AMBIGUOUS.has(m[1].toLowerCase()) && (loose ? PHRASE_GOES_ON.test(after) : !/^\s*(?:$|[,.;:!?)(（），、。！？—–-]|->|→)/.test(after))) return undefined;
  return { retry: BARE_POSITIVE.has(m[1].toLowerCase()), length: m[0].length };
}

/** A labelled verdict: `Retry: no`, `retry? yes`, `Retry: always`, `재시도: 아니오`, `재시도 여부: X`, `是否重试：否`. */
const LABELLED = new RegExp(
  String.raw`(?:${pattern(WORDS, (w) => w.retry.label).source})\s*(?:[?？]\s*[:：=]?|[:：=])\s*(${bareSource([...BARE_YES_WORDS, ...BARE_NO_WORDS])}|${marks([...YES_MARKS, ...NO_MARKS])})(?![A-Za-z\u3131-\u318e\uac00-\ud7a3\u4e00-\u9fff])`,
  'i',
);
const LABEL_YES = new Set([...BARE_POSITIVE, ...YES_MARKS]);

/**
 * The verdict a text gives: a labelled one (`Retry: no`) first, else the earliest verdict
 * word or phrase. Typographic apostrophes (don’t) read as plain ones.
 */
function firstVerdict(raw: string): boolean | undefined {
  return verdictAt(raw)?.retry;
}

/** The verdict firstVerdict reads, and where in the text it starts. */
function verdictAt(raw: string): { retry: boolean; at: number } | undefined {
  const text = raw.replace(/[’‘ʼ]/g, "'");
  const labelled = LABELLED.exec(text);
  if (labelled) return { retry: LABEL_YES.has(labelled[1].toLowerCase()), at: labelled.index };
  let best: { at: number; len: number; retry: boolean } | undefined;
  const consider = (patterns: RegExp[], retry: boolean) => {
    // Each pattern's first match is the only one that can be the earliest.
    for (const pattern of patterns) {
      pattern.lastIndex = 0;
      const m = pattern.exec(text);
      if (!m) continue;
      const at = m.index;
      if (!best || at < best.at || (at === best.at && m[0].length > best.len)) best = { at, len: m[0].length, retry };
    }
  };
  consider(NEGATIVE, false);
  consider(POSITIVE, true);
  return best && { retry: best.retry, at: best.at };
}

/** "Except" (steps/words): `Retry everything except 400 and 422`, `400을 제외하고 모두 재시도`, `除了 400 以外都重试`. */
const EXCEPT = pattern(WORDS, (w) => w.retry.except);

/**
 * Whether a verdict is given to all but the responses named: `except` stands between the
 * verdict and the responses (`retry everything except 400`, `400 빼고 재시도`), or before both
 * (`除了 400 都重试`, `Except for 400, retry`).
 */
function excepted(text: string): boolean {
  const except = EXCEPT.exec(text);
  if (!except) return false;
  const masked = text.replace(TIMEOUT, (m) => ' '.repeat(m.length)).replace(CODE, (m) => ' '.repeat(m.length));
  const verdict = verdictAt(masked);
  const outcome = masked.split('').findIndex((c, i) => c !== text[i]);
  if (!verdict || outcome < 0) return false;
  const [v, e, o] = [verdict.at, except.index, outcome];
  return (v < e && e < o) || (o < e && e < v) || (e < o && o < v);
}

/** The outcomes a text names. */

function outcomesIn(text: string): Outcome[] {
  const found = new Set<Outcome>();
  if (TIMEOUT_TEST.test(text)) found.add('timeout');
  for (const m of text.matchAll(CODE)) found.add(m[1] as Outcome);
  return [...found];
}

function withoutOutcomes(text: string): string {
  return text.replace(TIMEOUT, ' ').replace(CODE, ' ').replace(/Retry-After/gi, ' ');
}

/** Where the subject of a line ends: `503: retry`, `400 — no`, `timeout → retry`, `...; always retry a timeout`. */
const CLAUSE_BREAK = /\s*(?:[:：;；→]|->|=>|\s[-–—]\s|—)\s*/;
/** The same, and contrasts: `Retry 503, but a 400 is final` is about 503 (steps/words). */
function clauseBreak(): RegExp {
  return (CLAUSE_OR_CONTRAST ??= new RegExp(`${CLAUSE_BREAK.source}|${CONTRAST_SOURCE}`, 'i'));
}
let CLAUSE_OR_CONTRAST: RegExp | undefined;
/** The same breaks, and `?` or `=` (`400? No.`, `400 = no`), found one after another. */
const SUBJECT_BREAK = /\s*(?:[:：;；→=?？]|->|=>|\s[-–—]\s|—)\s*/g;

/**
 * The outcomes a line is about: those of its first clause naming any, so that a reason
 * mentioning another response (`503: retry, unlike a 400`) does not classify that one too.
 */
function subjectOutcomes(text: string): Outcome[] {
  for (const clause of text.split(clauseBreak())) {
    const found = outcomesIn(clause);
    if (found.length) return found;
  }
  return [];
}

/** Where the text after the first clause naming a response starts (`400: no` → at `no`), if a break follows it. */
function afterSubject(text: string): number | undefined {
  let from = 0;
  for (const m of text.matchAll(SUBJECT_BREAK)) {
    const at = m.index ?? 0;
    if (outcomesIn(text.slice(from, at)).length) return at + m[0].length;
    from = at + m[0].length;
  }
  return undefined;
}

/** One classified line of the learner's table or list. */
export interface Classification {
  outcomes: Outcome[];
  retry: boolean;
  reason: string;
  text: string;
}

/** A row, list item or sentence naming a response whose verdict could not be read. */
export interface Unread {
  outcomes: Outcome[];
  text: string;
}

function isClassified(c: Classification | Unread | undefined): c is Classification {
  return c !== undefined && 'retry' in c;
}

/** What classify read: the classified lines, and those naming a response without a readable verdict. */
export interface Reading {
  found: Classification[];
  unread: Unread[];
  /** Sentences giving every response one verdict, naming none: `Retry everything.`, `Never retry anything.` */
  blanket: { retry: boolean; text: string }[];
}

/**
 * The standard reason phrases of HTTP statuses (RFC 9110 section 15): `400 Bad Request: no`
 * names the response twice and gives no reason.
 */
const STATUS_TEXT =
  /\b(?:bad request|unauthori[sz]ed|forbidden|not found|conflict|unprocessable (?:entity|content)|too many requests|internal server error|bad gateway|service unavailable|gateway(?: time-?out)?|request time-?out)\b/gi;

/** How many words of reason a classification gives, the status's own name left out. */
export function reasonWords(reason: string): number {
  return wordCount(reason.replace(STATUS_TEXT, ' '));
}

/** Blanket words (steps/words): `everything` with a retry, `anything` with a "do not". */
const EVERYTHING = pattern(WORDS, (w) => w.retry.everything);
const ANYTHING = pattern(WORDS, (w) => w.retry.anything);

/**
 * The blanket verdict of a sentence naming no response, if it is one: a clause that is
 * little more than a retry and `everything` (`Retry everything, with backoff`, `Always
 * retry every failure`), or a "do not" and `anything` (`Never retry anything`). A clause
 * saying more (`A client that retries everything hammers the server`) is not one.
 */
function blanketVerdict(sentence: string): boolean | undefined {
  if (EXCEPT.test(sentence)) return undefined;
  for (const clause of sentence.split(/[,;:，；：。.!?！？]/)) {
    const retry = firstVerdict(clause);
    if (retry === undefined) continue;
    const all = (retry ? EVERYTHING : ANYTHING).exec(clause);
    if (!all) continue;
    let left = clause.replace(all[0], ' ').replace(/[’‘ʼ]/g, "'");
    for (const p of [...NEGATIVE, ...POSITIVE]) left = left.replace(p, ' ');
    left = left.replace(LABEL_FILLER, ' ').replace(new RegExp(BACKOFF.source, 'gi'), ' ').replace(new RegExp(JITTER.source, 'gi'), ' ');
    if (wordCount(left) <= 2) return retry;
  }
  return undefined;
}

/** The header of a table's verdict column: one about retrying first, else one about what to do. */
const VERDICT_HEADER = pattern(WORDS, (w) => w.retry.verdictHeader, 'i', false);
const ACTION_HEADER = pattern(WORDS, (w) => w.retry.actionHeader, 'i', false);

/**
 * The verdict of a table's verdict cell: a bare word (`No`, `always`, `예`, `否`) or the
 * earliest verdict phrase (`Retry with backoff`, `Give up`), else a bare word opening more text.
 */
function cellVerdict(cell: string): boolean | undefined {
  return bareVerdict(cell, false)?.retry ?? firstVerdict(withoutOutcomes(cell)) ?? bareVerdict(cell, true)?.retry;
}

/**
 * A table row: the responses are those of its first cell naming any (the response
 * column), the verdict is the verdict column's (headed retry, or action / what to do),
 * else a cell that is only a verdict word, else the row's first verdict phrase; the
 * reason is the other cells.
 */
function classifyRow(st: Statement & { cells: string[]; header: string[] }): Classification | Unread | undefined {
  const headed = (pattern: RegExp) => st.header.findIndex((h, i) => pattern.test(h) && outcomesIn(st.cells[i] ?? '').length === 0);
  let verdictCol = headed(VERDICT_HEADER);
  if (verdictCol < 0) verdictCol = headed(ACTION_HEADER);
  const responseCol = st.cells.findIndex((cell, i) => i !== verdictCol && outcomesIn(cell).length > 0);
  if (responseCol < 0) return undefined;
  const outcomes = outcomesIn(st.cells[responseCol]);
  let retry: boolean | undefined;
  if (verdictCol < 0) {
    const bare = st.cells.findIndex((cell, i) => i !== responseCol && /^\s*\S+\s*$/.test(cell) && bareVerdict(cell, false) !== undefined);
    if (bare >= 0) verdictCol = bare;
  }
  if (verdictCol >= 0) retry = cellVerdict(st.cells[verdictCol] ?? '');
  else retry = firstVerdict(withoutOutcomes(st.text));
  if (retry === undefined) return { outcomes, text: st.text };
  const reason = st.cells
    .filter((_, i) => i !== verdictCol && i !== responseCol)
    .join(' ')
    .trim();
  return { outcomes, retry, reason, text: st.text };
}

/**
 * A line, list item or group of sentences: the responses its first clause names; the
 * verdict a bare word right after them gives (`400: no`), else its first verdict phrase,
 * else `fallback` (the verdict of the heading or list item it sits under).
 */
function classifyText(text: string, fallback?: boolean): Classification | Unread | undefined {
  // Memoised per read: a text is classified again as part of its unit and beside its neighbours.
  const key = `${fallback}|${text}`;
  if (classified.has(key)) return copy(classified.get(key));
  const c = classifyOnce(text, fallback);
  if (classified.size > 10_000) classified.clear();
  classified.set(key, c);
  return copy(c);
}

/** classifyText's results for the texts of the file being read. */
const classified = new Map<string, Classification | Unread | undefined>();
const copy = <T>(c: T): T => (c === undefined ? c : { ...c });

function classifyOnce(text: string, fallback?: boolean): Classification | Unread | undefined {
  const outcomes = subjectOutcomes(text);
  if (outcomes.length === 0) return undefined;
  let said = text;
  const at = afterSubject(text);
  const bare = at === undefined ? undefined : bareVerdict(text.slice(at), false);
  if (bare && at !== undefined) said = `${text.slice(0, at)} ${text.slice(at + bare.length)}`;
  const rest = withoutOutcomes(said);
  let stated = bare?.retry ?? firstVerdict(rest);
  // "Retry everything except 400": the opposite for the responses named.
  if (stated !== undefined && !bare && excepted(text)) stated = !stated;
  // Nothing but the response and a bare word: `400 never`, `503 always.`
  if (stated === undefined) {
    const whole = bareVerdict(rest.trim(), false);
    if (whole && /^[\s.,;:!?。，；：！？]*$/.test(rest.trim().slice(whole.length))) stated = whole.retry;
  }
  const retry = stated ?? fallback;
  if (retry === undefined) return { outcomes, text };
  let reason = rest.replace(/[’‘ʼ]/g, "'").replace(LABELLED, ' ');
  for (const pattern of [...NEGATIVE, ...POSITIVE]) reason = reason.replace(pattern, ' ');
  // A verdict left implied (`but never 400`, `400 should not`) is no reason either.
  if (stated === undefined) for (const e of [ELLIPTIC_NOT, ELLIPTIC_SO, ELLIPTIC_TOO]) reason = reason.replace(e.start, ' ').replace(e.end, ' ');
  return { outcomes, retry, reason: reason.replace(/[-–—:|,.;()?→]+/g, ' ').trim(), text };
}

/** Headings and list items that only label what follows, never a verdict: `Which failures to retry`, `Retry policy`. */
const QUESTION = new RegExp(`${pattern(WORDS, (w) => w.retry.notALabel).source}|[?？]`, 'i');

/** Words a verdict label may have besides its verdict: `Retry these`, `Do not retry (client errors)`, `5xx: retry with backoff`. */
const LABEL_FILLER = new RegExp(String.raw`${pattern(WORDS, (w) => w.retry.labelFiller).source}|\b[45]xx\b`, 'gi');

/**
 * The verdict a heading or a list item gives to the items under it: `## Do not retry`,
 * `- Retry:`, `## Retryable (temporary)`. Only a label that is a verdict and little else:
 * not a question or a title (`Which failures to retry`, `Retry policy`), nor a verdict
 * qualified by more words (`Do not retry blindly`).
 */
function labelVerdict(text: string | undefined): boolean | undefined {
  if (!text || QUESTION.test(text)) return undefined;
  const said = withoutOutcomes(text);
  const verdict = firstVerdict(said);
  if (verdict === undefined) return undefined;
  let left = said.replace(/\([^)]*\)|（[^）]*）/g, ' ').replace(/[’‘ʼ]/g, "'");
  for (const pattern of [...NEGATIVE, ...POSITIVE]) left = left.replace(pattern, ' ');
  return /[A-Za-z]{2,}/.test(left.replace(LABEL_FILLER, ' ')) ? undefined : verdict;
}

/** Words joining two clauses (steps/words): `contrast` ones (`503 retry, but 400 never`), and weak ones (a comma, `and`). */
function joinerSource(words: string[], w: Words): string[] {
  const escapeWord = (word: string) => word.split(' ').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join(String.raw`\s+`);
  return words.map((word) => {
    if (word.startsWith('-')) return String.raw`${escapeWord(word.slice(1))}[,，]?\s+`;
    // A comma and spaces, or spaces, before the word (never two runs of spaces that could share one: linear time).
    if (w.spaced) return String.raw`(?:\s*[,，]\s*|\s+)\b${escapeWord(word)}\b[,，]?\s+`;
    return String.raw`\s*[,，]\s*${escapeWord(word)}[,，]?\s*|\s+${escapeWord(word)}[,，]?\s+`;
  });
}
const CONTRAST_SOURCE = WORDS.flatMap((w) => joinerSource(w.retry.contrast, w)).join('|');
const WEAK_SOURCE = [...WORDS.flatMap((w) => joinerSource(w.retry.and, w)), String.raw`\s*[,，]\s*`].join('|');
/** Where a clause ends and another begins: group 1 a contrast, else a weak joiner. */
const JOINER = new RegExp(`(${CONTRAST_SOURCE})|(?:${WEAK_SOURCE})`, 'gi');

/** Clause openings and endings that alone give a verdict after a contrast: `but never 400`, `400 should not`, `503 always`, `504 too`. */
const edges = (group: (w: Words) => Phrase[]) => {
  const any = pattern(WORDS, group).source;
  return { start: new RegExp(String.raw`^[\s,，]*(?:${any})`, 'i'), end: new RegExp(String.raw`(?:${any})[\s.!?。！？]*$`, 'i') };
};
const ELLIPTIC_NOT = edges((w) => w.retry.not);
const ELLIPTIC_SO = edges((w) => w.retry.so);
const ELLIPTIC_TOO = edges((w) => w.retry.too);

/**
 * The verdict of a clause that names a response but leaves out the verb, from the clause
 * before it (`prev`): after a contrast, a "not" (`but never 400`, `while 400 should not`)
 * says do not retry, a "so" after a "do not" (`400 never, but 503 always`) says retry;
 * after any joiner, `too` / `either` gives the verdict before it (`..., and 504 too`).
 */
function ellipticVerdict(clause: string, prev: boolean, contrast: boolean): boolean | undefined {
  const rest = withoutOutcomes(clause).replace(/[’‘ʼ]/g, "'");
  const at = (e: { start: RegExp; end: RegExp }) => e.start.test(rest) || e.end.test(rest);
  if (ELLIPTIC_TOO.end.test(rest)) return prev;
  if (!contrast) return undefined;
  if (at(ELLIPTIC_NOT)) return false;
  if (!prev && at(ELLIPTIC_SO)) return true;
  return undefined;
}

/** A part of a sentence to classify, with the verdict it takes from the clause before it when it gives none. */
interface Part {
  text: string;
  verdict?: boolean;
}

/** Clause splitting stops at sentences this long or with this many joiners (keeps reading linear on any input). */
const MAX_CLAUSED = 1000;
const MAX_CLAUSES = 24;

/**
 * A part's clauses, split where a clause names other responses than those before it and a
 * verdict of its own or, after a contrast, one left implied (`503 retry, but 400 never`;
 * `400 and 422: do not retry, 503: retry`). A clause that does not is kept with the one
 * before it, as its reason.
 */
function clauses(part: string): Part[] {
  if (part.length > MAX_CLAUSED) return [{ text: part }];
  const joins = [...part.matchAll(JOINER)].slice(0, MAX_CLAUSES);
  if (joins.length === 0) return [{ text: part }];
  const out: Part[] = [];
  let cur: Part = { text: part.slice(0, joins[0].index) };
  for (let n = 0; n < joins.length; n++) {
    const join = joins[n];
    const from = (join.index ?? 0) + join[0].length;
    const seg = part.slice(from, n + 1 < joins.length ? joins[n + 1].index : part.length);
    const said = classifyText(cur.text, cur.verdict);
    const before = new Set(outcomesIn(cur.text));
    const subject = subjectOutcomes(seg);
    if (isClassified(said) && subject.length > 0 && subject.every((o) => !before.has(o))) {
      const own = classifyText(seg);
      const verdict = isClassified(own) ? undefined : ellipticVerdict(seg, said.retry, join[1] !== undefined);
      if (isClassified(own) || verdict !== undefined) {
        out.push(cur);
        cur = { text: seg, verdict };
        continue;
      }
    }
    cur.text += join[0] + seg;
  }
  out.push(cur);
  return out;
}

/**
 * A text's sentences, each split again at `;` where what follows names a response and a
 * verdict of its own (`503 can be retried; a 400 should never be retried`), and then into
 * clauses (see clauses).
 */
function parts(text: string): Part[] {
  return sentences(text).flatMap((sentence) => {
    const out: string[] = [];
    for (const part of sentence.split(/\s*[;；]\s*/).filter(Boolean)) {
      const own = classifyText(part);
      if (out.length === 0 || isClassified(own)) out.push(part);
      else out[out.length - 1] += `; ${part}`;
    }
    return out.flatMap(clauses);
  });
}

/** A sentence giving the verdict of the one before it to another response: `The same goes for a 422.` */
const LIKEWISE = pattern(WORDS, (w) => w.retry.likewise);

/** Sentences or items read as one text: `;` after one that ends with no mark, so that `- 400` over `- no` reads `400; no`. */
function joined(texts: string[]): string {
  return texts.reduce((all, text) => (/[.:;!?。：；！？]$/.test(all) ? `${all} ${text}` : `${all}; ${text}`));
}

/** A unit to classify, with the verdict it takes when it gives none. */
interface Unit {
  text: string;
  fallback?: boolean;
}

/**
 * The units of a group of sentences (a paragraph, or a list item with the items nested in
 * it that name no response): each starts at a sentence naming a response and takes the
 * sentences after it that name none, as its verdict or reason. A sentence naming a
 * response without a verdict (its own or `fallback`) takes the verdict before it when it says so
 * (`The same goes for a 422.`), else goes on the unit before it, as a reason (`Unlike a
 * 400, it may succeed.`). Sentences before the first one naming a response are about the
 * heading's response, when the heading names one (`## 503` then `Retry: ...`).
 */
function units(texts: string[], heading: string | undefined, fallback: boolean | undefined): Unit[] {
  const found: { texts: string[]; verdict?: boolean }[] = [];
  const leading: string[] = [];
  for (const part of texts.flatMap(parts)) {
    if (subjectOutcomes(part.text).length) found.push({ texts: [part.text], verdict: part.verdict });
    else if (found.length) found[found.length - 1].texts.push(part.text);
    else leading.push(part.text);
  }
  const merged: Unit[] = [];
  for (const group of found) {
    const text = joined(group.texts);
    if (group.verdict !== undefined) {
      merged.push({ text, fallback: group.verdict });
      continue;
    }
    const own = classifyText(text, fallback);
    const prev = merged.length ? classifyText(merged[merged.length - 1].text, merged[merged.length - 1].fallback) : undefined;
    if (own && !isClassified(own) && isClassified(prev)) {
      if (LIKEWISE.test(text)) merged.push({ text, fallback: prev.retry });
      else merged[merged.length - 1].text += ` ${text}`;
    } else {
      merged.push({ text, fallback });
    }
  }
  if (leading.length && heading && subjectOutcomes(heading).length) merged.unshift({ text: `${heading}: ${joined(leading)}`, fallback });
  return merged;
}

/** Whether a statement names a response in its first clause. */
function names(st: Statement): boolean {
  return subjectOutcomes(st.text).length > 0;
}

/**
 * A list item's sentences and those of the items nested in it that name no response, at
 * any depth.
 */
function withChildren(st: Statement, taken: Set<Statement>): string[] {
  const out = sentences(st.text);
  for (const child of st.children ?? []) {
    if (names(child)) continue;
    taken.add(child);
    out.push(...withChildren(child, taken));
  }
  return out;
}

/**
 * Reads the retry verdicts a learner wrote: from tables (a column headed retry, or action),
 * from list items and from the sentences of paragraphs naming a response and a verdict. A
 * list item is read with the items nested in it; a response without a verdict takes that
 * of the list item, list label (`Do not retry:` on the line above the list) or heading it
 * sits under (`## Do not retry`, `- Retry:`) when that one gives a verdict; a heading gives
 * one when it says not to retry, or when headings say both. A paragraph line a list runs
 * on into is the reason of the items above it that give none, never their verdict. A line
 * may give several responses verdicts of their own (`503 retry, but 400 never`). Sentences
 * naming no response that give all one verdict (`Retry everything.`) are `blanket`.
 * Never throws; linear in the length of the text.
 */
export function read(markdown: string): Reading {
  classified.clear();
  const all = statements(markdown);
  const headingVerdicts = all.filter((st) => st.kind === 'heading').map((st) => labelVerdict(st.text));
  const bothWays = headingVerdicts.includes(true) && headingVerdicts.includes(false);
  const fromHeading = (heading: string | undefined) => {
    const verdict = labelVerdict(heading);
    return verdict === false || bothWays ? verdict : undefined;
  };
  const reading: Reading = { found: [], unread: [], blanket: [] };
  /** What each list's items were read as, for the paragraph a list runs on into. */
  const byList = new Map<number, Classification[]>();
  const add = (c: Classification | Unread | undefined, list?: number) => {
    if (!c) return;
    if (isClassified(c)) {
      reading.found.push(c);
      if (list !== undefined) {
        const items = byList.get(list);
        if (items) items.push(c);
        else byList.set(list, [c]);
      }
    } else reading.unread.push(c);
  };
  const taken = new Set<Statement>();
  for (let i = 0; i < all.length; i++) {
    const st = all[i];
    if (st.kind === 'heading' || taken.has(st)) continue;
    if (st.cells && st.header) {
      add(classifyRow(st as Statement & { cells: string[]; header: string[] }));
      continue;
    }
    let texts: string[];
    if (st.children || st.within) {
      texts = withChildren(st, taken);
    } else {
      // The sentences of one paragraph.
      texts = [st.text];
      while (i + 1 < all.length && all[i + 1].block === st.block) texts.push(all[++i].text);
      // A paragraph a list ran on into (`- 422` over `These are final because...`): when it
      // names no response and labels no list of its own, it is the reason of the items above
      // that give none; it never changes their verdicts.
      if (st.runOn !== undefined && !texts.some((text) => subjectOutcomes(text).length)) {
        const text = joined(texts);
        const intro = all[i + 1]?.intro === text;
        if (!intro) {
          for (const c of byList.get(st.runOn) ?? []) if (reasonWords(c.reason) < 2) c.reason = `${c.reason} ${text}`.trim();
        }
        continue;
      }
    }
    let fallback: boolean | undefined;
    for (const label of [...(st.within ?? [])].reverse()) {
      fallback = labelVerdict(label);
      if (fallback !== undefined) break;
    }
    // The label of the list (`Do not retry:` over `- 400`), then the heading's.
    if (fallback === undefined && st.intro) fallback = labelVerdict(st.intro);
    fallback ??= fromHeading(st.heading);
    for (const unit of units(texts, st.heading, fallback)) add(classifyText(unit.text, unit.fallback), st.list);
    for (const text of texts) {
      if (subjectOutcomes(text).length) continue;
      const retry = blanketVerdict(text);
      if (retry !== undefined) reading.blanket.push({ retry, text });
    }
  }
  return reading;
}

/** The retry verdicts a learner wrote (see read). */
export function classify(markdown: string): Classification[] {
  return read(markdown).found;
}

const BACKOFF = pattern(WORDS, (w) => w.backoff, 'i', false);
const JITTER = pattern(WORDS, (w) => w.jitter, 'i', false);

/** The minimum number of outcomes a learner must classify (lab sheet, step 7). */
export const MIN_OUTCOMES = 4;

/**
 * Step 07: 07-retry.md classifies at least four responses as retry or not, each with a
 * reason; a wrong verdict on 400, 422, 503 or a timeout fails; a line naming one of those
 * without a verdict that could be read (and that response classified nowhere else) warns, and
 * so does no backoff with jitter (lab sheet, step 7; the essay's retry table). One of those
 * four given both verdicts fails, and so does a blanket verdict (`Retry everything.`) that
 * is wrong for one of them not classified on its own line; a status's own name (`Bad
 * Request`) is no reason.
 */
export const step: Step = {
  id: '07',
  slug: 'retry',
  get title() {
    return t('step.07.title');
  },
  file: {
    name: '07-retry.md',
    check(text, notes) {
      const { found, unread, blanket } = read(text);
      const reasoned = found.filter((c) => reasonWords(c.reason) >= 2);
      // One response given both verdicts (listed under both headings, say): say which lines.
      for (const outcome of Object.keys(TRUTH) as Outcome[]) {
        if (!TRUTH[outcome]?.strict) continue;
        const yes = found.find((c) => c.retry && c.outcomes.includes(outcome));
        const no = found.find((c) => !c.retry && c.outcomes.includes(outcome));
        if (!yes || !no) continue;
        const label = outcome === 'timeout' ? t('step.07.timeoutLabel') : String(outcome);
        throw new CheckFailed(t('step.07.bothVerdicts', { label }), t('step.07.bothVerdicts.why'), {
          details: [t('step.07.theLine', { text: yes.text }), t('step.07.theLine', { text: no.text })],
        });
      }
      // `Retry everything.`: the verdict of every strict response not classified on its own line.
      const own = new Set(found.flatMap((c) => c.outcomes));
      const general = blanket.length
        ? (Object.keys(TRUTH) as Outcome[])
            .filter((o) => TRUTH[o]?.strict && !own.has(o))
            .map((o): Classification => ({ outcomes: [o], retry: blanket[0].retry, reason: '', text: blanket[0].text }))
        : [];
      for (const c of [...found, ...general]) {
        for (const outcome of c.outcomes) {
          const truth = TRUTH[outcome];
          if (!truth || truth.retry === c.retry) continue;
          const label = outcome === 'timeout' ? t('step.07.timeoutLabel') : String(outcome);
          const sentence = truth.retry
            ? t('step.07.shouldRetry', { label })
            : t('step.07.shouldNotRetry', { label, outcome });
          const why = truth.retry
            ? t('step.07.shouldRetry.why')
            : t('step.07.shouldNotRetry.why');
          if (truth.strict) throw new CheckFailed(sentence, why, { details: [t('step.07.theLine', { text: c.text })] });
          notes.warn(t('step.07.warning', { sentence, why }));
        }
      }
      // A line naming a response whose verdict could not be read, unless that response is classified elsewhere.
      const classified = new Set(found.flatMap((c) => c.outcomes));
      for (const u of unread) {
        const strict = u.outcomes.filter((o) => TRUTH[o]?.strict && !classified.has(o));
        if (strict.length === 0) continue;
        const labels = strict.map((o) => (o === 'timeout' ? t('step.07.aTimeout') : String(o)));
        const named = labels.length > 1 ? t('step.07.listAnd', { list: listOf(labels.slice(0, -1)), last: labels[labels.length - 1] }) : labels[0];
        notes.warn(t('step.07.unread', { named, text: u.text }));
      }
      const covered = new Set(reasoned.flatMap((c) => c.outcomes));
      // The outcomes as the learner's language names them (a timeout is a word, not an HTTP status).
      const coveredList = listOf([...covered].map((o) => (o === 'timeout' ? t('step.07.timeoutWord') : o)));
      const unreasoned = found.filter((c) => reasonWords(c.reason) < 2).map((c) => t('step.07.noReason', { text: c.text }));
      expect(
        covered.size >= MIN_OUTCOMES,
        t('step.07.tooFew', { min: MIN_OUTCOMES, count: covered.size }),
        t('step.07.tooFew.why'),
        { details: [...(covered.size ? [t('step.07.classified', { list: coveredList })] : []), ...unreasoned] },
      );
      if (!BACKOFF.test(text) || !JITTER.test(text)) {
        notes.warn(t('step.07.backoff'));
      }
      return t('step.07.pass', { list: coveredList });
    },
  },
  get hints() {
    return [t('step.07.hint.1'), t('step.07.hint.2'), t('step.07.hint.3')];
  },
};
