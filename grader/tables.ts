/**
 * Reading a whole sqlite file the way an auditor would: every table, every column, read
 * only and bounded, and finding a value in it also when it was stored encoded (base64,
 * hex, zlib or gzip, a timestamp as its digits or as epoch milliseconds). Engine code: the
 * tables a check passes over are given by the caller.
 */
import fs from 'node:fs';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';
import { openStudentDatabase } from './student-db.js';

/** seek-bzip (pure JavaScript bzip2 decoding; CommonJS, no types): its decode(input, output) writes to output.writeByte. */
const require = createRequire(import.meta.url);
const Bunzip = require('seek-bzip') as { decode(input: Buffer, output: { writeByte(byte: number): void }, multistream?: boolean): void };

/** One cell of a table: where it is and its bytes (a number or a text as its text, a blob as is). */
export interface Cell {
  table: string;
  column: string;
  /** Its row's place in the table as read, from 1. */
  row: number;
  value: Buffer;
  /** For a cell of a sqlite file the servers wrote other than IDEM_DB's: that file, as the failure names it. */
  file?: string;
  /** For a cell made by undoing an encoding of a stored one (expandXz): the encodings undone, outermost first (`xz`, `base64 > xz`). */
  via?: string;
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

/** At most this many files the servers wrote are read (steps/advanced/13-minimal.ts WRITTEN_LIMITS). */
export const MAX_FILES = 200;

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
  for (const at of offsetsOf(bytes, BZIP2_MAGIC)) {
    const inflated = bunzip(bytes.subarray(at));
    if (inflated.length > 0) out.push({ how: 'bz2', bytes: inflated });
  }
  for (const [run] of text.matchAll(new RegExp(`(?:<~)?[!-uz]{${MIN_RUN},}(?:~>)?`, 'g'))) {
    const decoded = ascii85(run);
    if (decoded && decoded.length > 0) out.push({ how: 'base85', bytes: decoded });
  }
  for (const [run] of text.matchAll(new RegExp(`[0-9A-Za-z!#$%&()*+\\-;<=>?@^_\`{|}~]{${MIN_RUN},}`, 'g'))) {
    const decoded = base85(run);
    if (decoded && decoded.length > 0) out.push({ how: 'base85', bytes: decoded });
  }
  return out;
}

/** A bzip2 stream's start: `BZh`, a block size 1-9, and the first block's magic (pi). */
const BZIP2_MAGIC = /BZh[1-9]1AY&SY/g;
/** An xz stream's header magic. */
const XZ_MAGIC = Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]);
/** At most this many streams of one kind are looked for in one cell. */
const MAX_STREAMS = 4;

/** Where `magic` starts in `bytes` (at most MAX_STREAMS places). */
function offsetsOf(bytes: Buffer, magic: RegExp | Buffer): number[] {
  const found: number[] = [];
  if (Buffer.isBuffer(magic)) {
    for (let at = bytes.indexOf(magic); at >= 0 && found.length < MAX_STREAMS; at = bytes.indexOf(magic, at + 1)) found.push(at);
    return found;
  }
  for (const m of bytes.toString('latin1').matchAll(magic)) {
    if (found.length >= MAX_STREAMS) break;
    found.push(m.index ?? 0);
  }
  return found;
}

/** Raised by bunzip's output once MAX_INFLATED_BYTES are written: decoding stops there. */
class Full extends Error {}

/**
 * The bytes a bzip2 stream at the start of `bytes` decodes to (seek-bzip), at most
 * MAX_INFLATED_BYTES: decoding stops at that cap (a decompression bomb never makes the
 * grader hold more), and what was decoded before an error (a stream cut short) is kept.
 * @returns the decoded bytes; empty when nothing decodes
 */
export function bunzip(bytes: Buffer): Buffer {
  const out = Buffer.alloc(MAX_INFLATED_BYTES);
  let length = 0;
  try {
    Bunzip.decode(bytes, {
      writeByte(byte: number) {
        if (length >= MAX_INFLATED_BYTES) throw new Full();
        out[length++] = byte;
      },
    });
  } catch {
    // full, cut short or not bzip2: what was decoded is kept
  }
  return Buffer.from(out.subarray(0, length));
}

/** The Ascii85 alphabet's value of `c` (`!` is 0), for a 5-character group. */
function groupValue(chars: number[]): number {
  return chars.reduce((n, c) => n * 85 + c, 0);
}

/**
 * Ascii85 (Adobe's, Python's base64.a85encode: `!`..`u`, `z` for four zero bytes, an
 * optional `<~ ~>` frame) decoded; undefined when `text` is not Ascii85.
 */
export function ascii85(text: string): Buffer | undefined {
  const body = text.replace(/^<~/, '').replace(/~>$/, '').replace(/z/g, '!!!!!');
  return decode85(body, (ch) => (ch >= 33 && ch <= 117 ? ch - 33 : -1));
}

/** RFC 1924's / Python's base64.b85encode alphabet. */
const B85 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~';
const B85_VALUE = new Map([...B85].map((ch, i) => [ch.charCodeAt(0), i]));

/** base85 (Python's base64.b85encode, RFC 1924's alphabet) decoded; undefined when `text` is not base85. */
export function base85(text: string): Buffer | undefined {
  return decode85(text, (ch) => B85_VALUE.get(ch) ?? -1);
}

/** Groups of five base-85 digits to four bytes each (a last short group padded, as both encodings do); undefined on a character outside the alphabet or a group over 2^32. */
function decode85(text: string, value: (ch: number) => number): Buffer | undefined {
  const out: number[] = [];
  for (let i = 0; i < text.length; i += 5) {
    const group = text.slice(i, i + 5);
    const digits = [...group].map((ch) => value(ch.charCodeAt(0)));
    if (digits.some((d) => d < 0)) return undefined;
    const pad = 5 - digits.length;
    if (pad === 4) break;
    const n = groupValue([...digits, ...Array<number>(pad).fill(84)]);
    if (n > 0xffffffff) return undefined;
    out.push(...[n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].slice(0, 4 - pad));
  }
  return Buffer.from(out);
}

/**
 * The bytes an xz stream at the start of `bytes` decodes to (xz-decompress: xz-embedded
 * in WebAssembly, no native code), at most MAX_INFLATED_BYTES: reading stops at that cap,
 * and what was decoded before an error (a stream cut short) is kept.
 * @returns the decoded bytes; empty when nothing decodes
 */
export async function unxz(bytes: Buffer): Promise<Buffer> {
  const { XzReadableStream } = require('xz-decompress') as { XzReadableStream: new (input: ReadableStream<Uint8Array>) => ReadableStream<Uint8Array> };
  const input = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new Uint8Array(bytes));
      controller.close();
    },
  });
  const chunks: Buffer[] = [];
  let length = 0;
  const reader = new XzReadableStream(input).getReader();
  try {
    while (length < MAX_INFLATED_BYTES) {
      const { done, value } = await reader.read();
      if (done || !value) break;
      const chunk = Buffer.from(value.subarray(0, MAX_INFLATED_BYTES - length));
      chunks.push(chunk);
      length += chunk.length;
    }
  } catch {
    // cut short or not xz: what was decoded is kept
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks);
}

/**
 * The cells xz streams in `cells` decode to (Node has no xz of its own, and the decoder
 * is asynchronous, so findHidden cannot undo it as it goes): each stream found in a
 * cell's bytes, or in one of its base64 or hex runs, decoded (unxz) to a cell of the same
 * place with `via` saying how (`xz`, `base64 > xz`). At most MAX_STREAMS streams a cell,
 * MAX_INFLATED_BYTES each, and MAX_DATABASE_BYTES in all.
 */
export async function expandXz(cells: readonly Cell[]): Promise<Cell[]> {
  const out: Cell[] = [];
  let bytes = 0;
  for (const cell of cells) {
    const sources = [{ how: '', bytes: cell.value }, ...decodings(cell.value).filter((d) => d.how === 'base64' || d.how === 'hex' || d.how === 'base85')];
    for (const source of sources) {
      for (const at of offsetsOf(source.bytes, XZ_MAGIC)) {
        if (bytes >= MAX_DATABASE_BYTES) return out;
        const value = await unxz(source.bytes.subarray(at));
        if (value.length === 0) continue;
        bytes += value.length;
        const via = [cell.via, source.how, 'xz'].filter(Boolean).join(' > ');
        out.push({ ...cell, value, via });
      }
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
 * two is undone (base64 or base64url, hex, base85 or Ascii85, zlib, gzip, raw deflate,
 * bzip2; xz through expandXz's cells, whose `via` starts the how). What no common
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
    if (how === undefined) continue;
    found.push({ cell, how: cell.via ? [cell.via, how].filter(Boolean).join(' > ') : how });
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
