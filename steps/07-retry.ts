import { CheckFailed, expect } from '../grader/failure.js';
import { sentences, statements, wordCount, type Statement } from '../grader/markdown.js';
import { t } from '../i18n/index.js';
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

/** Sending the request again, in the words learners use: retry, resend, send (it) again, try again. */
const ACTION = String.raw`(?:retr(?:y|ied|ies|ying|yable|iable)|re-?send(?:s|ing)?|send(?:s|ing)?\s+(?:it\s+|them\s+|this\s+|that\s+|the\s+(?:same\s+)?request\s+)?again|tr(?:y|ies|ying)\s+(?:it\s+|them\s+)?again)\b`;
/** Up to eight words between a retry and what is said of it, never across a mark: `retrying [the same request] won't help`. */
const BETWEEN = String.raw`(?:\s+(?!-+\s)[^\s.;:,!?—–()]+){0,8}?`;
/** Korean "even if sent again" (재시도해도, 다시 보내도) and "if sent again" (재시도하면, 다시 보내면). */
const KO_EVEN_IF = String.raw`(?:재시도(?:해도|하더라도|해\s*봤자|해\s*봐야)|(?:다시\s*보내|재전송)(?:도|더라도|해도|봤자|봐야))`;
const KO_IF = String.raw`(?:재시도(?:하면|해\s*봐도)|(?:다시\s*보내|재전송)(?:면|하면))`;
const ZH_AGAIN = '(?:重试|重发|再发|重新发送|再次发送)';

/**
 * Verdict words and phrases (a negative phrase wins over the positive word it contains:
 * earliest, then longest). Bare yes/no, always/never, 是/否 are not among them: they are a
 * verdict only as a whole cell or right after the response (`400: no`), see bareVerdict.
 */
const NEGATIVE = [
  new RegExp(
    String.raw`\b(?:do not|don't|never|no|not|must not|mustn't|should not|shouldn't|won't|will not|would not|wouldn't|cannot|can't|can not|need not|needn't|no need to|shall not|better not|not worth|no point(?: in)?|no use|no sense in|pointless to|useless to)\s+(?:be\s+)?${ACTION}`,
    'gi',
  ),
  /\bnon[- ]?retr(?:y|yable|iable)\b/gi,
  // "retrying won't help", "resending it is pointless", "retrying never succeeds"
  new RegExp(
    String.raw`\b${ACTION}${BETWEEN}\s+(?:(?:won't|will not|wouldn't|would not|doesn't|does not|can't|cannot|will never|never|isn't going to|is not going to|is unlikely to)\s+(?:helps?|succeeds?|works?|fix(?:es)?|changes?|matters?|make a difference)|(?:is|are|would be|will be|is just|is only)\s+(?:pointless|useless|futile|meaningless|hopeless|no use|of no use|no good|a waste|wasted|wasteful|in vain|not going to help|not helpful|not useful)|will (?:only |just |always )?fail (?:again|the same way)|(?:only |just |always )?fails? (?:again|the same way|every time)|(?:gives?|returns?|gets?|yields?|produces?|ends? (?:up )?with|results? in) the same(?: (?:error|failure|result|status|rejection|refusal))?(?=\s*(?:$|[,.;:!?)])))`,
    'gi',
  ),
  /\bgive\s+up\b(?!\s+(?:after|once|when|if|only|eventually|later|at\b))|\bfail[- ]fast\b/gi,
  /❌|✗|✘|🚫|×/g,
  /(?:재시도|재전송)\s*(?:하지\s*(?:않|마)|안(?!\s*전|정|심)|금지|불가|X|x|불필요|하면\s*안|할\s*필요\s*(?:가\s*)?없)|다시\s*보내(?:지\s*(?:않|마)|면\s*안)/g,
  new RegExp(String.raw`${KO_EVEN_IF}[^.。!?]{0,30}?(?:소용\s*(?:이\s*)?없|의미\s*(?:가\s*)?없|마찬가지|똑같|같은\s*(?:결과|오류|에러|응답|실패)|실패|안\s*된)`, 'g'),
  new RegExp(String.raw`${KO_IF}[^.。!?]{0,30}?(?:소용\s*(?:이\s*)?없|의미\s*(?:가\s*)?없|마찬가지|똑같|같은\s*(?:결과|오류|에러|실패))`, 'g'),
  /(?:재시도\s*)?(?:아니오|아니요|안\s*함)|포기/g,
  /不(?:要|应|应该|能|可|必|用|需要)?(?:再)?(?:重试|重发|重新发送|再次发送|再发)|别(?:再)?(?:重试|重发)|禁止重试|勿重试|无需重试|放弃|快速失败/g,
  new RegExp(String.raw`${ZH_AGAIN}[^，。；,;]{0,10}?(?:没用|无济于事|没有用|无用|没有意义|毫无意义|不会成功|还是(?:\s*(?:[，。；,;]|$)|一样|同样|会?失败|错)|也(?:会)?失败|结果(?:都)?一样|一样失败)`, 'g'),
];
const POSITIVE = [
  new RegExp(String.raw`\b${ACTION}`, 'gi'),
  /\b(?:do not|don't|never|not)\s+(?:to\s+)?give\s+up\b/gi,
  /✅|✔|✓|√|⭕/g,
  /재시도|재전송|다시\s*(?:보내|보낸|보냄|보낼|전송|시도)|포기하지\s*(?:말|않)/g,
  /重试|重发|重新发送|再次发送|再发|再试|不要放弃|别放弃/g,
];

/** A bare verdict word: yes / no, always / never, O / X, 예 / 아니오, 是 / 否. */
const BARE_WORD = /^\s*(yes|no|always|never|[ynox](?![-'’.]\w)|⭕|예|네|아니오|아니요|항상|是|否|可以)(?![A-Za-z0-9/\uac00-\ud7a3\u4e00-\u9fff])/i;
const BARE_POSITIVE = /^(?:yes|always|y|o|⭕|예|네|항상|是|可以)$/i;
/** Bare words that also begin ordinary phrases (`no way to know`, `never arrives`, `always fails`). */
const AMBIGUOUS = /^(?:no|never|always|[ynox])$/i;
/** What follows such a word when it begins a phrase, not a verdict, even in a verdict cell. */
const PHRASE_GOES_ON = /^\s+(?:way|idea|one|telling|guarantee|clue|knowing|answer|response|reply|know|knows|arrives?|arrived|reached|gets?|got|fails?)\b/i;

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
  if (AMBIGUOUS.test(m[1]) && (loose ? PHRASE_GOES_ON.test(after) : !/^\s*(?:$|[,.;:!?)(（），、。！？—–-]|->|→)/.test(after))) return undefined;
  return { retry: BARE_POSITIVE.test(m[1]), length: m[0].length };
}

/** A labelled verdict: `Retry: no`, `retry? yes`, `Retry: always`, `재시도: 아니오`, `재시도 여부: X`, `是否重试：否`. */
const LABELLED =
  /(?:\bretry|재시도(?:\s*여부)?|是否(?:要)?重试|重试)\s*(?:[?？]\s*[:：=]?|[:：=])\s*(yes|y|o|⭕|✅|✔|✓|예|네|是|always|no|n|never|x|❌|✗|✘|🚫|아니오|아니요|否)(?![A-Za-z\u3131-\u318e\uac00-\ud7a3\u4e00-\u9fff])/i;
const LABEL_YES = /^(?:yes|y|o|⭕|✅|✔|✓|예|네|是|always)$/i;

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
/** TIMEOUT without its global flag, for a test: compiled once, as a line may hold thousands of clauses. */
const TIMEOUT_ONCE = new RegExp(TIMEOUT.source, 'i');

function outcomesIn(text: string): Outcome[] {
  const found = new Set<Outcome>();
  if (TIMEOUT_ONCE.test(text)) found.add('timeout');
  for (const m of text.matchAll(CODE)) found.add(m[1] as Outcome);
  return [...found];
}

function withoutOutcomes(text: string): string {
  return text.replace(TIMEOUT, ' ').replace(CODE, ' ').replace(/Retry-After/gi, ' ');
}

/** Where the subject of a line ends: `503: retry`, `400 — no`, `timeout → retry`, `...; always retry a timeout`. */
const CLAUSE_BREAK = /\s*(?:[:：;；→]|->|=>|\s[-–—]\s|—)\s*/;
/** The same breaks, and `?` or `=` (`400? No.`, `400 = no`), found one after another. */
const SUBJECT_BREAK = /\s*(?:[:：;；→=?？]|->|=>|\s[-–—]\s|—)\s*/g;

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
}

/** The header of a table's verdict column: one about retrying first, else one about what to do. */
const VERDICT_HEADER = /retry|재시도|重试|verdict|판단|是否|결론|again/i;
const ACTION_HEADER = /action|what to do|handling|decision|조치|처리|대응|결정|处理|做法|对策|决定/i;

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
  const outcomes = subjectOutcomes(text);
  if (outcomes.length === 0) return undefined;
  let said = text;
  const at = afterSubject(text);
  const bare = at === undefined ? undefined : bareVerdict(text.slice(at), false);
  if (bare && at !== undefined) said = `${text.slice(0, at)} ${text.slice(at + bare.length)}`;
  const rest = withoutOutcomes(said);
  const retry = bare?.retry ?? firstVerdict(rest) ?? fallback;
  if (retry === undefined) return { outcomes, text };
  let reason = rest.replace(/[’‘ʼ]/g, "'").replace(LABELLED, ' ');
  for (const pattern of [...NEGATIVE, ...POSITIVE]) reason = reason.replace(pattern, ' ');
  return { outcomes, retry, reason: reason.replace(/[-–—:|,.;()?→]+/g, ' ').trim(), text };
}

/** Headings and list items that only label what follows, never a verdict: `Which failures to retry`, `Retry policy`. */
const QUESTION =
  /\b(?:which|what|when|whether|how|why|policy|policies|rules?|strategy|strategies|overview|summary|notes?|plan|or)\b|[?？]|어떤|무엇|언제|여부|정책|전략|규칙|哪些|什么|是否|何时|策略|规则|吗/i;

/** Words a verdict label may have besides its verdict: `Retry these`, `Do not retry (client errors)`, `5xx: retry with backoff`. */
const LABEL_FILLER =
  /\b(?:these|those|them|it|this|the|following|responses?|failures?|errors?|codes?|cases?|status(?:es)?|outcomes?|answers?|safe|ok|okay|to|can|be|should|must|always|with|backoff|later|after|a|pause|wait|delay|yes|no|[45]xx)\b/gi;

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

/**
 * A text's sentences, each split again at `;` where what follows names a response and a
 * verdict of its own (`503 can be retried; a 400 should never be retried`).
 */
function parts(text: string): string[] {
  return sentences(text).flatMap((sentence) => {
    const out: string[] = [];
    for (const part of sentence.split(/\s*[;；]\s*/).filter(Boolean)) {
      const own = classifyText(part);
      if (out.length === 0 || isClassified(own)) out.push(part);
      else out[out.length - 1] += `; ${part}`;
    }
    return out;
  });
}

/** A sentence giving the verdict of the one before it to another response: `The same goes for a 422.` */
const LIKEWISE = /\b(?:the same (?:goes|is true|holds|applies) for|same for|likewise|similarly)\b|마찬가지|同样|也一样/i;

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
  const found: string[][] = [];
  const leading: string[] = [];
  for (const part of texts.flatMap(parts)) {
    if (subjectOutcomes(part).length) found.push([part]);
    else if (found.length) found[found.length - 1].push(part);
    else leading.push(part);
  }
  const merged: Unit[] = [];
  for (const text of found.map(joined)) {
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
 * of the list item or heading it sits under (`## Do not retry`, `- Retry:`) when that one
 * gives a verdict; a heading gives one when it says not to retry, or when headings say both.
 */
export function read(markdown: string): Reading {
  const all = statements(markdown);
  const headingVerdicts = all.filter((st) => st.kind === 'heading').map((st) => labelVerdict(st.text));
  const bothWays = headingVerdicts.includes(true) && headingVerdicts.includes(false);
  const fromHeading = (heading: string | undefined) => {
    const verdict = labelVerdict(heading);
    return verdict === false || bothWays ? verdict : undefined;
  };
  const reading: Reading = { found: [], unread: [] };
  const add = (c: Classification | Unread | undefined) => {
    if (!c) return;
    if (isClassified(c)) reading.found.push(c);
    else reading.unread.push(c);
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
    }
    let fallback: boolean | undefined;
    for (const label of [...(st.within ?? [])].reverse()) {
      fallback = labelVerdict(label);
      if (fallback !== undefined) break;
    }
    fallback ??= fromHeading(st.heading);
    for (const unit of units(texts, st.heading, fallback)) add(classifyText(unit.text, unit.fallback));
  }
  return reading;
}

/** The retry verdicts a learner wrote (see read). */
export function classify(markdown: string): Classification[] {
  return read(markdown).found;
}

const BACKOFF = /back-?off|exponential|지수|백오프|退避|指数/i;
const JITTER = /jitter|지터|抖动|随机|랜덤|무작위|random/i;

/** The minimum number of outcomes a learner must classify (lab sheet, step 7). */
export const MIN_OUTCOMES = 4;

/**
 * Step 07: 07-retry.md classifies at least four responses as retry or not, each with a
 * reason; a wrong verdict on 400, 422, 503 or a timeout fails; a line naming one of those
 * without a verdict that could be read (and that response classified nowhere else) warns, and
 * so does no backoff with jitter (lab sheet, step 7; the essay's retry table).
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
      const { found, unread } = read(text);
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
      // A line naming a response whose verdict could not be read, unless that response is classified elsewhere.
      const classified = new Set(found.flatMap((c) => c.outcomes));
      for (const u of unread) {
        const strict = u.outcomes.filter((o) => TRUTH[o]?.strict && !classified.has(o));
        if (strict.length === 0) continue;
        const labels = strict.map((o) => (o === 'timeout' ? t('step.07.aTimeout') : String(o)));
        const named = labels.length > 1 ? t('step.07.listAnd', { list: labels.slice(0, -1).join(', '), last: labels[labels.length - 1] }) : labels[0];
        notes.warn(t('step.07.unread', { named, text: u.text }));
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
