import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { CheckFailed } from '../../grader/failure.js';
import { expectReplay, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { chargeMs } from '../../grader/limits.js';
import { expandXz, findHidden, MAX_CELL_BYTES, MAX_DATABASE_BYTES, MAX_FILES, readCells, timestampForms, type Cell } from '../../grader/tables.js';
import type { WrittenFile, WrittenLimits } from '../../grader/written-files.js';
import { listOf, t } from '../../i18n/index.js';
import { serverTimeZone } from '../../grader/seed.js';
import type { LiveContext } from '../../grader/context.js';
import type { Step } from '../../grader/track.js';
import type { Exchange } from '../../grader/types.js';

/**
 * The contract's columns of the tables that are the payment's own (docs/server-contract.md):
 * the ledger's (the payment itself) and those of the advanced contract's refunds table. Any
 * other column, in those tables too, is read like a record's.
 */
export const PAYMENT_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  ledger: ['payment_id', 'idempotency_key', 'user', 'amount', 'created_at'],
  refunds: ['payment_id', 'refunded_at'],
};

/**
 * The shortest provider latency the step's servers get, in ms (IDEM_CHARGE_MS, at least the
 * run's): a record claimed before the charge is then never stamped in the same millisecond
 * as the payment's charged_at, so its own time is never taken for a copy of it.
 */
export const MIN_CHARGE_MS = 20;

/**
 * The keyless window the step's servers get (IDEM_KEYLESS_WINDOW_S), in s: longer than the
 * step, so a keyless payment's record is still there when the tables are read.
 */
export const KEYLESS_WINDOW_S = 600;

/** One ms as a fraction of a day: a julian day written to the millisecond is this close. */
const MS_IN_DAYS = 1 / 86_400_000;

/**
 * What a cell's text is as a time, if it is nothing but one: an ISO-8601 date and time
 * (`2026-12-02T01:03:31.123Z`, `2026-12-02 01:03:31`), epoch seconds or milliseconds, or a
 * julian day (sqlite's julianday()), as epoch ms; undefined for anything else.
 */
export function asTime(cell: Cell): number | undefined {
  const text = cell.value.toString('utf8').trim();
  if (/^\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?$/.test(text)) {
    const ms = Date.parse(/Z|[+-]\d\d:?\d\d$/.test(text) ? text.replace(' ', 'T') : `${text.replace(' ', 'T')}Z`);
    return Number.isFinite(ms) ? ms : undefined;
  }
  if (!/^\d+(\.\d+)?$/.test(text)) return undefined;
  const n = Number(text);
  if (n >= 2_400_000 && n < 2_600_000) return (n - 2_440_587.5) * 86_400_000;
  if (n >= 1e9 && n < 1e10) return n * 1000;
  if (n >= 1e12 && n < 1e13) return n;
  return undefined;
}

/**
 * The cells that hold the payment's charged_at as a julian day (a REAL from sqlite's
 * julianday(), within a millisecond of it), as they are or among other text, which no
 * digit form finds.
 */
function julianCopies(cells: readonly Cell[], chargedAt: string): Cell[] {
  const jd = Date.parse(chargedAt) / 86_400_000 + 2_440_587.5;
  return cells.filter((cell) => [...cell.value.toString('latin1').matchAll(/(?<![\d.])\d{7}\.\d{5,}/g)].some(([n]) => Math.abs(Number(n) - jd) <= 1.5 * MS_IN_DAYS));
}

/**
 * Whether a cell is a record's own time that falls in the payment's millisecond: a cell of
 * a table holding nothing but a time, the only time of its row (a design may stamp its
 * record with the payment's charged_at as it completes, in the idem table or one of its
 * own). A second time in the row beside it (a claim time and a copy of charged_at), a
 * time inside more than a time, or one in a file, is a copy of the response.
 */
function ownTime(cell: Cell, cells: readonly Cell[]): boolean {
  if (cell.column === '(file)' || cell.via !== undefined || asTime(cell) === undefined) return false;
  return cells.filter((c) => c.via === undefined && c.file === cell.file && c.table === cell.table && c.row === cell.row && asTime(c) !== undefined).length === 1;
}

/** A date and time of day on a wall clock, as numbers (month 1-12). */
interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

/** The wall time of the instant `ms` (epoch ms) in `timeZone` (an IANA name), to the second. */
export function wallTime(ms: number, timeZone: string): WallTime {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', hourCycle: 'h23' }).formatToParts(new Date(ms));
  const get = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)?.value ?? NaN);
  return { year: get('year'), month: get('month'), day: get('day'), hour: get('hour'), minute: get('minute'), second: get('second') };
}

/**
 * The digits of charged_at written as the wall time of `timeZone` (the servers' TZ), to the
 * millisecond: `2026-12-06T19:51:51.123Z` in Asia/Tokyo is `20261207045151123`, which
 * finds `2026-12-07 04:51:51.123`, `2026-12-07T04:51:51.123000+09:00` and the like among a
 * cell's digits. Undefined for a time not written to the millisecond.
 */
export function localDigits(chargedAt: string, timeZone: string): string | undefined {
  const ms = Date.parse(chargedAt);
  if (!Number.isFinite(ms) || !/\.\d{3}/.test(chargedAt)) return undefined;
  const w = wallTime(ms, timeZone);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${w.year}${two(w.month)}${two(w.day)}${two(w.hour)}${two(w.minute)}${two(w.second)}${String(((ms % 1000) + 1000) % 1000).padStart(3, '0')}`;
}

/**
 * The bytes Python's pickle keeps of a datetime of charged_at (datetime.__reduce__: a
 * 10-byte state, the year in two bytes, month, day, hour, minute, second, microseconds in
 * three), in UTC and in `timeZone`'s wall time (an aware datetime turned local): each as
 * it is (protocol 3 on: SHORT_BINBYTES) and as protocol 2 writes it (the state as a latin-1
 * text, in UTF-8). Empty for a time not written to the millisecond.
 */
export function pickledForms(chargedAt: string, timeZone: string): Buffer[] {
  const ms = Date.parse(chargedAt);
  if (!Number.isFinite(ms) || !/\.\d{3}/.test(chargedAt)) return [];
  const d = new Date(ms);
  const utc: WallTime = { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate(), hour: d.getUTCHours(), minute: d.getUTCMinutes(), second: d.getUTCSeconds() };
  const micro = (((ms % 1000) + 1000) % 1000) * 1000;
  const state = (w: WallTime) => Buffer.from([w.year >> 8, w.year & 255, w.month, w.day, w.hour, w.minute, w.second, micro >> 16, (micro >> 8) & 255, micro & 255]);
  return [utc, wallTime(ms, timeZone)].map(state).flatMap((b) => [b, Buffer.from(b.toString('latin1'), 'utf8')]);
}

/** A copy of charged_at found: where, what it took to find it (the encodings undone, outermost first), and in which form; `columns` for a copy split across cells of one row. */
interface Copy {
  cell: Cell;
  how: string;
  form: 'plain' | 'julian' | 'local' | 'pickled';
  columns?: string[];
}

/**
 * The cells of one row that may hold a piece of a copy: every cell of the row but one that
 * is a whole time (asTime: a record's own time, or a time the single-cell search judged)
 * and any cell of a file.
 */
function pieces(cells: readonly Cell[]): Cell[][] {
  const rows = new Map<string, Cell[]>();
  for (const cell of cells) {
    if (cell.column === '(file)' || cell.via !== undefined || asTime(cell) !== undefined) continue;
    const id = `${cell.file ?? ''}\0${cell.table}\0${cell.row}`;
    rows.set(id, [...(rows.get(id) ?? []), cell]);
  }
  return [...rows.values()].filter((row) => row.length > 1);
}

/** At most this many cells of a row are paired (a row with more is read whole, in column order, and by its first MAX_PAIRED cells in pairs). */
const MAX_PAIRED = 16;

/**
 * The most bytes the joined cells of the split-copy search hold in all (MAX_DATABASE_BYTES,
 * as much as the cells themselves): each cell joins up to 2 * (MAX_PAIRED - 1) pairs, so a
 * database of wide rows of large cells would otherwise make the grader hold some thirty
 * times the bytes it read. Joins past it are not searched.
 */
const MAX_JOINED_BYTES = MAX_DATABASE_BYTES;

/**
 * Every copy of charged_at in `cells` (a database's cells and the files beside it): the
 * text, its digits or epoch ms, a julian day, its digits in the servers' local time
 * (localDigits), a pickled datetime (pickledForms), each also under an encoding; a copy in
 * a record's own time (ownTime) is none. When no cell alone holds one, the cells of each
 * row (pieces) are read together, each ordered pair of them, then the whole row in
 * column order (the pairs first, so a failure names the two columns): a copy split across columns (the date in one, the time in another; the body cut
 * in two) is found as well.
 */
function copiesOf(cells: readonly Cell[], chargedAt: string, timeZone: string): Copy[] {
  const forms = timestampForms(chargedAt);
  const local = localDigits(chargedAt, timeZone);
  const pickled = pickledForms(chargedAt, timeZone);
  const at = Date.parse(chargedAt);
  const search = (within: readonly Cell[]): Copy[] => [
    ...findHidden(within, chargedAt, forms).map((f): Copy => ({ ...f, form: 'plain' })),
    ...julianCopies(within, chargedAt).map((cell): Copy => ({ cell, how: '', form: 'julian' })),
    ...(local ? findHidden(within, '', [local]).map((f): Copy => ({ ...f, form: 'local' })) : []),
    ...findHidden(within, '', [], pickled).map((f): Copy => ({ ...f, form: 'pickled' })),
  ];
  // A record's own time may be charged_at, written in UTC or with its offset (the same instant).
  const own = (c: Copy) =>
    c.how === '' && ownTime(c.cell, cells) && (c.form === 'plain' || c.form === 'julian' || (c.form === 'local' && Math.abs((asTime(c.cell) ?? NaN) - at) <= 1));
  const single = search(cells).filter((c) => !own(c));
  if (single.length > 0) return single;
  const joined: Cell[] = [];
  let bytes = 0;
  const add = (table: string, n: number, parts: Cell[], file: string | undefined) => {
    const size = parts.reduce((sum, p) => sum + p.value.length, 0);
    if (bytes + size > MAX_JOINED_BYTES) return;
    bytes += size;
    joined.push({ table, row: n, file, column: parts.map((p) => p.column).join('\0'), value: Buffer.concat(parts.map((p) => p.value)) });
  };
  for (const row of pieces(cells)) {
    const { table, row: n, file } = row[0];
    const paired = row.slice(0, MAX_PAIRED);
    for (const x of paired) for (const y of paired) if (x !== y) add(table, n, [x, y], file);
    add(table, n, row, file);
  }
  return search(joined).map((c) => ({ ...c, columns: c.cell.column.split('\0') }));
}

/**
 * How much of what the servers wrote in their writable folders the step reads
 * (LiveContext.writtenFiles): as much as of the database, MAX_FILES files, a few folders deep.
 */
export const WRITTEN_LIMITS: WrittenLimits = { files: MAX_FILES, fileBytes: MAX_DATABASE_BYTES, totalBytes: MAX_DATABASE_BYTES, depth: 6, entries: 5000 };

/** A sqlite database's first 16 bytes. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** How much of a file's bytes each of its cells holds beyond MAX_CELL_BYTES: the next cell starts this much earlier, so a copy across the cut is whole in one. */
const FILE_OVERLAP = 4096;

/**
 * A file the servers wrote as a failure names it: beside the database, its name there
 * (`responses.json`); in a pod's /tmp, as the server saw it (`/tmp/cache.sqlite`); in its
 * HOME, `~/...`; else its path in the pod's folder.
 */
export function shownName(file: WrittenFile, dbDir: string): { name: string; beside: boolean } {
  if (file.path.startsWith(dbDir + path.sep)) return { name: path.relative(dbDir, file.path), beside: true };
  const [first, ...rest] = file.rel.split(path.sep);
  if (/^tmp-.+-\d+$/.test(first)) return { name: path.posix.join('/tmp', ...rest), beside: false };
  if (first === 'home') return { name: path.posix.join('~', ...rest), beside: false };
  return { name: file.rel, beside: false };
}

/**
 * The cells of the files the servers wrote (LiveContext.writtenFiles): a whole sqlite
 * database (with its `-wal`, when that was read whole too) read as the database is, from
 * a copy in a folder of the grader's own (readCells, its cells' `file` the shown name),
 * at most MAX_DATABASE_BYTES of cells in all; any other file (or a database that cannot be
 * read) as its bytes, in cells of MAX_CELL_BYTES overlapping by FILE_OVERLAP (column
 * `(file)`, table its shown name). `beside` gets the shown names of files beside the database.
 */
export function writtenCells(written: readonly WrittenFile[], dbDir: string, beside: Set<string>): Cell[] {
  const cells: Cell[] = [];
  const whole = new Map(written.filter((f) => f.bytes.length === f.size).map((f) => [f.path, f]));
  let databaseBytes = 0;
  let scratch: string | undefined;
  try {
    for (const file of written) {
      const { name, beside: isBeside } = shownName(file, dbDir);
      if (isBeside) beside.add(name);
      if (whole.has(file.path) && file.bytes.subarray(0, SQLITE_HEADER.length).equals(SQLITE_HEADER) && databaseBytes < MAX_DATABASE_BYTES) {
        try {
          scratch ??= fs.mkdtempSync(path.join(os.tmpdir(), 'idem-lab-written-'));
          const dir = fs.mkdtempSync(path.join(scratch, 'db-'));
          const copy = path.join(dir, 'copy.db');
          fs.writeFileSync(copy, file.bytes, { flag: 'wx', mode: 0o600 });
          const wal = whole.get(`${file.path}-wal`);
          if (wal) fs.writeFileSync(`${copy}-wal`, wal.bytes, { flag: 'wx', mode: 0o600 });
          const read = readCells(copy).map((cell): Cell => ({ ...cell, file: name }));
          databaseBytes += read.reduce((sum, c) => sum + c.value.length, 0);
          cells.push(...read);
          continue;
        } catch {
          // not a database sqlite can read: read as bytes below
        }
      }
      for (let at = 0; at < file.bytes.length; at += MAX_CELL_BYTES - FILE_OVERLAP) {
        cells.push({ table: name, column: '(file)', row: 1, value: file.bytes.subarray(at, at + MAX_CELL_BYTES) });
        if (at + MAX_CELL_BYTES >= file.bytes.length) break;
      }
    }
  } finally {
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  }
  return cells;
}

/** How a copy was found, as a failure says it: `as it is`, `once base64 is undone`, `in the servers' local time (Asia/Tokyo)`, ... */
function howFound(copy: Copy, zone: string): string {
  const form = copy.form === 'julian' ? t('step.13.how.julian') : copy.form === 'local' ? t('step.13.how.local', { zone }) : copy.form === 'pickled' ? t('step.13.how.pickled') : '';
  const encoded = copy.how === '' ? '' : t('step.13.how.encoded', { how: copy.how });
  if (form === '') return encoded === '' ? t('step.13.how.plain') : encoded;
  return encoded === '' ? form : `${form}, ${encoded}`;
}

/**
 * How long the check waits before each retry, in ms: a replay stamped anew (a fresh
 * charged_at) is then never stamped in the first response's millisecond.
 */
export const REPLAY_GAP_MS = 10;

/**
 * Step 13 (advanced track): the record keeps the status and the payment's id, not the
 * response; a replay is rebuilt from the ledger and equals the first response in every
 * field. A payment under a key, then one without (IDEM_KEYLESS_WINDOW_S set: a keyless
 * record; a server that refuses it with 400 has not reached step 15 and is judged on its
 * keyed record alone, its pass message says so), each on A is retried on A and on B (a pod with a copy of its own: nothing of
 * A's memory or files), each retry must replay it exactly, and then every cell of the
 * sqlite file but the contract's columns of the ledger and refunds (PAYMENT_COLUMNS) is
 * read (read-only, bounded: grader/tables.ts), and every file the servers wrote in the
 * folders they may write (LiveContext.writtenFiles: beside the database, their HOME and
 * /tmp; a sqlite file as a database, writtenCells): none may hold the first response's charged_at,
 * as it is, as its digits, epoch milliseconds, a julian day, its digits in the servers'
 * local wall time or a pickled datetime, or under base64, hex, base85, zlib, gzip, bzip2
 * or xz (expandXz), nor split
 * across the cells of a row (copiesOf), but as a record's own time (ownTime: a cell that is nothing but a time, the
 * only one of its row) (the essay: store the status and a
 * pointer to the result, and let the ledger be the one copy of the payment;
 * docs/server-contract.md, "The advanced track").
 */
export const step: Step = {
  id: '13',
  slug: 'minimal',
  get title() {
    return t('step.13.title');
  },
  async live(ctx: LiveContext) {
    const slow = Math.max(chargeMs(), MIN_CHARGE_MS);
    const env = { IDEM_KEYLESS_WINDOW_S: String(KEYLESS_WINDOW_S) };
    const [a, b] = await Promise.all([ctx.startServer({ chargeMs: slow, priority: 300, env }), ctx.startServer({ ownCopy: true, chargeMs: slow, priority: 200, env })]);
    ctx.keylessGrouping = 'same-answer';
    // A payment under a key, and one without (a keyless record), each retried on A and on B.
    const sent = [{ key: ctx.freshKey(), body: ctx.data.payment() }, { key: undefined, body: ctx.data.payment() }];
    const exchanges: Exchange[] = [];
    let cells: Cell[] = [];
    let files: Cell[] = [];
    let fileCount = 0;
    const chargedAts: string[] = [];
    let keylessLater = false;
    for (const req of sent) {
      const first = await ctx.pay(a, req);
      // A server refusing keyless payments (400) has not done step 15 yet, which comes after this one: its keyless records are looked at once it makes them.
      if (req.key === undefined && first.status === 400) {
        keylessLater = true;
        break;
      }
      expectStatus(first, 201, t(req.key === undefined ? 'step.13.keylessFirst' : 'check.first201'), t('step.13.first.why'));
      const chargedAt = String(paymentOf(first).charged_at);
      chargedAts.push(chargedAt);
      await delay(REPLAY_GAP_MS);
      const retry = await ctx.pay(a, req);
      expectReplay(first, retry, t('step.13.replay.why'));
      await delay(REPLAY_GAP_MS);
      const elsewhere = await ctx.pay(b, req);
      expectReplay(first, elsewhere, t('step.13.replay.why'));
      exchanges.push(first, retry, elsewhere);
      // Throws when the servers never made the file (they ignore IDEM_DB).
      ctx.ledger(a);
      const dbPath = ctx.database(a).dbPath;
      cells = readCells(dbPath, [], PAYMENT_COLUMNS);
      const { files: written, cut } = ctx.writtenFiles(WRITTEN_LIMITS);
      // What the grader did not read, it cannot clear: a record needs no such pile of files.
      if (cut !== undefined) {
        const { files: most, totalBytes, entries, depth } = WRITTEN_LIMITS;
        throw new CheckFailed(t('step.13.tooMuch', { files: most, mib: totalBytes / 1024 / 1024, entries, depth }), t('step.13.tooMuch.why'), { exchanges: [first, retry, elsewhere] });
      }
      const beside = new Set<string>();
      files = writtenCells(written, path.dirname(dbPath), beside);
      fileCount = written.length;
      const stored = [...cells, ...files];
      // xz (Python's lzma) is undone here, ahead of the search: its decoder is asynchronous.
      const all = [...stored, ...(await expandXz(stored))];
      const zone = serverTimeZone(ctx.data.seed);
      const found = copiesOf(all, chargedAt, zone);
      if (found.length > 0) {
        const { cell, columns } = found[0];
        const where =
          cell.column === '(file)'
            ? t(beside.has(cell.table) ? 'step.13.inFile' : 'step.13.inWritten', { file: cell.table })
            : cell.file !== undefined
              ? t('step.13.inWrittenTable', { file: cell.file, table: cell.table, column: columns ? listOf(columns) : cell.column, row: cell.row })
              : columns
                ? t('step.13.inCells', { table: cell.table, columns: listOf(columns), row: cell.row })
                : t('step.13.inTable', { table: cell.table, column: cell.column, row: cell.row });
        throw new CheckFailed(t('step.13.stored', { where, chargedAt, how: howFound(found[0], zone) }), t('step.13.stored.why'), {
          exchanges: [first, retry, elsewhere],
          details: found.map((f) => t('step.13.found', { table: f.cell.file === undefined ? f.cell.table : `${f.cell.file} ${f.cell.table}`, column: f.columns ? listOf(f.columns) : f.cell.column, row: f.cell.row, how: howFound(f, zone), bytes: f.cell.value.length })),
        });
      }
    }
    const tables = new Set(cells.map((c) => c.table));
    const counts = { chargedAt: chargedAts.join(', '), cells: cells.length, tables: tables.size, files: fileCount };
    return keylessLater ? `${t('step.13.passKeyed', counts)} ${t('step.13.keylessLater')}` : t('step.13.pass', counts);
  },
  get hints() {
    return [t('step.13.hint.1'), t('step.13.hint.2'), t('step.13.hint.3')];
  },
};
