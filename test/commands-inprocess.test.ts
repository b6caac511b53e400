/**
 * The commands, the menu and watch mode run in this process, writing through an Output
 * they are given (bin/output.ts) instead of the process's streams: the output is captured
 * and asserted, keys are typed into the menu and watch mode as a terminal would send them.
 * Real fixture workspaces, real Python servers for the live checks, real sqlite files.
 * (test/menu.test.ts and test/watch.test.ts drive the same code in tmux.)
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { captureOutput, type CapturedOutput } from '../bin/shared/output.js';
import { statusCommand } from '../bin/commands.js';
import { stepList } from '../bin/shared/progress.js';
import { hintCommand, showCommand } from '../bin/shared/step-texts.js';
import { checkCommand } from '../bin/shared/check.js';
import { menuCommand } from '../bin/menu.js';
import { watchCommand } from '../bin/watch.js';
import { freePort, runningServerCount } from '../grader/server.js';
import { serverSource } from '../fixtures/build.js';
import { readState, updateState } from '../lab/workspace.js';
import { setLanguage } from '../i18n/index.js';
import { fixtureWorkspace, serversUnder, stopRecorded } from './support.js';

setLanguage('en');

/** Terminal control sequences (cursor moves, colours, screen clears) taken out, so the text can be matched. */
const plain = (text: string) => text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');

/** Keys as a terminal sends them. */
const KEY = { down: '\x1b[B', enter: '\r', ctrlC: '\x03' } as const;

/**
 * Waits until what was written to the report after `from` (a length of the plain text)
 * matches `pattern`; fails after `ms` ms (default 20 s) with what was written.
 * @returns the plain text's length at the end of the match: where the next wait starts
 */
async function waitFor(out: CapturedOutput, pattern: RegExp, from = 0, ms = 20_000): Promise<number> {
  const deadline = Date.now() + ms;
  for (;;) {
    const text = plain(out.stdout());
    const m = pattern.exec(text.slice(from));
    if (m) return from + m.index + m[0].length;
    if (Date.now() > deadline) assert.fail(`no ${pattern} after ${from} within ${ms} ms; the output:\n${text.slice(from)}\nstderr:\n${out.stderr()}`);
    await delay(20);
  }
}

/** Types `keys` once the prompt has drawn itself (a key sent before its readline listens would go to the one before). */
async function type(out: CapturedOutput, ...keys: string[]): Promise<void> {
  for (const key of keys) {
    out.keys!.write(key);
    await delay(30);
  }
}

test('a command given an output writes its whole report there: status, show, hint and the step list', async () => {
  const ws = fixtureWorkspace('starter');
  try {
    const out = captureOutput();
    assert.equal(await statusCommand({ dir: ws.dir, out }), 0);
    assert.equal(showCommand('03', { dir: ws.dir, out }), 0);
    assert.equal(hintCommand('02', { dir: ws.dir, out }), 0);
    const text = out.stdout();
    assert.match(text, /^Server: not running \(idem-lab start starts it\)\./m);
    assert.match(text, /Progress: 0 of 8 steps pass\. □□□□□□□□/);
    assert.match(text, /^ {2}02 replay {4}· not tried$/m);
    assert.match(text, /^## 03 · Refuse a request without a key/m);
    assert.match(text, /^Hint 1 of 3 for 02 replay: /m);
    assert.equal(readState(ws.dir).hintsShown?.['02'], 1, 'the hint was counted');
    assert.doesNotMatch(text, /\x1b\[/, 'no colour on an output that is no terminal');
    assert.equal(out.stderr(), '');

    const coloured = captureOutput({ tty: true, colour: true });
    assert.match(stepList(ws.dir, coloured.c), /\x1b\[2m·\x1b\[22m 01 duplicate/, 'the step list takes the output\'s colours');
  } finally {
    ws.remove();
  }
});

test('check given an output: the verdicts, the summary and the progress go there; exit code 1 for a failing step; no server left', async () => {
  const ws = fixtureWorkspace('starter');
  try {
    const out = captureOutput();
    const code = await checkCommand(['01', '02'], { dir: ws.dir, out, sandbox: 'off' });
    const text = out.stdout();
    assert.equal(code, 1, text + out.stderr());
    assert.match(text, /^✓ 01 duplicate/m);
    assert.match(text, /^✗ 02 replay/m);
    assert.match(text, /What was sent and what came back:/);
    assert.match(text, /Progress: 1 of 8 steps pass\./);
    assert.equal(readState(ws.dir).steps?.['02']?.status, 'fail');
    assert.equal(runningServerCount(), 0);
    assert.deepEqual(serversUnder(ws.dir), []);

    // A machine reporter writes its document through the output too.
    const tap = captureOutput();
    assert.equal(await checkCommand(['01'], { dir: ws.dir, out: tap, reporter: ['tap'] }), 0);
    assert.match(tap.stdout(), /^TAP version 13\n1\.\.1\nok 1 - 01 duplicate/);
  } finally {
    ws.remove();
  }
});

test('the menu in process: keys typed in, the step list with its marks, read a step, show a hint, start and stop the server, Ctrl-C quits with 0', async () => {
  const ws = fixtureWorkspace('starter');
  const out = captureOutput({ tty: true, keys: true, colour: false });
  // A recorded port of this test's own, so Start does not reach for 8000.
  const port = await freePort();
  updateState(ws.dir, (s) => {
    s.port = port;
  });
  try {
    const menu = menuCommand({ dir: ws.dir, out });
    let at = await waitFor(out, /\? Choose a step or an action/);
    const screen = plain(out.stdout());
    assert.match(screen, /Server: not running/);
    assert.match(screen, /Progress: 0 of 8 steps pass\./);
    assert.match(screen, /❯ · 01 duplicate Reproduce the duplicate charge/);
    assert.match(screen, /Start the payment server/);

    // Read step 03: Down, Down, Enter opens its menu; Enter on "Read" shows its section, then the pause.
    await type(out, KEY.down, KEY.down, KEY.enter);
    at = await waitFor(out, /\? 03 nokey: Refuse a request without a key/, at);
    await type(out, KEY.enter);
    at = await waitFor(out, /## 03 · Refuse a request without a key[\s\S]*\[Enter\] back to the menu/, at);
    await type(out, KEY.enter);

    // Step 02's hint: Down, Enter, then Down Down to "Show a hint".
    at = await waitFor(out, /\? Choose a step or an action/, at);
    await type(out, KEY.down, KEY.enter);
    at = await waitFor(out, /\? 02 replay: /, at);
    await type(out, KEY.down, KEY.down, KEY.enter);
    at = await waitFor(out, /Hint 1 of 3 for 02 replay: [\s\S]*\[Enter\] back to the menu/, at);
    assert.equal(readState(ws.dir).hintsShown?.['02'], 1);
    await type(out, KEY.enter);

    // Start the learner's server (Down 8 times: past the steps, to the first action), then stop it.
    at = await waitFor(out, /\? Choose a step or an action/, at);
    await type(out, ...Array<string>(8).fill(KEY.down), KEY.enter);
    at = await waitFor(out, /Started the payment server \(pid (\d+)\) on http:\/\/127\.0\.0\.1:(\d+)[\s\S]*\[Enter\] back to the menu/, at);
    const { pid, port: recordedPort } = readState(ws.dir);
    assert.equal(recordedPort, port, 'on the recorded port');
    assert.deepEqual(serversUnder(ws.dir), [pid], 'one server, the recorded one');
    await type(out, KEY.enter);
    at = await waitFor(out, new RegExp(`Server: running \\(pid ${pid}\\) on http://127\\.0\\.0\\.1:${port}[\\s\\S]*\\? Choose a step or an action`), at);
    // Restart, Stop, Quit now follow the steps: Down 9 times is Stop.
    await type(out, ...Array<string>(9).fill(KEY.down), KEY.enter);
    at = await waitFor(out, new RegExp(`Stopped the payment server \\(pid ${pid}\\)\\.[\\s\\S]*\\[Enter\\] back to the menu`), at);
    assert.deepEqual(serversUnder(ws.dir), []);
    await type(out, KEY.enter);

    at = await waitFor(out, /Server: not running[\s\S]*\? Choose a step or an action/, at);
    await type(out, KEY.ctrlC);
    assert.equal(await menu, 0);
  } finally {
    out.keys?.end();
    stopRecorded(ws.dir);
    ws.remove();
  }
});

test('the menu stops on its AbortSignal; without a terminal it prints the step list and returns at once', async () => {
  const ws = fixtureWorkspace('reference');
  try {
    const out = captureOutput({ tty: true, keys: true, colour: false });
    const controller = new AbortController();
    const menu = menuCommand({ dir: ws.dir, out, signal: controller.signal });
    await waitFor(out, /\? Choose a step or an action/);
    controller.abort();
    assert.equal(await menu, 0);

    const piped = captureOutput();
    assert.equal(await menuCommand({ dir: ws.dir, out: piped }), 0);
    assert.match(piped.stdout(), /^The steps:\n {2}· 01 duplicate Reproduce the duplicate charge/);
    assert.doesNotMatch(piped.stdout(), /Choose a step/, 'no prompt without a terminal');
  } finally {
    ws.remove();
  }
});

test('watch in process: one check at the start, one save gives one more verdict, the AbortSignal stops it; no server left', async () => {
  const ws = fixtureWorkspace('starter', {});
  const out = captureOutput();
  const controller = new AbortController();
  try {
    const watching = watchCommand('02', { dir: ws.dir, out, debounceMs: 50, signal: controller.signal });
    let at = await waitFor(out, /✗ 02 replay[\s\S]*Watching server\.py for step 02 replay\./, 0, 30_000);
    assert.match(out.stdout(), /Watching server\.py for step 02 replay\. Ctrl-C stops\./, 'without a keys side the footer offers no keys');

    fs.writeFileSync(path.join(ws.dir, 'server.py'), serverSource('reference'));
    at = await waitFor(out, /Next: 03 nokey {2}Refuse a request without a key[\s\S]*Watching/, at, 30_000);
    controller.abort();
    assert.equal(await watching, 0);

    const text = plain(out.stdout());
    assert.equal((text.match(/^Checking 02 replay/gm) ?? []).length, 2, `one check at the start and one for the save:\n${text}`);
    assert.equal((text.match(/^Saved: server\.py$/gm) ?? []).length, 1);
    assert.match(text, /✗ 02 replay[\s\S]*Saved: server\.py[\s\S]*✓ 02 replay/);
    assert.match(text, /Stopped watching\.\n$/);
    assert.doesNotMatch(out.stdout(), /\x1b\[2J/, 'no screen clearing on an output that is no terminal');
    assert.equal(readState(ws.dir).steps?.['02']?.status, 'pass');
    assert.equal(runningServerCount(), 0);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    controller.abort();
    ws.remove();
  }
});

test('watch in process: a save still being written when its check starts gets no verdict of its own; the check runs again on the whole file', async () => {
  const ws = fixtureWorkspace('starter', {});
  const out = captureOutput();
  const controller = new AbortController();
  try {
    const watching = watchCommand('02', { dir: ws.dir, out, debounceMs: 50, signal: controller.signal });
    let at = await waitFor(out, /✗ 02 replay[\s\S]*Watching server\.py for step 02 replay\./, 0, 30_000);
    const whole = serverSource('reference');
    // The first half of a save (cut mid-file, so not even valid Python), then the rest once its check has begun
    // (a check starts a server process, far longer than waitFor's 20 ms poll; and were the whole file graded, the
    // change is still seen and the verdict still dropped).
    fs.writeFileSync(path.join(ws.dir, 'server.py'), whole.slice(0, Math.floor(whole.length / 2)));
    at = await waitFor(out, /Saved: server\.py\n[\s\S]*Checking 02 replay/, at, 30_000);
    fs.writeFileSync(path.join(ws.dir, 'server.py'), whole);
    const cut = at;
    at = await waitFor(out, /server\.py changed while it was checked \(a save still being written\?\): that verdict is about a version no longer there, so it is not kept\. Checking again\./, at, 30_000);
    await waitFor(out, /✓ 02 replay[\s\S]*Next: 03 nokey[\s\S]*Watching/, at, 30_000);
    controller.abort();
    assert.equal(await watching, 0);
    const after = plain(out.stdout()).slice(cut);
    assert.doesNotMatch(after, /✗ 02 replay/, `no verdict on the half-written file:\n${after}`);
    assert.equal(readState(ws.dir).steps?.['02']?.status, 'pass');
    assert.equal(runningServerCount(), 0);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    controller.abort();
    ws.remove();
  }
});

test('watch in process with a keys side: the footer offers the keys, h shows a hint, q quits', async () => {
  const ws = fixtureWorkspace('starter', {});
  const out = captureOutput({ keys: true });
  try {
    const watching = watchCommand('02', { dir: ws.dir, out, debounceMs: 50 });
    let at = await waitFor(out, /Watching server\.py for step 02 replay\. c checks now · h shows a hint · q quits\./, 0, 30_000);
    await type(out, 'h');
    at = await waitFor(out, /Hint 1 of 3 for 02 replay: /, at);
    assert.equal(readState(ws.dir).hintsShown?.['02'], 1);
    await type(out, 'q');
    assert.equal(await watching, 0);
    assert.match(plain(out.stdout()).slice(at), /Stopped watching\.\n$/);
    assert.equal((plain(out.stdout()).match(/^Checking 02 replay/gm) ?? []).length, 1, 'no check but the first');
    assert.equal(runningServerCount(), 0);
  } finally {
    out.keys?.end();
    ws.remove();
  }
});

test('watch in process: a save of the last step\'s file while its check runs does not check the next step once watch moved on', async () => {
  const ws = fixtureWorkspace('reference');
  const conflict = path.join(ws.dir, '04-conflict.txt');
  const text04 = fs.readFileSync(conflict, 'utf8');
  fs.rmSync(conflict);
  const { updateState } = await import('../lab/workspace.js');
  const now = new Date().toISOString();
  updateState(ws.dir, (s) => {
    s.steps = Object.fromEntries(['01', '02', '03'].map((id) => [id, { status: 'pass', checkedAt: now, passedAt: now }]));
  });
  const out = captureOutput();
  const controller = new AbortController();
  try {
    const watching = watchCommand(undefined, { dir: ws.dir, out, debounceMs: 50, signal: controller.signal });
    let at = await waitFor(out, /✗ 04 conflict[\s\S]*Watching server\.py and 04-conflict\.txt for step 04 conflict\./, 0, 30_000);
    fs.writeFileSync(conflict, text04);
    at = await waitFor(out, /Saved: 04-conflict\.txt\nChecking 04 conflict/, at, 30_000);
    // Written again while 04's live check runs: the save is 04's, not a reason to check 05.
    fs.writeFileSync(conflict, `${text04}\n`);
    at = await waitFor(out, /Next: 05 race[\s\S]*Watching/, at, 30_000);
    const next = at;
    fs.writeFileSync(path.join(ws.dir, '05-race.txt'), fs.readFileSync(path.join(ws.dir, '05-race.txt'), 'utf8') + '\n');
    await waitFor(out, /Saved: [^\n]*05-race\.txt\nChecking 05 race[\s\S]*05 race[\s\S]*Watching/, next, 60_000);
    controller.abort();
    assert.equal(await watching, 0);
    const after = plain(out.stdout()).slice(next);
    assert.doesNotMatch(after, /04-conflict\.txt/, `no check of 05 for a save of 04's file:\n${after}`);
    assert.equal((after.match(/^Checking 05 race/gm) ?? []).length, 1, after);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    controller.abort();
    ws.remove();
  }
});
