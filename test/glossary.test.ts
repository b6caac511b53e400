/**
 * One word per concept: every Korean and Chinese text a learner reads (the catalogs, with
 * every hint and verdict, and the sheets) uses the glossary's word (i18n/glossary.ts),
 * never one it replaced.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CATALOGS } from '../i18n/index.js';
import { GLOSSARY, replacedWords } from '../i18n/glossary.js';
import { LAB_DIR } from '../lab/paths.js';

/** Every text of a language: each catalog message by key, each sheet by file. */
function textsOf(lang: 'ko' | 'zh'): Array<[string, string]> {
  const sheets = fs.readdirSync(LAB_DIR).filter((f) => f.endsWith(`.${lang}.md`));
  return [...Object.entries(CATALOGS[lang]), ...sheets.map((f) => [f, fs.readFileSync(path.join(LAB_DIR, f), 'utf8')] as [string, string])];
}

test('the glossary finds a replaced word, and passes over it where an allowed phrase gives it another meaning', () => {
  assert.deepEqual(replacedWords('服务器的回应', 'zh'), [{ word: '回应', use: '响应' }]);
  assert.deepEqual(replacedWords('端口 8000 已被其他程序占用', 'zh'), []);
  assert.deepEqual(replacedWords('先占用键再扣款', 'zh'), [{ word: '占用', use: '占位' }]);
  assert.deepEqual(replacedWords('기본 트랙', 'ko'), [{ word: '트랙', use: '과정' }]);
  // A charge (the provider's) is 청구, a payment (the shop's) 결제; a ledger row is a 행.
  assert.deepEqual(replacedWords('{id}번 결제는 원장에 있지만 결제사는 결제한 적이 없습니다', 'ko'), [{ word: '결제사는 결제한', use: '청구' }]);
  assert.deepEqual(replacedWords('{id}번 결제는 원장에 있지만 결제사는 청구한 적이 없습니다', 'ko'), []);
  assert.deepEqual(replacedWords('원장 줄(2개):', 'ko'), [{ word: '원장 줄', use: '원장 행' }]);
  for (const lang of ['ko', 'zh'] as const) {
    for (const entry of GLOSSARY[lang]) {
      assert.ok(!entry.replaced.includes(entry.use), `${lang} ${entry.concept}: the word used is not one it replaced`);
      assert.ok(textsOf(lang).some(([, text]) => text.includes(entry.use)), `${lang} ${entry.concept}: ${entry.use} is used somewhere`);
    }
  }
});

test('no Korean or Chinese text uses a word the glossary replaced', () => {
  for (const lang of ['ko', 'zh'] as const) {
    const found = textsOf(lang).flatMap(([where, text]) => replacedWords(text, lang).map((f) => `${where}: ${f.word} (use ${f.use})`));
    assert.deepEqual(found, [], `${lang}: words the glossary replaced`);
  }
});
