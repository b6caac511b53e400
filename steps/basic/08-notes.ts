import { expect } from '../../grader/failure.js';
import { sentences, statements, wordCount } from '../../grader/markdown.js';
import { listOf, t } from '../../i18n/index.js';
import type { Step } from '../../grader/track.js';
import { pattern, WORDS } from './words/index.js';

/** A mention of the idempotency key: a line about "a different request" counts for the body idea only with one. */
const KEY = pattern(WORDS, (w) => w.notes.key);

/**
 * The three ideas 08-notes.md must cover, each recognised in Korean (the lab sheet asks
 * for 재시도, 저장, 본문), English or Chinese, whatever language the learner writes in
 * (the words: steps/words/en.ts, ko.ts, zh.ts).
 * `pattern` counts anywhere; `underKey` only in a line (a list item or paragraph) that
 * also names the key.
 */
export const CONCEPTS: readonly { name: string; pattern: RegExp; underKey?: RegExp; missing: string }[] = [
  {
    get name() {
      return t('step.08.concept.retry');
    },
    pattern: pattern(WORDS, (w) => w.retry.again),
    get missing() {
      return t('step.08.concept.retry.missing');
    },
  },
  {
    get name() {
      return t('step.08.concept.store');
    },
    pattern: new RegExp(`${pattern(WORDS, (w) => w.notes.store).source}|${pattern(WORDS, (w) => w.notes.keptIn).source}`, 'i'),
    get missing() {
      return t('step.08.concept.store.missing');
    },
  },
  {
    get name() {
      return t('step.08.concept.body');
    },
    pattern: pattern(WORDS, (w) => w.notes.body),
    underKey: pattern(WORDS, (w) => w.notes.differentRequest),
    get missing() {
      return t('step.08.concept.body.missing');
    },
  },
];

/** The minimum number of sentences of the learner's own words (the lab sheet's three lines; three sentences on one line count three). */
export const MIN_LINES = 3;

/** The concept words and the key, to leave out when counting a sentence's own words. */
const CONCEPT_WORDS = new RegExp(
  [KEY, ...CONCEPTS.flatMap((c) => (c.underKey ? [c.pattern, c.underKey] : [c.pattern]))].map((p) => p.source).join('|'),
  'gi',
);

/**
 * Whether each concept can have a sentence of its own, given the sentences (indices) that
 * state each one. Three candidates each are enough to decide, so at most 27 tries.
 */
function distinct(where: number[][]): boolean {
  const pick = (k: number, used: Set<number>): boolean =>
    k === where.length || where[k].slice(0, where.length).some((i) => !used.has(i) && pick(k + 1, new Set([...used, i])));
  return pick(0, new Set());
}

/** Whether a line (a list item or paragraph) states a concept. */
function covers(concept: (typeof CONCEPTS)[number], line: string): boolean {
  return concept.pattern.test(line) || (concept.underKey !== undefined && concept.underKey.test(line) && KEY.test(line));
}

/**
 * Step 08: 08-notes.md has at least three sentences covering why retries are unavoidable,
 * where keys are stored, and why a different body under one key is refused (lab sheet, step 8).
 */
export const step: Step = {
  id: '08',
  slug: 'notes',
  get title() {
    return t('step.08.title');
  },
  file: {
    name: '08-notes.md',
    check(text) {
      // The learner's sentences: three words or more, two of them besides the concept words
      // (`Retry, store, body.` is none), each counted once (a sentence pasted three times is
      // one), with the list item or paragraph it is in.
      const written: { text: string; block: number }[] = [];
      const seen = new Set<string>();
      for (const st of statements(text)) {
        if (st.kind === 'heading') continue;
        for (const sentence of sentences(st.text)) {
          const said = sentence.toLowerCase().replace(/\s+/g, ' ');
          if (wordCount(sentence) < 3 || wordCount(sentence.replace(CONCEPT_WORDS, ' ')) < 2 || seen.has(said)) continue;
          seen.add(said);
          written.push({ text: sentence, block: st.block });
        }
      }
      const count = written.length;
      expect(
        count >= MIN_LINES,
        t('step.08.tooShort', { min: MIN_LINES, count }),
        t('step.08.tooShort.why'),
      );
      /** The list items and paragraphs naming the key. */
      const keyed = new Set(written.filter((w) => KEY.test(w.text)).map((w) => w.block));
      /** The sentences stating a concept (a different request only in a line that names the key). */
      const stating = (c: (typeof CONCEPTS)[number]) =>
        written.flatMap((w, i) => (covers(c, w.text) || (c.underKey?.test(w.text) && keyed.has(w.block)) ? [i] : []));
      const where = CONCEPTS.map(stating);
      const found = (c: (typeof CONCEPTS)[number]) => where[CONCEPTS.indexOf(c)].length > 0;
      const missing = CONCEPTS.filter((c) => !found(c));
      expect(
        missing.length === 0,
        t('step.08.missing', { missing: missing.map((c) => c.missing).join(t('step.08.missingJoin')) }),
        t('step.08.missing.why'),
        { details: CONCEPTS.map((c) => t(found(c) ? 'step.08.found' : 'step.08.notFound', { name: c.name })) },
      );
      // Each idea in a sentence of its own: three keywords in one sentence explain none of them.
      expect(
        distinct(where),
        t('step.08.oneSentence', { list: listOf(CONCEPTS.map((c) => c.name)) }),
        t('step.08.oneSentence.why'),
      );
      return t('step.08.pass', { list: listOf(CONCEPTS.map((c) => c.name)) });
    },
  },
  get hints() {
    return [t('step.08.hint.1'), t('step.08.hint.2')];
  },
};
