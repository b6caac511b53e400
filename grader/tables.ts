/**
 * Reading a whole sqlite file the way an auditor would: every table, every column, read
 * only and bounded, and finding a value in it also when it was stored encoded (base64,
 * hex, zlib or gzip, a timestamp as its digits or as epoch milliseconds). Engine code: the
 * tables a check passes over are given by the caller.
 */
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { openStudentDatabase } from './student-db.js';
import { readRegularBytesSync } from './safe-read.js';

/** One cell of a table: where it is and its bytes (a number or a text as its text, a blob as is). */
export interface Cell {
  table: string;
  column: string;
  /** Its row's place in the table as read, from 1. */
  row: number;
  value: Buffer;
}

/** At most this many tables are read: a database a server keeps has a handful. */
export const MAX_TABLES = 64;
/** At most this many rows of each table are read. */
export const MAX_TABLE_ROWS = 1000;
/** At most this many bytes of one cell are read. */
export const MAX_CELL_BYTES = 64 * 1024;
/** At most this many bytes in all are read from one database. */
export const MAX_DATABASE_BYTES = 8 * 1024 * 1024;

/** An SQL identifier, quoted. */
const quoted = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * Every cell of every table of a sqlite file but those named in `except` (case-insensitive),
 * and but the columns `exempt` names for a table (table name to column names, any case),
 * read-only: at most MAX_TABLES tables, MAX_TABLE_ROWS rows each, MAX_CELL_BYTES of a cell
 * and MAX_DATABASE_BYTES in all. A NULL is no cell. A table that cannot be read (a
 * virtual table whose module the grader lacks) is passed over: its data lives in tables
 * of its own, which are read. Waits up to 5 s for a writer's lock.
 * @returns the cells, table by table in the schema's order, row by row; [] when the file does not exist
 * @throws Error when the file is not a sqlite database
 */
export function readCells(dbPath: string, except: readonly string[] = [], exempt: Readonly<Record<string, readonly string[]>> = {}): Cell[] {
  if (!fs.existsSync(dbPath)) return [];
  const skipped = new Set(except.map((name) => name.toLowerCase()));
  const exemptColumns = new Map(Object.entries(exempt).map(([table, columns]) => [table.toLowerCase(), new Set(columns.map((c) => c.toLowerCase()))]));
  const db = openStudentDatabase(dbPath, { readonly: true });
  const cells: Cell[] = [];
  let bytes = 0;
  try {
    const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid LIMIT ${MAX_TABLES}`).all() as Array<{ name: string }>;
    for (const { name } of tables) {
      if (skipped.has(name.toLowerCase())) continue;
      let columns: string[];
      let rows: unknown[][];
      try {
        columns = (db.prepare(`PRAGMA table_info(${quoted(name)})`).all() as Array<{ name: string }>).map((c) => c.name);
        if (columns.length === 0) continue;
        // Every value as its bytes, cut to MAX_CELL_BYTES in SQL, so a huge cell is never read whole.
        const select = columns.map((c) => `substr(CAST(${quoted(c)} AS BLOB), 1, ${MAX_CELL_BYTES})`).join(', ');
        rows = db.prepare(`SELECT ${select} FROM ${quoted(name)} LIMIT ${MAX_TABLE_ROWS}`).raw().all() as unknown[][];
      } catch {
        continue;
      }
      rows.forEach((values, i) => {
        values.forEach((value, j) => {
          if (value === null || value === undefined || bytes >= MAX_DATABASE_BYTES) return;
          if (exemptColumns.get(name.toLowerCase())?.has(columns[j].toLowerCase())) return;
          const buffer = Buffer.isBuffer(value) ? value : Buffer.from(String(value), 'utf8');
          bytes += buffer.length;
          cells.push({ table: name, column: columns[j], row: i + 1, value: buffer });
        });
      });
    }
  } finally {
    db.close();
  }
  return cells;
}

/** At most this many files are read by fileCells. */
export const MAX_FILES = 200;
/** How deep fileCells goes into folders. */
const MAX_FILE_DEPTH = 3;

/**
 * The files at `paths` (and in folders among them, MAX_FILE_DEPTH deep), each as a cell
 * (`table` the file's path relative to `base`, `column` '(file)', `row` 1): at most
 * MAX_FILES files and MAX_CELL_BYTES of each, read without following a link and only when
 * regular (safe-read.ts). A link, FIFO, socket or device is passed over.
 * @returns the cells, in the order found
 */
export function fileCells(paths: readonly string[], base: string): Cell[] {
  const cells: Cell[] = [];
  const visit = (file: string, depth: number) => {
    if (cells.length >= MAX_FILES) return;
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(file);
    } catch {
      return;
    }
    if (stat.isDirectory() && depth < MAX_FILE_DEPTH) {
      let entries: string[] = [];
      try {
        entries = fs.readdirSync(file).sort();
      } catch {
        return;
      }
      for (const entry of entries) visit(path.join(file, entry), depth + 1);
    } else if (stat.isFile()) {
      const value = readRegularBytesSync(file, MAX_CELL_BYTES);
      if (value !== undefined) cells.push({ table: path.relative(base, file), column: '(file)', row: 1, value });
    }
  };
  for (const file of paths) visit(file, 0);
  return cells;
}

/** How a value was found in a cell: as it is, or the encodings undone to find it, outermost first (e.g. `base64 > zlib`). */
export interface Found {
  cell: Cell;
  how: string;
}

/** How deep encodings inside encodings are undone: base64 of zlib, hex of base64. */
const MAX_DEPTH = 2;
/** The most a decompression may give: far more than any response. */
const MAX_INFLATED_BYTES = 256 * 1024;
/** The shortest run of base64 or hex characters that is decoded: shorter than any stored response. */
const MIN_RUN = 16;

/** What one decoding gives from a cell's bytes: each result with its name. */
function decodings(bytes: Buffer): Array<{ how: string; bytes: Buffer }> {
  const out: Array<{ how: string; bytes: Buffer }> = [];
  const text = bytes.toString('latin1');
  for (const [run] of text.matchAll(new RegExp(`[A-Za-z0-9+/_-]{${MIN_RUN},}={0,2}`, 'g'))) {
    const decoded = Buffer.from(run.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (decoded.length > 0) out.push({ how: 'base64', bytes: decoded });
  }
  for (const [run] of text.matchAll(new RegExp(`(?:[0-9a-fA-F]{2}){${MIN_RUN / 2},}`, 'g'))) {
    out.push({ how: 'hex', bytes: Buffer.from(run, 'hex') });
  }
  const inflaters: Array<[string, (b: Buffer) => Buffer]> = [
    ['zlib', (b) => zlib.inflateSync(b, { maxOutputLength: MAX_INFLATED_BYTES })],
    ['gzip', (b) => zlib.gunzipSync(b, { maxOutputLength: MAX_INFLATED_BYTES })],
    ['deflate', (b) => zlib.inflateRawSync(b, { maxOutputLength: MAX_INFLATED_BYTES })],
  ];
  for (const [how, inflate] of inflaters) {
    try {
      out.push({ how, bytes: inflate(bytes) });
    } catch {
      // not that format
    }
  }
  return out;
}

/**
 * The forms of an ISO-8601 timestamp looked for beside the text itself: its digits in
 * order (`2026-12-02T01:03:31.123Z` as `20261202010331123`, which also finds
 * `2026-12-02 01:03:31.123`) and its epoch milliseconds (`1764637411123`, which also
 * finds the seconds `1764637411.123`), each found in a cell's digits with the rest taken
 * out. Only forms precise to the millisecond: a time a second wide would be found in any
 * record made in that second.
 */
export function timestampForms(iso: string): string[] {
  const forms: string[] = [];
  const digits = iso.replace(/\D/g, '');
  if (digits.length >= 17) forms.push(digits);
  const epoch = Date.parse(iso);
  if (Number.isFinite(epoch) && /\.\d{3}/.test(iso)) forms.push(String(epoch));
  return forms;
}

/**
 * The cells that hold `text` as it is, or (when `digits` are given, e.g. timestampForms)
 * any of them among the cell's digits, or (when `raw` is given) any of those byte strings
 * as they are (a binary form, e.g. a pickled datetime's state), also once an encoding or
 * two is undone (base64 or base64url, hex, zlib, gzip, raw deflate). What no common
 * encoding reveals (an encryption, a compression of another kind) is not found.
 * @returns each cell found once, with how
 */
export function findHidden(cells: readonly Cell[], text: string, digits: readonly string[] = [], raw: readonly Buffer[] = []): Found[] {
  const needle = Buffer.from(text, 'utf8');
  const holds = (bytes: Buffer) => {
    if (needle.length > 0 && bytes.includes(needle)) return true;
    if (raw.some((r) => r.length > 0 && bytes.includes(r))) return true;
    if (digits.length === 0) return false;
    const own = bytes.toString('latin1').replace(/\D/g, '');
    return digits.some((d) => own.includes(d));
  };
  const search = (bytes: Buffer, depth: number): string | undefined => {
    if (holds(bytes)) return '';
    if (depth >= MAX_DEPTH) return undefined;
    for (const { how, bytes: inner } of decodings(bytes)) {
      const deeper = search(inner, depth + 1);
      if (deeper !== undefined) return deeper === '' ? how : `${how} > ${deeper}`;
    }
    return undefined;
  };
  const found: Found[] = [];
  for (const cell of cells) {
    const how = search(cell.value, 0);
    if (how !== undefined) found.push({ cell, how });
  }
  return found;
}

/**
 * How many rows each table of a sqlite file holds (read-only): at most MAX_TABLES tables,
 * in the schema's order, sqlite's own (sqlite_sequence and the like) and those named in
 * `except` (any case) left out; a table the grader cannot count (a virtual table whose module it lacks) is passed
 * over. Only the counts are read, never a row. Waits up to 5 s for a writer's lock.
 * @returns the count by table name; {} when the file does not exist
 * @throws Error when the file is not a sqlite database
 */
export function countRows(dbPath: string, except: readonly string[] = []): Record<string, number> {
  if (!fs.existsSync(dbPath)) return {};
  const skipped = new Set(except.map((name) => name.toLowerCase()));
  const db = openStudentDatabase(dbPath, { readonly: true });
  const counts: Record<string, number> = {};
  try {
    const tables = db
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid LIMIT ${MAX_TABLES}`)
      .all() as Array<{ name: string }>;
    for (const { name } of tables) {
      if (skipped.has(name.toLowerCase())) continue;
      try {
        counts[name] = (db.prepare(`SELECT count(*) AS n FROM ${quoted(name)}`).get() as { n: number }).n;
      } catch {
        // not countable here: passed over, as readCells does
      }
    }
  } finally {
    db.close();
  }
  return counts;
}
