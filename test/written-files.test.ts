/**
 * grader/written-files.ts and step 13's reading of what servers wrote (writtenCells): a
 * link a server plants in a folder it may write, to a host file or a host folder, is never
 * followed; a FIFO is never opened; files are read within their bounds; a sqlite file is
 * read as a database; and the encodings Node lacks (xz, bz2, base85) are undone within a cap.
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { readWritten, type WrittenLimits } from '../grader/written-files.js';
import { writtenCells } from '../steps/advanced/13-minimal.js';
import { bunzip, expandXz, findHidden, timestampForms, unxz } from '../grader/tables.js';
import { tempDir } from './support.js';

const CHARGED_AT = '2026-12-02T01:03:31.123Z';
const LIMITS: WrittenLimits = { files: 50, fileBytes: 1024 * 1024, totalBytes: 4 * 1024 * 1024, depth: 6, entries: 1000 };

test('a link planted in a writable folder, to a host file or folder, is never read; a FIFO is never opened', () => {
  const host = tempDir('written-host-');
  const pod = tempDir('written-pod-');
  try {
    // The host's secrets: a file and a folder outside every writable folder.
    fs.writeFileSync(path.join(host.dir, 'secret.txt'), `host secret ${CHARGED_AT}`);
    fs.mkdirSync(path.join(host.dir, 'dir'));
    fs.writeFileSync(path.join(host.dir, 'dir', 'inner.txt'), `host inner ${CHARGED_AT}`);
    // What a server left in its /tmp: one file of its own, links to the host, a FIFO.
    const tmp = path.join(pod.dir, 'tmp-A-40001');
    fs.mkdirSync(tmp);
    fs.writeFileSync(path.join(tmp, 'own.txt'), 'a file of the server');
    fs.symlinkSync(path.join(host.dir, 'secret.txt'), path.join(tmp, 'cache.sqlite'));
    fs.symlinkSync(path.join(host.dir, 'dir'), path.join(tmp, 'dirlink'));
    fs.symlinkSync(host.dir, path.join(pod.dir, 'home'));
    execFileSync('mkfifo', [path.join(tmp, 'fifo')]);
    const { files, cut } = readWritten([pod.dir], LIMITS);
    assert.equal(cut, undefined);
    assert.deepEqual(files.map((f) => f.rel), [path.join('tmp-A-40001', 'own.txt')]);
    assert.ok(files.every((f) => !f.bytes.toString('latin1').includes('host')), 'no byte of a host file was read');
    // The root itself a link: not read either.
    const linkRoot = path.join(pod.dir, 'root-link');
    fs.symlinkSync(host.dir, linkRoot);
    assert.deepEqual(readWritten([linkRoot], LIMITS).files, []);
    // And 13 finds nothing in what it read.
    const cells = writtenCells(files, path.join(pod.dir, 'ws'), new Set());
    assert.deepEqual(findHidden(cells, CHARGED_AT, timestampForms(CHARGED_AT)), []);
  } finally {
    host.remove();
    pod.remove();
  }
});

test('readWritten stays within its bounds of files, bytes and depth, and passes over what it is told to', () => {
  const pod = tempDir('written-bounds-');
  try {
    for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(pod.dir, `f${i}`), 'x'.repeat(1000));
    let deep = pod.dir;
    for (let i = 0; i < 10; i++) deep = path.join(deep, `d${i}`);
    fs.mkdirSync(deep, { recursive: true });
    fs.writeFileSync(path.join(deep, 'deep.txt'), 'deep');
    // The deep folder read last, so that the cut of each bound is the one reported.
    const last = { later: (full: string) => path.basename(full) === 'd0' };
    const few = readWritten([pod.dir], { ...LIMITS, files: 3 }, last);
    assert.equal(few.files.length, 3);
    assert.equal(few.cut, 'files');
    const small = readWritten([pod.dir], { ...LIMITS, fileBytes: 100, totalBytes: 250 }, last);
    assert.deepEqual(small.files.map((f) => f.bytes.length), [100, 100, 50]);
    assert.ok(small.files.every((f) => f.size === 1000));
    assert.equal(small.cut, 'bytes');
    const all = readWritten([pod.dir], LIMITS);
    assert.ok(!all.files.some((f) => f.rel.endsWith('deep.txt')), 'past the depth bound: not read');
    assert.equal(all.cut, 'depth');
    // What is cut in a folder read last (the learner's own) is not reported.
    assert.equal(readWritten([pod.dir], LIMITS, last).cut, undefined);
    assert.ok(!readWritten([pod.dir], LIMITS, { skip: (full) => path.basename(full) === 'f0' }).files.some((f) => f.rel === 'f0'));
  } finally {
    pod.remove();
  }
});

test('writtenCells reads a sqlite file a server wrote as a database, named as the server saw it', () => {
  const pod = tempDir('written-db-');
  try {
    const tmp = path.join(pod.dir, 'tmp-B-40002');
    fs.mkdirSync(tmp);
    const db = new Database(path.join(tmp, 'replay.sqlite'));
    db.exec('CREATE TABLE replay (payment_id INTEGER PRIMARY KEY, body TEXT)');
    db.prepare('INSERT INTO replay VALUES (7, ?)').run(JSON.stringify({ payment_id: 7, charged_at: CHARGED_AT }));
    db.close();
    const cells = writtenCells(readWritten([pod.dir], LIMITS).files, path.join(pod.dir, 'ws'), new Set());
    const [found] = findHidden(cells, CHARGED_AT, timestampForms(CHARGED_AT));
    assert.equal(found.cell.file, '/tmp/replay.sqlite');
    assert.equal(`${found.cell.table}.${found.cell.column}#${found.cell.row}`, 'replay.body#1');
  } finally {
    pod.remove();
  }
});

/** `python3 -c` code's standard output, as bytes. */
const python = (code: string): Buffer => execFileSync('python3', ['-c', code], { maxBuffer: 64 * 1024 * 1024 });

test('xz, bz2 and base85 are undone; a decompression bomb stops at the cap', async () => {
  const payload = `import json,sys; p=json.dumps({"payment_id": 7, "charged_at": "${CHARGED_AT}"}).encode()`;
  const cells = [
    python(`${payload}; import lzma; sys.stdout.buffer.write(lzma.compress(p))`),
    python(`${payload}; import bz2,base64; sys.stdout.buffer.write(base64.b64encode(bz2.compress(p)))`),
    python(`${payload}; import base64; sys.stdout.buffer.write(base64.b85encode(p))`),
    python(`${payload}; import base64; sys.stdout.buffer.write(base64.a85encode(p))`),
  ].map((value, i) => ({ table: 'idem', column: 'response', row: i + 1, value }));
  const all = [...cells, ...(await expandXz(cells))];
  const found = findHidden(all, CHARGED_AT, timestampForms(CHARGED_AT)).map((f) => `${f.cell.row} ${f.how}`);
  assert.ok(found.includes('1 xz'), found.join(', '));
  assert.ok(found.includes('2 base64 > bz2'), found.join(', '));
  assert.ok(found.includes('3 base85'), found.join(', '));
  assert.ok(found.includes('4 base85'), found.join(', '));
  const bzBomb = python('import bz2,sys; sys.stdout.buffer.write(bz2.compress(b"a" * 5_000_000))');
  assert.equal(bunzip(bzBomb).length, 256 * 1024);
  const xzBomb = python('import lzma,sys; sys.stdout.buffer.write(lzma.compress(b"a" * 5_000_000))');
  assert.equal((await unxz(xzBomb)).length, 256 * 1024);
});
