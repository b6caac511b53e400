import { CheckFailed, expect } from '../grader/failure.js';
import { t } from '../i18n/index.js';
import { statements, wordCount, type Statement } from '../grader/markdown.js';
import type { Step } from './types.js';

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

const TIMEOUT =
  /time[- ]?outs?|timed out|no (?:response|answer|reply)|network (?:error|failure)|connection (?:reset|refused|lost|error)|응답\s*(?:이\s*)?없|무응답|타임아웃|시간\s*초과|超时|没有(?:收到)?(?:回复|响应|应答)|无(?:回复|响应)|未收到/gi;
const CODE = /\b(400|401|403|404|409|422|429|500|502|503|504)\b/g;

/** Verdict words: a negative phrase wins over the positive word it contains (earliest, then longest). */
const NEGATIVE = [
  /\b(?:do not|don'?t|never|no|not|must not|mustn'?t|should not|shouldn'?t|won'?t|cannot|can'?t)\s+(?:be\s+)?retr(?:y|ied|ies|ying|yable|iable)\b/gi,
  /\bnon[- ]?retr(?:y|yable|iable)\b/gi,
  /\bno\b/gi,
  /❌|✗|✘|🚫|×/g,
  /재시도\s*(?:하지\s*(?:않|마)|안|금지|불가|X|x|불필요|하면\s*안)/g,
  /(?:재시도\s*)?(?:아니오|아니요|안\s*함)/g,
  /不(?:要|应|应该|能|可|必|用)?(?:再)?重试|别重试|禁止重试|勿重试|否/g,
];
const POSITIVE = [/\bretr(?:y|ies|ied|ying|yable|iable)\b/gi, /\byes\b/gi, /✅|✔|✓|√|⭕/g, /재시도/g, /重试|是|可以/g];

/** A table cell that is only a verdict mark: O / X, 예 / 아니오, 是 / 否. */
const CELL_YES = /^\s*(?:o|O|⭕|y|Y|예|네|是)\s*$/;
const CELL_NO = /^\s*(?:x|X|n|N|아니오|아니요|否)\s*$/;
/** A table cell that starts with such a mark and goes on: `예, Retry-After 만큼 기다린 뒤`, `X (요청 오류)`. */
const CELL_YES_FIRST = /^\s*(?:o|O|⭕|y|Y|예|네|是)(?=[\s,.;:(（，、。—–-])/;
const CELL_NO_FIRST = /^\s*(?:x|X|n|N|아니오|아니요|否)(?=[\s,.;:(（，、。—–-])/;

/** A labelled verdict: `Retry: no`, `retry? yes`, `재시도: 아니오`, `재시도 여부: X`, `是否重试：否`. */
const LABELLED =
  /(?:\bretry|재시도(?:\s*여부)?|是否(?:要)?重试|重试)\s*(?:[?？]\s*[:：=]?|[:：=])\s*(yes|y|o|⭕|✅|✔|✓|예|네|是|no|n|never|x|❌|✗|✘|🚫|아니오|아니요|否)(?![A-Za-z\u3131-\u318e\uac00-\ud7a3\u4e00-\u9fff])/i;
const LABEL_YES = /^(?:yes|y|o|⭕|✅|✔|✓|예|네|是)$/i;

/**
 * The verdict a text gives: a labelled one (`Retry: no`) first, else the earliest verdict
 * word or phrase. Typographic apostrophes (don’t) read as plain ones.
 */
function firstVerdict(raw: string): boolean | undefined {
  const text = raw.replace(/[’‘ʼ]/g, "'");
  const labelled = LABELLED.exec(text);
  if (labelled) return LABEL_YES.test(labelled[1]);
  let best: { at: number; len: number; retry: boolean } | undefined;
  const consider = (patterns: RegExp[], retry: boolean) => {
    for (const pattern of patterns) {
      for (const m of text.matchAll(pattern)) {
        const at = m.index ?? 0;
        if (!best || at < best.at || (at === best.at && m[0].length > best.len)) best = { at, len: m[0].length, retry };
      }
    }
  };
  consider(NEGATIVE, false);
  consider(POSITIVE, true);
  return best?.retry;
}

/** The outcomes a text names. */
function outcomesIn(text: string): Outcome[] {
  const found = new Set<Outcome>();
  if (new RegExp(TIMEOUT.source, 'i').test(text)) found.add('timeout');
  for (const m of text.matchAll(CODE)) found.add(m[1] as Outcome);
  return [...found];
}

function withoutOutcomes(text: string): string {
  return text.replace(TIMEOUT, ' ').replace(CODE, ' ').replace(/Retry-After/gi, ' ');
}

/** Where the subject of a line ends: `503: retry`, `400 — no`, `timeout → retry`, `...; always retry a timeout`. */
const CLAUSE_BREAK = /\s*(?:[:：;；→]|->|=>|\s[-–—]\s|—)\s*/;

/**
 * The outcomes a line is about: those of its first clause naming any, so that a reason
 * mentioning another response (`503: retry, unlike a 400`) does not classify that one too.
 */
function subjectOutcomes(text: string): Outcome[] {
  for (const clause of text.split(CLAUSE_BREAK)) {
    const found = outcomesIn(clause);
    if (found.length) return found;
  }
  return [];
}

/** One classified line of the learner's table or list. */
export interface Classification {
  outcomes: Outcome[];
  retry: boolean;
  reason: string;
  text: string;
}

const VERDICT_HEADER = /retry|재시도|重试|verdict|판단|是否|결론|again/i;

/**
 * A table row: the responses are those of its first cell naming any (the response
 * column), the verdict is the retry column's, the reason the other cells.
 */
function classifyRow(st: Statement & { cells: string[]; header: string[] }): Classification | undefined {
  const verdictCol = st.header.findIndex((h, i) => VERDICT_HEADER.test(h) && outcomesIn(st.cells[i] ?? '').length === 0);
  const responseCol = st.cells.findIndex((cell, i) => i !== verdictCol && outcomesIn(cell).length > 0);
  if (responseCol < 0) return undefined;
  const outcomes = outcomesIn(st.cells[responseCol]);
  let retry: boolean | undefined;
  if (verdictCol >= 0) {
    const cell = st.cells[verdictCol] ?? '';
    retry = CELL_YES.test(cell) ? true : CELL_NO.test(cell) ? false : firstVerdict(withoutOutcomes(cell));
    if (retry === undefined) retry = CELL_YES_FIRST.test(cell) ? true : CELL_NO_FIRST.test(cell) ? false : undefined;
  } else {
    retry = firstVerdict(withoutOutcomes(st.text));
  }
  if (retry === undefined) return undefined;
  const reason = st.cells
    .filter((_, i) => i !== verdictCol && i !== responseCol)
    .join(' ')
    .trim();
  return { outcomes, retry, reason, text: st.text };
}

/** A list item or line: the responses its first clause names, and the first verdict it gives. */
function classifyLine(st: Statement): Classification | undefined {
  let outcomes = subjectOutcomes(st.text);
  let text = st.text;
  if (st.kind === 'heading') return undefined;
  if (outcomes.length === 0 && st.heading) {
    // "## 503" then "Retry: the server ..." under it.
    outcomes = subjectOutcomes(st.heading);
    text = `${st.heading}: ${st.text}`;
  }
  if (outcomes.length === 0) return undefined;
  const rest = withoutOutcomes(text);
  const retry = firstVerdict(rest);
  if (retry === undefined) return undefined;
  let reason = rest;
  for (const pattern of [...NEGATIVE, ...POSITIVE]) reason = reason.replace(pattern, ' ');
  return { outcomes, retry, reason: reason.replace(/[-–—:|,.;()]+/g, ' ').trim(), text: st.text };
}

/**
 * Reads the retry verdicts a learner wrote, from tables (a column headed "retry") and from
 * list items or lines naming a response and a verdict.
 */
export function classify(markdown: string): Classification[] {
  const out: Classification[] = [];
  for (const st of statements(markdown)) {
    const c = st.cells && st.header ? classifyRow(st as Statement & { cells: string[]; header: string[] }) : classifyLine(st);
    if (c) out.push(c);
  }
  return out;
}

const BACKOFF = /back-?off|exponential|지수|백오프|退避|指数/i;
const JITTER = /jitter|지터|抖动|随机|랜덤|무작위|random/i;

/** The minimum number of outcomes a learner must classify (lab sheet, step 7). */
export const MIN_OUTCOMES = 4;

/**
 * Step 07: 07-retry.md classifies at least four responses as retry or not, each with a
 * reason; a wrong verdict on 400, 422, 503 or a timeout fails; no backoff with jitter warns
 * (lab sheet, step 7; the essay's retry table).
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
      const found = classify(text);
      const reasoned = found.filter((c) => wordCount(c.reason) >= 2);
      for (const c of found) {
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
      const covered = new Set(reasoned.flatMap((c) => c.outcomes));
      const unreasoned = found.filter((c) => wordCount(c.reason) < 2).map((c) => t('step.07.noReason', { text: c.text }));
      expect(
        covered.size >= MIN_OUTCOMES,
        t('step.07.tooFew', { min: MIN_OUTCOMES, count: covered.size }),
        t('step.07.tooFew.why'),
        { details: [...(covered.size ? [t('step.07.classified', { list: [...covered].join(', ') })] : []), ...unreasoned] },
      );
      if (!BACKOFF.test(text) || !JITTER.test(text)) {
        notes.warn(t('step.07.backoff'));
      }
      return t('step.07.pass', { list: [...covered].join(', ') });
    },
  },
  get hints() {
    return [t('step.07.hint.1'), t('step.07.hint.2'), t('step.07.hint.3')];
  },
};
