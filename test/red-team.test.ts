// Red team: a hostile student against the grader, also when the grader runs as root (as CI
// runners do). Each test is an attack of issue 18 that worked before its fix.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { LiveContext } from '../grader/context.js';
import { parseSeed } from '../grader/seed.js';
import { bwrapArgs, bwrapPath, chooseSandbox, dropPrivileges, sandboxOwner, DEFAULT_SANDBOX_LIMITS } from '../grader/sandbox.js';
import { chownTree, renewFile } from '../grader/safe-copy.js';
import { tempDir } from './support.js';
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
