/**
 * The chaos run (issue 11, part 3): the lossy proxy really loses and delays on real
 * sockets; the backoff is full jitter and capped; every fate and wait is a function of
 * the seed; end to end on the real Python server, the starter charges retries again and
 * the reference charges each payment once; --no-key; bad options exit 2; a hanging
 * server is cut off by the deadline. Every server started is stopped.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { Chalk } from 'chalk';
import { openConnection, sendOn } from '../grader/http.js';
import { runningServerCount } from '../grader/server.js';
import { draw } from '../grader/chaos/draw.js';
import { DEFAULT_BACKOFF, backoffCeilingMs, fullJitterMs, retryWaitMs, shouldRetry, type BackoffPolicy } from '../grader/chaos/backoff.js';
import { DEFAULT_FAULTS, fateOf, type Fate } from '../grader/chaos/faults.js';
import { startLossyProxy, type LossyProxy } from '../grader/chaos/proxy.js';
import { intendedPayments, runChaos, type ChaosResult } from '../grader/chaos/run.js';
import { chartCharset, formatWaits, histogram } from '../grader/chaos/render.js';
import { chaosCommand } from '../bin/chaos-command.js';
import { FIXTURES_DIR, serverSource } from '../fixtures/build.js';
import { fixtureWorkspace, runCli, serversUnder, tempDir } from './support.js';

/** The seed and size of the end-to-end runs: with it, 3 of 8 payments lose a response (checked below, not assumed). */
const SEED = 42;
const PAYMENTS = 8;
const plain = new Chalk({ level: 0 });

afterEach(() => {
  assert.equal(runningServerCount(), 0, 'every server the chaos run started was stopped');
});

/** A real HTTP server on loopback that answers every request 200 `ok` (after `holdMs`) and counts the requests it got. */
async function upstream(holdMs = 0): Promise<{ port: number; requests: () => number; close: () => Promise<void> }> {
  let count = 0;
  const server = http.createServer((req, res) => {
    count++;
    req.resume();
    req.on('end', () => setTimeout(() => res.end('ok'), holdMs));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    requests: () => count,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** One POST through the proxy with the given fate: its status (undefined: none came), and the wall time, ms. */
async function through(proxy: LossyProxy, fates: Map<number, Fate>, fate: Fate, answerMs = 2000): Promise<{ status?: number; ms: number; error?: string }> {
  const started = performance.now();
  const socket = await openConnection(proxy.port, 1000);
  fates.set(socket.localPort ?? 0, fate);
  const exchange = await sendOn(socket, { label: 'A', port: proxy.port }, 'POST', '/pay', { key: 'k', body: { user: 'u', amount: 1 } }, { connectMs: 1000, answerMs });
  return { status: exchange.status, ms: performance.now() - started, error: exchange.error };
}

test('the proxy passes, loses requests before the server, loses responses after it answered, and delays (real sockets)', async () => {
  const server = await upstream();
  const fates = new Map<number, Fate>();
  const proxy = await startLossyProxy({ upstream: { port: server.port }, fateOf: (port) => fates.get(port) });
  try {
    const passed = await through(proxy, fates, { loss: 'none', delayMs: 0 });
    assert.equal(passed.status, 200);
    assert.equal(server.requests(), 1);

    const lostRequest = await through(proxy, fates, { loss: 'request', delayMs: 0 });
    assert.equal(lostRequest.status, undefined, 'no response to a lost request');
    assert.ok(lostRequest.error, 'the client is told the connection failed');
    assert.equal(server.requests(), 1, 'a lost request never reaches the server');

    const lostResponse = await through(proxy, fates, { loss: 'response', delayMs: 0 });
    assert.equal(lostResponse.status, undefined, 'no response comes back');
    assert.equal(server.requests(), 2, 'the server got the request and answered it');

    const delayed = await through(proxy, fates, { loss: 'none', delayMs: 300 });
    assert.equal(delayed.status, 200);
    assert.ok(delayed.ms >= 299, `held back 300 ms (took ${delayed.ms.toFixed(0)} ms)`);
    assert.equal(server.requests(), 3);

    assert.deepEqual(
      proxy.connections.map((c) => [c.fate.loss, c.reachedServer, c.serverAnswered]),
      [
        ['none', true, true],
        ['request', false, false],
        ['response', true, true],
        ['none', true, true],
      ],
    );
  } finally {
    await proxy.close();
    await server.close();
  }
});

test('a client that gives up on a delayed request takes it with it; close() resets what is open', async () => {
  const server = await upstream(5000);
  const fates = new Map<number, Fate>();
  const proxy = await startLossyProxy({ upstream: { port: server.port }, fateOf: (port) => fates.get(port) });
  try {
    // The client writes its request and hangs up 100 ms later, while the proxy still holds it back.
    const socket = await openConnection(proxy.port, 1000);
    fates.set(socket.localPort ?? 0, { loss: 'none', delayMs: 1000 });
    socket.write('POST /pay HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}');
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 1300));
    assert.equal(proxy.connections.length, 1, 'the proxy got the request');
    assert.equal(server.requests(), 0, 'the request held back was never passed on');
    // A request the server holds for 5 s: close() ends it at once.
    const pending = through(proxy, fates, { loss: 'none', delayMs: 0 }, 10_000);
    for (const until = performance.now() + 3000; server.requests() === 0 && performance.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(server.requests(), 1, 'the request reached the server');
    const closedAt = performance.now();
    await proxy.close();
    const cut = await pending;
    assert.equal(cut.status, undefined);
    assert.ok(performance.now() - closedAt < 2000, 'the open request ended when the proxy closed');
  } finally {
    await proxy.close();
    await server.close();
  }
});

test('backoff: full jitter between 0 and min(cap, base * 2^n), capped, spread over the whole range', () => {
  const policy: BackoffPolicy = { baseMs: 100, capMs: 1000, maxAttempts: 6 };
  assert.deepEqual(
    Array.from({ length: 8 }, (_, n) => backoffCeilingMs(n, policy)),
    [100, 200, 400, 800, 1000, 1000, 1000, 1000],
  );
  assert.equal(fullJitterMs(3, 0, policy), 0);
  assert.equal(fullJitterMs(3, 0.5, policy), 400);
  assert.equal(fullJitterMs(3, 0.999999, policy), 799);
  assert.throws(() => fullJitterMs(0, 1, policy), RangeError);
  assert.throws(() => backoffCeilingMs(-1, policy), RangeError);
  for (const retry of [0, 2, 6]) {
    const ceiling = backoffCeilingMs(retry, policy);
    const waits = Array.from({ length: 2000 }, (_, payment) => retryWaitMs(7, payment, retry, policy));
    assert.ok(waits.every((w) => Number.isInteger(w) && w >= 0 && w < ceiling), `retry ${retry}: every wait in [0, ${ceiling})`);
    const mean = waits.reduce((a, b) => a + b, 0) / waits.length;
    // Full jitter is uniform over [0, ceiling): the mean is half the ceiling, and waits come near both ends
    // ("equal jitter" would keep every wait above ceiling / 2; no jitter would give the ceiling each time).
    assert.ok(Math.abs(mean - ceiling / 2) < ceiling * 0.05, `retry ${retry}: mean ${mean} near ${ceiling / 2}`);
    assert.ok(Math.min(...waits) < ceiling * 0.05 && Math.max(...waits) > ceiling * 0.95, `retry ${retry}: waits reach both ends`);
    assert.ok(waits.filter((w) => w < ceiling / 2).length > 800, `retry ${retry}: about half the waits are under half the ceiling`);
  }
  assert.deepEqual(
    [undefined, 200, 201, 400, 404, 408, 409, 422, 429, 500, 501, 502, 503].map(shouldRetry),
    [true, false, false, false, false, true, true, false, true, true, false, true, true],
  );
});

test('the same seed gives the same fates, waits and payments; another seed other ones; the shares are as asked', () => {
  const fates = (seed: number) => Array.from({ length: 50 }, (_, p) => Array.from({ length: 6 }, (_, a) => fateOf(seed, p, a, DEFAULT_FAULTS)));
  assert.deepEqual(fates(SEED), fates(SEED));
  assert.notDeepEqual(fates(SEED), fates(SEED + 1));
  assert.equal(draw(1, 'x', 2, 3), draw(1, 'x', 2, 3));
  assert.notEqual(draw(1, 'x', 2, 3), draw(1, 'x', 3, 2));
  const waits = (seed: number) => Array.from({ length: 50 }, (_, p) => retryWaitMs(seed, p, 1, DEFAULT_BACKOFF));
  assert.deepEqual(waits(SEED), waits(SEED));
  assert.notDeepEqual(waits(SEED), waits(SEED + 1));
  const payments = intendedPayments(SEED, 30, true);
  assert.deepEqual(payments, intendedPayments(SEED, 30, true));
  assert.equal(new Set(payments.map((p) => p.key)).size, 30, 'a key of its own per payment');
  assert.equal(new Set(payments.map((p) => `${p.body.user}/${p.body.amount}`)).size, 30);
  assert.ok(intendedPayments(SEED, 3, false).every((p) => p.key === undefined));
  // Over 20,000 attempts at loss 0.3: about 15 % requests lost, 15 % responses lost, a quarter of the rest delayed under 200 ms.
  const all = Array.from({ length: 20_000 }, (_, i) => fateOf(9, i, i % 6, DEFAULT_FAULTS));
  const share = (f: (x: Fate) => boolean) => all.filter(f).length / all.length;
  assert.ok(Math.abs(share((f) => f.loss === 'request') - 0.15) < 0.015);
  assert.ok(Math.abs(share((f) => f.loss === 'response') - 0.15) < 0.015);
  assert.ok(Math.abs(share((f) => f.loss !== 'request' && f.delayMs > 0) / share((f) => f.loss !== 'request') - 0.25) < 0.02);
  assert.ok(all.every((f) => f.delayMs >= 0 && f.delayMs < DEFAULT_FAULTS.maxDelayMs && (f.loss !== 'request' || f.delayMs === 0)));
  assert.ok(fates(SEED).flat().every((f) => f.loss === 'none') === false);
  assert.ok(Array.from({ length: 100 }, (_, p) => fateOf(SEED, p, 0, { ...DEFAULT_FAULTS, loss: 0 })).every((f) => f.loss === 'none'));
});

test('the histogram buckets the waits and scales its bars to the fullest bucket', () => {
  assert.deepEqual(histogram([5, 50, 99, 150, 999, 2000], 100, 300), ['  0–100 ms │████████████████████████████████ 3', '100–200 ms │███████████ 1', '200–300 ms │█████████████████████ 2']);
  assert.deepEqual(histogram([], 100, 300), []);
  // ASCII only, for terminals that draw ambiguous-width characters (│ █ – ≤ • ·) two columns wide.
  assert.deepEqual(histogram([5, 150], 100, 200, 'ascii'), ['  0-100 ms |################################ 1', '100-200 ms |################################ 1']);
});

test('the charts are drawn in ASCII where the locale is Chinese, Japanese or Korean, with --ascii, or as IDEM_LAB_CHARSET says', () => {
  assert.equal(chartCharset(undefined, { LANG: 'en_US.UTF-8' }), 'unicode');
  assert.equal(chartCharset(undefined, {}), 'unicode');
  assert.equal(chartCharset(undefined, { LANG: 'ko_KR.UTF-8' }), 'ascii');
  assert.equal(chartCharset(undefined, { LANG: 'en_US.UTF-8', LC_ALL: 'zh_CN.UTF-8' }), 'ascii', 'LC_ALL comes first');
  assert.equal(chartCharset(undefined, { LANG: 'ja_JP.UTF-8', LC_CTYPE: 'C.UTF-8' }), 'unicode', 'then LC_CTYPE');
  assert.equal(chartCharset(undefined, { LANG: 'ko_KR.UTF-8', IDEM_LAB_CHARSET: 'unicode' }), 'unicode');
  assert.equal(chartCharset(undefined, { LANG: 'en_US.UTF-8', IDEM_LAB_CHARSET: 'ascii' }), 'ascii');
  assert.equal(chartCharset(true, { LANG: 'en_US.UTF-8', IDEM_LAB_CHARSET: 'unicode' }), 'ascii', '--ascii wins');
  const lines = formatWaits([[10, 60, 90], [150]], { ...DEFAULT_BACKOFF, baseMs: 100, capMs: 1000 }, 'ascii');
  const chart = lines.slice(1).join('\n');
  // eslint-disable-next-line no-control-regex
  assert.match(chart.replace(/\(.*\)/g, ''), /^[\x00-\x7f]*$/, `only ASCII in the bars and strips:\n${chart}`);
  assert.match(chart, /retry 1 +<= 100 ms +\|[.o]{32}\| 3/);
  assert.match(chart, /each # is a share of the retries/);
  assert.match(chart, /o marks a cell where some wait fell, \. one where none did/);
});

/** Every attempt of every payment, as [payment, attempt, loss, status, replayed]. */
function story(result: ChaosResult): Array<[number, number, string, number | undefined, boolean]> {
  return result.runs.flatMap((r) => r.attempts.map((a) => [r.index, a.attempt, a.fate.loss, a.status, a.replayed === true] as [number, number, string, number | undefined, boolean]));
}

test('end to end on the starter: a retry after a lost response is charged again; the same seed gives the same run', { timeout: 120_000 }, async () => {
  const ws = fixtureWorkspace('starter');
  try {
    const first = await runChaos({ workspace: ws.dir, seed: SEED, payments: PAYMENTS, keyed: true });
    const { tally } = first;
    assert.ok(tally.lostResponses > 0, 'the seed loses some responses');
    assert.ok(tally.duplicates > 0, 'the starter charges some payments more than once');
    assert.equal(tally.paid, PAYMENTS);
    // Each attempt that reached the server was charged and written down: whole rows, payment by payment.
    const reached = first.runs.map((r) => r.attempts.filter((a) => a.fate.loss !== 'request').length);
    assert.deepEqual(tally.chargesPerPayment, reached);
    assert.deepEqual(tally.rowsPerPayment, reached);
    assert.equal(tally.charges, tally.requests - tally.lostRequests);
    assert.equal(tally.duplicates, reached.filter((n) => n > 1).length);
    // Which payments: the key each sent and its charges.
    assert.deepEqual(tally.doubled.map((d) => [d.key, d.charges]), first.runs.flatMap((r, i) => (reached[i] > 1 ? [[r.payment.key, reached[i]]] : [])));
    assert.equal(tally.retries, tally.requests - PAYMENTS);
    assert.ok(first.runs.every((r) => r.attempts.slice(0, -1).every((a) => a.fate.loss !== 'none') && r.attempts.at(-1)!.status === 201), 'retried only after a loss, ending with 201');
    assert.ok(first.rows.every((row) => row.idempotency_key !== null), 'every row carries the key sent');
    const again = await runChaos({ workspace: ws.dir, seed: SEED, payments: PAYMENTS, keyed: true });
    assert.deepEqual(again.tally, tally, 'the same seed, the same table');
    assert.deepEqual(story(again), story(first));
    assert.equal(fs.existsSync(path.join(ws.dir, 'lab.db')), false, "the learner's lab.db was never touched");
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    ws.remove();
  }
});

test('end to end on the reference: every payment charged exactly once, retries after lost responses replayed', { timeout: 120_000 }, async () => {
  const ws = fixtureWorkspace('reference');
  try {
    const result = await runChaos({ workspace: ws.dir, seed: SEED, payments: PAYMENTS, keyed: true });
    const { tally } = result;
    assert.ok(tally.lostResponses > 0 && tally.retries > 0);
    assert.deepEqual(tally.chargesPerPayment, Array(PAYMENTS).fill(1));
    assert.deepEqual(tally.rowsPerPayment, Array(PAYMENTS).fill(1));
    assert.equal(tally.duplicates, 0);
    assert.equal(tally.charges, PAYMENTS);
    assert.equal(tally.ledgerRows, PAYMENTS);
    for (const run of result.runs) {
      const last = run.attempts.at(-1)!;
      assert.equal(last.status, 201);
      // The answer is a replay exactly when an earlier attempt reached the server and lost its response.
      assert.equal(last.replayed === true, run.attempts.slice(0, -1).some((a) => a.fate.loss === 'response'), `payment ${run.index}`);
    }
    assert.ok(tally.replays > 0);
    // The command in process: its table, its verdict and exit 0.
    let out = '';
    const code = await chaosCommand({ dir: ws.dir, seed: String(SEED), payments: String(PAYMENTS) }, (text) => (out += text), plain);
    assert.equal(code, 0, out);
    assert.match(out, new RegExp(`seed ${SEED}\\.`));
    assert.match(out, new RegExp(`payments intended +${PAYMENTS}\\n`));
    assert.match(out, new RegExp(`provider's charges +${PAYMENTS}\\n`));
    assert.match(out, /duplicates +0 /);
    assert.match(out, new RegExp(`retries +${tally.retries} `), 'the same seed, the same table as the run above');
    assert.match(out, /retry 1 +≤ 100 ms +│[·•]+│ \d+/);
    assert.match(out, /\(each █ is a share of the retries/, 'the histogram has a legend');
    assert.match(out, /• marks a cell where some wait fell, · one where none did/, 'the dot chart has a legend');
    assert.doesNotMatch(out, /Charged more than once/);
    assert.match(out, new RegExp(`Each of the ${PAYMENTS} payments was charged exactly once`));
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    ws.remove();
  }
});

test('the command on the starter exits 1 and says the payments were charged more than once', { timeout: 120_000 }, async () => {
  const ws = fixtureWorkspace('starter');
  try {
    let out = '';
    const code = await chaosCommand({ dir: ws.dir, seed: String(SEED), payments: String(PAYMENTS) }, (text) => (out += text), plain);
    assert.equal(code, 1, out);
    assert.match(out, new RegExp(`\\d of ${PAYMENTS} payments were charged more than once`));
    assert.match(out, /duplicates +[1-9]/);
    assert.match(out, /idem-lab show 02/);
    // The keys charged twice, listed: each one that the run charged more than once, with its charges.
    const n = Number(/(\d+) of \d+ payments were charged more than once/.exec(out)![1]);
    const listed = [...out.matchAll(/^ {2}([0-9a-f-]{36}) {2}(\S+) {2}(\d+): (\d+) charges$/gm)];
    assert.match(out, /^Charged more than once:$/m);
    assert.equal(listed.length, Math.min(n, 10), out);
    assert.ok(listed.every((m) => Number(m[4]) >= 2));
    const run = await runChaos({ workspace: ws.dir, seed: SEED, payments: PAYMENTS, keyed: true });
    assert.deepEqual(listed.map((m) => m[1]), run.tally.doubled.slice(0, 10).map((d) => d.key), 'the keys the run charged more than once');
    // --ascii draws the same charts without ambiguous-width characters.
    let ascii = '';
    await chaosCommand({ dir: ws.dir, seed: String(SEED), payments: String(PAYMENTS), ascii: true }, (text) => (ascii += text), plain);
    assert.match(ascii, /retry 1 +<= 100 ms +\|[.o]+\| \d+/);
    assert.doesNotMatch(ascii, /[│█•·–≤]/);
    assert.match(out, new RegExp(`idem-lab chaos --seed ${SEED} --payments ${PAYMENTS} --loss 0.3`));
  } finally {
    ws.remove();
  }
});

test('--no-key: the starter charges retries again (exit 1); the reference refuses every payment with 400, charges nothing and is not retried (exit 0)', { timeout: 120_000 }, async () => {
  const starter = fixtureWorkspace('starter');
  const reference = fixtureWorkspace('reference');
  try {
    const loose = await runChaos({ workspace: starter.dir, seed: SEED, payments: PAYMENTS, keyed: false });
    assert.ok(loose.tally.duplicates > 0);
    assert.ok(loose.rows.every((row) => row.idempotency_key === null), 'no key was sent');
    const strict = await runChaos({ workspace: reference.dir, seed: SEED, payments: PAYMENTS, keyed: false });
    assert.equal(strict.tally.refused, PAYMENTS);
    assert.deepEqual(strict.charges, []);
    assert.deepEqual(strict.rows, []);
    for (const run of strict.runs) {
      // Retried only while nothing came back; the first 400 ends the payment.
      assert.deepEqual(run.attempts.map((a) => a.status ?? null), [...run.attempts.slice(0, -1).map(() => null), 400], `payment ${run.index}`);
    }
    let out = '';
    assert.equal(await chaosCommand({ dir: starter.dir, seed: String(SEED), payments: String(PAYMENTS), key: false }, (text) => (out += text), plain), 1, out);
    assert.match(out, /Without a key the server cannot tell a retry from a new payment/);
    out = '';
    assert.equal(await chaosCommand({ dir: reference.dir, seed: String(SEED), payments: String(PAYMENTS), key: false }, (text) => (out += text), plain), 0, out);
    assert.match(out, /every payment was refused and nothing was charged/);
    assert.match(out, /provider's charges +0\n/);
  } finally {
    starter.remove();
    reference.remove();
  }
});

test('a server whose /pay never answers: the run ends at its deadline, gives up, exits 1, and the server is stopped', { timeout: 120_000 }, async () => {
  const tmp = tempDir('idem-lab-chaos-hangs-');
  try {
    // The starter, whose handle_pay never returns: it answers GET /health and keeps IDEM_DB, but no payment ever comes back.
    const hangs = serverSource('starter').replace(/\n    charge\(payload\["user"\], payload\["amount"\]\)\n/, '\n    time.sleep(3600)\n');
    assert.notEqual(hangs, serverSource('starter'));
    fs.writeFileSync(path.join(tmp.dir, 'server.py'), hangs);
    let out = '';
    const started = performance.now();
    const code = await chaosCommand({ dir: tmp.dir, seed: String(SEED), payments: '3', timeout: '1.5' }, (text) => (out += text), plain);
    const ms = performance.now() - started;
    assert.equal(code, 1, out);
    assert.match(out, /given up +3\n/);
    assert.match(out, /The client gave up on 3 payments/);
    assert.ok(ms < 30_000, `bounded (${ms.toFixed(0)} ms)`);
    assert.deepEqual(serversUnder(tmp.dir), []);
  } finally {
    tmp.remove();
  }
});

test('a server that cannot start: exit 1 with the reason and its output, as check says it', { timeout: 60_000 }, async () => {
  const tmp = tempDir('idem-lab-chaos-crash-');
  try {
    fs.copyFileSync(path.join(FIXTURES_DIR, 'misbehaving', 'crash-at-start', 'server.py'), path.join(tmp.dir, 'server.py'));
    let out = '';
    const code = await chaosCommand({ dir: tmp.dir, seed: String(SEED), payments: '3' }, (text) => (out += text), plain);
    assert.equal(code, 1, out);
    assert.match(out, /server.py exited during start-up \(exit code 1\)/);
    assert.match(out, /What the server printed:\n[\s\S]*PAYMENT_PROVIDER_URL is not set/);
    assert.doesNotMatch(out, /payments intended/, 'no table without a server');
    assert.deepEqual(serversUnder(tmp.dir), []);
  } finally {
    tmp.remove();
  }
});

test('the command line: bad options and no workspace exit 2 with a sentence; a run on the reference exits 0', { timeout: 120_000 }, async () => {
  const ws = fixtureWorkspace('reference');
  const empty = tempDir();
  try {
    const bad: Array<[string[], RegExp]> = [
      [['--loss', '1'], /--loss must be a number from 0 to below 1.*not "1"/],
      [['--loss', '-0.1'], /--loss must be/],
      [['--loss', 'lots'], /--loss must be/],
      [['--payments', '0'], /--payments must be a whole number from 1 to 500, not "0"/],
      [['--payments', '2.5'], /--payments must be/],
      [['--payments', '501'], /--payments must be/],
      [['--seed', 'abc'], /a seed is a whole number/],
      [['--timeout', '0'], /--timeout must be/],
      [['--sandbox', 'maybe'], /--sandbox must be auto, required or off/],
    ];
    for (const [args, message] of bad) {
      const run = await runCli(['chaos', '--dir', ws.dir, ...args]);
      assert.equal(run.exitCode, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, message);
      assert.equal(run.stdout, '', 'nothing ran');
    }
    const none = await runCli(['chaos', '--dir', empty.dir]);
    assert.equal(none.exitCode, 2);
    assert.match(none.stderr, /server\.py/);
    const help = await runCli(['chaos', '--help']);
    assert.equal(help.exitCode, 0);
    assert.match(help.stdout, /--no-key/);
    assert.match(help.stdout, /Exit codes: 0 every payment was charged exactly once/);
    const ok = await runCli(['chaos', '--dir', ws.dir, '--seed', String(SEED), '--payments', '4']);
    assert.equal(ok.exitCode, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /Each of the 4 payments was charged exactly once/);
    assert.deepEqual(serversUnder(ws.dir), []);
  } finally {
    ws.remove();
    empty.remove();
  }
});
