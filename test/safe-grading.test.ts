/**
 * Grading untrusted code safely (issue 8): the server gets no secret of the grader's, runs
 * confined in a bubblewrap sandbox when one starts, leaves nothing running, and cannot
 * make the grader read without bound or block.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { grade } from '../grader/engine.js';
import { DEFAULT_COMMAND, resolveInterpreter, runningServerCount, type ServerCommand } from '../grader/server.js';
import { openWorkspace } from '../lab/workspace.js';
import { chooseSandbox, DEFAULT_SANDBOX_LIMITS, NoSandbox, probeSandbox } from '../grader/sandbox.js';
import { RUN_MARKER, sweepStaleRuns } from '../grader/stale.js';
import { FIXTURES_DIR, buildWorkspace } from '../fixtures/build.js';
import { selectSteps } from '../steps/index.js';
import type { StepResult } from '../grader/types.js';
import { CLI, runCli, tempDir } from './support.js';

const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
  assert.equal(runningServerCount(), 0, 'every server the grader started was stopped');
});

const SECRETS = { GITHUB_TOKEN: 'ghp_fake_token_for_the_test', AWS_SECRET_ACCESS_KEY: 'fake/aws/secret', ACTIONS_RUNTIME_TOKEN: 'fake-runtime' };

function misbehaving(name: string): string {
  return fs.readFileSync(path.join(FIXTURES_DIR, 'misbehaving', name, 'server.py'), 'utf8');
}

/** A workspace holding a misbehaving server and extra files; removed by the returned function. */
function workspaceWith(name: string, files: Record<string, string> = {}): { dir: string; remove: () => void } {
  const tmp = tempDir('idem-lab-safe-');
  fs.writeFileSync(path.join(tmp.dir, 'server.py'), misbehaving(name));
  for (const [file, text] of Object.entries(files)) fs.writeFileSync(path.join(tmp.dir, file), text);
  return tmp;
}

async function commandFor(dir: string, sandboxed: boolean, hide: string[] = []): Promise<ServerCommand> {
  const command = await resolveInterpreter(DEFAULT_COMMAND, dir);
  if (!sandboxed) return command;
  const sandbox = await chooseSandbox('required', hide);
  assert.ok(sandbox, 'a sandbox starts here (.ci/run installs bubblewrap)');
  return { ...command, sandbox };
}

interface SnoopReport {
  env: Record<string, string>;
  signal_grader: boolean;
  reach_host_port: boolean;
  pids: number[];
  wrote: Record<string, boolean>;
  read: Record<string, string | null>;
  home: string[] | null;
  markers: string[];
  tmp_writable: boolean;
  limits: Record<string, number>;
}

/** Grades step 02 against the snooping server and returns what it reported seeing. */
async function snoop(sandboxed: boolean): Promise<{ report: SnoopReport; result: StepResult; workspace: string; classmate: string }> {
  Object.assign(process.env, SECRETS);
  const classmate = tempDir('idem-lab-classmate-');
  fs.writeFileSync(path.join(classmate.dir, 'secret.txt'), 'the classmate answer');
  // A port on the host's loopback that the server must not reach from a sandbox.
  const listener = net.createServer((c) => c.destroy());
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  const plan = {
    host_port: (listener.address() as net.AddressInfo).port,
    grader_pid: process.pid,
    // Without a sandbox nothing stops a server run as root: it only tries then what it may.
    write: sandboxed ? ['/etc/idem-lab-pwned', path.join(classmate.dir, 'pwned.txt')] : [],
    read: [path.join(classmate.dir, 'secret.txt')],
    // A file the server writes into its /tmp: in a sandbox it must not land in the host's.
    tmp_probe: `idem-lab-snoop-${process.pid}-${Date.now()}`,
  };
  const ws = workspaceWith('snoops', { 'snoop.json': JSON.stringify(plan) });
  if (sandboxed) plan.write.push(path.join(ws.dir, 'pwned.txt'));
  fs.writeFileSync(path.join(ws.dir, 'snoop.json'), JSON.stringify(plan));
  try {
    const [result] = await grade({ workspace: ws.dir, steps: selectSteps(['02']), command: await commandFor(ws.dir, sandboxed, [classmate.dir, ws.dir]) });
    const answered = result.exchanges.find((e) => e.status === 500);
    assert.ok(answered, `the snooping server answered: ${JSON.stringify(result.exchanges)}`);
    return { report: JSON.parse(answered.responseBody ?? '') as SnoopReport, result, workspace: ws.dir, classmate: classmate.dir };
  } finally {
    const wroteTmp = path.join('/tmp', plan.tmp_probe);
    if (sandboxed) assert.equal(fs.existsSync(wroteTmp), false, "what it wrote into /tmp stayed in the sandbox's own folder");
    fs.rmSync(wroteTmp, { force: true });
    const wroteEtc = fs.existsSync('/etc/idem-lab-pwned');
    fs.rmSync('/etc/idem-lab-pwned', { force: true });
    assert.equal(wroteEtc, false, 'nothing was written into /etc');
    ws.remove();
    classmate.remove();
    listener.close();
  }
}

function assertAllowListed(env: Record<string, string>): void {
  for (const name of Object.keys(SECRETS)) assert.equal(env[name], undefined, `${name} is not passed to the server`);
  // bwrap sets PWD to the folder it starts the server in.
  const allowed = /^(PWD|PATH|HOME|LANG|LC_\w+|TZ|USER|LOGNAME|SHELL|TERM|TMPDIR|PORT|IDEM_DB|IDEM_CHARGE_MS|IDEM_DB_MS|IDEM_PROVIDER_LOG|IDEM_PROVIDER_GATE|PYTHONUNBUFFERED|PYTHONDONTWRITEBYTECODE)$/;
  // Python itself may add LC_CTYPE when it coerces the C locale.
  for (const name of Object.keys(env)) assert.match(name, allowed, `${name} is on the allow-list`);
  assert.ok(env.PORT && env.IDEM_DB && env.IDEM_CHARGE_MS, 'the contract variables are set');
  assert.notEqual(env.HOME, os.homedir(), 'HOME is a temporary folder, not the grader user\'s');
  // Without a sandbox TMPDIR is the instance's own temporary folder (what a sandbox shows as /tmp), never the grader's.
  if (env.TMPDIR !== undefined) assert.notEqual(env.TMPDIR, process.env.TMPDIR, "TMPDIR is the server's own folder, not the grader's");
}

test('without a sandbox the server gets only the allow-listed environment, none of the grader\'s secrets', async () => {
  const { report } = await snoop(false);
  assertAllowListed(report.env);
  assert.equal(report.reach_host_port, true, 'without a sandbox the host network is reachable');
  assert.equal(report.signal_grader, true, 'without a sandbox the grader is visible (the sandbox is what hides it)');
});

test('in the sandbox the server cannot see or signal the grader, write outside its folder, or read a classmate\'s files', async () => {
  const { report, workspace, classmate } = await snoop(true);
  assertAllowListed(report.env);
  assert.equal(report.signal_grader, false, 'the grader is out of reach (own pid namespace)');
  assert.equal(report.reach_host_port, false, 'no network beyond its own loopback (the grader reaches it through the relay)');
  assert.ok(!report.pids.includes(process.pid) && report.pids.length < 10, `only the sandbox's processes are visible: ${report.pids.join(' ')}`);
  assert.deepEqual(
    Object.entries(report.wrote).filter(([, ok]) => ok).map(([p]) => p),
    [],
    'it could write none of /etc, the original workspace, a classmate\'s folder',
  );
  assert.equal(report.read[path.join(classmate, 'secret.txt')], null, 'a classmate\'s folder is hidden');
  assert.deepEqual(report.home, [], 'HOME is an empty folder');
  // Nothing only the grader sets: its run mark is out of sight, and /tmp is writable as on any machine (issue 7, class 6).
  assert.deepEqual(report.markers, [], "the grader's run mark is not visible");
  assert.equal(report.tmp_writable, true, '/tmp is writable');
  assert.deepEqual(
    { as: report.limits.RLIMIT_AS, nofile: report.limits.RLIMIT_NOFILE, fsize: report.limits.RLIMIT_FSIZE, cpu: report.limits.RLIMIT_CPU },
    { as: DEFAULT_SANDBOX_LIMITS.memoryBytes, nofile: DEFAULT_SANDBOX_LIMITS.openFiles, fsize: DEFAULT_SANDBOX_LIMITS.fileBytes, cpu: DEFAULT_SANDBOX_LIMITS.cpuSeconds },
    'memory, open files, file size and CPU time are limited',
  );
  assert.ok(report.limits.RLIMIT_NPROC > 0, 'the number of processes is limited');
  assert.ok(!report.env.IDEM_DB.startsWith(workspace), 'the database is in the check\'s temporary folder');
});

test('the reference solution passes every step in the sandbox', async () => {
  const tmp = tempDir('idem-lab-sandboxed-');
  try {
    buildWorkspace(tmp.dir, 'reference');
    const results = await grade({ workspace: tmp.dir, steps: selectSteps([]), command: await commandFor(tmp.dir, true, [tmp.dir]) });
    assert.deepEqual(results.filter((r) => r.status !== 'pass').map((r) => `${r.id}: ${r.message}`), []);
    assert.equal(fs.existsSync(path.join(tmp.dir, 'lab.db')), false, 'the learner\'s workspace was not written to');
  } finally {
    tmp.remove();
  }
});

test('a Node.js server passes every step in the sandbox too, behind the Node.js relay (a Python server gets the Python one)', async () => {
  const tmp = tempDir('idem-lab-sandboxed-node-');
  try {
    buildWorkspace(tmp.dir, 'ok-node-server');
    const sandbox = await chooseSandbox('required', [tmp.dir]);
    assert.ok(sandbox, 'a sandbox starts here (.ci/run installs bubblewrap)');
    const { command } = openWorkspace(tmp.dir);
    assert.equal(command.file, 'node');
    const results = await grade({ workspace: tmp.dir, steps: selectSteps([]), command: { ...command, sandbox } });
    assert.deepEqual(results.filter((r) => r.status !== 'pass').map((r) => `${r.id}: ${r.message}`), []);
  } finally {
    tmp.remove();
  }
});

/** Pids of live processes whose command line holds `token`. */
function processesWith(token: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(token) && !fs.readFileSync(`/proc/${entry}/stat`, 'utf8').includes(') Z ')) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

for (const sandboxed of [false, true]) {
  test(`a quiet setsid daemon is found, killed and reported (${sandboxed ? 'sandbox' : 'no sandbox'})`, async () => {
    const token = `idem-lab-daemon-${crypto.randomBytes(6).toString('hex')}`;
    const ws = workspaceWith('quiet-daemon', { 'daemon-token': token });
    try {
      const [result] = await grade({ workspace: ws.dir, steps: selectSteps(['02']), command: await commandFor(ws.dir, sandboxed) });
      assert.equal(result.status, 'fail');
      assert.deepEqual(processesWith(token), [], 'the daemon does not outlive the check');
      if (!sandboxed) assert.ok(result.warnings.some((w) => /your server left a process running/i.test(w)), `the verdict says so: ${result.warnings.join(' | ')}`);
    } finally {
      for (const pid of processesWith(token)) process.kill(pid, 'SIGKILL');
      ws.remove();
    }
  });
}

test('--sandbox: grade requires one and names bubblewrap when none starts; check falls back; a bad value is a usage error', async () => {
  const ws = tempDir('idem-lab-nosandbox-');
  try {
    buildWorkspace(ws.dir, 'reference');
    const missing = { IDEM_LAB_BWRAP: '/nonexistent/bwrap' };
    process.env.IDEM_LAB_BWRAP = missing.IDEM_LAB_BWRAP;
    await assert.rejects(chooseSandbox('required'), NoSandbox);
    assert.equal(await chooseSandbox('auto'), undefined);
    assert.equal(typeof (await probeSandbox('/nonexistent/bwrap')), 'string');

    const graded = await runCli(['grade', ws.dir], { env: missing });
    assert.equal(graded.exitCode, 2, graded.stderr);
    assert.match(graded.stderr, /no sandbox could start.*install bubblewrap/s);

    const required = await runCli(['check', '02', '--dir', ws.dir, '--sandbox', 'required'], { env: missing });
    assert.equal(required.exitCode, 2, required.stderr);
    assert.match(required.stderr, /bubblewrap/);

    const auto = await runCli(['check', '02', '--dir', ws.dir], { env: missing });
    assert.equal(auto.exitCode, 0, auto.stdout + auto.stderr);

    const bad = await runCli(['check', '02', '--dir', ws.dir, '--sandbox', 'maybe']);
    assert.equal(bad.exitCode, 2);
    assert.match(bad.stderr, /--sandbox must be auto, required or off/);
  } finally {
    ws.remove();
  }
});

test('grade: the instructor\'s config decides points and required steps; a student\'s idem-lab.json only names its server', async () => {
  const ws = tempDir('idem-lab-student-');
  const out = tempDir('idem-lab-book-');
  try {
    buildWorkspace(ws.dir, 'reference');
    fs.writeFileSync(path.join(ws.dir, 'idem-lab.json'), JSON.stringify({ server: ['python3', 'server.py'], points: { '01': 100 }, required: [] }));
    const json = path.join(out.dir, 'book.json');
    const run = await runCli(['grade', ws.dir, '--json', json], { timeoutMs: 120_000 });
    assert.equal(run.exitCode, 0, run.stdout + run.stderr);
    const book = JSON.parse(fs.readFileSync(json, 'utf8')) as { max_score: number; steps: Array<{ required: boolean }>; students: Array<{ score: number }> };
    assert.equal(book.max_score, 8, 'one point per step, not the student\'s 100');
    assert.ok(book.steps.every((s) => s.required), 'every step required, whatever the student listed');
    assert.equal(book.students[0].score, 8);
  } finally {
    ws.remove();
    out.remove();
  }
});

test('answer files: a FIFO, a directory, a link out of the workspace and a file over 1 MB fail clearly, unread', async () => {
  Object.assign(process.env, SECRETS);
  const ws = tempDir('idem-lab-answers-');
  try {
    buildWorkspace(ws.dir, 'reference');
    const file = (n: string) => path.join(ws.dir, n);
    fs.rmSync(file('01-duplicate.txt'));
    await execa('mkfifo', [file('01-duplicate.txt')]);
    fs.rmSync(file('03-nokey.txt'));
    fs.symlinkSync('/proc/self/environ', file('03-nokey.txt'));
    fs.rmSync(file('04-conflict.txt'));
    fs.mkdirSync(file('04-conflict.txt'));
    fs.writeFileSync(file('07-retry.md'), 'x'.repeat(1024 * 1024 + 1));
    // A link that stays inside the workspace is read as the file it points to.
    fs.renameSync(file('08-notes.md'), file('notes-real.md'));
    fs.symlinkSync('notes-real.md', file('08-notes.md'));
    const results = await grade({ workspace: ws.dir, steps: selectSteps(['01', '07', '08']), command: await resolveInterpreter(DEFAULT_COMMAND, ws.dir) });
    const [r01, r07, r08] = results;
    assert.equal(r01.status, 'fail');
    assert.match(r01.message, /01-duplicate\.txt is a FIFO \(named pipe\), not a regular file, so it was not read/);
    assert.equal(r07.status, 'fail');
    assert.match(r07.message, /07-retry\.md is 1048577 bytes, more than the 1048576 bytes/);
    assert.equal(r08.status, 'pass', r08.message);
    const more = await grade({ workspace: ws.dir, steps: selectSteps(['03', '04']), command: await resolveInterpreter(DEFAULT_COMMAND, ws.dir) });
    assert.match(more[0].message, /03-nokey\.txt points outside the workspace \(to \/proc\/\d+\/environ\), so it was not read/);
    assert.match(more[1].message, /04-conflict\.txt is a directory, not a regular file/);
    const everything = JSON.stringify([...results, ...more]);
    for (const secret of Object.values(SECRETS)) assert.ok(!everything.includes(secret), 'no secret of the grader\'s reaches a verdict');
  } finally {
    ws.remove();
  }
});

test('an endless response body ends the exchange at 64 KB: "the response was longer than 64 KB", memory bounded', async () => {
  const ws = workspaceWith('endless-body');
  try {
    const [result] = await grade({ workspace: ws.dir, steps: selectSteps(['02']), command: await resolveInterpreter(DEFAULT_COMMAND, ws.dir) });
    assert.equal(result.status, 'fail');
    assert.match(result.message, /the response was longer than 64 KB/);
    assert.ok(result.exchanges.every((e) => (e.responseBody ?? '').length <= 64 * 1024));
    assert.ok(process.memoryUsage().rss < 512 * 1024 * 1024, `the grader stays under 512 MB (rss ${process.memoryUsage().rss})`);
  } finally {
    ws.remove();
  }
});

test('servers and temporary folders of a grader killed with SIGKILL are cleaned up by the next run', async () => {
  const ws = workspaceWith('pay-hangs');
  const script = `
    import { grade } from ${JSON.stringify(path.join(path.dirname(CLI), '..', 'grader', 'engine.js'))};
    import { selectSteps } from ${JSON.stringify(path.join(path.dirname(CLI), '..', 'steps', 'index.js'))};
    await grade({ workspace: ${JSON.stringify(ws.dir)}, steps: selectSteps(['02']) });`;
  const child = execa('node', ['--input-type=module', '-e', script], { env: { IDEM_LAB_REQUEST_TIMEOUT_MS: '120000' }, reject: false, stdin: 'ignore' });
  try {
    // The child's server is the process whose IDEM_DB lies in a folder the child marked.
    let found: { pid: number; dir: string } | undefined;
    for (let i = 0; i < 200 && !found; i++) {
      await new Promise((r) => setTimeout(r, 100));
      found = serverOfGrader(child.pid ?? -1);
    }
    assert.ok(found, 'the child grader started a server');
    child.kill('SIGKILL');
    await child;
    assert.ok(fs.existsSync(found.dir), 'a grader killed outright leaves its folder');
    // Its unsandboxed server dies with it where setpriv exists (--pdeathsig SIGKILL, server.ts withParentDeath, issue 18); else the sweep kills it.
    const setpriv = (process.env.PATH ?? '').split(':').some((dir) => dir !== '' && fs.existsSync(path.join(dir, 'setpriv')));
    // A bound, not a speed check: a killed process needs a CPU to exit, and a loaded machine gives it one late.
    for (let i = 0; setpriv && i < 300 && alive(found.pid); i++) await new Promise((r) => setTimeout(r, 50));
    if (setpriv) assert.equal(alive(found.pid), false, 'its server died with it');
    const swept = sweepStaleRuns(os.tmpdir(), true);
    assert.ok(swept.dirs.includes(found.dir), 'the folder was removed');
    if (!setpriv) assert.ok(swept.killed.includes(found.pid), 'the server was killed');
    for (let i = 0; i < 50 && alive(found.pid); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(alive(found.pid), false);
    assert.equal(fs.existsSync(found.dir), false);
  } finally {
    child.kill('SIGKILL');
    ws.remove();
  }
});

function alive(pid: number): boolean {
  try {
    return !fs.readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
}

/** A server of the grader process `graderPid`: found by the marker in its IDEM_DB's folder. */
function serverOfGrader(graderPid: number): { pid: number; dir: string } | undefined {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const db = fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').find((v) => v.startsWith('IDEM_DB='));
      if (!db) continue;
      // The marker is in the check's folder, which holds the server's copy and its database.
      for (let dir = path.dirname(db.slice('IDEM_DB='.length)); dir !== path.dirname(dir); dir = path.dirname(dir)) {
        if (!fs.existsSync(path.join(dir, RUN_MARKER))) continue;
        const marker = JSON.parse(fs.readFileSync(path.join(dir, RUN_MARKER), 'utf8')) as { pid: number };
        if (marker.pid === graderPid) return { pid: Number(entry), dir };
        break;
      }
    } catch {
      // not a server, or not ours
    }
  }
  return undefined;
}

/** Pathological answers of 1 MB: what a regex that backtracks, or a parser that recurses, chokes on. */
const PATHOLOGICAL: Record<string, string> = {
  'one line of `[`': '['.repeat(1 << 20),
  'lines of `[`': '[\n'.repeat(1 << 19),
  '`curl ` repeated': 'curl '.repeat((1 << 20) / 5),
  'continued curl lines': 'curl -X POST /pay \\\n'.repeat((1 << 20) / 20),
  'one line of 1 MB': 'a'.repeat(1 << 20),
  '`<` repeated': '<'.repeat(1 << 20),
  'unclosed links': '[a]('.repeat(1 << 18),
  'dashes': '- '.repeat(1 << 19),
  'nested quotes': '> '.repeat(1 << 19),
  'probe options': `./probe.sh ${'-x '.repeat((1 << 20) / 3)}`,
};

test('file checks read 1 MB of pathological text in linear time, without a stack overflow', async () => {
  const ws = tempDir('idem-lab-patho-');
  try {
    buildWorkspace(ws.dir, 'reference');
    const fileSteps = selectSteps([]).filter((s) => s.file);
    for (const [name, text] of Object.entries(PATHOLOGICAL)) {
      for (const step of fileSteps) fs.writeFileSync(path.join(ws.dir, step.file!.name), text);
      const started = performance.now();
      const results = await grade({ workspace: ws.dir, steps: fileSteps.filter((s) => !s.live), concurrency: 1 });
      const ms = performance.now() - started;
      for (const r of results) assert.equal(r.status, 'fail', `${name}: step ${r.id} is graded, not an error: ${r.message}`);
      // The bound is 2 s per answer (see the report's figures); a generous one here, the machine is shared.
      assert.ok(ms < 15_000, `${name}: ${results.length} answers graded in ${Math.round(ms)} ms`);
    }
  } finally {
    ws.remove();
  }
});

test('Ctrl-C stops `check` within a second or two, its servers stopped', async () => {
  const ws = workspaceWith('pay-hangs');
  try {
    const child = execa('node', [CLI, 'check', '02', '--dir', ws.dir], { env: { NO_COLOR: '1', IDEM_LAB_REQUEST_TIMEOUT_MS: '120000' }, reject: false, stdin: 'ignore' });
    let server: { pid: number; dir: string } | undefined;
    for (let i = 0; i < 200 && !server; i++) {
      await new Promise((r) => setTimeout(r, 100));
      server = serverOfGrader(child.pid ?? -1);
    }
    assert.ok(server, 'check started the server');
    // Give it time to send the request that will hang.
    await new Promise((r) => setTimeout(r, 500));
    const sent = performance.now();
    child.kill('SIGINT');
    const result = await child;
    const ms = performance.now() - sent;
    assert.equal(result.exitCode, 130);
    assert.ok(ms < 5000, `it ended ${Math.round(ms)} ms after SIGINT`);
    for (let i = 0; i < 50 && alive(server.pid); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(alive(server.pid), false, 'the server was stopped');
    assert.equal(fs.existsSync(server.dir), false, 'its temporary folder was removed');
  } finally {
    ws.remove();
  }
});

test('grade --timeout cuts a hanging workspace off in time', async () => {
  const ws = workspaceWith('pay-hangs');
  try {
    const started = performance.now();
    const run = await runCli(['grade', ws.dir, '--timeout', '2'], { env: { IDEM_LAB_REQUEST_TIMEOUT_MS: '120000' } });
    const ms = performance.now() - started;
    assert.equal(run.exitCode, 1, run.stdout + run.stderr);
    assert.match(run.stdout, /1 workspace graded in [\d.]+ s with --jobs 1: 0 pass, 0 fail, 1 error\./);
    assert.ok(ms < 30_000, `grade ended after ${Math.round(ms)} ms`);
  } finally {
    ws.remove();
  }
});
