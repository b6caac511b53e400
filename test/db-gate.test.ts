/**
 * The database's gate (gate.ts, IDEM_DB_GATE) as a server speaks it: statements reported on
 * the provider's socket, held while a check holds them, let go in waves (`go`), and let go at
 * once, told `late`, when nothing holds them. No timing: each step waits for what it checks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { openGate, type ProviderGate } from '../grader/gate.js';

/** A thread of a server: one connection, statements reported one after another. */
function client(gate: ProviderGate) {
  const socket = net.connect(gate.socketPath);
  const answers: string[] = [];
  let buffered = '';
  const waiters: Array<() => void> = [];
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      answers.push(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
      waiters.splice(0).forEach((w) => w());
    }
  });
  const nextAnswer = (count: number) => new Promise<void>((resolve) => (answers.length >= count ? resolve() : waiters.push(() => answers.length >= count && resolve())));
  return {
    answers,
    ask: (sql: string, thread: number) => socket.write(JSON.stringify({ point: 'sql', sql, pid: 1, thread }) + '\n'),
    ran: () => socket.write('{"point": "ran"}\n'),
    nextAnswer,
    close: () => socket.destroy(),
  };
}

test('statements are held while a check holds them, go in a wave, and go at once, told late, when nothing holds them', async () => {
  const gate = await openGate();
  try {
    const hold = gate.holdStatements();
    const a = client(gate);
    const b = client(gate);
    a.ask('DELETE FROM idem', 1);
    b.ask('DELETE FROM idem', 2);
    assert.ok(await gate.until(() => hold.waiting().length === 2, 10_000), 'both statements reached the gate');
    assert.deepEqual(a.answers, [], 'a held statement gets no answer');
    assert.equal(hold.releaseWave(), 2);
    await Promise.all([a.nextAnswer(1), b.nextAnswer(1)]);
    assert.deepEqual([a.answers, b.answers], [['go'], ['go']]);
    a.ran();
    b.ran();
    assert.ok(await gate.until(() => gate.statements.every((st) => st.ran), 10_000), 'each reported it ran');
    // The next statement of each waits for the next wave.
    a.ask('SELECT 1 FROM idem WHERE key = ?', 1);
    assert.ok(await gate.until(() => hold.waiting().length === 1, 10_000));
    hold.release();
    await a.nextAnswer(2);
    assert.equal(a.answers[1], 'go', 'what the hold had when released goes as held');
    a.ran();
    // Nothing holds now: at once, told late (the server waits IDEM_DB_MS as without the gate).
    a.ask('INSERT INTO idem VALUES (1)', 1);
    await a.nextAnswer(3);
    assert.equal(a.answers[2], 'late');
    a.close();
    b.close();
  } finally {
    gate.close();
  }
});

test('a hold let through answers every later statement go at once', async () => {
  const gate = await openGate();
  try {
    const hold = gate.holdStatements();
    const a = client(gate);
    a.ask('SELECT 1', 7);
    assert.ok(await gate.until(() => hold.waiting().length === 1, 10_000));
    hold.passThrough();
    await a.nextAnswer(1);
    a.ran();
    a.ask('SELECT 2', 7);
    await a.nextAnswer(2);
    assert.deepEqual(a.answers, ['go', 'go']);
    a.close();
  } finally {
    gate.close();
  }
});

test('a statement whose connection closes while held leaves the hold', async () => {
  const gate = await openGate();
  try {
    const hold = gate.holdStatements();
    const a = client(gate);
    a.ask('SELECT 1', 3);
    assert.ok(await gate.until(() => hold.waiting().length === 1, 10_000));
    a.close();
    assert.ok(await gate.until(() => hold.waiting().length === 0 && gate.statements[0].ran, 10_000));
  } finally {
    gate.close();
  }
});

test("the gate's log keeps what the grader decided, without times: charges let go together (sorted), each wave's statements (sorted), those let run when a hold ends", async () => {
  const gate = await openGate();
  try {
    // Two charges, held at their start, reported in either order.
    const charges = [
      { user: 'zoe_20000', amount: 300, key: 'k2' },
      { user: 'ana_10000', amount: 100 },
    ];
    const hold = gate.hold();
    const sockets = charges.map((c) => {
      const socket = net.connect(gate.socketPath);
      socket.write(JSON.stringify({ point: 'start', ...c, pid: 1 }) + '\n');
      return socket;
    });
    assert.ok(await gate.until((cs) => cs.length === 2, 10_000), 'both charges reached the gate');
    assert.deepEqual(gate.decisions, [], 'holding is no decision yet: letting go is');
    hold.release();
    assert.deepEqual(gate.decisions, [{ kind: 'let-go', point: 'start', charges: ['"ana_10000" 100', '"zoe_20000" 300 key "k2"'] }]);
    hold.release();
    assert.equal(gate.decisions.length, 1, 'a hold is let go once');
    for (const s of sockets) s.destroy();

    const statements = gate.holdStatements();
    const a = client(gate);
    const b = client(gate);
    b.ask('SELECT 2', 2);
    a.ask('SELECT 1', 1);
    assert.ok(await gate.until(() => statements.waiting().length === 2, 10_000));
    assert.equal(statements.releaseWave(), 2);
    await Promise.all([a.nextAnswer(1), b.nextAnswer(1)]);
    a.ran();
    b.ran();
    assert.ok(await gate.until(() => gate.statements.every((st) => st.ran), 10_000));
    a.ask('UPDATE idem SET status = 201', 1);
    assert.ok(await gate.until(() => statements.waiting().length === 1, 10_000));
    statements.release();
    assert.deepEqual(gate.decisions.slice(1), [
      { kind: 'wave', statements: ['SELECT 1', 'SELECT 2'] },
      { kind: 'pass', statements: ['UPDATE idem SET status = 201'] },
    ]);
    a.close();
    b.close();
  } finally {
    gate.close();
  }
});

test("a transaction's end (\"ends\": true) goes at once, told late, unless the hold asks for it; then it waits like any other", async () => {
  const gate = await openGate();
  try {
    const a = client(gate);
    const commit = () => gate.statements.filter((st) => st.ends === true);
    let hold = gate.holdStatements();
    a.ask('BEGIN IMMEDIATE', 5);
    assert.ok(await gate.until(() => hold.waiting().length === 1, 10_000));
    hold.releaseWave();
    await a.nextAnswer(1);
    a.ran();
    // A plain hold (a lockstep's) lets a reported COMMIT ("ends") run at once, told late: the server answers as without the gate.
    const socket = net.connect(gate.socketPath);
    const answers: string[] = [];
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => answers.push(...chunk.split('\n').filter(Boolean)));
    socket.write(JSON.stringify({ point: 'sql', sql: 'COMMIT', pid: 1, thread: 6, ends: true }) + '\n');
    assert.ok(await gate.until(() => commit().length === 1, 10_000));
    await new Promise<void>((resolve) => (answers.length > 0 ? resolve() : socket.once('data', () => resolve())));
    assert.deepEqual(answers, ['late'], 'not held by a hold that does not ask for ends');
    assert.equal(hold.waiting().length, 0);
    socket.write('{"point": "ran"}\n');
    // A hold that asks for them holds it.
    hold = gate.holdStatements({ ends: true });
    socket.write(JSON.stringify({ point: 'sql', sql: 'COMMIT', pid: 1, thread: 6, ends: true }) + '\n');
    assert.ok(await gate.until(() => hold.waiting().length === 1, 10_000));
    assert.equal(hold.waiting()[0].ends, true);
    assert.deepEqual(answers, ['late'], 'held: no answer yet');
    hold.release();
    await new Promise<void>((resolve) => (answers.length > 1 ? resolve() : socket.once('data', () => resolve())));
    assert.deepEqual(answers, ['late', 'go']);
    socket.destroy();
    a.close();
  } finally {
    gate.close();
  }
});

test('a wait on the gate (until) ends with false when the gate is closed, before its bound: no timer is left to keep the process alive', async () => {
  const gate = await openGate();
  const started = performance.now();
  const waiting = gate.until(() => false, 30_000);
  gate.close();
  assert.equal(await waiting, false);
  assert.ok(performance.now() - started < 15_000, 'ended by close, not by its 30 s bound');
  assert.equal(await gate.until(() => false, 30_000), false, 'a wait begun on a closed gate ends at once');
  assert.ok(performance.now() - started < 15_000, 'a wait begun on a closed gate ends at once, not by its bound');
});
