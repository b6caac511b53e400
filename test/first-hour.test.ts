/**
 * The learner's first hour, driven as a person would: the README's first command on a
 * fresh clone with a fresh HOME whose npm prefix is in it; commands from a subfolder; a
 * mistaken `start --force` undone with the command its output names; reset, status in the
 * local time zone, reference answers after a pass, the end-of-lab summary; repeated
 * exchanges and tracebacks shown once.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { PACKAGE_ROOT, LAB_DIR } from '../lab/paths.js';
import { readState, writeState } from '../lab/workspace.js';
import { freePort } from '../grader/server.js';
import { HANDLE_PAY_END, HANDLE_PAY_START, buildWorkspace } from '../fixtures/build.js';
import { STEPS } from '../steps/index.js';
import { collapseServerOutput, groupExchanges } from '../grader/reporters/human.js';
import { withTheirHistory } from '../grader/engine.js';
import { CheckFailed, ServerStartFailed, withNote } from '../grader/failure.js';
import type { Exchange } from '../grader/types.js';
import { answerFiles } from '../bin/commands.js';
import { fixtureWorkspace, runCli, serversUnder, stopRecorded, tempDir } from './support.js';

/** The README's first command: the first line of its first sh block, without the comment. */
function readmeFirstCommand(): string {
  const readme = fs.readFileSync(path.join(PACKAGE_ROOT, 'README.md'), 'utf8');
  const block = /```sh\n([\s\S]*?)```/.exec(readme);
  assert.ok(block, 'the README starts with a sh block');
  const lines = block[1].trim().split('\n');
  assert.equal(lines.length, 2, 'two commands at the top: the lab and the tests');
  assert.match(lines[1], /^npm test\b/);
  return lines[0].replace(/\s+#.*$/, '');
}

test("the README's first command, on a fresh clone with a fresh HOME whose npm prefix is in it, makes idem-lab work inside the workspace as the sheet writes it", { timeout: 300_000 }, async () => {
  const first = readmeFirstCommand();
  assert.match(first, /^npm ci && npm link && node dist\/bin\/idem-lab\.js start --dir ~\/idem-lab$/);
  const tmp = tempDir('idem-lab-clone-');
  const home = path.join(tmp.dir, 'home');
  const clone = path.join(tmp.dir, 'idem-lab');
  try {
    fs.mkdirSync(home);
    // A user-level npm prefix, as `npm config set prefix ~/.npm-global` writes it.
    fs.writeFileSync(path.join(home, '.npmrc'), `prefix=${path.join(home, '.npm-global')}\n`);
    await execa('git', ['clone', '--quiet', '--no-hardlinks', PACKAGE_ROOT, clone]);
    // The committed tree only: bring the working copy of the files under test along, so the
    // test grades what is being changed, not only what was committed.
    for (const file of ['README.md']) fs.copyFileSync(path.join(PACKAGE_ROOT, file), path.join(clone, file));
    // `npm ci` would fetch from the registry; tests use loopback only, so the same
    // node_modules comes from this checkout (what npm ci would lay from package-lock.json).
    await execa('cp', ['-a', path.join(PACKAGE_ROOT, 'node_modules'), clone]);
    const rest = first.replace(/^npm ci && /, '');
    const env = {
      HOME: home,
      PATH: `${path.join(home, '.npm-global', 'bin')}:/usr/local/bin:/usr/bin:/bin`,
      npm_config_offline: 'true',
      npm_config_update_notifier: 'false',
      npm_config_fund: 'false',
      npm_config_audit: 'false',
      LANG: 'C.UTF-8',
      NO_COLOR: '1',
    };
    const shell = (line: string, cwd: string) => execa('sh', ['-c', line], { cwd, env, reject: false, extendEnv: false, timeout: 240_000 });
    const run = await shell(rest, clone);
    assert.equal(run.exitCode, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /Started the payment server \(pid \d+\)/);
    assert.doesNotMatch(run.stdout, /not on your PATH/, 'start finds idem-lab on PATH');
    assert.ok(fs.existsSync(path.join(home, '.npm-global', 'bin', 'idem-lab')), 'linked into the user prefix');

    // In the workspace and in a folder under it, as the sheet writes it.
    const workspace = path.join(home, 'idem-lab');
    fs.mkdirSync(path.join(workspace, 'notes'));
    const check = await shell('idem-lab check 01', path.join(workspace, 'notes'));
    assert.equal(check.exitCode, 1, check.stdout + check.stderr);
    assert.match(check.stdout, /01-duplicate\.txt is missing: write it in the workspace \(/);
    assert.doesNotMatch(check.stderr, /not found/);

    // Without the prefix's bin folder on PATH, start prints the exact line that fixes it.
    const hidden = await execa('node', [path.join(clone, 'dist', 'bin', 'idem-lab.js'), 'start'], { cwd: workspace, env: { ...env, PATH: '/usr/local/bin:/usr/bin:/bin' }, extendEnv: false, reject: false });
    assert.match(hidden.stdout, new RegExp(`not on your PATH.*Run: export PATH="${path.join(home, '.npm-global', 'bin').replace(/[.]/g, '\\.')}:\\$PATH"`));
    const fixed = await shell(`export PATH="${path.join(home, '.npm-global', 'bin')}:$PATH" && idem-lab status`, workspace);
    assert.match(fixed.stdout, /Server: running/, 'the printed fix works');
    const stop = await shell('idem-lab stop', workspace);
    assert.equal(stop.exitCode, 0);
  } finally {
    stopRecorded(path.join(home, 'idem-lab'));
    tmp.remove();
  }
});

test('start without idem-lab anywhere on PATH prints npm link in this folder as the fix', async () => {
  const tmp = tempDir();
  try {
    const start = await runCli(['start', '--port', String(await freePort())], { cwd: tmp.dir, env: { PATH: '/usr/bin:/bin' } });
    assert.equal(start.exitCode, 0);
    assert.match(start.stdout, new RegExp(`The idem-lab command is not on your PATH, so every \`idem-lab\` command of the lab sheet \\(\`idem-lab check 02\`, \`idem-lab hint 02\` \\.\\.\\.\\) would fail\\. Run: .*cd ${PACKAGE_ROOT.replace(/[.]/g, '\\.')} && npm link`));
  } finally {
    stopRecorded(tmp.dir);
    tmp.remove();
  }
});

test('every command works from a folder under the workspace; show and hint without a step mean the current step', async () => {
  const ws = fixtureWorkspace('starter', {});
  try {
    const sub = path.join(ws.dir, 'a', 'b');
    fs.mkdirSync(sub, { recursive: true });
    const show = await runCli(['show'], { cwd: sub });
    assert.equal(show.exitCode, 0, show.stderr);
    assert.match(show.stdout, /^## 01 · Reproduce the duplicate charge/);
    const hint = await runCli(['hint'], { cwd: sub });
    assert.match(hint.stdout, /^Hint 1 of 2 for 01 duplicate: /);
    fs.writeFileSync(path.join(ws.dir, '01-duplicate.txt'), fs.readFileSync(path.join(LAB_DIR, 'answers', '01-duplicate.txt')));
    const check = await runCli(['check', '01'], { cwd: sub });
    assert.equal(check.exitCode, 0, check.stdout);
    assert.equal(readState(ws.dir).steps?.['01']?.status, 'pass', 'the verdict is saved in the workspace, not in the subfolder');
    assert.ok(!fs.existsSync(path.join(sub, '.idem-lab')));
    const next = await runCli(['show'], { cwd: sub });
    assert.match(next.stdout, /^## 02 · Replay the stored response/, 'the current step moved on');
    const hint2 = await runCli(['hint'], { cwd: sub });
    assert.match(hint2.stdout, /^Hint 1 of 3 for 02 replay: /);
    const status = await runCli(['status'], { cwd: sub, env: { TZ: 'Asia/Seoul' } });
    assert.match(status.stdout, /01 duplicate ✓ passed {2}last passed \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+09:00/, 'times in the local zone');
    const utc = await runCli(['status'], { cwd: sub, env: { TZ: 'UTC' } });
    const [, seoulHour] = /last passed \S+ (\d\d)/.exec(status.stdout) ?? [];
    const [, utcHour] = /last passed \S+ (\d\d)/.exec(utc.stdout) ?? [];
    assert.equal((Number(utcHour) + 9) % 24, Number(seoulHour));
  } finally {
    ws.remove();
  }
});

test('a mistaken start --force loses nothing: the output names idem-lab restore, which puts the work back (twice in a row, the same work); reset N keeps a copy too', async () => {
  const tmp = tempDir();
  const port = String(await freePort());
  try {
    assert.equal((await runCli(['start', '--port', port], { cwd: tmp.dir })).exitCode, 0);
    const server = path.join(tmp.dir, 'server.py');
    const mine = fs.readFileSync(server, 'utf8').replace('# --- handle_pay: the part you edit starts here ---', '# --- handle_pay: the part you edit starts here ---\n# my work');
    fs.writeFileSync(server, mine);
    fs.writeFileSync(path.join(tmp.dir, 'LAB.md'), 'my notes in the sheet\n');
    const force = await runCli(['start', '--force'], { cwd: tmp.dir });
    assert.equal(force.exitCode, 0);
    const said = /A copy of what was replaced is in (\.idem-lab\/backup\/\S+); idem-lab restore puts it back\./.exec(force.stdout);
    assert.ok(said, force.stdout);
    assert.equal(fs.readFileSync(path.join(tmp.dir, said[1], 'server.py'), 'utf8'), mine);
    assert.equal(fs.readFileSync(path.join(tmp.dir, said[1], 'LAB.md'), 'utf8'), 'my notes in the sheet\n');
    assert.notEqual(fs.readFileSync(server, 'utf8'), mine, '--force replaced it');

    const restore = await runCli(['restore'], { cwd: tmp.dir });
    assert.equal(restore.exitCode, 0, restore.stderr);
    assert.match(restore.stdout, /Put back LAB\.md, server\.py from \.idem-lab\/backup\//);
    assert.equal(fs.readFileSync(server, 'utf8'), mine, 'the work is back');
    assert.equal(fs.readFileSync(path.join(tmp.dir, 'LAB.md'), 'utf8'), 'my notes in the sheet\n');
    // Run twice, restore puts back the same backup: the second run changes nothing and says so (it once undid the first).
    const undo = /What the restore replaced is in \S+; idem-lab restore (\S+) puts it back/.exec(restore.stdout);
    assert.ok(undo, restore.stdout);
    const again = await runCli(['restore'], { cwd: tmp.dir });
    assert.equal(again.exitCode, 0, again.stderr);
    assert.match(again.stdout, /LAB\.md, server\.py already read as in \.idem-lab\/backup\/\S+: nothing to put back\./);
    assert.equal(fs.readFileSync(server, 'utf8'), mine, 'the work is still there');
    // The restore itself is undone by naming its backup.
    assert.equal((await runCli(['restore', undo[1]], { cwd: tmp.dir })).exitCode, 0);
    assert.notEqual(fs.readFileSync(server, 'utf8'), mine, 'restore NAME undid the restore');
    assert.equal((await runCli(['restore'], { cwd: tmp.dir })).exitCode, 0);
    assert.equal(fs.readFileSync(server, 'utf8'), mine, 'and restore alone puts the work back again');

    const reset = await runCli(['reset', '05'], { cwd: tmp.dir });
    assert.match(reset.stdout, /server\.py is the starter again, the starting point of step 05/);
    assert.equal(fs.readFileSync(server, 'utf8'), fs.readFileSync(path.join(LAB_DIR, 'server.py'), 'utf8'));
    const copy = /A copy of what was replaced is in (\S+);/.exec(reset.stdout);
    assert.ok(copy);
    assert.equal(fs.readFileSync(path.join(tmp.dir, copy[1], 'server.py'), 'utf8'), mine);

    fs.writeFileSync(path.join(tmp.dir, '07-retry.md'), 'my table\n');
    const reset07 = await runCli(['reset', 'retry'], { cwd: tmp.dir });
    assert.match(reset07.stdout, /Removed 07-retry\.md: step 07 starts again from no file\./);
    assert.ok(!fs.existsSync(path.join(tmp.dir, '07-retry.md')));
    assert.equal((await runCli(['restore'], { cwd: tmp.dir })).exitCode, 0);
    assert.equal(fs.readFileSync(path.join(tmp.dir, '07-retry.md'), 'utf8'), 'my table\n');

    const none = await runCli(['restore', 'no-such-backup'], { cwd: tmp.dir });
    assert.equal(none.exitCode, 2);
    assert.match(none.stderr, /there is no backup "no-such-backup"; the backups are /);
  } finally {
    stopRecorded(tmp.dir);
    tmp.remove();
  }
  const empty = tempDir();
  try {
    fs.writeFileSync(path.join(empty.dir, 'server.py'), '');
    const nothing = await runCli(['restore'], { cwd: empty.dir });
    assert.equal(nothing.exitCode, 2);
    assert.match(nothing.stderr, /there is no backup in \.idem-lab\/backup to restore/);
  } finally {
    empty.remove();
  }
});

test('the reference answers in lab/answers pass their steps: each file its file check, each handle_pay its live steps', { timeout: 300_000 }, async () => {
  for (const step of STEPS) {
    const answer = answerFiles(step, 'en');
    if (step.file) {
      assert.ok(answer.file, `${step.id} has an answer file`);
      assert.doesNotThrow(() => step.file?.check(fs.readFileSync(answer.file ?? '', 'utf8'), { warn: () => {} }), step.id);
      for (const lang of ['ko', 'zh'] as const) {
        const other = answerFiles(step, lang).file;
        assert.ok(other);
        assert.doesNotThrow(() => step.file?.check(fs.readFileSync(other, 'utf8'), { warn: () => {} }), `${step.id} ${lang}`);
      }
    }
    if (!step.live) continue;
    assert.ok(answer.server, `${step.id} has a handle_pay`);
    const tmp = tempDir();
    try {
      buildWorkspace(tmp.dir, 'starter', {});
      const starter = fs.readFileSync(path.join(tmp.dir, 'server.py'), 'utf8');
      const from = starter.indexOf(HANDLE_PAY_START) + HANDLE_PAY_START.length;
      const to = starter.indexOf(HANDLE_PAY_END);
      fs.writeFileSync(path.join(tmp.dir, 'server.py'), `${starter.slice(0, from)}\n${fs.readFileSync(answer.server, 'utf8')}\n\n${starter.slice(to)}`);
      // The step and the ones before it; answer files stand in for the file checks.
      const upTo = STEPS.filter((s) => s.live && s.id <= step.id);
      for (const s of upTo) if (s.file) fs.copyFileSync(answerFiles(s, 'en').file ?? '', path.join(tmp.dir, s.file.name));
      const run = await runCli(['check', ...upTo.map((s) => s.id)], { cwd: tmp.dir, timeoutMs: 240_000 });
      assert.equal(run.exitCode, 0, `${step.id}: ${run.stdout}`);
    } finally {
      tmp.remove();
    }
  }
});

test('solution N opens only after N passes; when the last step passes, check prints the end-of-lab summary', { timeout: 300_000 }, async () => {
  const ws = fixtureWorkspace('reference');
  try {
    const before = await runCli(['solution', '05'], { cwd: ws.dir });
    assert.equal(before.exitCode, 2);
    assert.match(before.stderr, /step 05 does not pass yet: its reference answer opens once it does \(idem-lab check 05\)/);
    writeState(ws.dir, { ...readState(ws.dir), startedAt: new Date(Date.now() - 75 * 60_000).toISOString() });
    const some = await runCli(['check', '01', '02', '03', '04', '07', '08'], { cwd: ws.dir, timeoutMs: 240_000 });
    assert.equal(some.exitCode, 0);
    assert.match(some.stdout, /You may now read the reference answer of each step passed: 01, 02, 03, 04, 07, 08; idem-lab solution 08 shows one\./);
    assert.doesNotMatch(some.stdout, /The lab is done/);
    const rest = await runCli(['check', '05', '06'], { cwd: ws.dir, timeoutMs: 240_000 });
    assert.equal(rest.exitCode, 0, rest.stdout);
    assert.match(rest.stdout, /The lab is done: all 8 steps pass\.\n\nWhat each step proved:\n {2}✓ 01 duplicate a retry with the same key charged twice/);
    assert.match(rest.stdout, / {2}✓ 08 notes {5}you can say the three ideas/);
    assert.match(rest.stdout, /It took 1 h 1[56] min, from the first start \(/);
    assert.match(rest.stdout, new RegExp(`Your answers are in ${ws.dir.replace(/[.]/g, '\\.')}: server\\.py, 01-duplicate\\.txt, 03-nokey\\.txt`));
    const solution = await runCli(['solution', '05'], { cwd: ws.dir });
    assert.equal(solution.exitCode, 0);
    assert.match(solution.stdout, /^A reference answer for 05 race\nClaim the key with one INSERT into idem before charging/);
    assert.match(solution.stdout, /def handle_pay\(key, payload\):/);
    assert.match(solution.stdout, /What 05-race\.txt can show:\n\n\$ for i in \$\(seq 10\)/);
    const ko = await runCli(['solution', '08', '--lang', 'ko'], { cwd: ws.dir });
    assert.match(ko.stdout, /타임아웃이 나면 클라이언트는/);
    const again = await runCli(['check', '08'], { cwd: ws.dir });
    assert.doesNotMatch(again.stdout, /The lab is done/, 'the summary comes once, when the last step passes');
  } finally {
    ws.remove();
  }
});

test('identical exchanges are shown once with a count; a repeated traceback once, as lines', async () => {
  const base: Exchange = { server: 'A', port: 1, method: 'POST', path: '/pay', key: 'r', requestBody: '{}', status: 201, responseBody: '{"payment_id": 1}', ms: 1 };
  const failed: Exchange = { ...base, status: 500, responseBody: '{"error": "internal error: RuntimeError"}' };
  const grouped = groupExchanges([failed, base, failed, { ...base, replayed: 'true' }, failed, failed, { ...base, key: 'other' }, failed]);
  assert.deepEqual(grouped.map((g) => [g.exchange.status, g.exchange.key, g.count]), [[500, 'r', 4], [201, 'r', 1], [201, 'r', 1], [201, 'other', 1], [500, 'r', 1]]);
  const traceback = ['Traceback (most recent call last):', '  File "server.py", line 3, in handle_pay', '    boom()', 'RuntimeError: boom'];
  const log = [...Array.from({ length: 9 }, (_, i) => [`127.0.0.1 - - [01/Dec/2026 10:00:0${i}] handle_pay failed: RuntimeError('boom')`, ...traceback]).flat(), '127.0.0.1 - - [01/Dec/2026 10:00:09] "POST /pay HTTP/1.1" 201 -'];
  assert.deepEqual(collapseServerOutput(log.join('\n')), [
    "127.0.0.1 - - [01/Dec/2026 10:00:00] handle_pay failed: RuntimeError('boom')",
    '  (same as above, 8 more)',
    ...traceback,
    '  (same as above, 8 more)',
    '127.0.0.1 - - [01/Dec/2026 10:00:09] "POST /pay HTTP/1.1" 201 -',
  ]);

  // A repeat after another log line is shown again, in order (a newcomer read 201, "same as
  // above", 422 for a 201, a 422 and a 201); right after itself it is counted.
  const answered = (status: number, second: number) => `127.0.0.1 - - [01/Dec/2026 10:00:0${second}] "POST /pay HTTP/1.1" ${status} -`;
  assert.deepEqual(collapseServerOutput([answered(201, 1), answered(422, 2), answered(201, 3), answered(201, 4)].join('\n')), [
    answered(201, 1),
    answered(422, 2),
    answered(201, 3),
    '  (same as above, 1 more)',
  ]);

  // Lines that keep coming back in turn would push a traceback out of what a report shows:
  // then every repeat is counted under its first, and the traceback stays in view.
  const alternating = [...traceback, ...Array.from({ length: 25 }, (_, i) => answered(i % 2 === 0 ? 201 : 409, i % 10))];
  const folded = collapseServerOutput(alternating.join('\n'));
  assert.ok(folded.length <= 30, folded.join('\n'));
  assert.deepEqual(folded.slice(0, traceback.length), traceback);

  // Output kept as a tail: the end of a traceback cut at its start counts as the whole one shown later.
  const cut = [...traceback.slice(2), ...log.slice(-6)];
  const whole = [log[log.length - 6], ...traceback, '  (same as above, 1 more)', log[log.length - 1]];
  assert.deepEqual(collapseServerOutput(cut.join('\n')), whole);
  // The same, labelled by server (printed.ts): each line keeps its label, the count gets it too.
  assert.deepEqual(collapseServerOutput(cut.map((l) => `[A] ${l}`).join('\n')), whole.map((l) => `[A] ${l}`));

  // A real server whose race losers raise: the starter writes its traceback as lines, shown once.
  const ws = fixtureWorkspace('race-losers-500');
  try {
    const run = await runCli(['check', '05'], { cwd: ws.dir });
    assert.equal(run.exitCode, 1);
    assert.match(run.stdout, /\(same as above, \d+ more\)/);
    const tracebacks = run.stdout.match(/^ +\[[A-Z]\] RuntimeError: another request with this Idempotency-Key is in flight$/gm) ?? [];
    assert.equal(tracebacks.length, 1, run.stdout);
    assert.doesNotMatch(run.stdout, /\\x0a/);
  } finally {
    ws.remove();
  }
  assert.deepEqual(serversUnder(PACKAGE_ROOT), []);
});

test("06's failure after a restart names the split that failed beside it and says its servers were several (the story's filter itself is tested as data below)", async () => {
  // process-dict keeps its keys in memory: the retry after the restart pays again, and the
  // split on D and E (run meanwhile on a database of its own) charges twice.
  const ws = fixtureWorkspace('process-dict');
  try {
    const run = await runCli(['check', '06'], { cwd: ws.dir });
    assert.equal(run.exitCode, 1, run.stdout);
    const sent = run.stdout.slice(run.stdout.indexOf('What was sent and what came back:'), run.stdout.indexOf('Ledger rows'));
    assert.match(run.stdout, /After a restart: The retry must get the stored first response back/);
    assert.match(run.stdout, /· Also failed: A race split over two instances on a slow database \(250 ms per statement\): Round 1: 2 charges/);
    const servers = [...sent.matchAll(/^ +\[([A-Z])\] POST \/pay/gm)].map((m) => m[1]);
    // Whether D's and E's requests fall inside the restart's story depends on timing: this holds
    // with or without the filter, which 'a failure's requests come with their story' proves.
    assert.deepEqual([...new Set(servers)].sort(), ['A', 'B'], `only the restart's requests, not D's and E's:\n${sent}`);
    assert.match(sent, /the grader sent these to 2 servers of its own \(A, B\)/);
  } finally {
    ws.remove();
  }
  assert.deepEqual(serversUnder(PACKAGE_ROOT), []);
});

test("a failure's requests come with their story, from its key's first request, but not with what went to another database meanwhile", () => {
  const sent = (server: string, key: string): Exchange => ({ server, port: 1, method: 'POST', path: '/pay', key, requestBody: '{}', status: 201, responseBody: '{}', ms: 1 });
  const [a1, other, d1, e1, b1] = [sent('A', 'k'), sent('A', 'other'), sent('D', 'split'), sent('E', 'split'), sent('B', 'k')];
  const all = [a1, other, d1, e1, b1];
  // A and B on one database (a restart), D and E on one of their own.
  const databases = [{ exchanges: [a1, other, b1] }, { exchanges: [d1, e1] }];
  assert.deepEqual(withTheirHistory([a1, b1], all, databases), [a1, other, b1], 'the payment in between is kept, the split beside is not');
  assert.deepEqual(withTheirHistory([b1], all, databases), [a1, other, b1], 'from the first request with the key');
  assert.deepEqual(withTheirHistory([d1, e1], all, databases), [d1, e1]);
});

test('a note added to a failure keeps its kind: a server that could not start stays one', () => {
  const noted = withNote(new ServerStartFailed('server.py exited during start-up', 'why'), 'Also failed: ...');
  assert.ok(noted instanceof ServerStartFailed);
  assert.ok(noted instanceof CheckFailed);
  assert.deepEqual((noted as CheckFailed).evidence.details, ['Also failed: ...']);
  const other = new Error('not a check');
  assert.equal(withNote(other, 'x'), other);
});
