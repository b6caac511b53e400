/**
 * The command line as a user runs it: a real process, real files, a real detached server.
 * What asserts only the output and the exit code runs in this process (bin/cli.ts main,
 * through runMain); exit codes through a real process, the environment and detached servers
 * keep a process of their own (runCli).
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { freePort } from '../grader/server.js';
import { readState } from '../lab/workspace.js';
import { fixtureWorkspace, runCli, runMain, serversUnder, tempDir, stopRecorded } from './support.js';
import { main } from '../bin/cli.js';
import { captureOutput } from '../bin/shared/output.js';
import { language, setLanguage } from '../i18n/index.js';


test('--help lists every command and exits 0; an unknown command exits 2', async () => {
  const help = await runMain(['--help']);
  assert.equal(help.exitCode, 0);
  for (const command of ['start', 'stop', 'restart', 'status', 'probe', 'ledger', 'show', 'hint', 'check', 'chaos']) {
    assert.match(help.stdout, new RegExp(`^  ${command}\\b`, 'm'));
  }
  const checkHelp = await runMain(['check', '--help']);
  assert.equal(checkHelp.exitCode, 0);
  assert.match(checkHelp.stdout, /Usage: idem-lab check/);
  const unknown = await runMain(['frobnicate']);
  assert.equal(unknown.exitCode, 2);
  assert.match(unknown.stderr, /unknown command 'frobnicate'/);
});

test('check refuses a folder without server.py, a missing folder and an unknown step with exit 2', async () => {
  const empty = tempDir();
  try {
    const noServer = await runMain(['check', '--dir', empty.dir]);
    assert.equal(noServer.exitCode, 2);
    assert.match(noServer.stderr, /there is no server\.py/);
    const missing = await runMain(['check', '--dir', path.join(empty.dir, 'nope')]);
    assert.equal(missing.exitCode, 2);
    assert.match(missing.stderr, /the folder does not exist/);
  } finally {
    empty.remove();
  }
  const ws = fixtureWorkspace('reference');
  try {
    const unknown = await runMain(['check', '99', '--dir', ws.dir]);
    assert.equal(unknown.exitCode, 2);
    assert.match(unknown.stderr, /unknown step "99"; the steps are 01 \(duplicate\), 02 \(replay\).*, 09 \(replayed\)/);
    const badLimit = await runCli(['check', '02', '--dir', ws.dir], { env: { IDEM_LAB_REQUEST_TIMEOUT_MS: 'soon' } });
    assert.equal(badLimit.exitCode, 2);
    assert.match(badLimit.stderr, /IDEM_LAB_REQUEST_TIMEOUT_MS must be a whole number of milliseconds/);
  } finally {
    ws.remove();
  }
});

test('check grades the reference solution: every step passes, exit 0, verdicts saved', async () => {
  const ws = fixtureWorkspace('reference');
  try {
    const run = await runCli(['check'], { cwd: ws.dir });
    assert.equal(run.exitCode, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /8 of 8 steps pass\./);
    assert.equal((run.stdout.match(/^✓ /gm) ?? []).length, 8);
    assert.doesNotMatch(run.stdout, /\x1b\[/, 'no colour with NO_COLOR and no terminal');
    const steps = readState(ws.dir).steps ?? {};
    assert.deepEqual(Object.keys(steps).sort(), ['01', '02', '03', '04', '05', '06', '07', '08']);
    assert.ok(Object.values(steps).every((s) => s.status === 'pass' && s.passedAt));
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    ws.remove();
  }
});

test('a failing check exits 1 and shows what was sent, what came back and the ledger', async () => {
  const ws = fixtureWorkspace('starter');
  try {
    const run = await runCli(['check', 'replay', '--dir', ws.dir, '--seed', '42']);
    assert.equal(run.exitCode, 1);
    assert.match(run.stdout, /^✗ 02 replay/m);
    assert.match(run.stdout, /The retry must get the stored first response back unchanged/);
    assert.match(run.stdout, /Why it matters: /);
    assert.match(run.stdout, /What was sent and what came back:/);
    const sent = /\[A\] POST \/pay {2}Idempotency-Key: ([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}) {2}\{"user":"[a-z]+_\d{5}","amount":\d+\}/.exec(run.stdout);
    assert.ok(sent, run.stdout);
    assert.match(run.stdout, /· payment_id: 1 first, 3 then/);
    assert.match(run.stdout, /These requests came from seed 42: idem-lab check 02 --seed 42 sends the same ones again\./);
    // The same seed sends the same keys, users and amounts again.
    const again = await runCli(['check', 'replay', '--dir', ws.dir, '--seed', '42']);
    assert.ok(again.stdout.includes(sent[0]), 'the same seed sends the same first request');
    const other = await runCli(['check', 'replay', '--dir', ws.dir], { env: { IDEM_LAB_SEED: '43' } });
    assert.ok(!other.stdout.includes(sent[1]), 'another seed sends another key');
    assert.match(other.stdout, /seed 43/);
    const bad = await runCli(['check', 'replay', '--dir', ws.dir, '--seed', 'forty-two']);
    assert.equal(bad.exitCode, 2);
    assert.match(bad.stderr, /a seed is a whole number from 0 to 4294967295, not "forty-two"/);
    assert.match(run.stdout, /Stuck\? idem-lab hint 02/);
    assert.match(run.stdout, /0 of 1 step passes\. To do: 02\./);
    assert.equal(readState(ws.dir).steps?.['02']?.status, 'fail');
  } finally {
    ws.remove();
  }
});

test('start lays the workspace and starts one server; probe, ledger, status, restart and stop work on it', async () => {
  const tmp = tempDir();
  const port = String(await freePort());
  try {
    const start = await runCli(['start', '--port', port], { cwd: tmp.dir });
    assert.equal(start.exitCode, 0, start.stdout + start.stderr);
    assert.match(start.stdout, /Laid out server\.py, probe\.sh, ledger\.sh, statement\.sh, LAB\.md/);
    assert.match(start.stdout, new RegExp(`Started the payment server \\(pid \\d+\\) on http://127\\.0\\.0\\.1:${port}`));
    assert.match(start.stdout, /^## 01 · Reproduce the duplicate charge/m);
    for (const file of ['server.py', 'probe.sh', 'ledger.sh', 'LAB.md']) assert.ok(fs.existsSync(path.join(tmp.dir, file)), file);
    assert.ok(fs.statSync(path.join(tmp.dir, 'probe.sh')).mode & 0o100, 'probe.sh is executable');
    const { pid } = readState(tmp.dir);
    assert.ok(pid && serversUnder(tmp.dir).includes(pid));

    const again = await runCli(['start'], { cwd: tmp.dir });
    assert.match(again.stdout, new RegExp(`already running \\(pid ${pid}\\)`));
    assert.equal(serversUnder(tmp.dir).length, 1, 'starting twice does not start a second server');

    for (let i = 1; i <= 2; i++) {
      const probe = await runCli(['probe', 'k1'], { cwd: tmp.dir });
      assert.equal(probe.exitCode, 0);
      assert.match(probe.stdout, /^POST \/pay {2}Idempotency-Key: k1 {2}\{"user":"u1","amount":1000\}\nHTTP 201 Created\n\{"payment_id": \d/);
      assert.match(probe.stdout, new RegExp(`"payment_id": ${i},`));
    }
    const ledger = await runCli(['ledger'], { cwd: tmp.dir });
    assert.match(ledger.stdout, /^payment_id {2}idempotency_key {2}user {2}amount {2}created_at\n1 {11}k1 {15}u1 {4}1000 {4}\S+Z\n2 /);
    // The learner's server keeps the provider's statement too: both charges, beside their rows.
    const statement = await runCli(['statement'], { cwd: tmp.dir });
    assert.equal(statement.exitCode, 0, statement.stdout + statement.stderr);
    assert.match(statement.stdout, /^charged_at +user +amount +pid +ledger\n\S+Z +u1 +1000 +\d+ +payment 1\n\S+Z +u1 +1000 +\d+ +payment 2\n2 charges, 2 ledger rows$/m);
    const script = await execa('./statement.sh', [], { cwd: tmp.dir, reject: false });
    assert.equal(script.exitCode, 0, script.stderr);
    assert.equal(script.stdout.replace(/ +/g, ' '), statement.stdout.trimEnd().replace(/ +/g, ' '), 'statement.sh prints what idem-lab statement prints');
    // In a workspace started in Chinese the scripts speak Chinese too, with idem-lab's own words.
    await runCli(['start', '--lang', 'zh'], { cwd: tmp.dir });
    const zhScript = await execa('./statement.sh', [], { cwd: tmp.dir, reject: false });
    const zhStatement = await runCli(['statement', '--lang', 'zh'], { cwd: tmp.dir });
    assert.match(zhScript.stdout, /^扣款时间 +用户 +金额 +pid +账本\n\S+Z +u1 +1000 +\d+ +支付 1\n/);
    assert.equal(zhScript.stdout.replace(/ +/g, ' '), zhStatement.stdout.trimEnd().replace(/ +/g, ' '), 'statement.sh prints what idem-lab statement prints, in Chinese');
    assert.match((await execa('./ledger.sh', [], { cwd: tmp.dir, env: { IDEM_DB: 'missing.db' }, reject: false })).stdout, /^还没有账本：missing\.db 不存在/);
    assert.match((await execa('./probe.sh', [], { cwd: tmp.dir, env: { PORT: '1' }, reject: false })).stdout, /^POST \/pay {2}（没有 Idempotency-Key） /);
    await runCli(['start', '--lang', 'en'], { cwd: tmp.dir });
    assert.match((await execa('./ledger.sh', [], { cwd: tmp.dir, env: { IDEM_DB: 'missing.db' }, reject: false })).stdout, /^no ledger yet: missing\.db does not exist/);

    const status = await runCli(['status'], { cwd: tmp.dir });
    assert.match(status.stdout, new RegExp(`Server: running, pid ${pid}, http://127\\.0\\.0\\.1:${port}`));
    assert.match(status.stdout, /Progress: 0 of 8 steps pass\./);

    const restart = await runCli(['restart'], { cwd: tmp.dir });
    assert.equal(restart.exitCode, 0);
    assert.match(restart.stdout, new RegExp(`Stopped the payment server \\(pid ${pid}\\)\\.`));
    const newPid = readState(tmp.dir).pid;
    assert.ok(newPid && newPid !== pid);
    assert.deepEqual(serversUnder(tmp.dir), [newPid]);

    const stop = await runCli(['stop'], { cwd: tmp.dir });
    assert.match(stop.stdout, new RegExp(`Stopped the payment server \\(pid ${newPid}\\)\\.`));
    assert.deepEqual(serversUnder(tmp.dir), []);
    const stopAgain = await runCli(['stop'], { cwd: tmp.dir });
    assert.match(stopAgain.stdout, /No payment server is running here: none was started, or it was stopped already/);
  } finally {
    stopRecorded(tmp.dir);
    tmp.remove();
  }
});

test('stop says so when the server had died; start keeps a changed file unless --force', async () => {
  const tmp = tempDir();
  const port = String(await freePort());
  try {
    assert.equal((await runCli(['start', '--port', port], { cwd: tmp.dir })).exitCode, 0);
    const { pid } = readState(tmp.dir);
    assert.ok(pid);
    process.kill(-pid, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const stop = await runCli(['stop'], { cwd: tmp.dir });
    assert.match(stop.stdout, new RegExp(`The payment server \\(pid ${pid}\\) was not running any more: it may have crashed`));

    const server = path.join(tmp.dir, 'server.py');
    fs.appendFileSync(server, '\n# my change\n');
    const kept = await runCli(['start', '--port', port], { cwd: tmp.dir });
    assert.match(kept.stdout, /Kept your changed server\.py \(idem-lab start --force resets it\)/);
    assert.match(fs.readFileSync(server, 'utf8'), /# my change/);
    assert.equal((await runCli(['stop'], { cwd: tmp.dir })).exitCode, 0);
    const forced = await runCli(['start', '--port', port, '--force'], { cwd: tmp.dir });
    assert.match(forced.stdout, /Laid out server\.py/);
    assert.doesNotMatch(fs.readFileSync(server, 'utf8'), /# my change/);
  } finally {
    stopRecorded(tmp.dir);
    tmp.remove();
  }
});

test('show prints one step of the lab sheet; hint gives one more hint each time', async () => {
  const tmp = tempDir();
  try {
    const show = await runMain(['show', 'nokey', '--dir', tmp.dir]);
    assert.equal(show.exitCode, 0);
    assert.match(show.stdout, /^## 03 · Refuse a request without a key/);
    assert.doesNotMatch(show.stdout, /^## 04/m);
    const unknown = await runMain(['show', '42', '--dir', tmp.dir]);
    assert.equal(unknown.exitCode, 2);
    assert.match(unknown.stderr, /unknown step "42"/);
    const first = await runMain(['hint', '03', '--dir', tmp.dir]);
    assert.match(first.stdout, /^Hint 1 of 3 for 03 nokey: /);
    assert.doesNotMatch(first.stdout, /Hint 2 of 3/);
    const second = await runMain(['hint', '03', '--dir', tmp.dir]);
    assert.match(second.stdout, /Hint 2 of 3 for 03 nokey: /);
    const third = await runMain(['hint', '03', '--dir', tmp.dir]);
    assert.match(third.stdout, /That was the last hint for 03/);
    const past = await runMain(['hint', '03', '--dir', tmp.dir]);
    assert.match(past.stdout, /Hint 3 of 3 for 03 nokey: /);
    assert.match(past.stdout, /No more hints for 03: those are all 3\. .*--reset starts again/, 'past the last hint, it says there are no more');
    assert.doesNotMatch(past.stdout, /That was the last hint/);
  } finally {
    tmp.remove();
  }
});

test('main runs twice in one process with nothing carried over: language, colour and options are each call\'s own', async () => {
  const tmp = tempDir();
  const before = language();
  try {
    setLanguage('zh');
    const korean = captureOutput({ colour: true });
    assert.equal(await main(['--lang', 'ko', 'show', '03', '--dir', tmp.dir], korean, { LANG: 'C.UTF-8' }), 0);
    assert.match(korean.stdout(), /^## 03 · /m);
    assert.doesNotMatch(korean.stdout(), /Refuse a request without a key/, 'the Korean sheet');
    assert.equal(language(), 'zh', 'the language is put back as it was');
    const english = await runMain(['show', '03', '--dir', tmp.dir]);
    assert.match(english.stdout, /^## 03 · Refuse a request without a key/, 'the next call chooses its own language');
    assert.doesNotMatch(english.stdout + english.stderr, /\x1b\[/, 'nor does it keep the colour of the one before');
    // --reset applies to its own call only: the next hint counts on from it.
    assert.match((await runMain(['hint', '03', '--dir', tmp.dir])).stdout, /^Hint 1 of 3 for 03/m);
    assert.match((await runMain(['hint', '03', '--dir', tmp.dir])).stdout, /Hint 2 of 3 for 03/);
    const reset = await runMain(['hint', '03', '--reset', '--dir', tmp.dir]);
    assert.doesNotMatch(reset.stdout, /Hint 2 of 3/);
    assert.match((await runMain(['hint', '03', '--dir', tmp.dir])).stdout, /Hint 2 of 3 for 03/);
    // A usage error is returned, never an exit: the process goes on.
    const unknown = await runMain(['--lang', 'xx', 'status']);
    assert.equal(unknown.exitCode, 2);
    assert.match(unknown.stderr, /^idem-lab: The lab is not written in "xx"/);
    assert.equal((await runMain(['--version'])).stdout, '0.1.0\n');
  } finally {
    setLanguage(before);
    tmp.remove();
  }
});
