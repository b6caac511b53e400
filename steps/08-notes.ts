import { expect } from '../grader/failure.js';
import { statements, wordCount } from '../grader/markdown.js';
import type { Step } from './types.js';

/**
 * The three ideas 08-notes.md must cover, each recognised in Korean (the lab sheet asks
 * for 재시도, 저장, 본문), English or Chinese, whatever language the learner writes in.
 */
export const CONCEPTS = [
  {
    name: 'why retries are unavoidable',
    pattern: /retr(?:y|ies|ied|ying)|재시도|重试|再试/i,
    missing: 'why clients retry at all (a timeout cannot tell a lost request from a lost answer)',
  },
  {
    name: 'where idempotency keys are stored',
    pattern: /\bstor(?:e|ed|es|ing|age)\b|\bsav(?:e|ed|es|ing)\b|persist|database|\bDB\b|redis|sqlite|저장|存储|保存|存放|数据库/i,
    missing: 'where the keys are kept (a store every instance shares, not process memory)',
  },
  {
    name: 'why a different body under one key is refused',
    pattern: /\bbod(?:y|ies)\b|payload|본문|正文|请求体|请求内容/i,
    missing: 'why a reused key with a different body is refused (422)',
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
  title: 'Write down the three ideas',
  file: {
    name: '08-notes.md',
    check(text) {
      const written = statements(text).filter((st) => st.kind !== 'heading' && wordCount(st.text) >= 3);
      expect(
        written.length >= MIN_LINES,
        `08-notes.md must have at least ${MIN_LINES} lines of your own words; it has ${written.length}.`,
        'Writing the ideas down in a sentence each is how you find out whether you can explain them.',
      );
      const all = written.map((st) => st.text).join('\n');
      const missing = CONCEPTS.filter((c) => !c.pattern.test(all));
      expect(
        missing.length === 0,
        `08-notes.md does not say ${missing.map((c) => c.missing).join('; nor ')}.`,
        'These three ideas are the lab: clients must retry, the server must remember keys where every instance sees them, and a key names one request only.',
        { details: CONCEPTS.map((c) => `${c.pattern.test(all) ? 'found' : 'missing'}: ${c.name}`) },
      );
      return `08-notes.md covers ${CONCEPTS.map((c) => c.name).join(', ')}.`;
    },
  },
  hints: [
    'One line each: why do clients retry, where does the server keep the keys, what happens when a key comes back with another body?',
    'Think of the client that timed out, of the second instance behind the load balancer, and of the 1000 versus 99999 request.',
  ],
};
