// Red team: a hostile student against the grader, also when the grader runs as root (as CI
// runners do). Each test is an attack of issue 18 that worked before its fix.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { LiveContext } from '../grader/context.js';
import { parseSeed } from '../grader/seed.js';
import { bwrapArgs, bwrapPath, chooseSandbox, dropPrivileges, installationOf, sandboxOwner, DEFAULT_SANDBOX_LIMITS } from '../grader/sandbox.js';
import { chownTree, renewFile } from '../grader/safe-copy.js';
import { copyImage, WorkspaceTooLarge, DEFAULT_IMAGE_LIMITS } from '../grader/workspace-image.js';
import { DEFAULT_DISK_BOUND } from '../grader/disk-bound.js';
import { grade } from '../grader/engine.js';
import { resolveInterpreter } from '../grader/server.js';
import { openWorkspace } from '../lab/workspace.js';
import { buildWorkspace } from '../fixtures/build.js';
import { selectSteps } from '../steps/index.js';
import { runCli, tempDir } from './support.js';
import { CheckCgroup, cgroupUnavailable } from '../grader/cgroup.js';

const isRoot = process.getuid?.() === 0;
const hasBwrap = spawnSync(bwrapPath(), ['--version']).status === 0;

/** A check's context on a workspace of `files`, its first copy made, as step 06 has it before a restart. */
function contextWith(files: Record<string, string>, links: Record<string, string> = {}) {
  const ws = tempDir('idem-lab-redteam-ws-');
  const tmp = tempDir('idem-lab-redteam-tmp-');
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(ws.dir, name), text);
  for (const [name, target] of Object.entries(links)) fs.symlinkSync(target, path.join(ws.dir, name));
  const ctx = new LiveContext(ws.dir, tmp.dir, '06', undefined, parseSeed('1'));
  (ctx as unknown as { copyWorkspace(): string }).copyWorkspace();
  return { ctx, remove: () => (ws.remove(), tmp.remove()) };
}

/** A host file the student wants to overwrite or read. */
function hostFile(text: string): { file: string; remove: () => void } {
  const dir = tempDir('idem-lab-redteam-host-');
  const file = path.join(dir.dir, 'host-secret.txt');
  fs.writeFileSync(file, text, { mode: 0o600 });
  return { file, remove: dir.remove };
}

test('a committed provider.log.renewed link does not let step 06 overwrite a host file', () => {
  const host = hostFile('host original\n');
  const { ctx, remove } = contextWith({ 'server.py': 'print(1)\n' }, { 'provider.log.renewed': host.file, 'lab.db.renewed': host.file });
  try {
    fs.writeFileSync(ctx.providerLog, 'charge 1\n', { mode: 0o6777 });
    fs.writeFileSync(ctx.dbPath, 'not a database\n');
    ctx.renewCopies();
    assert.equal(fs.readFileSync(host.file, 'utf8'), 'host original\n', 'the host file is untouched');
    assert.equal(fs.statSync(host.file).mode & 0o7777, 0o600, "the host file's mode is untouched");
    assert.equal(fs.readFileSync(ctx.providerLog, 'utf8'), 'charge 1\n', 'the statement is kept');
    assert.equal(fs.statSync(ctx.providerLog).mode & 0o7777, 0o600, "the renewed statement is 0600, not the student's 6777");
  } finally {
    remove();
    host.remove();
  }
});

test('a statement or database swapped for a link to a host file is removed, not copied in', () => {
  const host = hostFile('root:secret-hash:19000:0:99999:7:::\n');
  const { ctx, remove } = contextWith({ 'server.py': 'print(1)\n' });
  try {
    fs.symlinkSync(host.file, ctx.providerLog);
    fs.symlinkSync(host.file, ctx.dbPath);
    ctx.renewCopies();
    for (const file of [ctx.providerLog, ctx.dbPath]) {
      const seen = fs.existsSync(file) && !fs.lstatSync(file).isSymbolicLink() ? fs.readFileSync(file, 'utf8') : '';
      assert.ok(!seen.includes('secret-hash'), `${path.basename(file)} does not hold the host file`);
    }
    assert.equal(fs.readFileSync(host.file, 'utf8'), 'root:secret-hash:19000:0:99999:7:::\n');
  } finally {
    remove();
    host.remove();
  }
});

test("a link planted as the database's -shm or -wal is removed before the grader opens the database", () => {
  const host = hostFile('must not be truncated\n');
  const { ctx, remove } = contextWith({ 'server.py': 'print(1)\n' });
  try {
    // A real sqlite database in WAL mode, as a server leaves it.
    execFileSync('python3', ['-c', `import sqlite3; c=sqlite3.connect(${JSON.stringify(ctx.dbPath)}); c.execute('pragma journal_mode=wal'); c.execute('create table t(x)'); c.commit(); c.close()`]);
    fs.rmSync(`${ctx.dbPath}-shm`, { force: true });
    fs.rmSync(`${ctx.dbPath}-wal`, { force: true });
    fs.symlinkSync(host.file, `${ctx.dbPath}-shm`);
    fs.symlinkSync(host.file, `${ctx.dbPath}-wal`);
    ctx.renewCopies();
    assert.equal(fs.readFileSync(host.file, 'utf8'), 'must not be truncated\n');
  } finally {
    remove();
    host.remove();
  }
});

test('renewFile makes its copy O_EXCL under a random name and never takes the mode from the student', () => {
  const dir = tempDir('idem-lab-redteam-renew-');
  try {
    const file = path.join(dir.dir, 'provider.log');
    fs.writeFileSync(file, 'a\n', { mode: 0o4755 });
    assert.equal(renewFile(file), true);
    assert.equal(fs.statSync(file).mode & 0o7777, 0o600);
    fs.rmSync(file);
    execFileSync('mkfifo', [file]);
    assert.equal(renewFile(file), false, 'a FIFO is not renewed (nor opened for long)');
    assert.equal(fs.existsSync(file), false, 'and is removed');
  } finally {
    dir.remove();
  }
});

/** Runs `script` with sh in a sandbox as a server would be (as root: as the check's own user). */
async function inSandbox(script: string, cgroup?: CheckCgroup): Promise<{ status: number | null; out: string }> {
  const sandbox = await chooseSandbox('required');
  assert.ok(sandbox);
  const dir = tempDir('idem-lab-redteam-sbx-');
  try {
    const owner = sandboxOwner(sandbox, dir.dir);
    if (owner) chownTree(dir.dir, owner);
    const inner = owner ? dropPrivileges(owner, sandbox.limits, ['/bin/sh', '-c', script]) : ['prlimit', `--nproc=${DEFAULT_SANDBOX_LIMITS.processes}`, '/bin/sh', '-c', script];
    let [file, args] = [sandbox.bwrap, [...bwrapArgs(sandbox, dir.dir, dir.dir, '/bin/sh'), '--', ...inner]];
    if (cgroup) [file, args] = cgroup.wrap(file, args);
    const result = spawnSync(file, args, { encoding: 'utf8', timeout: 60_000 });
    cgroup?.release();
    return { status: result.status, out: `${result.stdout}${result.stderr}` };
  } finally {
    dir.remove();
  }
}

test('as root, the sandboxed server runs as an unprivileged user: /etc/shadow stays closed, no capabilities', { skip: !isRoot || !hasBwrap ? 'needs root and bubblewrap' : false }, async () => {
  const { out } = await inSandbox('id -u; head -c 20 /etc/shadow >/dev/null 2>&1 && echo READ-SHADOW; grep CapEff /proc/self/status');
  const uid = Number(out.trim().split('\n')[0]);
  assert.notEqual(uid, 0, `not root inside: ${out}`);
  assert.ok(!out.includes('READ-SHADOW'), `/etc/shadow is not readable: ${out}`);
  assert.match(out, /CapEff:\s+0+\n/, `no effective capabilities: ${out}`);
});

test('a Python server with 16 threads at once keeps its memory: the address-space bound leaves room for glibc\'s malloc arenas', { skip: !hasBwrap ? 'needs bubblewrap' : false }, async () => {
  // Each thread allocates, so glibc gives it an arena of its own (64 MiB of address space, up
  // to 8 per core). Under a 1 GiB RLIMIT_AS this raised MemoryError on 2 cores, as 02's
  // sixteen requests at once did to the reference server.
  const script = [
    'import threading, sqlite3, time',
    'errors = []',
    'def work():',
    '    try:',
    "        c = sqlite3.connect(':memory:'); c.execute('create table t(x)')",
    "        for i in range(200): c.execute('insert into t values (?)', ('x' * 1000,))",
    '        time.sleep(0.5)',
    '    except BaseException as e: errors.append(repr(e))',
    'ts = [threading.Thread(target=work) for _ in range(16)]',
    '[t.start() for t in ts]',
    '[t.join() for t in ts]',
    "print('errors', len(errors), errors[:1])",
  ].join('\n');
  const { out } = await inSandbox(`python3 -c "$(cat <<'PY'\n${script}\nPY\n)"`);
  assert.match(out, /^errors 0 /m, `no thread ran out of address space: ${out.slice(-400)}`);
});

test('as root, a fork bomb is bounded by the process limit', { skip: !isRoot || !hasBwrap ? 'needs root and bubblewrap' : false }, async () => {
  // Starts sleeping children until fork fails (dash then exits), printing the count after
  // each one; bounded by 2,000 in any case. The sleepers die with the sandbox.
  const { out } = await inSandbox('n=0; while [ $n -lt 2000 ]; do sleep 30 & n=$((n+1)); echo forks=$n; done');
  const counts = [...out.matchAll(/forks=(\d+)/g)].map((m) => Number(m[1]));
  const forks = Math.max(0, ...counts);
  assert.ok(forks > 10, `it could fork at all: ${out.slice(-300)}`);
  assert.ok(forks < DEFAULT_SANDBOX_LIMITS.processes + 5, `forks stop at the limit (${forks}): ${out.slice(-300)}`);
  assert.match(out, /Cannot fork|Resource temporarily unavailable/, 'fork failed, the loop did not just end');
});

test('/dev/shm is a small tmpfs of its own', { skip: !hasBwrap ? 'needs bubblewrap' : false }, async () => {
  const { out } = await inSandbox('dd if=/dev/zero of=/dev/shm/fill bs=1M count=200 2>/dev/null; echo shm=$(du -m /dev/shm/fill | cut -f1)');
  const shm = Number(/shm=(\d+)/.exec(out)?.[1]);
  assert.ok(shm > 0 && shm <= 16, `/dev/shm holds at most 16 MiB: ${out}`);
});

/** Disk blocks in use under `dir`, bytes (du), links not followed. */
function diskUsed(dir: string): number {
  return Number(execFileSync('du', ['-s', '-B1', dir], { encoding: 'utf8' }).split('\t')[0]);
}

/** Step 02 of the workspace `dir` with its own command, in the sandbox when one starts here (`required` when asked). */
async function gradeStep02(dir: string, sandboxed: boolean) {
  const { command } = openWorkspace(dir);
  const sandbox = sandboxed ? await chooseSandbox('required', [dir]) : undefined;
  const [result] = await grade({ workspace: dir, steps: selectSteps(['02']), command: { ...(await resolveInterpreter(command, dir)), sandbox } });
  return result;
}

test('a 2 GB sparse file in the workspace is a setup error naming it, judged by its size: never read, never expanded', async () => {
  const ws = tempDir('idem-lab-redteam-sparse-');
  try {
    buildWorkspace(ws.dir, 'reference');
    const big = path.join(ws.dir, 'data', 'big.bin');
    fs.mkdirSync(path.dirname(big));
    fs.closeSync(fs.openSync(big, 'w'));
    fs.truncateSync(big, 2 * 1024 ** 3);
    assert.ok(diskUsed(big) < 1024 * 1024, 'the file is sparse');
    const started = performance.now();
    const run = await runCli(['check', '02', '--dir', ws.dir, '--sandbox', 'off'], { timeoutMs: 120_000 });
    assert.equal(run.exitCode, 2, `a setup error, exit 2: ${run.stdout}${run.stderr}`);
    assert.match(run.stdout + run.stderr, /data\/big\.bin in the workspace is 2048\.0 MiB \(2147483648 bytes\); a file of the workspace may hold at most 16\.0 MiB/);
    // Refused before a byte is read: copying 2 GB (even of holes) takes far longer than starting the CLI.
    assert.ok(performance.now() - started < 60_000);
    // The grader's temporary folders (TMPDIR of the CLI: GRADER_TMP) hold no copy of it.
    const images = fs.readdirSync(process.env.TMPDIR!).map((entry) => path.join(process.env.TMPDIR!, entry));
    assert.ok(images.every((dir) => diskUsed(dir) < 64 * 1024 * 1024), 'nothing of it was copied');
  } finally {
    ws.remove();
  }
});

test('a 300 MB file in the workspace is an error row naming it and its size; nothing of it is copied', async () => {
  const ws = tempDir('idem-lab-redteam-300mb-');
  try {
    buildWorkspace(ws.dir, 'reference');
    const big = path.join(ws.dir, 'dump.sql');
    const fd = fs.openSync(big, 'w');
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    for (let i = 0; i < 300; i++) fs.writeSync(fd, chunk);
    fs.closeSync(fd);
    const result = await gradeStep02(ws.dir, false);
    assert.equal(result.status, 'error', `an error (a setup error), not a pass or a fail: ${result.message}`);
    assert.match(result.message, /dump\.sql in the workspace is 300\.0 MiB \(314572800 bytes\)/);
  } finally {
    ws.remove();
  }
});

test('the copy is bounded in all, in entries and in depth, and names where it stopped', () => {
  const ws = tempDir('idem-lab-redteam-bounds-');
  const out = tempDir('idem-lab-redteam-bounds-out-');
  try {
    for (let i = 0; i < 5; i++) fs.writeFileSync(path.join(ws.dir, `f${i}`), Buffer.alloc(1000));
    const limits = { ...DEFAULT_IMAGE_LIMITS, fileBytes: 1000, totalBytes: 3500 };
    assert.throws(() => copyImage(ws.dir, path.join(out.dir, 'a'), out.dir, limits), (err: unknown) => err instanceof WorkspaceTooLarge && err.file === 'f3');
    assert.equal(fs.existsSync(path.join(out.dir, 'a')), false, 'a partial copy is removed');
    assert.throws(() => copyImage(ws.dir, path.join(out.dir, 'b'), out.dir, { ...DEFAULT_IMAGE_LIMITS, entries: 4 }), (err: unknown) => err instanceof WorkspaceTooLarge && err.file === 'f4');
    fs.mkdirSync(path.join(ws.dir, 'a/b/c/d'), { recursive: true });
    assert.throws(() => copyImage(ws.dir, path.join(out.dir, 'c'), out.dir, { ...DEFAULT_IMAGE_LIMITS, depth: 2 }), WorkspaceTooLarge);
    const image = copyImage(ws.dir, path.join(out.dir, 'd'), out.dir);
    assert.equal(image.bytes, 5000);
    assert.equal(fs.statSync(path.join(out.dir, 'd', 'f0')).mode & 0o777, 0o444, 'the image is read-only');
  } finally {
    ws.remove();
    out.remove();
  }
});

test('a workspace file swapped for a link to a host file while it is copied is never followed', async () => {
  const host = hostFile('host-secret-token\n');
  const ws = tempDir('idem-lab-redteam-swap-');
  const file = path.join(ws.dir, 'notes.txt');
  fs.writeFileSync(file, 'the learner\'s notes\n');
  fs.writeFileSync(path.join(ws.dir, 'server.py'), 'print(1)\n');
  // A process of the student's swaps notes.txt for a link to the host file and back, as
  // fast as it can, while the workspace is copied 300 times: the grader's copy of it must
  // be the learner's notes or the link itself, never the host file: each entry is opened
  // O_NOFOLLOW and checked with fstat, so no timing lets a link through. (A copy that
  // looks at an entry, then opens it by name, has a window of microseconds: this test
  // cannot show that one leaks, only that this copy never does.)
  const python = `
import os, sys
f, secret, aside = sys.argv[1], sys.argv[2], sys.argv[3]
while True:
    os.symlink(secret, aside + '/l'); os.replace(aside + '/l', f)
    with open(aside + '/t', 'w') as out: out.write("the learner's notes\\n")
    os.replace(aside + '/t', f)
`;
  // Its temporary names are made outside the workspace, on the same file system.
  const aside = tempDir('idem-lab-redteam-swap-aside-');
  const child = spawn('python3', ['-c', python, file, host.file, aside.dir], { stdio: 'ignore' });
  try {
    // Copies start once the swapper runs (the file was seen as a link).
    for (const until = Date.now() + 30_000; !fs.lstatSync(file).isSymbolicLink() && Date.now() < until; ) await new Promise((r) => setTimeout(r, 5));
    let links = 0;
    let files = 0;
    for (let i = 0; i < 300; i++) {
      const tmp = tempDir('idem-lab-redteam-swap-tmp-');
      try {
        const ctx = new LiveContext(ws.dir, tmp.dir, '06', undefined, parseSeed('1'));
        const dest = (ctx as unknown as { copyWorkspace(): string }).copyWorkspace();
        const copied = path.join(dest, 'notes.txt');
        const stat = fs.lstatSync(copied, { throwIfNoEntry: false });
        if (!stat) continue;
        if (stat.isSymbolicLink()) {
          links++;
          continue; // kept as a link, verbatim: the grader never read through it
        }
        files++;
        assert.doesNotMatch(fs.readFileSync(copied, 'utf8'), /host-secret-token/, `copy ${i} holds the host file`);
      } finally {
        tmp.remove();
      }
    }
    assert.ok(links > 0, `the swapper ran during the copies: ${links} links, ${files} files copied`);
  } finally {
    child.kill('SIGKILL');
    ws.remove();
    aside.remove();
    host.remove();
  }
});

test('a workspace file swapped for a link right after the copy looked at it is not followed (O_NOFOLLOW, fstat)', () => {
  const host = hostFile('host-secret-token\n');
  const ws = tempDir('idem-lab-redteam-swap1-');
  const out = tempDir('idem-lab-redteam-swap1-out-');
  const file = path.join(ws.dir, 'notes.txt');
  fs.writeFileSync(file, "the learner's notes\n");
  const lstat = fs.lstatSync;
  // The swap lands exactly between the copy's look at the entry and its open.
  (fs as { lstatSync: unknown }).lstatSync = (p: fs.PathLike, ...rest: unknown[]) => {
    const stat = (lstat as (...a: unknown[]) => fs.Stats)(p, ...rest);
    if (String(p).endsWith('/notes.txt') && stat?.isFile() && !String(p).startsWith(out.dir)) {
      fs.rmSync(file);
      fs.symlinkSync(host.file, file);
    }
    return stat;
  };
  try {
    const image = copyImage(ws.dir, path.join(out.dir, 'image'), out.dir);
    const copied = path.join(image.dir, 'notes.txt');
    assert.ok(!fs.existsSync(copied) || !fs.readFileSync(copied, 'utf8').includes('host-secret-token'), 'the host file is not copied in');
    assert.equal(fs.lstatSync(copied, { throwIfNoEntry: false }), undefined, 'an entry that changed under the copy is passed over');
  } finally {
    (fs as { lstatSync: unknown }).lstatSync = lstat;
    ws.remove();
    out.remove();
    host.remove();
  }
});

test("a server writing past the disk bound (its files each under RLIMIT_FSIZE) is stopped and the check fails saying so", { skip: !hasBwrap ? 'needs bubblewrap' : false }, async () => {
  const ws = tempDir('idem-lab-redteam-filler-');
  try {
    buildWorkspace(ws.dir, 'reference');
    const server = path.join(ws.dir, 'server.py');
    // Six files of 60 MiB in HOME, each under the 64 MiB RLIMIT_FSIZE, 360 MiB together.
    const filler = [
      'import os as _os, threading as _threading',
      'def _fill():',
      '    for _i in range(6):',
      "        with open(_os.path.join(_os.environ['HOME'], f'fill{_i}'), 'wb') as _f:",
      '            for _ in range(60):',
      "                _f.write(b'x' * (1 << 20))",
      '_threading.Thread(target=_fill, daemon=True).start()',
      '',
    ].join('\n');
    fs.writeFileSync(server, filler + fs.readFileSync(server, 'utf8'));
    const result = await gradeStep02(ws.dir, true);
    assert.equal(result.status, 'fail', result.message);
    assert.match(result.message, new RegExp(`Your servers wrote more than ${DEFAULT_DISK_BOUND.bytes} bytes together`));
    assert.match(result.details.join('\n'), /The largest file: .*fill\d, \d+ bytes/);
  } finally {
    ws.remove();
  }
});

test('a Node.js server with its own node_modules in a workspace under /tmp passes a basic check in the sandbox', { skip: !hasBwrap ? 'needs bubblewrap' : false }, async () => {
  const ws = tempDir('idem-lab-redteam-node-');
  try {
    assert.ok(/^\/tmp\//.test(fs.realpathSync(ws.dir)) || !fs.realpathSync(ws.dir).startsWith('/opt'), 'the workspace lies under a folder the sandbox hides');
    buildWorkspace(ws.dir, 'ok-node-server');
    assert.ok(fs.lstatSync(path.join(ws.dir, 'node_modules', 'better-sqlite3')).isDirectory(), 'better-sqlite3 is in the workspace');
    const result = await gradeStep02(ws.dir, true);
    assert.equal(result.status, 'pass', `${result.message}\n${result.serverOutput ?? ''}`);
  } finally {
    ws.remove();
  }
});

test('a Python server run by its virtual environment (.venv/bin/python) in a workspace under /tmp passes a basic check in the sandbox', { skip: !hasBwrap ? 'needs bubblewrap' : false }, async () => {
  const ws = tempDir('idem-lab-redteam-venv-');
  try {
    buildWorkspace(ws.dir, 'reference');
    execFileSync('python3', ['-m', 'venv', '--without-pip', path.join(ws.dir, '.venv')]);
    fs.writeFileSync(path.join(ws.dir, 'idem-lab.json'), JSON.stringify({ server: ['.venv/bin/python', 'server.py'] }) + '\n');
    const run = await runCli(['check', '02', '--dir', ws.dir, '--sandbox', 'required'], { timeoutMs: 120_000 });
    assert.equal(run.exitCode, 0, `${run.stdout}${run.stderr}`);
    assert.match(run.stdout, /✓ 02 replay/);
  } finally {
    ws.remove();
  }
});

test('as root, the memory of all a check\'s processes is bounded together (a cgroup), not per process only', { skip: !isRoot || !hasBwrap || cgroupUnavailable() ? `needs root, bubblewrap and cgroups (${cgroupUnavailable() ?? ''})` : false }, async () => {
  const cgroup = CheckCgroup.make(`red-team-memory-${process.pid}`, { memoryBytes: 256 * 1024 * 1024, processes: 64 });
  assert.ok(cgroup);
  // Four children each hold 120 MiB (written, so resident; well within the 1 GiB a process
  // may map) and keep it until their parent closes their stdin: all four are alive at once,
  // however slowly the machine starts them. The parent counts those that got to hold it.
  const parent = [
    'import subprocess, sys',
    "child = 'import sys; b = bytes(126000000) + b\"x\" * 0; b = bytearray(b); b[::4096] = b\"y\" * len(b[::4096]); print(\"held\", flush=True); sys.stdin.read()'",
    "kids = [subprocess.Popen([sys.executable, '-c', child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(4)]",
    "lines = [k.stdout.readline().strip() for k in kids]",
    "[k.stdin.close() for k in kids]",
    "[k.wait() for k in kids]",
    "[print(l) for l in lines if l]",
    "print('done')",
  ].join('\n');
  const { out } = await inSandbox(`python3 -c "$(cat <<'PY'\n${parent}\nPY\n)"`, cgroup);
  const held = (out.match(/^held$/gm) ?? []).length;
  assert.match(out, /done/, `the shell itself finished: ${out.slice(-300)}`);
  assert.ok(held >= 1 && held <= 2, `at most two of four 120 MiB children fit in 256 MiB together (${held} did): ${out.slice(-300)}`);
});

test('a database made a FIFO, or a link to a host database, is refused unread, and the grader does not hang', async () => {
  const { readLedger } = await import('../grader/ledger.js');
  const { readCells } = await import('../grader/tables.js');
  const { UnsafeDatabase } = await import('../grader/student-db.js');
  const dir = tempDir('idem-lab-redteam-db-');
  const host = tempDir('idem-lab-redteam-hostdb-');
  try {
    // A host database with a ledger of its own (what a link would make the grader print).
    const hostDb = path.join(host.dir, 'secret.db');
    execFileSync('python3', ['-c', `import sqlite3; c=sqlite3.connect(${JSON.stringify(hostDb)}); c.execute('create table ledger(payment_id integer primary key, idempotency_key text, user text, amount integer, created_at text)'); c.execute("insert into ledger values (1, 'k', 'host-secret-user', 1, 't')"); c.commit()`]);
    const db = path.join(dir.dir, 'lab.db');
    fs.symlinkSync(hostDb, db);
    assert.throws(() => readLedger(db), UnsafeDatabase);
    assert.throws(() => readCells(db), UnsafeDatabase);
    fs.rmSync(db);
    execFileSync('mkfifo', [db]);
    // A reader that opened the FIFO would block for ever: the test would time out.
    assert.throws(() => readLedger(db), UnsafeDatabase);
  } finally {
    dir.remove();
    host.remove();
  }
});

test('a statement made a link to a host file is never read', async () => {
  const { readStatementLines } = await import('../grader/statement.js');
  const host = hostFile('{"user": "host-secret", "amount": 1}\n');
  const dir = tempDir('idem-lab-redteam-stmt-');
  try {
    const log = path.join(dir.dir, 'provider.log');
    fs.symlinkSync(host.file, log);
    const read = readStatementLines(log);
    assert.deepEqual(read, { charges: [], other: [] });
  } finally {
    dir.remove();
    host.remove();
  }
});

test("a relay socket swapped for a link to another of the host's sockets is never connected to", async () => {
  const net = await import('node:net');
  const { openConnection } = await import('../grader/http.js');
  const dir = tempDir('idem-lab-redteam-sock-');
  let connections = 0;
  const host = net.createServer((socket) => {
    connections++;
    socket.on('error', () => {});
    socket.end('HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\nhost-secret');
  });
  try {
    const hostSocket = path.join(dir.dir, 'host.sock');
    await new Promise<void>((resolve) => host.listen(hostSocket, resolve));
    const relay = path.join(dir.dir, 'A-1.sock');
    fs.symlinkSync(hostSocket, relay);
    await assert.rejects(openConnection({ port: 1, socketPath: relay }, 1000));
    assert.equal(connections, 0, 'the host socket saw no connection');
    // The real socket itself is reached.
    const socket = await openConnection({ port: 1, socketPath: hostSocket }, 1000);
    socket.destroy();
  } finally {
    await new Promise((resolve) => host.close(resolve));
    dir.remove();
  }
});

test('with a relay socket path longer than the kernel allows, the sandbox keeps a network of its own (never the host network in silence)', { skip: !hasBwrap ? 'needs bubblewrap' : false }, async () => {
  const { startServer } = await import('../grader/server.js');
  const sandbox = await chooseSandbox('required');
  assert.ok(sandbox);
  if (sandbox.network !== 'private') return; // no network namespace here: covered by the reporting tests
  // A check folder 150 bytes deep: the relay socket must not be made there.
  const deep = tempDir('idem-lab-redteam-deep-');
  const scratch = path.join(deep.dir, 'x'.repeat(100));
  const ws = path.join(scratch, 'ws');
  fs.mkdirSync(ws, { recursive: true });
  fs.writeFileSync(path.join(ws, 'server.py'), [
    'import http.server, os, socket',
    'class H(http.server.BaseHTTPRequestHandler):',
    '    def do_GET(self):',
    '        net = "private" if [n for _, n in socket.if_nameindex()] == ["lo"] else "host"',
    '        body = net.encode(); self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)',
    '    def log_message(self, *a): pass',
    'http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()',
  ].join('\n'));
  const { send } = await import('../grader/http.js');
  const server = await startServer({ workspace: ws, dbPath: path.join(ws, 'lab.db'), label: 'A', scratch, command: { file: 'python3', args: ['server.py'], sandbox } });
  try {
    assert.ok(server.socketPath, 'reached through a relay socket');
    assert.ok(Buffer.byteLength(server.socketPath) < 104, `at a short path: ${server.socketPath}`);
    const health = await send(server, 'GET', '/health');
    assert.equal(health.responseBody, 'private');
  } finally {
    await server.kill();
    deep.remove();
  }
});

test("as root, a committed server.py linked to /etc/shadow does not print it through the grader", { skip: !isRoot || !hasBwrap || !fs.existsSync('/etc/shadow') ? 'needs root, bubblewrap and /etc/shadow' : false }, async () => {
  const { startServer } = await import('../grader/server.js');
  const { ServerStartFailed } = await import('../grader/failure.js');
  const sandbox = await chooseSandbox('required');
  assert.ok(sandbox);
  const firstLine = fs.readFileSync('/etc/shadow', 'utf8').split('\n')[0]!;
  const scratch = tempDir('idem-lab-redteam-shadow-');
  try {
    const ws = path.join(scratch.dir, 'ws');
    fs.mkdirSync(ws);
    fs.symlinkSync('/etc/shadow', path.join(ws, 'server.py'));
    const failure = await startServer({ workspace: ws, dbPath: path.join(ws, 'lab.db'), label: 'A', scratch: scratch.dir, readyTimeoutMs: 5000, command: { file: 'python3', args: ['server.py'], sandbox } }).then(
      async (server) => {
        await server.kill();
        return undefined;
      },
      (err: unknown) => err,
    );
    assert.ok(failure instanceof ServerStartFailed, 'the server cannot start');
    const said = JSON.stringify(failure);
    assert.ok(!said.includes(firstLine), `/etc/shadow is not printed: ${said.slice(0, 400)}`);
    assert.match(said, /Permission denied|Errno 13/, 'python was refused the file');
  } finally {
    scratch.remove();
  }
});

test("the provider's gate admits the check's own server user only: another local user cannot hold or report a charge", async () => {
  const { openGate } = await import('../grader/gate.js');
  const owner = isRoot ? { uid: 61999, gid: 61999 } : undefined;
  // The gate's folder under one the other users can pass through, as a sandbox's bound path is.
  const base = tempDir('idem-lab-redteam-gate-');
  fs.chmodSync(base.dir, 0o711);
  const before = process.env.TMPDIR;
  process.env.TMPDIR = base.dir;
  const gate = await openGate(owner).finally(() => (process.env.TMPDIR = before));
  try {
    const stat = fs.lstatSync(gate.socketPath);
    assert.ok(stat.isSocket());
    assert.equal(stat.mode & 0o777, 0o600, 'the socket is 0600');
    assert.equal(stat.uid, owner?.uid ?? process.getuid?.(), "the socket is the server user's");
    if (!isRoot) return;
    // Connect as the owner and as another user (nobody), each an unprivileged process.
    const connectAs = (uid: number) =>
      spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '/usr/bin/python3', '-c', `import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n  s.connect(${JSON.stringify(gate.socketPath)}); print('connected')\nexcept OSError as e:\n  print('refused', e.errno)`], { encoding: 'utf8', timeout: 10_000 }).stdout.trim();
    assert.equal(connectAs(61999), 'connected', "the server's own user connects");
    assert.match(connectAs(65534), /^refused 13$/, 'another user is refused (EACCES)');
  } finally {
    gate.close();
    base.remove();
  }
});

test("a server command naming a file in the grader's home binds no home back into the sandbox; an interpreter's installation still is", async () => {
  const home = tempDir('idem-lab-redteam-home-');
  try {
    const put = (rel: string) => {
      const file = path.join(home.dir, rel);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, '#!/bin/sh\n', { mode: 0o755 });
      return file;
    };
    const key = put('.ssh/id_ed25519');
    const ownBin = put('bin/tool');
    const python = put('.pyenv/versions/3.12.1/bin/python3.12');
    const masks = [home.dir];
    assert.equal(installationOf(key, masks), undefined, 'a key file is no interpreter: nothing bound back');
    assert.equal(installationOf(ownBin, masks), undefined, 'an installation that is the home itself is not bound back');
    assert.equal(installationOf(path.join(home.dir, 'missing/bin/x'), masks), undefined, 'a file that does not exist binds nothing');
    assert.equal(installationOf(python, masks), path.join(home.dir, '.pyenv/versions/3.12.1'), "pyenv's installation is bound back");
    assert.equal(installationOf('/usr/bin/env', masks), undefined, 'a file under no mask needs no bind');
    const sandbox = { bwrap: 'bwrap', prlimit: 'prlimit', hide: masks, limits: DEFAULT_SANDBOX_LIMITS, network: 'private' as const };
    const args = bwrapArgs(sandbox, path.join(home.dir, 'w'), path.join(home.dir, 'w'), key).join(' ');
    assert.ok(!args.includes(`--ro-bind ${home.dir} ${home.dir}`), `the home is not bound back: ${args}`);
  } finally {
    home.remove();
  }
});
