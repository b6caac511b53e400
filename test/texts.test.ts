/**
 * Korean and Chinese read as written in those languages: no English sentence and no
 * Korean particle template, neither in any message of the catalogs (all keys, also those
 * added later: the scan is driven by the catalogs) nor in what every command prints,
 * commander's own errors and help included.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort } from '../grader/server.js';
import { brokenParagraphs, englishSentences, particleTemplates, quoteProblems, spaceAfterFullStop, variableParticles } from './language-scan.js';
import { CheckFailed, inPart } from '../grader/failure.js';
import { formatResult } from '../grader/reporters/human.js';
import { CATALOGS, language, setLanguage, t, type MessageKey } from '../i18n/index.js';
import { LAB_DIR } from '../lab/paths.js';
import { Chalk } from 'chalk';
import { CLI, fixtureWorkspace, runCli, serversUnder, stopRecorded, tempDir } from './support.js';
import { execa } from 'execa';

test('the scanners find what they look for, and pass names, flags and lists', () => {
  assert.deepEqual(englishSentences('연결 실패: connection to the server refused'), ['connection to the server refused']);
  assert.deepEqual(englishSentences('idem-lab show N은 단계를 보여 주고, idem-lab check 05 명령, --force, json, junit, tap, github'), []);
  assert.deepEqual(englishSentences('Usage: idem-lab [options] [command]'), []);
  assert.deepEqual(englishSentences('HTTP 500 Internal Server Error'), []);
  assert.deepEqual(englishSentences('$ curl -sS -i http://x/pay\n{"error": "an Idempotency-Key header is required"}', { transcripts: true }), []);
  assert.deepEqual(particleTemplates('{files}을(를) 놓았습니다. {using}(으)로'), ['을(를)', '(으)']);
  assert.deepEqual(variableParticles('"{step}"라는 단계, {file}을 읽고, {n}개 단계, {id}단계, 응답(HTTP {first})을 받고'), ['{step}"라는', '{file}을']);
  assert.deepEqual(spaceAfterFullStop('共 1 步，通过 0 步。 待完成'), ['。 待']);
  assert.deepEqual(spaceAfterFullStop('重启之后： 响应'), ['： 响'], 'a full-width colon followed by a space');
  assert.deepEqual(quoteProblems('zh', '没有"{step}"这一步，"先查再插"，\'{command}\'，“server” 必须'), ['"{step}"', '"先查再插"', "'{command}'", '“server”']);
  assert.deepEqual(quoteProblems('zh', '“先查再插”，“{value}”，"status": "{status}"，{"07": "hidden"}，"race" 这一行，`"不看"`'), []);
  assert.deepEqual(quoteProblems('ko', '“재시도”와 "재시도"'), ['“', '”']);
  assert.deepEqual(brokenParagraphs('# 标题\n\n第一句在这里\n断开了。\n\n- 列表\n  接着\n\n```sh\necho a\necho b\n```\n| a |\n| b |\n'), ['3: 第一句在这里', '6: - 列表']);
});

for (const lang of ['ko', 'zh'] as const) {
  test(`every ${lang} catalog message: no English sentence${lang === 'ko' ? ', no particle template, no particle glued to a placeholder' : ', no space after a full-width stop'}`, () => {
    const problems: string[] = [];
    for (const [key, message] of Object.entries(CATALOGS[lang] as Record<string, string>)) {
      for (const s of englishSentences(message)) problems.push(`${key}: English "${s}"`);
      for (const s of particleTemplates(message)) problems.push(`${key}: particle template ${s}`);
      if (lang === 'ko') for (const s of variableParticles(message)) problems.push(`${key}: particle after a placeholder ${s}`);
      if (lang === 'zh') for (const s of spaceAfterFullStop(message)) problems.push(`${key}: space after "${s}"`);
      for (const s of quoteProblems(lang, message)) problems.push(`${key}: quoted ${s}`);
    }
    assert.deepEqual(problems, []);
  });

  test(`the ${lang} sheets: quotes as ${lang} writes them, no paragraph broken across lines`, () => {
    const problems: string[] = [];
    for (const name of ['LAB', 'ADVANCED']) {
      const sheet = fs.readFileSync(path.join(LAB_DIR, `${name}.${lang}.md`), 'utf8');
      const prose = sheet.replace(/^```[\s\S]*?^```$/gm, '');
      for (const s of quoteProblems(lang, prose)) problems.push(`${name}.${lang}.md: quoted ${s}`);
      if (lang === 'zh') for (const s of spaceAfterFullStop(prose)) problems.push(`${name}.${lang}.md: space after "${s}"`);
      for (const s of brokenParagraphs(sheet)) problems.push(`${name}.${lang}.md line ${s}`);
    }
    assert.deepEqual(problems, []);
  });
}

test('a failing Chinese verdict, named by its part, reads without a space after the part\'s full-width colon', async () => {
  const was = language();
  setLanguage('zh');
  try {
    const parts = Object.keys(CATALOGS.zh).filter((key) => /\.part\./.test(key)) as MessageKey[];
    assert.ok(parts.length >= 10, `parts found: ${parts.join(', ')}`);
    const problems: string[] = [];
    for (const key of parts) {
      const failed = (async () => {
        await inPart(t(key, { ms: 300, lock: 1, n: 1, count: 3 }), async () => {
          throw new CheckFailed(t('check.noAnswer', { request: 'POST /pay', error: '连接被拒绝' }), t('check.noPayment.why'));
        });
      })();
      const err = (await failed.then(() => undefined, (e: unknown) => e)) as CheckFailed;
      assert.ok(err instanceof CheckFailed, key);
      const report = formatResult(
        { id: '06', slug: 'persist', title: '持久化', status: 'fail', message: err.message, why: err.why, details: [], warnings: [], exchanges: [], ms: 5 } as Parameters<typeof formatResult>[0],
        new Chalk({ level: 0 }),
      );
      assert.ok(report.includes(t(key, { ms: 300, lock: 1, n: 1, count: 3 }).slice(0, -1)), `${key}: its part is named`);
      for (const s of spaceAfterFullStop(report)) problems.push(`${key}: space after "${s}"`);
    }
    assert.deepEqual(problems, []);
  } finally {
    setLanguage(was);
  }
});

/** Everything a learner can type, as argument lists; run in a workspace whose server is started. */
function commandLines(port: number): string[][] {
  const help = ['start', 'stop', 'restart', 'status', 'probe', 'ledger', 'show', 'hint', 'solution', 'reset', 'restore', 'check', 'grade', 'ci', 'watch', 'menu', 'chaos'].map((c) => [c, '--help']);
  return [
    ['start', '--port', String(port)],
    ['--help'],
    ...help,
    ['help', 'check'],
    ['status'],
    ['show'],
    ['show', '03'],
    ['hint'],
    ['hint', '05'],
    ['hint', '05', '--reset'],
    ['probe', 'k1'],
    ['probe'],
    ['ledger'],
    ['check', '01'],
    ['check', '02'],
    ['check', '03', '04'],
    ['chaos', '--payments', '4', '--seed', '42'],
    ['chaos', '--payments', '3', '--seed', '42', '--no-key'],
    ['chaos', '--loss', '2'],
    ['solution', '02'],
    ['reset', '01'],
    ['reset', '02'],
    ['start', '--force'],
    ['restore'],
    ['restore', 'nope'],
    ['menu'],
    [],
    ['nope'],
    ['chek'],
    ['show', '1', '2'],
    ['show', '42'],
    ['start', '--port', 'abc'],
    ['probe', '--port'],
    ['hint', '--bogus'],
    ['grade'],
    ['ci'],
    ['restart'],
    ['stop'],
    ['stop'],
    ['probe', 'k1'],
    ['status'],
  ];
}

/** What a scan of one command's output found wrong, each line naming the command. */
function scan(lang: 'ko' | 'zh', args: string[], output: string): string[] {
  const where = `idem-lab ${args.join(' ')}`;
  const problems = englishSentences(output, { transcripts: true }).map((s) => `${where}: English "${s}"`);
  for (const s of particleTemplates(output)) problems.push(`${where}: particle template ${s}`);
  if (lang === 'zh') for (const s of spaceAfterFullStop(output)) problems.push(`${where}: space after "${s}"`);
  return problems;
}

for (const lang of ['ko', 'zh'] as const) {
  test(`every command in ${lang}, its errors, commander's errors and help: no English sentence, no particle template`, { timeout: 600_000 }, async () => {
    const tmp = tempDir();
    const problems: string[] = [];
    try {
      const env = { LANG: lang === 'ko' ? 'ko_KR.UTF-8' : 'zh_CN.UTF-8', PATH: '/usr/bin:/bin' };
      let ran = 0;
      for (const args of commandLines(await freePort())) {
        const run = await runCli(args, { cwd: tmp.dir, env });
        problems.push(...scan(lang, args, run.stdout + run.stderr));
        assert.ok(run.stdout + run.stderr !== '', `idem-lab ${args.join(' ')} printed something`);
        ran++;
      }
      assert.ok(ran > 40);
      // probe.sh, without a server, in the workspace's language.
      const probe = await execa('sh', ['probe.sh', 'k1'], { cwd: tmp.dir, reject: false, env: { PORT: String(await freePort()) } });
      assert.equal(probe.exitCode, 1);
      assert.match(probe.stdout, lang === 'ko' ? /응답 없음: 연결이 거부되었습니다/ : /没有响应：连接被拒绝/);
      problems.push(...scan(lang, ['(probe.sh)'], probe.stdout));
      // Configuration errors: an idem-lab.json that is not JSON, a limit that is not a number.
      fs.writeFileSync(path.join(tmp.dir, 'idem-lab.json'), '{"server": [python3}');
      const config = await runCli(['check', '02'], { cwd: tmp.dir, env });
      assert.equal(config.exitCode, 2);
      problems.push(...scan(lang, ['check 02 (idem-lab.json broken)'], config.stderr));
      fs.rmSync(path.join(tmp.dir, 'idem-lab.json'));
      const limit = await runCli(['check', '02'], { cwd: tmp.dir, env: { ...env, IDEM_LAB_REQUEST_TIMEOUT_MS: 'soon' } });
      assert.equal(limit.exitCode, 2);
      problems.push(...scan(lang, ['check 02 (IDEM_LAB_REQUEST_TIMEOUT_MS=soon)'], limit.stderr));
    } finally {
      stopRecorded(tmp.dir);
      tmp.remove();
    }
    // A workspace where every step passes: the end-of-lab summary and the reference answers.
    const ws = fixtureWorkspace('reference');
    try {
      const env = { LANG: lang === 'ko' ? 'ko_KR.UTF-8' : 'zh_CN.UTF-8' };
      const check = await runCli(['check'], { cwd: ws.dir, env, timeoutMs: 300_000 });
      assert.equal(check.exitCode, 0, check.stdout + check.stderr);
      problems.push(...scan(lang, ['check'], check.stdout));
      for (const id of ['01', '02', '05', '07', '08']) {
        const solution = await runCli(['solution', id], { cwd: ws.dir, env });
        assert.equal(solution.exitCode, 0);
        // The reference code is code; what the tool says about it is scanned.
        problems.push(...scan(lang, ['solution', id], solution.stdout.split('\n\n')[0]));
      }
    } finally {
      ws.remove();
    }
    assert.deepEqual(serversUnder(path.dirname(CLI)), []);
    assert.deepEqual(problems, []);
  });
}
