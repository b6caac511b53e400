/**
 * The parts of the grader that make it hard to fool, tested on their own: seeded test data
 * (varied, reproducible, like a real client's), the caller's IDEM_CHARGE_MS honoured by every
 * server, and the provider's statement read within bounds.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TestData, parseSeed } from '../grader/seed.js';
import { resolveInterpreter, startServer } from '../grader/server.js';
import { LiveContext } from '../grader/context.js';
import { STATEMENT_MAX_BYTES, readStatement } from '../grader/statement.js';
import { grade, makeGraderTempDir } from '../grader/engine.js';
import { openWorkspace } from '../lab/workspace.js';
import { selectSteps } from '../steps/index.js';
import { fixtureWorkspace, tempDir } from './support.js';

test('test data is reproducible from its seed and scope, and varies with either', () => {
  const take = (seed: number, scope: string) => {
    const d = new TestData(seed, scope);
    return [d.key(), d.user(), d.amount(), d.key()];
  };
  assert.deepEqual(take(7, '05'), take(7, '05'));
  assert.notDeepEqual(take(7, '05'), take(8, '05'));
  assert.notDeepEqual(take(7, '05'), take(7, '06'));
});

test('keys look like a client\'s UUIDs, users like customers, amounts like prices; none repeats within a step', () => {
  const d = new TestData(12345, '02');
  const keys = Array.from({ length: 200 }, () => d.key());
  const users = Array.from({ length: 200 }, () => d.user());
  const amounts = Array.from({ length: 200 }, () => d.amount());
  for (const key of keys) assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  for (const user of users) assert.match(user, /^[a-z]+_\d{5}$/);
  for (const amount of amounts) assert.ok(Number.isInteger(amount) && amount >= 100 && amount <= 99_999);
  assert.equal(new Set(keys).size, keys.length);
  assert.equal(new Set(users).size, users.length, 'users never repeat');
  assert.equal(new Set(amounts).size, amounts.length, 'amounts never repeat');
  assert.ok(!keys.some((k) => /^\d\d-/.test(k)) && !users.some((u) => /^(racer-|u\d)/.test(u)), 'nothing of the old fixed patterns');
  assert.equal(d.word(255).length, 255);
});

test('amounts never repeat within a step, even where the draws themselves would (issue 7: a check whose "other amount" was the same amount failed a correct server)', () => {
  // 3,000 draws from 99,900 amounts repeat about 45 times by chance; every one must be drawn anew.
  const d = new TestData(3621045336, '05');
  const amounts = Array.from({ length: 3000 }, () => d.amount());
  assert.equal(new Set(amounts).size, amounts.length);
  // The stream is still the seed's own: the same seed gives the same amounts.
  const again = new TestData(3621045336, '05');
  assert.deepEqual(Array.from({ length: 3000 }, () => again.amount()), amounts);
});

test('a seed is a whole number from 0 to 2^32 - 1', () => {
  assert.equal(parseSeed('0'), 0);
  assert.equal(parseSeed('4294967295'), 4294967295);
  for (const bad of ['-1', '4294967296', '1.5', 'abc', '']) assert.throws(() => parseSeed(bad), /a seed is a whole number/);
});

test("every server gets the caller's IDEM_CHARGE_MS, and the same contract variables as the learner's own start", async () => {
  const tmp = tempDir();
  const before = process.env.IDEM_CHARGE_MS;
  process.env.IDEM_CHARGE_MS = '7';
  // A server that records its environment, then answers GET /health.
  const script = [
    'import json, os, http.server',
    'json.dump(dict(os.environ), open("env.json", "w"))',
    'class H(http.server.BaseHTTPRequestHandler):',
    '    def do_GET(self):',
    '        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()',
    '    def log_message(self, *a): pass',
    'http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()',
  ].join('\n');
  try {
    const db = path.join(tmp.dir, 'lab.db');
    const server = await startServer({ workspace: tmp.dir, dbPath: db, label: 'A', command: { file: 'python3', args: ['-c', script] } });
    await server.stop();
    const env = JSON.parse(fs.readFileSync(path.join(tmp.dir, 'env.json'), 'utf8')) as Record<string, string>;
    assert.equal(env.IDEM_CHARGE_MS, '7');
    assert.equal(env.IDEM_DB, db);
    assert.equal(env.IDEM_PROVIDER_LOG, path.join(tmp.dir, 'provider.log'));
    assert.equal(env.IDEM_DB_MS, '0');
  } finally {
    if (before === undefined) delete process.env.IDEM_CHARGE_MS;
    else process.env.IDEM_CHARGE_MS = before;
    tmp.remove();
  }
});

test('the statement is read within bounds: foreign lines passed over, a FIFO or a huge file cannot hold the grader', () => {
  const tmp = tempDir();
  try {
    const file = path.join(tmp.dir, 'provider.log');
    assert.equal(readStatement(file), undefined, 'no file: no statement');
    fs.writeFileSync(file, '{"user":"mina_10000","amount":100,"at":"x","pid":1}\nnot json\n{"user":5}\n{"user":"li_20000","amount":200,"at":"y"}\n{"user":"cut');
    assert.deepEqual(
      readStatement(file)?.map((c) => c.user),
      ['mina_10000', 'li_20000'],
    );
    const line = '{"user":"ana_30000","amount":300,"at":"z"}\n';
    fs.writeFileSync(file, line.repeat(Math.ceil((STATEMENT_MAX_BYTES * 2) / line.length)));
    const charges = readStatement(file) ?? [];
    assert.ok(charges.length > 0 && charges.length <= STATEMENT_MAX_BYTES / line.length, 'at most STATEMENT_MAX_BYTES are read');
    const fifo = path.join(tmp.dir, 'fifo.log');
    fs.rmSync(file);
    const made = spawnSync('mkfifo', [fifo]);
    assert.equal(made.status, 0, String(made.stderr));
    assert.deepEqual(readStatement(fifo), [], 'a FIFO is not read (and does not block)');
  } finally {
    tmp.remove();
  }
});

test('a server whose fingerprint depends on the order of the fields passes step 02 with a warning, not a failure', async () => {
  // The Node.js fixture, made to hash the body as it came instead of its parsed fields.
  const ws = fixtureWorkspace('ok-node-server');
  try {
    const file = path.join(ws.dir, 'server.mjs');
    const source = fs.readFileSync(file, 'utf8');
    const raw = source
      .replace('return ok ? { user: p.user, amount: p.amount } : undefined;', 'return ok ? { user: p.user, amount: p.amount, raw: body.replace(/\\s+/g, "") } : undefined;')
      .replace('update(JSON.stringify({ amount: payment.amount, user: payment.user }))', 'update(payment.raw)');
    assert.equal((raw.match(/payment\.raw|raw: body/g) ?? []).length, 2, 'both changes were made');
    fs.writeFileSync(file, raw);
    const { command } = openWorkspace(ws.dir);
    const [result] = await grade({ workspace: ws.dir, steps: selectSteps(['02']), command });
    assert.equal(result.status, 'pass', result.message);
    assert.ok(result.warnings.some((w) => /same fields in another order and spacing was refused with 422: fingerprint the parsed body/.test(w)), result.warnings.join('\n'));
  } finally {
    ws.remove();
  }
});

test("a retry refused with 422 after a restart is said to be a fingerprint that changed between processes, not a second charge", async () => {
  // Python's hash() is salted per process: the same body fingerprints differently after the restart.
  const ws = fixtureWorkspace('salted-fingerprint');
  try {
    const { command } = openWorkspace(ws.dir);
    const [result] = await grade({ workspace: ws.dir, steps: selectSteps(['06']), command });
    assert.equal(result.status, 'fail', result.message);
    assert.match(result.message, /^After a restart: .*not HTTP 422/);
    assert.match(result.why ?? '', /fingerprint stored with the key must come out the same in every process/);
    assert.doesNotMatch(result.why ?? '', /charge/);
  } finally {
    ws.remove();
  }
});

test("the restart renews only the check's own database and folders: pods of another database keep running, untouched, under the labels they asked for", async () => {
  const ws = fixtureWorkspace('reference');
  const tmp = makeGraderTempDir('lab-');
  const { command } = openWorkspace(ws.dir);
  const ctx = new LiveContext(ws.dir, tmp, '06', await resolveInterpreter(command, ws.dir), 1);
  try {
    const startedA = ctx.startServer();
    const database = ctx.newDatabase();
    const startedD = ctx.startServer({ database, label: 'D' });
    await assert.rejects(ctx.startServer({ label: 'D' }), /label D is taken/);
    const [a, d] = await Promise.all([startedA, startedD]);
    assert.deepEqual([a.label, d.label], ['A', 'D']);
    const onD = await ctx.pay(d, { key: ctx.freshKey(), body: ctx.data.payment() });
    const onA = await ctx.pay(a, { key: ctx.freshKey(), body: ctx.data.payment() });
    assert.deepEqual([onD.status, onA.status], [201, 201]);
    // What each wrote beside its database.
    fs.writeFileSync(path.join(path.dirname(database.dbPath), 'beside-d'), 'kept');
    fs.writeFileSync(path.join(path.dirname(ctx.mainDatabase.dbPath), 'beside-a'), 'gone');
    assert.throws(() => ctx.renewCopies(), /stop every instance on the check's database first/);
    await ctx.stopServer(a);
    ctx.renewCopies();
    assert.equal(fs.existsSync(path.join(path.dirname(ctx.mainDatabase.dbPath), 'beside-a')), false, "the check's own folder is put back");
    assert.equal(fs.readFileSync(path.join(path.dirname(database.dbPath), 'beside-d'), 'utf8'), 'kept', "the other database's folder is left alone");
    assert.equal(ctx.ledger().length, 1, "the check's database keeps its payment");
    const replayed = await ctx.pay(d, { key: onD.key!, body: onD.requestBody });
    assert.equal(replayed.status, 201, 'D, still running, still answers');
    assert.equal(replayed.responseBody, onD.responseBody, 'and replays from its untouched database');
    const b = await ctx.startServer();
    assert.equal(b.label, 'B', 'the next letter skips none and takes none that was asked for');
  } finally {
    await ctx.stopAll();
    fs.rmSync(tmp, { recursive: true, force: true });
    ws.remove();
  }
});
