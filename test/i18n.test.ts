/**
 * The three languages: every message exists in each, with the same placeholders; the
 * language is chosen by --lang, the workspace, then LC_ALL / LC_MESSAGES / LANG; the lab
 * sheets have the same steps; the command line speaks Korean and Chinese when asked.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CATALOGS, LANGUAGES, chooseLanguage, languageFromEnv, langOfLocale, placeholders, setLanguage, t, tIn } from '../i18n/index.js';
import { en } from '../i18n/en.js';
import { LAB_DIR } from '../lab/paths.js';
import { ADVANCED_STEPS, STEPS } from '../steps/index.js';
import { CheckFailed } from '../grader/failure.js';
import { fixtureWorkspace, runCli, stopRecorded, tempDir } from './support.js';
import { readState } from '../lab/workspace.js';

test('every catalog has every English key, no other key, a non-empty text and the same placeholders', () => {
  const keys = Object.keys(en).sort();
  for (const lang of LANGUAGES) {
    const catalog = CATALOGS[lang] as Record<string, string>;
    assert.deepEqual(Object.keys(catalog).sort(), keys, `${lang}: the keys`);
    for (const key of keys) {
      assert.ok(catalog[key].trim() !== '' || key.endsWith('Join') || key.endsWith('.and'), `${lang} ${key} is empty`);
      assert.deepEqual(placeholders(catalog[key]), placeholders((en as Record<string, string>)[key]), `${lang} ${key}: placeholders`);
    }
  }
});

test('the Korean and Chinese catalogs are written, not copied: most messages differ from the English', () => {
  for (const lang of ['ko', 'zh'] as const) {
    const catalog = CATALOGS[lang] as Record<string, string>;
    const same = Object.keys(en).filter((k) => catalog[k] === (en as Record<string, string>)[k] && /[a-z]{3}/.test(catalog[k]));
    assert.ok(same.length <= 3, `${lang}: copied from English: ${same.join(', ')}`);
  }
});

test('t fills placeholders and keeps a missing one visible; tIn speaks a given language', () => {
  setLanguage('en');
  assert.equal(t('report.progress', { passed: 3, total: 8 }), 'Progress: 3 of 8 steps pass.');
  assert.equal(t('report.stuck'), 'Stuck? idem-lab hint {id}');
  assert.equal(tIn('ko', 'report.stuck', { id: '02' }), '막혔나요? idem-lab hint 02');
  assert.equal(tIn('zh', 'report.stuck', { id: '02' }), '卡住了？idem-lab hint 02');
  assert.equal(t('report.stuck', { id: '02' }), 'Stuck? idem-lab hint 02', 'tIn restores the language');
});

test('the language: --lang, else the workspace, else LC_ALL, LC_MESSAGES, LANG; English when unknown', () => {
  assert.equal(langOfLocale('ko_KR.UTF-8'), 'ko');
  assert.equal(langOfLocale('zh_CN.UTF-8'), 'zh');
  assert.equal(langOfLocale('zh_TW'), 'zh');
  assert.equal(langOfLocale('en_US.UTF-8'), 'en');
  assert.equal(langOfLocale('C.UTF-8'), undefined);
  assert.equal(langOfLocale('fr_FR.UTF-8'), undefined);
  assert.equal(languageFromEnv({ LANG: 'ko_KR.UTF-8' }), 'ko');
  assert.equal(languageFromEnv({ LANG: 'ko_KR.UTF-8', LC_ALL: 'zh_CN.UTF-8' }), 'zh');
  assert.equal(languageFromEnv({ LANG: 'ko_KR.UTF-8', LC_ALL: '' }), 'ko', 'an empty LC_ALL does not count');
  assert.equal(languageFromEnv({ LANG: 'ko_KR.UTF-8', LC_MESSAGES: 'en_GB' }), 'en');
  assert.equal(languageFromEnv({ LANG: 'C' }), 'en');
  assert.equal(languageFromEnv({}), 'en');
  assert.equal(languageFromEnv({ LANG: 'fr_FR.UTF-8' }), 'en');
  assert.deepEqual(chooseLanguage('zh', 'ko', { LANG: 'en_US' }), { lang: 'zh' });
  assert.deepEqual(chooseLanguage(undefined, 'ko', { LANG: 'zh_CN' }), { lang: 'ko' });
  assert.deepEqual(chooseLanguage(undefined, undefined, { LANG: 'zh_CN' }), { lang: 'zh' });
  assert.deepEqual(chooseLanguage('fr', undefined, { LANG: 'C' }), { lang: 'en', unknown: 'fr' });
});

for (const [name, steps] of [['LAB', STEPS], ['ADVANCED', ADVANCED_STEPS]] as const) {
  test(`the three ${name} sheets have the track's steps, each headed \`## NN · <the step title in that language>\``, () => {
    for (const lang of LANGUAGES) {
      const sheet = fs.readFileSync(path.join(LAB_DIR, `${name}.${lang}.md`), 'utf8');
      const headings = sheet.split('\n').filter((line) => /^## /.test(line));
      setLanguage(lang);
      try {
        assert.deepEqual(headings, steps.map((s) => `## ${s.id} · ${s.title}`), lang);
      } finally {
        setLanguage('en');
      }
      // Every command block of the English sheet is in the others unchanged but for comments: the learner runs the same commands.
      // Comments (`# ...` to the end of a line) are prose, written in each language.
      const blocks = (text: string) => [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1].replace(/\s+#[^\n]*/g, ''));
      assert.deepEqual(blocks(sheet), blocks(fs.readFileSync(path.join(LAB_DIR, `${name}.en.md`), 'utf8')), `${lang}: the commands`);
    }
  });
}

test('a check fails in the chosen language; step 08 recognises notes in any language whatever the chosen one', () => {
  const notes = {
    ko: '클라이언트는 타임아웃 뒤에 재시도할 수밖에 없다.\n키는 모든 인스턴스가 보는 데이터베이스에 저장한다.\n같은 키에 다른 본문이 오면 422로 거절한다.\n',
    zh: '客户端超时之后只能重试这个请求。\n幂等键要存储在所有实例共享的数据库里。\n同一个键配上不同的正文必须用 422 拒绝。\n',
    en: 'Clients retry because a timeout hides what happened.\nThe keys are stored in the database every instance shares.\nA different body under one key is refused with 422.\n',
  };
  const step08 = STEPS.find((s) => s.id === '08');
  assert.ok(step08?.file);
  for (const lang of LANGUAGES) {
    setLanguage(lang);
    try {
      for (const text of Object.values(notes)) assert.doesNotThrow(() => step08.file?.check(text, { warn: () => {} }), `${lang}`);
      assert.throws(
        () => step08.file?.check('one\n', { warn: () => {} }),
        (err: unknown) => err instanceof CheckFailed && err.message === t('step.08.tooShort', { min: 3, count: 0 }),
      );
    } finally {
      setLanguage('en');
    }
  }
});

test('--lang ko prints Korean: start lays the Korean sheet and the workspace keeps the language; show, hint and check follow it', async () => {
  const tmp = tempDir();
  try {
    const show = await runCli(['show', '03', '--lang', 'ko'], { cwd: tmp.dir });
    assert.equal(show.exitCode, 0);
    assert.match(show.stdout, /^## 03 · 키 없는 요청 거절하기/);
    const hint = await runCli(['hint', '03', '--lang', 'ko'], { cwd: tmp.dir });
    assert.match(hint.stdout, /^03 nokey 힌트 1\/3: handle_pay 맨 앞/);
    const unknown = await runCli(['show', '42', '--lang=ko'], { cwd: tmp.dir });
    assert.equal(unknown.exitCode, 2);
    assert.match(unknown.stderr, /"42" 단계는 없습니다/);
  } finally {
    tmp.remove();
  }
  const ws = fixtureWorkspace('starter');
  try {
    const check = await runCli(['check', 'replay', '--lang', 'ko', '--dir', ws.dir]);
    assert.equal(check.exitCode, 1);
    assert.match(check.stdout, /^✗ 02 replay {2}저장해 둔 응답 돌려주기/m);
    assert.match(check.stdout, /재시도는 저장된 첫 응답을 그대로 받아야 합니다/);
    assert.match(check.stdout, /왜 중요한가: /);
    assert.match(check.stdout, /· payment_id: 처음엔 1, 다음엔 \d+/);
    assert.match(check.stdout, /보낸 요청과 받은 응답:/);
    assert.match(check.stdout, /\$ curl -sS -i -X POST http:\/\/127\.0\.0\.1:8000\/pay /);
    assert.match(check.stdout, /막혔나요\? idem-lab hint 02/);
    assert.match(check.stdout, /1개 단계 중 0개 통과\. 남은 단계: 02\./);
  } finally {
    ws.remove();
  }
});

test('LANG=zh_CN.UTF-8 prints Chinese; a workspace started in Korean stays Korean; --lang overrides it', async () => {
  const ws = fixtureWorkspace('starter');
  try {
    const zh = await runCli(['check', '03', '--dir', ws.dir], { env: { LANG: 'zh_CN.UTF-8' } });
    assert.equal(zh.exitCode, 1);
    assert.match(zh.stdout, /^✗ 03 nokey {2}拒绝没有键的请求/m);
    assert.match(zh.stdout, /没有 Idempotency-Key 请求头的请求必须被 400 拒绝。/);
    assert.match(zh.stdout, /进度：共 8 步，通过 0 步。/);
    const status = await runCli(['status', '--dir', ws.dir], { env: { LC_ALL: 'zh_CN.UTF-8', LANG: 'en_US.UTF-8' } });
    assert.match(status.stdout, /服务器：未运行/);
    assert.match(status.stdout, /03 nokey +✗ 未通过 {2}上次检查 /);
    const list = await runCli(['--dir', ws.dir], { env: { LANG: 'zh_CN.UTF-8' } });
    assert.equal(list.exitCode, 0);
    assert.match(list.stdout, /^步骤：\n {2}· 01 duplicate 复现重复扣款/);
  } finally {
    ws.remove();
  }
  const tmp = tempDir();
  try {
    const { freePort } = await import('../grader/server.js');
    const start = await runCli(['start', '--lang', 'ko', '--port', String(await freePort())], { cwd: tmp.dir });
    assert.equal(start.exitCode, 0, start.stdout + start.stderr);
    assert.match(start.stdout, /결제 서버를 시작했습니다/);
    assert.match(fs.readFileSync(path.join(tmp.dir, 'LAB.md'), 'utf8'), /^# 두 번 눌러도 결제는 한 번/);
    assert.equal(readState(tmp.dir).lang, 'ko');
    const status = await runCli(['status'], { cwd: tmp.dir, env: { LANG: 'zh_CN.UTF-8' } });
    assert.match(status.stdout, /서버: 실행 중, pid \d+/, 'the workspace setting wins over LANG');
    const english = await runCli(['show', '01', '--lang', 'en'], { cwd: tmp.dir });
    assert.match(english.stdout, /^## 01 · Reproduce the duplicate charge/, '--lang wins over the workspace');
    const fr = await runCli(['show', '01', '--lang', 'fr'], { cwd: tmp.dir });
    assert.equal(fr.exitCode, 2, 'an unknown --lang is a usage error');
    assert.match(fr.stderr, /"fr" 언어로 된 실습은 없습니다\. en, ko, zh 중에서 고르세요/);
    assert.equal(fr.stdout, '', 'nothing runs in a language not asked for');
  } finally {
    stopRecorded(tmp.dir);
    tmp.remove();
  }
});
