/**
 * grader/tables.ts on real sqlite files: every table is read but those passed over, within
 * its bounds, and a timestamp is found as it is and under each common encoding, while a
 * neighbouring time (a record's own claim time) is not.
 */
import path from 'node:path';
import zlib from 'node:zlib';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { MAX_CELL_BYTES, MAX_TABLES, MAX_TABLE_ROWS, countRows, findHidden, readCells, timestampForms } from '../grader/tables.js';
import { tempDir } from './support.js';

const CHARGED_AT = '2026-12-02T01:03:31.123Z';
/** The record's own claim time: 50 ms earlier, as a claim made before a 50 ms charge. */
const CLAIMED_AT = '2026-12-02T01:03:31.073Z';
const RESPONSE = JSON.stringify({ payment_id: 7, user: 'mina_48213', amount: 4210, charged_at: CHARGED_AT });

/** A database with a ledger, a refunds table and `idem` rows holding `responses`, one each (a Buffer is stored as a blob). */
function database(responses: Array<string | Buffer>, extra?: (db: Database.Database) => void): { file: string; remove(): void } {
  const dir = tempDir('tables-');
  const file = path.join(dir.dir, 'lab.db');
  const db = new Database(file);
  db.exec(`CREATE TABLE ledger (payment_id INTEGER PRIMARY KEY AUTOINCREMENT, idempotency_key TEXT, user TEXT NOT NULL, amount INTEGER NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE idem (key TEXT PRIMARY KEY, request_hash TEXT NOT NULL, status INTEGER, response TEXT, created_at TEXT NOT NULL);
    CREATE TABLE refunds (payment_id INTEGER PRIMARY KEY, refunded_at TEXT NOT NULL);`);
  db.prepare('INSERT INTO ledger (idempotency_key, user, amount, created_at) VALUES (?, ?, ?, ?)').run('k1', 'mina_48213', 4210, CHARGED_AT);
  db.prepare('INSERT INTO refunds VALUES (7, ?)').run(CHARGED_AT);
  responses.forEach((response, i) => db.prepare('INSERT INTO idem VALUES (?, ?, 201, ?, ?)').run(`["mina_48213", "key", "k${i}"]`, 'ab'.repeat(32), response, CLAIMED_AT));
  extra?.(db);
  db.close();
  return { file, remove: dir.remove };
}

/** Where CHARGED_AT was found, as `table.column#row how`. */
function found(file: string): string[] {
  return findHidden(readCells(file, ['ledger', 'refunds']), CHARGED_AT, timestampForms(CHARGED_AT)).map((f) => `${f.cell.table}.${f.cell.column}#${f.cell.row} ${f.how}`);
}

test('a minimal record holds nothing of the response; the ledger and refunds are passed over', () => {
  const db = database([JSON.stringify({ payment_id: 7 }), '7']);
  try {
    assert.deepEqual(found(db.file), []);
    const tables = new Set(readCells(db.file, ['ledger', 'refunds']).map((c) => c.table));
    assert.ok(tables.has('idem') && !tables.has('ledger') && !tables.has('refunds'));
    // Without passing them over, the ledger's created_at and the refund's time are found: the search can fail.
    assert.deepEqual(
      findHidden(readCells(db.file), CHARGED_AT).map((f) => f.cell.table),
      ['ledger', 'refunds'],
    );
  } finally {
    db.remove();
  }
});

test('the response is found as it is and under each common encoding, with the encodings named', () => {
  const encoded: Array<string | Buffer> = [
    RESPONSE,
    Buffer.from(RESPONSE).toString('base64'),
    Buffer.from(RESPONSE).toString('base64url'),
    Buffer.from(RESPONSE).toString('hex'),
    zlib.deflateSync(RESPONSE),
    zlib.gzipSync(RESPONSE),
    zlib.deflateRawSync(RESPONSE),
    zlib.deflateSync(RESPONSE).toString('base64'),
    JSON.stringify({ payment_id: 7, t: Date.parse(CHARGED_AT) }),
    JSON.stringify({ payment_id: 7, t: Date.parse(CHARGED_AT) / 1000 }),
    '2026-12-02 01:03:31.123',
  ];
  const db = database(encoded);
  try {
    assert.deepEqual(found(db.file), [
      'idem.response#1 ',
      'idem.response#2 base64',
      'idem.response#3 base64',
      'idem.response#4 hex',
      'idem.response#5 zlib',
      'idem.response#6 gzip',
      'idem.response#7 deflate',
      'idem.response#8 base64 > zlib',
      'idem.response#9 ',
      'idem.response#10 ',
      'idem.response#11 ',
    ]);
  } finally {
    db.remove();
  }
});

test('a table of its own is read; a time 50 ms away is not the timestamp', () => {
  const db = database([JSON.stringify({ payment_id: 7, claimed: CLAIMED_AT, at: Date.parse(CLAIMED_AT) })], (d) => {
    d.exec('CREATE TABLE "my responses" (id INTEGER, body BLOB)');
    d.prepare('INSERT INTO "my responses" VALUES (1, ?)').run(Buffer.from(RESPONSE));
  });
  try {
    assert.deepEqual(found(db.file), ['my responses.body#1 ']);
  } finally {
    db.remove();
  }
});

test('what is read is bounded: a cell to MAX_CELL_BYTES, a table to MAX_TABLE_ROWS rows', () => {
  const db = database([], (d) => {
    d.exec('CREATE TABLE big (v TEXT)');
    d.prepare('INSERT INTO big VALUES (?)').run('x'.repeat(MAX_CELL_BYTES * 2) + CHARGED_AT);
    const insert = d.prepare('INSERT INTO big VALUES (?)');
    for (let i = 0; i < MAX_TABLE_ROWS + 50; i++) insert.run(String(i));
  });
  try {
    const cells = readCells(db.file, ['ledger', 'refunds']).filter((c) => c.table === 'big');
    assert.equal(cells.length, MAX_TABLE_ROWS);
    assert.equal(cells[0].value.length, MAX_CELL_BYTES);
    assert.deepEqual(found(db.file), [], 'what lies beyond the bound is not read');
  } finally {
    db.remove();
  }
  const empty = tempDir('tables-');
  try {
    assert.deepEqual(readCells(path.join(empty.dir, 'missing.db')), [], 'no file: no cells');
  } finally {
    empty.remove();
  }
});

test('timestampForms: the digits and the epoch milliseconds, only to the millisecond', () => {
  assert.deepEqual(timestampForms(CHARGED_AT), ['20261202010331123', String(Date.parse(CHARGED_AT))]);
  assert.deepEqual(timestampForms('2026-12-02T01:03:31Z'), [], 'a time a second wide would be found in any record of that second');
});

test('countRows: rows per table, sqlite\'s own and the excepted ones left out, at most MAX_TABLES tables', () => {
  const tmp = tempDir('count-rows-');
  try {
    const file = path.join(tmp.dir, 'lab.db');
    const db = new Database(file);
    db.exec('CREATE TABLE ledger (payment_id INTEGER PRIMARY KEY AUTOINCREMENT, x TEXT); INSERT INTO ledger (x) VALUES (1), (2);');
    db.exec('CREATE TABLE idem (key TEXT PRIMARY KEY); INSERT INTO idem VALUES (\'a\'), (\'b\'), (\'c\');');
    db.close();
    assert.deepEqual(countRows(file, ['LEDGER']), { idem: 3 }, 'sqlite_sequence (of AUTOINCREMENT) and the ledger are not counted');
    assert.deepEqual(countRows(path.join(tmp.dir, 'none.db')), {});
    const many = new Database(file);
    for (let i = 0; i < MAX_TABLES + 10; i++) many.exec(`CREATE TABLE t${i} (v)`);
    many.close();
    assert.equal(Object.keys(countRows(file)).length, MAX_TABLES, 'no more tables than MAX_TABLES are counted');
  } finally {
    tmp.remove();
  }
});
