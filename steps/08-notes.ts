import { expect } from '../grader/failure.js';
import { statements, wordCount } from '../grader/markdown.js';
import type { Step } from './types.js';
import { t } from '../i18n/index.js';

/**
 * The three ideas 08-notes.md must cover, each recognised in Korean (the lab sheet asks
 * for 재시도, 저장, 본문), English or Chinese, whatever language the learner writes in.
 */
export const CONCEPTS = [
  {
    get name() {
      return t('step.08.concept.retry');
    },
    pattern: /retr(?:y|ies|ied|ying)|재시도|重试|再试/i,
    get missing() {
      return t('step.08.concept.retry.missing');
    },
  },
  {
    get name() {
      return t('step.08.concept.store');
    },
    pattern: /\bstor(?:e|ed|es|ing|age)\b|\bsav(?:e|ed|es|ing)\b|persist|database|\bDB\b|redis|sqlite|저장|存储|保存|存放|数据库/i,
    get missing() {
      return t('step.08.concept.store.missing');
    },
  },
  {
    get name() {
      return t('step.08.concept.body');
    },
    pattern: /\bbod(?:y|ies)\b|payload|본문|正文|请求体|请求内容/i,
    get missing() {
      return t('step.08.concept.body.missing');
    },
  },
] as const;

/** The minimum number of written lines (lab sheet, step 8). */
export const MIN_LINES = 3;

/**
 * Step 08: 08-notes.md has at least three lines covering why retries are unavoidable,
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
      const written = statements(text).filter((st) => st.kind !== 'heading' && wordCount(st.text) >= 3);
      expect(
        written.length >= MIN_LINES,
        t('step.08.tooShort', { min: MIN_LINES, count: written.length }),
        t('step.08.tooShort.why'),
      );
      const all = written.map((st) => st.text).join('\n');
      const missing = CONCEPTS.filter((c) => !c.pattern.test(all));
      expect(
        missing.length === 0,
        t('step.08.missing', { missing: missing.map((c) => c.missing).join(t('step.08.missingJoin')) }),
        t('step.08.missing.why'),
        { details: CONCEPTS.map((c) => t(c.pattern.test(all) ? 'step.08.found' : 'step.08.notFound', { name: c.name })) },
      );
      return t('step.08.pass', { list: CONCEPTS.map((c) => c.name).join(', ') });
    },
  },
  get hints() {
    return [t('step.08.hint.1'), t('step.08.hint.2')];
  },
};
