/**
 * The word tables of steps 07 and 08 (steps/basic/words): every phrase of every language builds
 * an expression, the notation means what steps/basic/words/index.ts says, and the examples of
 * issue 7 ("the file checks read learners right") are read as written, verdict by verdict.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { read, type Outcome } from '../steps/basic/07-retry.js';
import { phraseSource, WORDS, type Phrase, type Words } from '../steps/basic/words/index.js';
import { en } from '../steps/basic/words/en.js';
import { ko } from '../steps/basic/words/ko.js';
import { zh } from '../steps/basic/words/zh.js';

/** Every phrase of a table, with the path of its group (`retry.again`). */
function phrases(words: Words): { group: string; phrase: Phrase }[] {
  const out: { group: string; phrase: Phrase }[] = [];
  const visit = (value: unknown, group: string) => {
    if (Array.isArray(value)) {
      for (const item of value) {
        if (typeof item === 'string' || (item && typeof item === 'object' && 'say' in item)) out.push({ group, phrase: item as Phrase });
        else visit(item, group);
      }
    } else if (value && typeof value === 'object') {
      for (const [key, inner] of Object.entries(value)) if (key !== 'gap') visit(inner, group ? `${group}.${key}` : key);
    }
  };
  visit(words, '');
  return out;
}

test('the checks read the tables of en, ko and zh', () => {
  assert.deepEqual(WORDS, [en, ko, zh]);
});

test('every phrase of every table builds an expression', () => {
  for (const [lang, words] of [['en', en], ['ko', ko], ['zh', zh]] as const) {
    const all = phrases(words);
    assert.ok(all.length > 100, `${lang}: only ${all.length} phrases`);
    for (const { group, phrase } of all) {
      const say = typeof phrase === 'string' ? phrase : phrase.say;
      assert.doesNotThrow(() => new RegExp(phraseSource(phrase, words), 'i'), `${lang} ${group}: "${say}"`);
      // The expression finds the phrase itself, written out plainly (first choice of each group).
      const plain = say.replace(/\{([^|}]*)[^}]*\}/g, '$1').replace(/\s*\[[^\]]*\]/g, '').replace(/\s*[*…]/g, '').replace(/^-/, '');
      if (!['retry.contrast', 'retry.and', 'retry.ambiguous'].includes(group)) {
        assert.match(plain, new RegExp(phraseSource(phrase, words), 'i'), `${lang} ${group}: "${say}" does not find "${plain}"`);
      }
    }
  }
});

test('every language names the ideas the checks cannot do without', () => {
  for (const [lang, words] of [['en', en], ['ko', ko], ['zh', zh]] as const) {
    for (const [group, list] of Object.entries({
      timeout: words.timeout,
      backoff: words.backoff,
      jitter: words.jitter,
      'retry.again': words.retry.again,
      'retry.no': words.retry.no,
      'retry.bareYes': words.retry.bareYes,
      'retry.bareNo': words.retry.bareNo,
      'retry.label': words.retry.label,
      'retry.contrast': words.retry.contrast,
      'retry.except': words.retry.except,
      'notes.key': words.notes.key,
      'notes.store': words.notes.store,
      'notes.body': words.notes.body,
      'notes.differentRequest': words.notes.differentRequest,
    })) {
      assert.ok(list.length > 0, `${lang}: ${group} is empty`);
    }
  }
});

test('the phrase notation: choices, optional words, spaces, whole words, exceptions', () => {
  const spaced = { spaced: true, bounded: true };
  const unspaced = { spaced: false, bounded: false };
  const re = (phrase: Phrase, w = spaced) => new RegExp(phraseSource(phrase, w), 'i');
  const send = re('{send|sends} [it|them|the request] again');
  for (const yes of ['send again', 'Sends  it again', 'send the request again']) assert.match(yes, send);
  for (const no of ['sendagain', 'send it', 'resend again', 'send us again']) assert.doesNotMatch(no, send);
  assert.doesNotMatch('retrying', re('retry'));
  assert.match('Retry!', re('retry'));
  assert.match('다시보내도', re('다시 보내', unspaced));
  assert.match('没有收到响应', re('没有[收到]{回复|响应}', unspaced));
  assert.match('没有响应', re('没有[收到]{回复|响应}', unspaced));
  const giveUp = re({ say: 'give up', notBefore: ['after'] });
  assert.match('give up.', giveUp);
  assert.doesNotMatch('give up after five tries', giveUp);
  assert.match('kept in a table', re('{keep|kept} … {in|on} [a|the] * * {table|store}'));
  assert.match('kept the keys safely in the shared table', re('{keep|kept} … {in|on} [a|the] * * {table|store}'));
  assert.throws(() => phraseSource('[do] not retry', spaced), /starts with an optional part/);
  assert.throws(() => phraseSource('{retry', spaced), /unclosed/);
});

/** The verdict read for each outcome (true: retry), failing on an outcome read both ways. */
function verdicts(markdown: string): Partial<Record<Outcome, boolean>> {
  const out: Partial<Record<Outcome, boolean>> = {};
  for (const c of read(markdown).found) {
    for (const o of c.outcomes) {
      assert.ok(out[o] === undefined || out[o] === c.retry, `${o} read both ways in ${JSON.stringify(markdown)}`);
      out[o] = c.retry;
    }
  }
  return out;
}

test('a list whose last item runs on into a paragraph line is read as written (issue 7)', () => {
  const text = 'Retry:\n- timeout\n- 503\nDo not retry:\n- 400\n- 422\nThese are final because the body is wrong.\n';
  assert.deepEqual(verdicts(text), { timeout: true, '503': true, '400': false, '422': false });
  const reading = read(text);
  // The paragraph line is the reason of the items above it, not an item, and not 503's label.
  assert.equal(reading.found.find((c) => c.outcomes.includes('422'))?.reason, 'These are final because the body is wrong.');
  assert.equal(reading.found.find((c) => c.outcomes.includes('503'))?.reason, '');
  assert.deepEqual(reading.unread, []);
  assert.deepEqual(verdicts('재시도:\n- 타임아웃\n- 503\n재시도하지 않음:\n- 400\n- 422\n요청 자체가 잘못되었다.\n'), {
    timeout: true,
    '503': true,
    '400': false,
    '422': false,
  });
  assert.deepEqual(verdicts('重试：\n- 超时\n- 503\n不要重试：\n- 400\n- 422\n这是请求本身的问题。\n'), {
    timeout: true,
    '503': true,
    '400': false,
    '422': false,
  });
});

test('a line giving two codes two different verdicts is read as written (issue 7)', () => {
  assert.deepEqual(verdicts('503 retry, but 400 never'), { '503': true, '400': false });
  assert.deepEqual(verdicts('400 and 422: do not retry; 503 and timeouts: retry with backoff'), {
    '400': false,
    '422': false,
    '503': true,
    timeout: true,
  });
  assert.deepEqual(verdicts('Retry 503 and timeouts, but never 400 or 422.'), { '503': true, timeout: true, '400': false, '422': false });
  assert.deepEqual(verdicts('Timeouts should be retried while 400 should not.'), { timeout: true, '400': false });
  assert.deepEqual(verdicts('400 never, but 503 always.'), { '400': false, '503': true });
  assert.deepEqual(verdicts('Retry everything except 400 and 422.'), { '400': false, '422': false });
  // A reason naming another response gives that one no verdict.
  assert.deepEqual(verdicts('503: retry, unlike a 400.'), { '503': true });
  assert.deepEqual(verdicts('Retry 503, but a 400 is final.'), { '503': true });
  assert.deepEqual(verdicts('400: do not retry, a retry gets 400 again.'), { '400': false });
  assert.deepEqual(verdicts('503은 재시도하지만 400은 재시도하지 않는다.'), { '503': true, '400': false });
  assert.deepEqual(verdicts('400은 재시도하지 않고 503은 재시도한다.'), { '400': false, '503': true });
  assert.deepEqual(verdicts('400과 422를 제외하고 모두 재시도한다.'), { '400': false, '422': false });
  assert.deepEqual(verdicts('503 重试，但 400 不要。'), { '503': true, '400': false });
  assert.deepEqual(verdicts('超时重试，400 不重试。'), { timeout: true, '400': false });
  assert.deepEqual(verdicts('除了 400 和 422 以外都重试。'), { '400': false, '422': false });
});
