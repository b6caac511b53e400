/**
 * Issue 18, learner-side faults: a damaged state.json does not hide the proven server from
 * `idem-lab stop`; a damaged lab.db is one sentence in `ledger`, `statement`, ./ledger.sh
 * and ./statement.sh; the servers of `check --sandbox off` die with it on kill -9.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { buildWorkspace } from '../fixtures/build.js';
import { freePort } from '../grader/server.js';
import { procStat } from '../grader/process.js';
import { CLI, killGroupIn, runCli, stopRecorded, tempDir } from './support.js';

/** Live processes whose environment has IDEM_DB under `root`. */
function processesWithDbUnder(root: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = procStat(Number(entry));
      if (!stat || stat.state === 'Z') continue;
      const env = fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (env.some((v) => v.startsWith(`IDEM_DB=${root}`))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

test('a damaged state.json: stop still finds the proven server, stops it, and says the file is damaged', async () => {
  const ws = tempDir('idem-lab-damaged-state-');
  try {
    buildWorkspace(ws.dir, 'reference');
    const port = await freePort();
    const started = await runCli(['start', '--dir', ws.dir, '--port', String(port)]);
    assert.equal(started.exitCode, 0, started.stdout + started.stderr);
    const { pid } = JSON.parse(fs.readFileSync(path.join(ws.dir, '.idem-lab', 'state.json'), 'utf8'));
    assert.ok(procStat(pid), 'the server runs');
    try {
      fs.writeFileSync(path.join(ws.dir, '.idem-lab', 'state.json'), '{"pid": 12');
      const stopped = await runCli(['stop', '--dir', ws.dir]);
      assert.equal(stopped.exitCode, 0, stopped.stdout + stopped.stderr);
      assert.match(stopped.stdout, new RegExp(`Stopped the payment server \\(pid ${pid}\\)`));
      assert.match(stopped.stderr, /state\.json is damaged: it is not valid JSON/);
      const gone = procStat(pid);
      assert.ok(!gone || gone.state === 'Z', 'the server is gone');
      assert.equal(fs.readFileSync(path.join(ws.dir, '.idem-lab', 'state.json'), 'utf8'), '{"pid": 12', 'the damaged file is left for the learner');
      const again = await runCli(['stop', '--dir', ws.dir]);
      assert.equal(again.exitCode, 0, again.stderr);
      assert.match(again.stdout, /No payment server is running here: none was started, or it was stopped already/);
      assert.match(again.stderr, /state\.json is damaged/);
    } finally {
      killGroupIn(pid, ws.dir);
    }
  } finally {
    ws.remove();
  }
});

test('a damaged lab.db: ledger, statement, ./ledger.sh and ./statement.sh say it in one sentence, no stack trace', async () => {
  const ws = tempDir('idem-lab-damaged-db-');
  try {
    buildWorkspace(ws.dir, 'reference');
    const laid = await runCli(['start', '--dir', ws.dir, '--port', String(await freePort())]);
    assert.equal(laid.exitCode, 0, laid.stderr);
    stopRecorded(ws.dir);
    fs.writeFileSync(path.join(ws.dir, 'lab.db'), Buffer.alloc(4096, 'not a sqlite database '));
    fs.writeFileSync(path.join(ws.dir, 'provider.log'), '{"at": "2026-12-04T00:00:00Z", "user": "u", "amount": 5}\n');
    for (const command of ['ledger', 'statement']) {
      const run = await runCli([command, '--dir', ws.dir]);
      assert.equal(run.exitCode, 2, `${command}: ${run.stdout}${run.stderr}`);
      assert.match(run.stderr, /lab\.db cannot be read as the ledger \(.*\): it is damaged or not a sqlite database\./, command);
      assert.equal(run.stderr.trim().split('\n').length, 1, `${command}: one line`);
      assert.doesNotMatch(run.stderr, /\n\s+at /, `${command}: no stack trace`);
    }
    for (const script of ['./ledger.sh', './statement.sh']) {
      const run = await execa(script, [], { cwd: ws.dir, reject: false, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, extendEnv: false });
      assert.equal(run.exitCode, 1, `${script}: ${run.stdout}${run.stderr}`);
      assert.match(run.stdout, /lab\.db cannot be read as the ledger \(file is not a database\)/, script);
      assert.doesNotMatch(run.stderr, /Traceback/, script);
    }
  } finally {
    stopRecorded(ws.dir);
    ws.remove();
  }
});

test('a server killed mid-transaction (the hot journal of step 12\'s kill -9): ledger, statement and both scripts still read the ledger', async () => {
  const ws = tempDir('idem-lab-hot-journal-');
  try {
    buildWorkspace(ws.dir, 'reference');
    const port = await freePort();
    const laid = await runCli(['start', '--dir', ws.dir, '--port', String(port)]);
    assert.equal(laid.exitCode, 0, laid.stderr);
    const paid = await execa('./probe.sh', ['k-hot'], { cwd: ws.dir, reject: false, env: { PORT: String(port) } });
    assert.match(paid.stdout, /^HTTP\S* 201/m, paid.stdout + paid.stderr);
    stopRecorded(ws.dir);
    // A writer in the rollback-journal mode, killed inside its transaction after its
    // changes spilled into lab.db: the journal it leaves is hot, and only a connection
    // that may write can roll it back.
    const killed = await execa('python3', ['-c', [
      'import os, signal, sqlite3',
      'c = sqlite3.connect("lab.db", isolation_level=None)',
      'c.execute("PRAGMA journal_mode=DELETE"); c.execute("PRAGMA cache_size=2")',
      'c.execute("BEGIN IMMEDIATE"); c.execute("CREATE TABLE pad(x)")',
      'c.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO pad SELECT randomblob(4000) FROM n")',
      'os.kill(os.getpid(), signal.SIGKILL)',
    ].join('\n')], { cwd: ws.dir, reject: false });
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    assert.ok(fs.existsSync(path.join(ws.dir, 'lab.db-journal')), 'the killed writer left its journal');
    for (const script of ['./ledger.sh', './statement.sh']) {
      const run = await execa(script, [], { cwd: ws.dir, reject: false, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, extendEnv: false });
      assert.equal(run.exitCode, 0, `${script}: ${run.stdout}${run.stderr}`);
      assert.match(run.stdout, /k-hot|payment 1/, `${script} shows the payment: ${run.stdout}`);
    }
    for (const command of ['ledger', 'statement']) {
      const run = await runCli([command, '--dir', ws.dir]);
      assert.equal(run.exitCode, 0, `${command}: ${run.stdout}${run.stderr}`);
    }
  } finally {
    stopRecorded(ws.dir);
    ws.remove();
  }
});

test('kill -9 of check --sandbox off: its servers die with it (parent-death signal), not at the next sweep', async () => {
  const ws = tempDir('idem-lab-orphan-ws-');
  const tmp = tempDir('idem-lab-orphan-tmp-');
  // /health at once; every payment answered a minute later: the check is mid-step when it is killed.
  fs.writeFileSync(
    path.join(ws.dir, 'server.py'),
    [
      'import os, time',
      'from http.server import BaseHTTPRequestHandler, HTTPServer',
      'class H(BaseHTTPRequestHandler):',
      '    def do_GET(self):',
      '        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()',
      '    def do_POST(self):',
      '        time.sleep(60)',
      'HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()',
      '',
    ].join('\n'),
  );
  const cli = spawn('node', [CLI, 'check', '02', '--dir', ws.dir, '--sandbox', 'off'], { env: { ...process.env, TMPDIR: tmp.dir, NO_COLOR: '1' }, stdio: 'ignore' });
  try {
    let servers: number[] = [];
    for (const until = Date.now() + 30_000; servers.length === 0 && Date.now() < until; await delay(100)) servers = processesWithDbUnder(tmp.dir);
    assert.ok(servers.length > 0, 'the check started its server');
    await delay(500); // the server holds a payment now
    cli.kill('SIGKILL');
    let left = servers;
    for (const until = Date.now() + 5_000; left.length > 0 && Date.now() < until; await delay(100)) left = processesWithDbUnder(tmp.dir);
    assert.deepEqual(left, [], 'no process with the check\'s IDEM_DB is left 5 s after kill -9');
  } finally {
    cli.kill('SIGKILL');
    for (const pid of processesWithDbUnder(tmp.dir)) process.kill(pid, 'SIGKILL');
    ws.remove();
    tmp.remove();
  }
});

test('check says so when it cannot save its verdicts (an immutable .idem-lab, which holds for root too), exit code unchanged', async (t) => {
  const ws = tempDir('idem-lab-unsaved-');
  const stateDir = path.join(ws.dir, '.idem-lab');
  try {
    buildWorkspace(ws.dir, 'reference');
    fs.mkdirSync(stateDir, { recursive: true });
    fs.writeFileSync(path.join(stateDir, 'state.json'), '{}\n');
    const locked = await execa('chattr', ['+i', stateDir], { reject: false });
    if (locked.exitCode !== 0) {
      t.skip(`chattr +i is not allowed here: ${locked.stderr}`);
      return;
    }
    const check = await runCli(['check', '02', '--dir', ws.dir, '--sandbox', 'off']);
    assert.equal(check.exitCode, 0, check.stdout + check.stderr);
    assert.match(check.stdout, /1 of 1 step passes/);
    assert.match(check.stderr, /The verdicts were not saved: /);
    assert.equal(fs.readFileSync(path.join(stateDir, 'state.json'), 'utf8'), '{}\n');
  } finally {
    await execa('chattr', ['-i', stateDir], { reject: false });
    ws.remove();
  }
});
