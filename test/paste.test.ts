/**
 * parsePaste on every format a learner pastes: probe.sh / idem-lab probe, curl -i, curl -v,
 * ledger.sh / idem-lab ledger, the sqlite3 shell, GET /ledger, with prose around. Each
 * test asserts the whole structure read (statuses, keys, bodies, ledger rows), not counts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { commandKey, describeResponse, headerKey, parsePaste, paymentId, probeKey, type PastedResponse } from '../grader/paste.js';
import type { LedgerRow } from '../grader/types.js';

/** Joins lines with \n, so each test can count its lines. */
const lines = (...ls: string[]) => ls.join('\n');

const T1 = '2026-11-29T07:43:58.061Z';
const T2 = '2026-11-29T07:43:58.793Z';
const T3 = '2026-11-29T07:43:59.433Z';

/** A 201 body as the server answers it. */
const paid = (id: number, at: string) => ({ payment_id: id, user: 'u1', amount: 1000, charged_at: at });
const paidJson = (id: number, at: string) => JSON.stringify(paid(id, at)).replace(/,"/g, ', "').replace(/":/g, '": ');
const row = (id: number, key: string | null, at: string, user = 'u1', amount = 1000): LedgerRow => ({
  payment_id: id,
  idempotency_key: key,
  user,
  amount,
  created_at: at,
});
const REQUIRED = { error: 'an Idempotency-Key header is required' };
const REQUIRED_JSON = '{"error": "an Idempotency-Key header is required"}';

test('probe.sh output with a key: status, key from the request line, body; the ledger.sh table', () => {
  const paste = parsePaste(
    lines(
      'The starter, twice with k1:',
      '$ ./probe.sh k1',
      'POST /pay  Idempotency-Key: k1  {"user":"u1","amount":1000}',
      'HTTP 201 Created',
      paidJson(1, T1),
      'user@lab:~/idem$ ./probe.sh k1',
      'POST /pay  Idempotency-Key: k1  {"user":"u1","amount":1000}',
      'HTTP 201 Created',
      paidJson(2, T2),
      '$ ./ledger.sh',
      'payment_id  idempotency_key  user  amount  created_at',
      `1           k1               u1    1000    ${T1}`,
      `2           k1               u1    1000    ${T2}`,
      'Two rows for one key.',
    ),
  );
  assert.deepEqual(paste.responses, [
    { line: 4, status: 201, key: 'k1', body: paid(1, T1) },
    { line: 8, status: 201, key: 'k1', body: paid(2, T2) },
  ]);
  assert.deepEqual(paste.ledger, [row(1, 'k1', T1), row(2, 'k1', T2)]);
  assert.equal(paste.lines.length, 14);
});

test('probe.sh output without a key and with an (empty) key; the replayed header', () => {
  const paste = parsePaste(
    lines(
      '$ ./probe.sh',
      'POST /pay  (no Idempotency-Key)  {"user":"u1","amount":1000}',
      'HTTP 400 Bad Request',
      REQUIRED_JSON,
      "$ ./probe.sh ''",
      'POST /pay  Idempotency-Key: (empty)  {"user":"u1","amount":1000}',
      'HTTP 400 Bad Request',
      REQUIRED_JSON,
      '$ ./probe.sh k2',
      'POST /pay  Idempotency-Key: k2  {"user":"u1","amount":1000}',
      'HTTP 201 Created',
      'Idempotency-Replayed: true',
      paidJson(3, T3),
    ),
  );
  assert.deepEqual(paste.responses, [
    { line: 3, status: 400, key: null, body: REQUIRED },
    { line: 7, status: 400, key: '', body: REQUIRED },
    { line: 11, status: 201, key: 'k2', replayed: 'true', body: paid(3, T3) },
  ]);
  assert.deepEqual(paste.ledger, []);
});

test('idem-lab probe output without the command line still carries its key; no answer is no response', () => {
  const paste = parsePaste(
    lines(
      'POST /pay  Idempotency-Key: k9  {"user":"u1","amount":5}',
      'HTTP 201 Created',
      '{"payment_id": 9, "user": "u1", "amount": 5, "charged_at": "2026-11-29T08:00:00.000Z"}',
      'POST /pay  Idempotency-Key: k9  {"user":"u1","amount":5}',
      'no answer: [Errno 111] Connection refused (is the server running on port 8000? idem-lab status)',
    ),
  );
  assert.deepEqual(paste.responses, [
    { line: 2, status: 201, key: 'k9', body: { payment_id: 9, user: 'u1', amount: 5, charged_at: '2026-11-29T08:00:00.000Z' } },
  ]);
});

test('curl -i: HTTP/1.1 status line, headers, the key from -H, a body glued to the next prompt', () => {
  const paste = parsePaste(
    lines(
      `$ curl -i -X POST http://127.0.0.1:8000/pay -H 'Content-Type: application/json' -H 'Idempotency-Key: k1' -d '{"user":"u1","amount":1000}'`,
      'HTTP/1.1 201 Created',
      'Server: idem-lab Python/3.11.7',
      'Date: Sun, 29 Nov 2026 07:43:59 GMT',
      'Content-Type: application/json',
      'Content-Length: 89',
      'Idempotency-Replayed: true',
      '',
      `${paidJson(1, T1)}$ curl -i -X POST http://127.0.0.1:8000/pay -H 'Content-Type: application/json' -d '{"user":"u1","amount":1000}'`,
      'HTTP/1.1 400 Bad Request',
      'Server: idem-lab Python/3.11.7',
      'Content-Type: application/json',
      'Content-Length: 50',
      '',
      `${REQUIRED_JSON}$ `,
    ),
  );
  assert.deepEqual(paste.responses, [
    { line: 2, status: 201, key: 'k1', replayed: 'true', body: paid(1, T1) },
    { line: 10, status: 400, key: null, body: REQUIRED },
  ]);
});

test('curl -i with the command continued over lines (\\ and the > of the shell)', () => {
  const paste = parsePaste(
    lines(
      '$ curl -i -X POST http://127.0.0.1:8000/pay \\',
      "    -H 'Content-Type: application/json' \\",
      "    -H 'Idempotency-Key: k3' \\",
      `    -d '{"user":"u1","amount":1000}'`,
      'HTTP/1.1 201 Created',
      '',
      paidJson(3, T3),
      '$ curl -i \\',
      "> -H 'Content-Type: application/json' \\",
      `> -d '{"user":"u1","amount":1000}' \\`,
      '> http://127.0.0.1:8000/pay',
      'HTTP/1.1 400 Bad Request',
      '',
      REQUIRED_JSON,
    ),
  );
  assert.deepEqual(paste.responses, [
    { line: 5, status: 201, key: 'k3', body: paid(3, T3) },
    { line: 12, status: 400, key: null, body: REQUIRED },
  ]);
});

test("curl -v: '> Idempotency-Key:' sets the key, '< HTTP/1.1' is the status; no header line means no key", () => {
  const request = (key: string | undefined) => [
    '*   Trying 127.0.0.1:8000...',
    '* Connected to 127.0.0.1 (127.0.0.1) port 8000 (#0)',
    '> POST /pay HTTP/1.1',
    '> Host: 127.0.0.1:8000',
    '> User-Agent: curl/7.88.1',
    '> Accept: */*',
    '> Content-Type: application/json',
    ...(key === undefined ? [] : [`> Idempotency-Key:${key === '' ? '' : ` ${key}`}`]),
    '> Content-Length: 27',
    '> ',
    '} [27 bytes data]',
  ];
  const answer = (status: string, body: string) => [
    `< HTTP/1.1 ${status}`,
    '< Server: idem-lab Python/3.11.7',
    '< Content-Type: application/json',
    '< ',
    '{ [89 bytes data]',
    '* Connection #0 to host 127.0.0.1 left intact',
    body,
  ];
  const text = lines(
    `$ curl -v http://127.0.0.1:8000/pay -H 'Content-Type: application/json' -H 'Idempotency-Key: abc' -d '{"user":"u1","amount":1000}'`,
    ...request('abc'),
    ...answer('422 Unprocessable Entity', '{"error": "this Idempotency-Key was used with a different request body"}'),
    `$ curl -v http://127.0.0.1:8000/pay -H 'Content-Type: application/json' -d '{"user":"u1","amount":1000}'`,
    ...request(undefined),
    ...answer('201 Created', paidJson(2, T2)),
    ...request(''),
    ...answer('400 Bad Request', REQUIRED_JSON),
  );
  const paste = parsePaste(text);
  assert.deepEqual(paste.responses, [
    { line: 13, status: 422, key: 'abc', body: { error: 'this Idempotency-Key was used with a different request body' } },
    { line: 31, status: 201, key: null, body: paid(2, T2) },
    { line: 49, status: 400, key: '', body: REQUIRED },
  ]);
  assert.equal(paste.lines[12], '< HTTP/1.1 422 Unprocessable Entity');
  assert.equal(paste.lines[30], '< HTTP/1.1 201 Created');
  assert.equal(paste.lines[48], '< HTTP/1.1 400 Bad Request');
  assert.deepEqual(paste.ledger, []);
});

test('an interim 100 Continue is not the response', () => {
  const paste = parsePaste(
    lines("$ curl -i localhost:8000/pay -H 'Idempotency-Key: big' -d @big.json", 'HTTP/1.1 100 Continue', '', 'HTTP/1.1 201 Created', '', paidJson(4, T1)),
  );
  assert.deepEqual(paste.responses, [{ line: 4, status: 201, key: 'big', body: paid(4, T1) }]);
});

test('ledger.sh table: - for no key, a blank cell for an empty key, other text around', () => {
  const paste = parsePaste(
    lines(
      '$ ./ledger.sh',
      'payment_id  idempotency_key  user  amount  created_at',
      `1           -                u1    1000    ${T1}`,
      `2                            u2    250     ${T2}`,
      `3           k1               u1    1000    ${T3}`,
      '$ echo done',
    ),
  );
  assert.deepEqual(paste.ledger, [row(1, null, T1), row(2, null, T2, 'u2', 250), row(3, 'k1', T3)]);
  assert.deepEqual(paste.responses, []);
});

test('ledger.sh rows without their header (./ledger.sh | grep k1)', () => {
  const paste = parsePaste(lines('$ ./ledger.sh | grep k1', `1           k1               u1    1000    ${T1}`, `3           k1               u1    1000    ${T3}`));
  assert.deepEqual(paste.ledger, [row(1, 'k1', T1), row(3, 'k1', T3)]);
});

test('sqlite3 rows without headers: an empty cell is no key', () => {
  const paste = parsePaste(
    lines("$ sqlite3 lab.db 'select * from ledger'", `1|k1|u1|1000|${T1}`, `2||u1|1000|${T2}`, `3|k1|u2|70|${T3}`),
  );
  assert.deepEqual(paste.ledger, [row(1, 'k1', T1), row(2, null, T2), row(3, 'k1', T3, 'u2', 70)]);
});

test('sqlite3 with .headers on, in list, column and box mode', () => {
  const list = parsePaste(lines('sqlite> .headers on', 'sqlite> select * from ledger;', 'payment_id|idempotency_key|user|amount|created_at', `1|k1|u1|1000|${T1}`, `2|race|u1|1000|${T2}`));
  assert.deepEqual(list.ledger, [row(1, 'k1', T1), row(2, 'race', T2)]);

  const column = parsePaste(
    lines(
      "$ sqlite3 -header -column lab.db 'select * from ledger'",
      'payment_id  idempotency_key  user  amount  created_at              ',
      '----------  ---------------  ----  ------  ------------------------',
      `1           k1               u1    1000    ${T1}`,
      `2           race             u1    1000    ${T2}`,
    ),
  );
  assert.deepEqual(column.ledger, [row(1, 'k1', T1), row(2, 'race', T2)]);

  const box = parsePaste(
    lines(
      "$ sqlite3 -box lab.db 'select * from ledger'",
      '┌────────────┬─────────────────┬──────┬────────┬──────────────────────────┐',
      '│ payment_id │ idempotency_key │ user │ amount │        created_at        │',
      '├────────────┼─────────────────┼──────┼────────┼──────────────────────────┤',
      `│ 1          │ k1              │ u1   │ 1000   │ ${T1} │`,
      `│ 2          │ race            │ u1   │ 1000   │ ${T2} │`,
      '└────────────┴─────────────────┴──────┴────────┴──────────────────────────┘',
    ),
  );
  assert.deepEqual(box.ledger, [row(1, 'k1', T1), row(2, 'race', T2)]);
});

test('GET /ledger: a JSON array on one line (glued to the prompt), pretty-printed by jq, and one object per row', () => {
  const oneLine = parsePaste(
    lines(
      '$ curl -s http://localhost:8000/ledger',
      `[{"payment_id": 1, "idempotency_key": "abc", "user": "u1", "amount": 1000, "created_at": "${T1}"}, {"payment_id": 2, "idempotency_key": null, "user": "u1", "amount": 1000, "created_at": "${T2}"}]$ `,
    ),
  );
  assert.deepEqual(oneLine.ledger, [row(1, 'abc', T1), row(2, null, T2)]);

  const pretty = parsePaste(
    lines(
      '$ curl -s http://localhost:8000/ledger | jq .',
      '[',
      '  {',
      '    "payment_id": 1,',
      '    "idempotency_key": "k1",',
      '    "user": "u1",',
      '    "amount": 1000,',
      `    "created_at": "${T1}"`,
      '  }',
      ']',
      "$ curl -s http://localhost:8000/ledger | jq -c '.[]'",
      `{"payment_id":2,"idempotency_key":"k1","user":"u1","amount":1000,"created_at":"${T2}"}`,
      '[]',
    ),
  );
  assert.deepEqual(pretty.ledger, [row(1, 'k1', T1), row(2, 'k1', T2)]);
  assert.deepEqual(pretty.responses, []);
});

test('pretty-printed JSON bodies (curl -D /dev/stderr | jq .) are read as the response body', () => {
  const paste = parsePaste(
    lines(
      `$ curl -sS -D /dev/stderr http://127.0.0.1:8000/pay -H 'Idempotency-Key: k6' -d '{"user":"u1","amount":1000}' | jq .`,
      'HTTP/1.1 201 Created',
      'Content-Type: application/json',
      'Idempotency-Replayed: true',
      '',
      '{',
      '  "payment_id": 12,',
      '  "user": "u1",',
      '  "amount": 1000,',
      `  "charged_at": "${T1}"`,
      '}',
      'HTTP 409 Conflict',
      '{',
      '  "error": "a request with {this} key is still in progress, see [docs]"',
      '}',
    ),
  );
  assert.deepEqual(paste.responses, [
    { line: 2, status: 201, key: 'k6', replayed: 'true', body: paid(12, T1) },
    { line: 12, status: 409, body: { error: 'a request with {this} key is still in progress, see [docs]' } },
  ]);
});

test('Windows line endings (and curl -i header lines ending in \\r) read as Unix ones', () => {
  const unix = lines(
    '$ ./probe.sh k1',
    'POST /pay  Idempotency-Key: k1  {"user":"u1","amount":1000}',
    'HTTP 201 Created',
    paidJson(1, T1),
    '$ ./ledger.sh',
    'payment_id  idempotency_key  user  amount  created_at',
    `1           k1               u1    1000    ${T1}`,
    '',
  );
  const windows = parsePaste(unix.replace(/\n/g, '\r\n'));
  assert.deepEqual(windows, parsePaste(unix));
  assert.deepEqual(windows.responses, [{ line: 3, status: 201, key: 'k1', body: paid(1, T1) }]);
  assert.deepEqual(windows.ledger, [row(1, 'k1', T1)]);

  const curl = parsePaste(`$ curl -i localhost:8000/pay -d '{}'\nHTTP/1.1 400 Bad Request\r\nContent-Length: 50\r\n\r\n${REQUIRED_JSON}`);
  assert.deepEqual(curl.responses, [{ line: 2, status: 400, key: null, body: REQUIRED }]);
});

test('prose is never read as a status line or a ledger', () => {
  const paste = parsePaste(
    lines(
      'The server should answer 400 when the key is missing.',
      'HTTP 201 means the payment was created.',
      'Expected: HTTP 422 Unprocessable Entity',
      'HTTP 400 is what I want here',
      'HTTP 400 Bad Request.',
      '> HTTP 400 Bad Request',
      'I expected HTTP/1.1 400 Bad Request but got something else',
      'The ledger has payment_id, user and amount columns.',
      '1 row for race, as it should be',
      '  HTTP 201',
    ),
  );
  assert.deepEqual(paste.responses, [{ line: 10, status: 201 }]);
  assert.deepEqual(paste.ledger, []);
});

test('a ledger pasted twice keeps each payment_id once, in order', () => {
  const table = (...rows: string[]) => ['payment_id  idempotency_key  user  amount  created_at', ...rows];
  const paste = parsePaste(
    lines(
      '$ ./ledger.sh',
      ...table(`2           k1               u1    1000    ${T2}`),
      '$ ./probe.sh k1',
      'POST /pay  Idempotency-Key: k1  {"user":"u1","amount":1000}',
      'HTTP 201 Created',
      paidJson(1, T1),
      '$ ./ledger.sh',
      ...table(`1           k1               u1    1000    ${T1}`, `2           k1               u1    1000    ${T2}`),
    ),
  );
  assert.deepEqual(paste.ledger, [row(1, 'k1', T1), row(2, 'k1', T2)]);
});

test('probeKey, headerKey and commandKey read the key a command sends', () => {
  assert.equal(probeKey('$ ./probe.sh k1'), 'k1');
  assert.equal(probeKey('user@host:~/lab$ ./probe.sh "k 2" \'{"user":"u1","amount":5}\''), 'k 2');
  assert.equal(probeKey("$ ./probe.sh ''"), '');
  assert.equal(probeKey('$ ./probe.sh'), null);
  assert.equal(probeKey('$ ./probe.sh >> 03-nokey.txt'), null);
  assert.equal(probeKey('$ idem-lab probe r7 &'), 'r7');
  assert.equal(probeKey('$ ./ledger.sh'), undefined);
  assert.equal(probeKey('$ npx idem-lab probe --dir ~/idem-lab r5 &'), 'r5');
  assert.equal(probeKey('$ idem-lab probe --port 8001 --dir=/tmp/lab "r 6"'), 'r 6');
  assert.equal(probeKey('$ idem-lab probe r7 --dir ~/idem-lab'), 'r7');
  assert.equal(probeKey('$ idem-lab probe --dir ~/idem-lab'), null);
  assert.equal(probeKey('$ ./probe.sh 2>&1'), null);

  assert.equal(headerKey('for i in $(seq 10); do xh POST :8000/pay Idempotency-Key:r5 user=u1 & done'), 'r5');
  assert.equal(headerKey(`hey -n 10 -c 10 -m POST -H "Idempotency-Key: r6" http://127.0.0.1:8000/pay`), 'r6');
  assert.equal(headerKey('./ledger.sh'), undefined);

  assert.equal(commandKey('./probe.sh race >/dev/null 2>&1 & pids="$pids $!"; done'), 'race');
  assert.equal(commandKey(`curl -s localhost:8000/pay -H 'Idempotency-Key: burst-1' -d '{}' & done`), 'burst-1');
  assert.equal(commandKey(`curl -s localhost:8000/pay -H "Idempotency-Key;" -d '{}'`), '');
  assert.equal(commandKey(`curl -s localhost:8000/pay -d '{}'`), null);
  assert.equal(commandKey('curl -s localhost:8000/ledger'), undefined);
  assert.equal(commandKey('I ran the loop twice.'), undefined);
});

test('paymentId and describeResponse', () => {
  const r: PastedResponse = { line: 12, status: 201, key: 'k1', replayed: 'true', body: paid(3, T3) };
  assert.equal(paymentId(r), 3);
  assert.equal(describeResponse(r), 'line 12: HTTP 201, key "k1", payment_id 3, Idempotency-Replayed: true');
  assert.equal(paymentId({ line: 1, status: 201, body: { payment_id: '3' } }), undefined);
  assert.equal(describeResponse({ line: 4, status: 400, key: null }), 'line 4: HTTP 400, no key');
  assert.equal(describeResponse({ line: 5, status: 400 }), 'line 5: HTTP 400');
});

test('text that is not a paste at all gives nothing and does not throw', () => {
  for (const text of ['', '{', '[1, 2', '{"a": "unterminated', '}}}]]]', 'HTTP', 'payment_id user amount\n1 2 3', '\u0000\u0001']) {
    const paste = parsePaste(text);
    assert.deepEqual(paste.responses, [], JSON.stringify(text));
    assert.deepEqual(paste.ledger, [], JSON.stringify(text));
  }
});

test("the shell's job notices are neither bodies nor commands", () => {
  const paste = parsePaste(
    lines(
      '$ for i in $(seq 3); do ./probe.sh race & done',
      '[1] 4263',
      'POST /pay  Idempotency-Key: race  {"user":"u1","amount":1000}',
      'HTTP 201 Created',
      '[1]+  Done                    ./probe.sh race',
      paidJson(7, T1),
    ),
  );
  assert.deepEqual(paste.responses, [{ line: 4, status: 201, key: 'race', body: paid(7, T1) }]);
});
