/**
 * The menu as a learner meets it: `idem-lab` alone in a real terminal (tmux), keys sent,
 * the screen read. Without a terminal it prints the step list and exits at once.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort } from '../grader/server.js';
import { readState } from '../lab/workspace.js';
import { CLI, fixtureWorkspace, runCli, serversUnder, stopRecorded } from './support.js';
import { Terminal, tmuxAvailable } from './terminal.js';

/** The main menu waiting for a key (the last prompt on the screen). */
const AT_MENU = /\? Choose a step or an action\n[^?✔]*$/;
/** A step's menu waiting for a key. */
const atStep = (id: string) => new RegExp(`\\? ${id} \\w+: [^?✔]*$`);
/** `text`, then the pause after an action, last on the screen. */
const shownThenPause = (text: string) => new RegExp(`${text}[\\s\\S]*\\[Enter\\] back to the menu\\s*$`);

/** `n` presses of the Down key. The cursor starts on the first step not passing yet (01 here). */
const down = (n: number) => Array.from({ length: n }, () => 'Down');


test('idem-lab alone without a terminal prints the step list and the progress, and exits 0 at once', async () => {
  const ws = fixtureWorkspace('reference');
  try {
    const run = await runCli([], { cwd: ws.dir, timeoutMs: 10_000 });
    assert.equal(run.exitCode, 0);
    assert.match(run.stdout, /^The steps:\n {2}· 01 duplicate Reproduce the duplicate charge/);
    assert.match(run.stdout, /Progress: 0 of 8 steps pass\. □□□□□□□□\nTrack: basic, steps 01-08 \(idem-lab track switches\)$/m);
    // On the advanced track the list says so, in the learner's language.
    const { updateState } = await import('../lab/workspace.js');
    updateState(ws.dir, (s) => {
      s.track = 'advanced';
    });
    const ko = await runCli(['--lang', 'ko'], { cwd: ws.dir, timeoutMs: 10_000 });
    assert.match(ko.stdout, /^과정: 심화, 09~15단계 /m);
    assert.match(ko.stdout, /09 replayed/);
  } finally {
    ws.remove();
  }
});

test("idem-lab in its own folder (a fresh clone) says where the lab goes, never offers to lay it out there", async () => {
  const { PACKAGE_ROOT, LAB_DIR } = await import('../lab/paths.js');
  for (const [args, cwd] of [[[], PACKAGE_ROOT], [['status'], PACKAGE_ROOT], [['check', '02'], LAB_DIR], [['start'], PACKAGE_ROOT]] as const) {
    const run = await runCli([...args], { cwd, timeoutMs: 10_000 });
    assert.equal(run.exitCode, 2, `${args.join(' ')}: a setup error`);
    assert.match(run.stderr, /is the folder of idem-lab itself \(the tool\)/, args.join(' '));
    assert.match(run.stderr, /idem-lab start --dir ~\/idem-lab, then cd ~\/idem-lab/);
    assert.doesNotMatch(run.stderr, /run idem-lab start there/);
  }
  assert.equal(fs.existsSync(path.join(PACKAGE_ROOT, '.idem-lab')), false, 'start laid nothing in the tool\'s folder');
  assert.equal(fs.existsSync(path.join(PACKAGE_ROOT, 'server.py')), false);
  const zh = await runCli(['status', '--lang', 'zh'], { cwd: PACKAGE_ROOT, timeoutMs: 10_000 });
  assert.match(zh.stderr, /是 idem-lab 工具本身的目录/);
});

test('start from another folder ends with the cd into the workspace; from inside it, without', async () => {
  const ws = fixtureWorkspace('starter', {});
  const port = String(await freePort());
  try {
    const outside = await runCli(['start', '--dir', ws.dir, '--port', port, '--lang', 'ko'], { cwd: path.dirname(ws.dir), timeoutMs: 30_000 });
    assert.equal(outside.exitCode, 0, outside.stderr);
    assert.match(outside.stdout, new RegExp(`\\n다음: cd ${ws.dir.replace(/[.]/g, '\\.')}\\. [^\\n]*\\n?$`));
    const inside = await runCli(['start', '--port', port], { cwd: ws.dir, timeoutMs: 30_000 });
    assert.doesNotMatch(inside.stdout, /Next: cd/);
  } finally {
    stopRecorded(ws.dir);
    ws.remove();
  }
});

test('the menu in a terminal: steps with their state, read, check, hint, start and stop the server, quit', { skip: !tmuxAvailable() && 'tmux is not installed' }, async () => {
  const ws = fixtureWorkspace('starter', {});
  const port = String(await freePort());
  // A recorded port, so Start uses a free one.
  const { updateState } = await import('../lab/workspace.js');
  updateState(ws.dir, (s) => {
    s.port = Number(port);
  });
  const term = new Terminal(['node', CLI], { cwd: ws.dir, env: { NO_COLOR: '1' } });
  try {
    let screen = await term.waitFor(AT_MENU);
    assert.match(screen, /Server: not running/);
    assert.match(screen, /Track: basic, steps 01-08 \(idem-lab track switches\)/);
    assert.match(screen, /Progress: 0 of 8 steps pass\./);
    assert.match(screen, /❯ · 01 duplicate Reproduce the duplicate charge/);
    assert.match(screen, /^ {2}· 08 notes {5}Write down the three ideas/m);
    assert.match(screen, /Start the payment server/);

    // Read step 03.
    term.keys('Down', 'Down', 'Enter');
    await term.waitFor(atStep('03'));
    term.keys('Enter');
    await term.waitFor(shownThenPause('## 03 · Refuse a request without a key'));
    term.keys('Enter');

    // Check step 02: it fails on the starter, and the menu shows it.
    await term.waitFor(AT_MENU);
    term.keys('Down', 'Enter');
    await term.waitFor(atStep('02'));
    term.keys('Down', 'Enter');
    screen = await term.waitFor(shownThenPause('✗ 02 replay'), 30_000);
    assert.match(screen, /\$ curl -sS -i -X POST http:\/\/127\.0\.0\.1:\d+\/pay/);
    term.keys('Enter');
    screen = await term.waitFor(AT_MENU);
    assert.match(screen, /✗ 02 replay {4}Replay the stored response/);

    // A hint for step 02.
    term.keys('Down', 'Enter');
    await term.waitFor(atStep('02'));
    term.keys('Down', 'Down', 'Enter');
    await term.waitFor(shownThenPause('Hint 1 of 3 for 02 replay: [^\\n]*\\nChoose "Show a hint" again for the next one\\.'));
    term.keys('Enter');

    // Start the server, then stop it.
    await term.waitFor(AT_MENU);
    term.keys(...down(8), 'Enter'); // past the eight steps: Start
    await term.waitFor(shownThenPause('Started the payment server \\(pid \\d+\\)'), 30_000);
    const { pid } = readState(ws.dir);
    assert.ok(pid && serversUnder(ws.dir).includes(pid));
    term.keys('Enter');
    screen = await term.waitFor(AT_MENU);
    assert.match(screen, new RegExp(`Server: running \\(pid ${pid}\\) on http://127\\.0\\.0\\.1:${port}`));
    assert.match(screen, /Stop the payment server/);
    term.keys(...down(9), 'Enter'); // Restart, then Stop
    await term.waitFor(shownThenPause(`Stopped the payment server \\(pid ${pid}\\)`), 10_000);
    term.keys('Enter');
    assert.match(await term.waitFor(AT_MENU), /Server: not running/);
    assert.deepEqual(serversUnder(ws.dir), []);

    // Quit.
    term.keys(...down(9), 'Enter'); // Start, then Quit
    await term.waitFor(/\[exited 0\]/);
  } finally {
    term.kill();
    stopRecorded(ws.dir);
    ws.remove();
  }
});

test('Ctrl-C on the menu quits with exit 0; colour on a terminal, none with NO_COLOR', { skip: !tmuxAvailable() && 'tmux is not installed' }, async () => {
  const ws = fixtureWorkspace('starter', {});
  const term = new Terminal(['node', CLI, 'menu', '--dir', ws.dir], { cwd: ws.dir, env: { NO_COLOR: '1' } });
  const coloured = new Terminal(['node', CLI, 'menu', '--dir', ws.dir], { cwd: ws.dir, env: { NO_COLOR: null } });
  try {
    await coloured.waitFor(AT_MENU);
    assert.match(coloured.screenWithEscapes(), /\x1b\[[0-9;]*m/, 'colour on a terminal');
    await term.waitFor(AT_MENU);
    assert.doesNotMatch(term.screenWithEscapes(), /\x1b\[[0-9;]*m/, 'no colour with NO_COLOR');
    term.keys('C-c');
    await term.waitFor(/\[exited 0\]/);
  } finally {
    term.kill();
    coloured.kill();
    ws.remove();
  }
});

test('the menu speaks the chosen language: --lang zh gives a Chinese menu, LANG=ko_KR.UTF-8 a Korean one', { skip: !tmuxAvailable() && 'tmux is not installed' }, async () => {
  const ws = fixtureWorkspace('starter', {});
  const zh = new Terminal(['node', CLI, '--lang', 'zh'], { cwd: ws.dir, env: { NO_COLOR: '1' } });
  const ko = new Terminal(['node', CLI, 'menu', '--dir', ws.dir], { cwd: ws.dir, env: { NO_COLOR: '1', LANG: 'ko_KR.UTF-8' } });
  try {
    let screen = await zh.waitFor(/\? 选择一个步骤或操作/);
    assert.match(screen, /服务器：未运行/);
    assert.match(screen, /路线：基础，第 01-08 步（用 idem-lab track 切换）/);
    assert.match(screen, /进度：共 8 步，通过 0 步。/);
    assert.match(screen, /❯ · 01 duplicate 复现重复扣款/);
    assert.match(screen, /启动支付服务器/);
    assert.match(screen, /↑↓ 移动 • ⏎ 选择/);
    zh.keys('Enter');
    await zh.waitFor(/\? 01 duplicate: 复现重复扣款/);
    zh.keys('Enter');
    await zh.waitFor(/## 01 · 复现重复扣款[\s\S]*\[Enter\] 返回菜单\s*$/);
    screen = await ko.waitFor(/\? 단계나 할 일을 고르세요/);
    assert.match(screen, /서버: 실행 중 아님/);
    assert.match(screen, /· 05 race {6}동시 요청 10개 버티기/);
  } finally {
    zh.kill();
    ko.kill();
    ws.remove();
  }
});
