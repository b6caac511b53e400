/**
 * Watch mode as a learner uses it: in a real terminal, saving files, pressing keys.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Coalescer } from '../lab/coalesce.js';
import { serverSource } from '../fixtures/build.js';
import { readState } from '../lab/workspace.js';
import { CLI, fixtureWorkspace, serversUnder, stopRecorded } from './support.js';
import { Terminal, tmuxAvailable } from './terminal.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The terminal's height for watch on step 02: its failure shows the first request with its
 * proxy headers (request and curl lines wrap at 120 columns), and the line a test looks for
 * above it (`Saved: server.py`) must stay on the screen.
 */
const WATCH_ROWS = 70;
/** How long step 02 may take to pass, in ms: about 190 requests, 106 of them two at a time, on a machine loaded by other test lanes. */
const PASS_02_MS = 60_000;

test('Coalescer never overlaps runs and merges the triggers of a run into one follow-up run', async () => {
  let active = 0;
  let most = 0;
  const batches: string[][] = [];
  const runs = new Coalescer(async ({ reasons }) => {
    active++;
    most = Math.max(most, active);
    batches.push(reasons);
    await sleep(150);
    active--;
  }, 20);
  runs.trigger('a');
  runs.trigger('a');
  await sleep(60); // the first run is going
  for (const reason of ['b', 'c', 'b', 'a']) {
    runs.trigger(reason);
    await sleep(5);
  }
  await sleep(30);
  await runs.idle();
  assert.equal(most, 1);
  assert.deepEqual(batches, [['a'], ['b', 'c', 'a']]);
  runs.close();
  runs.trigger('d');
  await sleep(60);
  assert.equal(batches.length, 2, 'no run after close');
});

test('Coalescer keeps going after a run throws', async () => {
  const errors: unknown[] = [];
  let calls = 0;
  const runs = new Coalescer(async () => {
    calls++;
    if (calls === 1) throw new Error('boom');
  }, 5, (err) => errors.push(err));
  runs.trigger('x');
  await sleep(30);
  runs.trigger('y');
  await sleep(30);
  await runs.idle();
  assert.equal(calls, 2);
  assert.equal(errors.length, 1);
});

test('watch in a terminal: checks the step, re-checks on save, moves on when it passes, q quits; no server left', { skip: !tmuxAvailable() && 'tmux is not installed' }, async () => {
  const ws = fixtureWorkspace('starter', {});
  const term = new Terminal(['node', CLI, 'watch', 'replay'], { cwd: ws.dir, env: { NO_COLOR: '1' }, rows: WATCH_ROWS });
  try {
    await term.waitFor(/Watching server\.py for step 02 replay\. c checks now · h shows a hint · q quits\./);
    let screen = term.screen();
    assert.match(screen, /✗ 02 replay/);
    assert.match(screen, /\$ curl -sS -i -X POST http:\/\/127\.0\.0\.1:8000\/pay -H 'Content-Type: application\/json' -H 'Idempotency-Key: [0-9a-f-]{36}' --data '\{"user":"[a-z]+_\d{5}","amount":\d+\}'/);
    assert.match(screen, /Progress: 0 of 8 steps pass\. □□□□□□□□/);

    term.type('h');
    await term.waitFor(/Hint 1 of 3 for 02 replay: /);

    // Three saves in quick succession: one check for all of them.
    const server = path.join(ws.dir, 'server.py');
    fs.writeFileSync(server, serverSource('replay-as-error'));
    await sleep(20);
    fs.writeFileSync(server, serverSource('replay-as-error') + '\n# again\n');
    await sleep(20);
    fs.writeFileSync(server, serverSource('reference'));
    screen = await term.waitFor(/Next: 03 nokey {2}Refuse a request without a key/, PASS_02_MS);
    assert.match(screen, /^Saved: server\.py$/m);
    assert.match(screen, /✓ 02 replay/);
    assert.match(screen, /Progress: 1 of 8 steps pass\. ■□□□□□□□/);
    assert.match(screen, /Watching server\.py and 03-nokey\.txt for step 03 nokey/);
    assert.equal(readState(ws.dir).steps?.['02']?.status, 'pass');
    assert.equal((screen.match(/Checking 0\d/g) ?? []).length, 1, 'the screen shows one check');

    // Saving the step's own file checks it too.
    fs.writeFileSync(path.join(ws.dir, '03-nokey.txt'), 'POST /pay  (no Idempotency-Key)  {"user":"u1","amount":1000}\nHTTP 400 Bad Request\n{"error": "Idempotency-Key required"}\n');
    screen = await term.waitFor(/Saved: 03-nokey\.txt[\s\S]*(✓|✗) 03 nokey[\s\S]*Watching/);

    term.type('q');
    await term.waitFor(/Stopped watching\.\n\[exited 0\]/);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    term.kill();
    ws.remove();
  }
});

test('watch without a terminal stops cleanly on SIGTERM with no server left', async () => {
  const ws = fixtureWorkspace('reference');
  const { execa } = await import('execa');
  const child = execa('node', [CLI, 'watch', '05', '--dir', ws.dir], { env: { NO_COLOR: '1' }, reject: false, stdin: 'ignore' });
  try {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const deadline = Date.now() + 20_000;
    while (!/Checking 05 race/.test(out) && Date.now() < deadline) await sleep(50);
    await sleep(300); // in the middle of the race check: its servers are up
    child.kill('SIGTERM');
    const result = await child;
    assert.equal(result.exitCode, 0, out);
    assert.match(String(result.stdout), /Stopped watching\./);
    assert.doesNotMatch(String(result.stdout), /\x1b\[2J/, 'no screen clearing without a terminal');
    await sleep(200);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    child.kill('SIGKILL');
    ws.remove();
  }
});

test('watch restarts the learner\'s running server when server.py is saved, and leaves it running on quit', { skip: !tmuxAvailable() && 'tmux is not installed' }, async () => {
  const ws = fixtureWorkspace('starter', {});
  const { freePort } = await import('../grader/server.js');
  const { runCli } = await import('./support.js');
  const term = { current: undefined as Terminal | undefined };
  try {
    const start = await runCli(['start', '--port', String(await freePort())], { cwd: ws.dir });
    assert.equal(start.exitCode, 0, start.stdout + start.stderr);
    const before = readState(ws.dir).pid;
    assert.ok(before);
    term.current = new Terminal(['node', CLI, 'watch', '02'], { cwd: ws.dir, env: { NO_COLOR: '1' }, rows: WATCH_ROWS });
    await term.current.waitFor(/Watching server\.py for step 02 replay/);
    fs.writeFileSync(path.join(ws.dir, 'server.py'), serverSource('reference'));
    const screen = await term.current.waitFor(/Next: 03 nokey/, PASS_02_MS);
    assert.match(screen, new RegExp(`Stopped the payment server \\(pid ${before}\\)\\.\\nStarted the payment server \\(pid \\d+\\)`));
    const after = readState(ws.dir).pid;
    assert.ok(after && after !== before);
    term.current.type('q');
    await term.current.waitFor(/\[exited 0\]/);
    assert.deepEqual(serversUnder(ws.dir), [after], 'only the learner\'s own server is left, restarted');
  } finally {
    term.current?.kill();
    stopRecorded(ws.dir);
    ws.remove();
  }
});

test('watch after a save that broke server.py: the restart fails, and the next save starts the server watch stopped; h says h gives the next hint', { skip: !tmuxAvailable() && 'tmux is not installed' }, async () => {
  const ws = fixtureWorkspace('starter', {});
  const { freePort } = await import('../grader/server.js');
  const { runCli, stopRecorded } = await import('./support.js');
  let term: Terminal | undefined;
  try {
    assert.equal((await runCli(['start', '--port', String(await freePort())], { cwd: ws.dir })).exitCode, 0);
    term = new Terminal(['node', CLI, 'watch', '02'], { cwd: ws.dir, env: { NO_COLOR: '1' }, rows: WATCH_ROWS });
    await term.waitFor(/Watching server\.py for step 02 replay/);
    term.type('h');
    await term.waitFor(/Hint 1 of 3 for 02 replay: .*\nPress h for the next one\./);

    fs.writeFileSync(path.join(ws.dir, 'server.py'), serverSource('reference') + '\nthis is not python (\n');
    let screen = await term.waitFor(/The payment server did not start: [\s\S]*Watching server\.py for step 02 replay/, 40_000);
    assert.match(screen, /✗ 02 replay/);
    assert.equal(readState(ws.dir).pid, undefined, 'the broken server is not recorded');

    fs.writeFileSync(path.join(ws.dir, 'server.py'), serverSource('reference'));
    screen = await term.waitFor(/Next: 03 nokey/, PASS_02_MS);
    assert.match(screen, /Started the payment server \(pid \d+\)/, 'the next save started it again');
    const { pid } = readState(ws.dir);
    assert.ok(pid && serversUnder(ws.dir).includes(pid));
    term.type('q');
    await term.waitFor(/\[exited 0\]/);
    assert.deepEqual(serversUnder(ws.dir), [pid]);
  } finally {
    term?.kill();
    stopRecorded(ws.dir);
    ws.remove();
  }
});

test('watch N on a step that already passes keeps watching it while the learner refactors', { skip: !tmuxAvailable() && 'tmux is not installed' }, async () => {
  const ws = fixtureWorkspace('reference');
  const { updateState } = await import('../lab/workspace.js');
  updateState(ws.dir, (s) => {
    s.steps = { '02': { status: 'pass', checkedAt: new Date().toISOString(), passedAt: new Date().toISOString() } };
  });
  const term = new Terminal(['node', CLI, 'watch', '02'], { cwd: ws.dir, env: { NO_COLOR: '1' }, rows: WATCH_ROWS });
  try {
    let screen = await term.waitFor(/Step 02 still passes; watch stays on it while you refactor[\s\S]*Watching server\.py for step 02 replay/, PASS_02_MS);
    assert.doesNotMatch(screen, /Next: /);
    fs.appendFileSync(path.join(ws.dir, 'server.py'), '\n# refactored\n');
    screen = await term.waitFor(/Saved: server\.py[\s\S]*✓ 02 replay[\s\S]*Step 02 still passes[\s\S]*Watching server\.py for step 02 replay/, PASS_02_MS);
    assert.doesNotMatch(screen, /Next: /);
    // A refactor that breaks it, then the fix: the step "passes again", not "still passes".
    const reference = fs.readFileSync(path.join(ws.dir, 'server.py'), 'utf8');
    fs.writeFileSync(path.join(ws.dir, 'server.py'), serverSource('starter'));
    screen = await term.waitFor(/Saved: server\.py[\s\S]*✗ 02 replay[\s\S]*Watching server\.py for step 02 replay/, PASS_02_MS);
    fs.writeFileSync(path.join(ws.dir, 'server.py'), reference);
    screen = await term.waitFor(/Saved: server\.py[\s\S]*✓ 02 replay[\s\S]*Step 02 passes again; watch stays on it[\s\S]*Watching server\.py for step 02 replay/, PASS_02_MS);
    assert.doesNotMatch(screen, /still passes|Next: /);
    term.type('q');
    await term.waitFor(/\[exited 0\]/);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    term.kill();
    ws.remove();
  }
});
