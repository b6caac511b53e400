/**
 * How exchanges are shown to a learner: the curl line that replays one, and the progress bar;
 * and where a second client's requests come from (http.ts openSecondConnection).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { openSecondConnection, secondSocketPath, SECOND_CLIENT_ADDRESS } from '../grader/http.js';
import { Chalk } from 'chalk';
import { curlCommand, formatExchange, formatRequestLine, shellQuote } from '../grader/wire.js';
import { parsePaste } from '../grader/paste.js';
import { serverTimeZone } from '../grader/seed.js';
import { setLanguage } from '../i18n/index.js';
import { formatProgress, formatResult, progressBar } from '../grader/reporters/human.js';
import type { Exchange, StepResult } from '../grader/types.js';

const pay = (over: Partial<Exchange> = {}): Exchange => ({
  server: 'A',
  port: 41234,
  method: 'POST',
  path: '/pay',
  key: 'k1',
  requestBody: '{"user":"u1","amount":1000}',
  status: 201,
  responseBody: '{"payment_id": 1}',
  ms: 3,
  ...over,
});

/** What a POSIX shell makes of a command line: its words, as `printf '%s\n'` prints them. */
function wordsInShell(line: string): string[] {
  const out = execFileSync('sh', ['-c', `set -- ${line.replace(/^curl /, '')}; for w in "$@"; do printf '%s\\0' "$w"; done`], { encoding: 'utf8' });
  return out.split('\0').slice(0, -1);
}

test('shellQuote leaves safe words alone and single-quotes the rest, quotes included', () => {
  assert.equal(shellQuote('http://127.0.0.1:8000/pay'), 'http://127.0.0.1:8000/pay');
  assert.equal(shellQuote(''), "''");
  assert.equal(shellQuote('a b'), "'a b'");
  assert.equal(shellQuote("it's"), "'it'\\''s'");
  for (const word of ["it's", '$HOME `x` "y"', '{"user":"o\'neil","amount":1}', '\\n;|&', '']) {
    assert.deepEqual(wordsInShell(`curl ${shellQuote(word)}`), [word], word);
  }
});

test('curlCommand replays a request: the key, an empty key, no key, the body exactly', () => {
  assert.equal(
    curlCommand(pay(), 8000),
    `curl -sS -i -X POST http://127.0.0.1:8000/pay -H 'Content-Type: application/json' -H 'Idempotency-Key: k1' --data '{"user":"u1","amount":1000}'`,
  );
  assert.match(curlCommand(pay({ key: '' })), /-H 'Idempotency-Key;' --data/);
  assert.doesNotMatch(curlCommand(pay({ key: undefined })), /Idempotency-Key/);
  const odd = pay({ key: "k'1 $x", requestBody: `{"user":"o'neil","amount":1}` });
  assert.deepEqual(wordsInShell(curlCommand(odd, 8000)).slice(-3), ['-H', `Idempotency-Key: k'1 $x`, '--data', `{"user":"o'neil","amount":1}`].slice(-3));
  assert.equal(curlCommand({ ...pay(), method: 'GET', path: '/health', key: undefined, requestBody: '' }, 9), 'curl -sS -i http://127.0.0.1:9/health');
  assert.match(curlCommand(pay({ requestBody: 'x'.repeat(50) }), 8000, 10), /--data xxxxxxxxxx {2}# body cut: 40 more characters$/);
});

test('a failing verdict shows a curl line under each exchange, to the learner\'s port, without colour when asked', () => {
  const result: StepResult = { id: '02', slug: 'replay', title: 'Replay', status: 'fail', message: 'm', details: [], warnings: [], exchanges: [pay(), pay({ responseBody: 'y'.repeat(1000) })], ms: 1 };
  const text = formatResult(result, new Chalk({ level: 0 }), { replayPort: 8123 });
  assert.equal((text.match(/^ {10}\$ curl -sS -i -X POST http:\/\/127\.0\.0\.1:8123\/pay /gm) ?? []).length, 2);
  assert.match(text, /y{400}… \(600 more characters\)/);
  assert.match(text, /each \$ curl line sends that request again, to your server on port 8123/);
  assert.doesNotMatch(text, /\x1b\[/);
  assert.match(formatResult(result, new Chalk({ level: 1 })), /\x1b\[/);
});

test('the progress bar has one square per step', () => {
  assert.equal(progressBar(3, 8), '■■■□□□□□');
  assert.equal(progressBar(0, 8), '□□□□□□□□');
  assert.equal(progressBar(8, 8), '■■■■■■■■');
  assert.equal(formatProgress(3, 8, new Chalk({ level: 0 })), 'Progress: 3 of 8 steps pass. ■■■□□□□□');
});

test('a transcript speaks the language of the learner (no key, empty key, a cut body) and reads back as the same request', () => {
  setLanguage('ko');
  try {
    assert.equal(formatRequestLine(pay({ key: undefined })), 'POST /pay  (Idempotency-Key 없음)  {"user":"u1","amount":1000}');
    assert.equal(formatRequestLine(pay({ key: '' })), 'POST /pay  Idempotency-Key: (빈 값)  {"user":"u1","amount":1000}');
    assert.match(formatExchange(pay({ responseBody: 'y'.repeat(1000) }), 400).join('\n'), /y{400}… \(글자 600개 더 있음\)$/);
    assert.match(curlCommand(pay({ requestBody: 'x'.repeat(50) }), 8000, 10), /# 본문 잘림: 글자 40개 더 있음$/);
    const keyless = parsePaste([...formatExchange(pay({ key: undefined })), ...formatExchange(pay({ key: '' }))].join('\n'));
    assert.deepEqual(keyless.responses.map((r) => r.key), [null, '']);
  } finally {
    setLanguage('en');
  }
  setLanguage('zh');
  try {
    assert.equal(formatRequestLine(pay({ key: undefined })), 'POST /pay  （没有 Idempotency-Key）  {"user":"u1","amount":1000}');
    const keyless = parsePaste([...formatExchange(pay({ key: undefined })), ...formatExchange(pay({ key: '' }))].join('\n'));
    assert.deepEqual(keyless.responses.map((r) => r.key), [null, '']);
  } finally {
    setLanguage('en');
  }
});

test("a request sent with proxy headers from the second client address shows both, in its line and its curl line (which binds the address); a fallback says why", () => {
  const elsewhere = pay({ headers: { 'X-Forwarded-For': '198.51.100.23', Forwarded: 'for=198.51.100.23' }, client: { address: '127.3.4.5' } });
  assert.equal(formatRequestLine(elsewhere), 'POST /pay  Idempotency-Key: k1  X-Forwarded-For: 198.51.100.23  Forwarded: for=198.51.100.23  (from 127.3.4.5)  {"user":"u1","amount":1000}');
  assert.deepEqual(wordsInShell(curlCommand(elsewhere, 8000)), [
    '-sS', '-i', '-X', 'POST', '--interface', '127.3.4.5', 'http://127.0.0.1:8000/pay',
    '-H', 'Content-Type: application/json', '-H', 'Idempotency-Key: k1', '-H', 'X-Forwarded-For: 198.51.100.23', '-H', 'Forwarded: for=198.51.100.23',
    '--data', '{"user":"u1","amount":1000}',
  ]);
  const fellBack = pay({ client: { address: '127.0.0.1', fallback: '127.3.4.5 could not be bound here (EADDRNOTAVAIL)' } });
  assert.match(formatRequestLine(fellBack), /\(from 127\.0\.0\.1: 127\.3\.4\.5 could not be bound here \(EADDRNOTAVAIL\)\)/);
  assert.doesNotMatch(curlCommand(fellBack), /--interface/);
  assert.deepEqual(parsePaste(formatExchange(elsewhere).join('\n')).responses.map((r) => r.key), ['k1'], 'reads back as the same key');
});

test('a second client connects from 127.3.4.5: bound unsandboxed, through the relay\'s second socket, or through its first with the reason when there is none', async () => {
  const peers: string[] = [];
  const tcp = net.createServer((c) => {
    peers.push(c.remoteAddress ?? '');
    c.end();
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const port = (tcp.address() as net.AddressInfo).port;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'second-'));
  const servers: net.Server[] = [];
  /** A Unix socket server at `file` that answers every connection with `name`, once it listens. */
  const unix = (file: string, name: string) =>
    new Promise<void>((resolve) => {
      const server = net.createServer((c) => c.end(name));
      servers.push(server);
      server.listen(file, resolve);
    });
  const relay = path.join(dir, 'A-1.sock');
  try {
    const bound = await openSecondConnection({ port }, 2000);
    bound.socket.destroy();
    assert.deepEqual(bound.client, { address: SECOND_CLIENT_ADDRESS });
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(peers, [SECOND_CLIENT_ADDRESS], 'the server saw the second address');
    const read = async (opened: { socket: net.Socket }) => {
      const chunks: Buffer[] = [];
      for await (const chunk of opened.socket) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString();
    };
    await unix(relay, 'first');
    const none = await openSecondConnection({ port, socketPath: relay }, 2000);
    assert.equal(none.client.address, '127.0.0.1');
    assert.match(none.client.fallback ?? '', /relay could not bind 127\.3\.4\.5/);
    assert.equal(none.client.relayMissing, true, 'a relay without its second socket is told apart from an address that cannot be bound');
    assert.equal(await read(none), 'first');
    await unix(secondSocketPath(relay), 'second');
    const second = await openSecondConnection({ port, socketPath: relay }, 2000);
    assert.deepEqual(second.client, { address: SECOND_CLIENT_ADDRESS });
    assert.equal(await read(second), 'second');
  } finally {
    tcp.close();
    for (const s of servers) s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

const verdictOf = (over: Partial<StepResult>): StepResult => ({ id: '02', slug: 'replay', title: 'Replay', status: 'fail', message: 'm', details: [], warnings: [], exchanges: [], ms: 1, ...over });

test("a live step's server output is headed with the time zone its servers ran in, which the log's local times follow", () => {
  const live = formatResult(verdictOf({ seed: 7, serverOutput: '[A] 127.0.0.1 - - [05/Dec/2026 20:55:13] "POST /pay HTTP/1.1" 201 -' }), new Chalk({ level: 0 }));
  assert.match(live, new RegExp(`The server printed \\(last lines; it ran with TZ=${serverTimeZone(7)}, so its log shows that zone's local time\\):`));
  const fileOnly = formatResult(verdictOf({ serverOutput: '[A] hello' }), new Chalk({ level: 0 }));
  assert.match(fileOnly, /The server printed \(last lines\):/);
});
