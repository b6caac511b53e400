/**
 * The numbers a sheet quotes are the numbers its step's check uses: each quoted number is
 * read out of the sheet, in every language, and compared with the step's own constant, so
 * that a check that changes (05 went from three rounds to five) fails this test until the
 * sheets say so too.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RACE_ROUNDS } from '../steps/basic/05-race.js';
import { RACE_SIZE } from '../grader/race.js';
import { SPLIT_DB_MS } from '../steps/basic/06-persist.js';
import { checkTimeouts } from '../grader/http.js';
import { LAB_DIR } from '../lab/paths.js';
import { sheetSection } from '../lab/sheet.js';
import { CRASH_LOCK_S, RECOVERY_BOUND_MS, RETRY_DELAY_MS } from '../steps/advanced/12-crash.js';

/** A number a sheet quotes: the step, what it is, the value the check uses, and where the sheet says it in each language (the first group is the number). */
const QUOTED: Array<{ sheet?: 'LAB' | 'ADVANCED'; step: string; what: string; value: number; en: RegExp; ko: RegExp; zh: RegExp }> = [
  // The three plain rounds, the round with the database held and the slow ones (05's pass message counts RACE_ROUNDS + 2).
  { step: '05', what: 'rounds of the live check', value: RACE_ROUNDS + 2, en: /Live: (\d+) rounds of/, ko: /동시 요청 \d+개를 (\d+)번 보냅니다/, zh: /实时检查进行 (\d+) 轮/ },
  { step: '05', what: 'simultaneous requests per round', value: RACE_SIZE, en: /rounds of (\d+) simultaneous requests/, ko: /동시 요청 (\d+)개를/, zh: /同时发送 (\d+) 个\s*请求/ },
  { step: '05', what: 'seconds each request has to be answered', value: checkTimeouts().answerMs / 1000, en: /answer every request within (\d+) seconds/, ko: /모든 요청은 (\d+)초 안에/, zh: /在 (\d+) 秒内得到/ },
  { step: '06', what: 'simultaneous requests across instances', value: RACE_SIZE, en: /3\. A race across instances: (\d+) simultaneous/, ko: /3\. 인스턴스 사이의 경쟁: .*동시 요청 (\d+)개/, zh: /3\. 实例之间的竞争：.*的 (\d+) 个并发请求/ },
  { step: '06', what: 'ms each statement of the slow database is late', value: SPLIT_DB_MS, en: /every SQL statement answers (\d+) ms late/, ko: /SQL 문마다 (\d+) ms 늦게/, zh: /每条 SQL 语句都晚 (\d+) 毫秒/ },
  // The advanced sheet's step 12 once said IDEM_LOCK_S=1 while the check ran with 2.
  { sheet: 'ADVANCED', step: '12', what: 'IDEM_LOCK_S of the crashed servers', value: CRASH_LOCK_S, en: /With `IDEM_LOCK_S=(\d+)`/, ko: /`IDEM_LOCK_S=(\d+)`로 두고/, zh: /在 `IDEM_LOCK_S=(\d+)` 下/ },
  { sheet: 'ADVANCED', step: '12', what: 'seconds beyond IDEM_LOCK_S the retries have', value: RECOVERY_BOUND_MS / 1000, en: /`IDEM_LOCK_S` plus (\d+) s/, ko: /`IDEM_LOCK_S`에 (\d+)초를 더한/, zh: /`IDEM_LOCK_S` 加 (\d+) 秒/ },
  { sheet: 'ADVANCED', step: '12', what: 'seconds between two retries', value: RETRY_DELAY_MS / 1000, en: /every ([\d.]+) s/, ko: /([\d.]+)초마다 다시/, zh: /每 ([\d.]+) 秒重试/ },
];

test('the numbers each sheet quotes are the constants its step checks with, in every language', () => {
  for (const lang of ['en', 'ko', 'zh'] as const) {
    for (const q of QUOTED) {
      const file = `${q.sheet ?? 'LAB'}.${lang}.md`;
      const section = sheetSection(fs.readFileSync(path.join(LAB_DIR, file), 'utf8'), q.step) ?? '';
      const found = q[lang].exec(section);
      assert.ok(found, `${file}, step ${q.step}: where it quotes the ${q.what} (${q[lang]})`);
      assert.equal(Number(found[1]), q.value, `${file}, step ${q.step}: the ${q.what}`);
    }
  }
});
