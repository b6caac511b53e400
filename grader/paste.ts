/**
 * Reads what learners paste into their step files: the output of `./probe.sh`,
 * `idem-lab probe`, `curl -i` or `curl -v` (responses), and of `./ledger.sh`,
 * `idem-lab ledger` (with or without its header line, e.g. through `grep`), `GET /ledger`
 * or the sqlite3 shell (ledger rows), in any order, with other text around. Prose is
 * never read as a response: only a status line (`HTTP 201`, `HTTP/1.1 201 Created`)
 * starts one. Commands continued over several lines with `\` are read as one.
 */
import type { LedgerRow } from './types.js';
import { CATALOGS, LANGUAGES, t } from '../i18n/index.js';

/** One response found in a paste. */
export interface PastedResponse {
  /** 1-based line of the status line. */
  line: number;
  status: number;
  /**
   * The Idempotency-Key of the request that got this response, when the paste shows it:
   * a string (possibly ''), null when the request visibly had no key, undefined when unknown.
   */
  key?: string | null;
  /** The Idempotency-Replayed header, when shown. */
  replayed?: string;
  /** The JSON body, when one followed the status line. */
  body?: Record<string, unknown>;
}

/** Everything a paste shows. */
export interface Paste {
  responses: PastedResponse[];
  ledger: LedgerRow[];
  /** The lines, for checks that look for commands. */
  lines: string[];
}

/** `HTTP 201`, `HTTP/1.1 201 Created`, `< HTTP/1.1 422 Unprocessable Entity`: a reason phrase in Title Case or none, so prose is not read as a status. */
const STATUS_LINE = /^\s*(?:<\s*)?HTTP(?:\/[\d.]+)?\s+(\d{3})(?:\s+[A-Z][A-Za-z'-]*(?:\s+[A-Z][A-Za-z'-]*){0,3})?\s*$/;
const REPLAYED_HEADER = /^\s*(?:<\s*)?Idempotency-Replayed:\s*(\S+)/i;
function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
/**
 * How probe output in each language marks an empty key (`(empty)`, `(빈 값)`, `（空）`,
 * the catalogs' probe.emptyKey) and a request without a key (`(no Idempotency-Key)`,
 * `(Idempotency-Key 없음)`, `（没有 Idempotency-Key）`, probe.noKey): a paste is read
 * the same whatever language the workspace that printed it speaks.
 */
const EMPTY_MARKS = [...new Set(LANGUAGES.map((lang) => CATALOGS[lang]['probe.emptyKey']))];
const NO_KEY_MARKS = [...new Set(LANGUAGES.map((lang) => CATALOGS[lang]['probe.noKey']))];
/** The key in a request line or header; an EMPTY_MARKS label is how probe output shows an empty key. */
const KEY_HEADER = new RegExp(`Idempotency-Key:\\s*(${EMPTY_MARKS.map(escapeRegExp).join('|')}|[^\\s'"{]*)`, 'i');
/** curl's way of sending a header with no value: `-H 'Idempotency-Key;'`. */
const EMPTY_KEY_HEADER = /Idempotency-Key;/i;
const NO_KEY_MARK = new RegExp(NO_KEY_MARKS.map(escapeRegExp).join('|'), 'i');
const REQUEST_LINE = /^\s*(?:>\s*)?POST\s+\S*\/pay\b/;
/** The request line curl -v prints; the request headers follow it, each on a `> ` line. */
const VERBOSE_REQUEST_LINE = /^\s*>\s*POST\s+\S*\/pay\b/;
const PROBE_COMMAND = /(?:probe\.sh|idem-lab\s+probe)(.*)$/;
const CURL_WORD = /\bcurl\b/;
const PAY_PATH = /\/pay\b/;
/**
 * `curl ... /pay` on one line: the first `curl` and a `/pay` after it, found in linear
 * time (a `curl\b.*\/pay` search backtracks from every `curl` of a line to its end).
 */
function isCurlCommand(line: string): boolean {
  const curl = CURL_WORD.exec(line);
  return curl !== null && PAY_PATH.test(line.slice(curl.index + 4));
}
/** curl -v's notes on bytes sent and received: `} [27 bytes data]`, `{ [89 bytes data]`. */
const CURL_DATA_NOTE = /^\s*[{}]\s*\[\d+ bytes data\]\s*$/;
/** The shell's job notices, `[1] 4263` and `[1]+  Done  ./probe.sh race`: neither a body nor a command sent then. */
const JOB_NOTICE = /^\s*\[\d+\][+-]?\s+(?:\d+\s*$|Done\b|Running\b|Exit\b|Stopped\b|Terminated\b|Killed\b)/;
/** A line continued on the next one, as a shell reads it. */
const CONTINUED = /\\\s*$/;
/** The most lines one continued command is read over. */
const MAX_CONTINUED = 64;

function keyText(shown: string): string {
  return EMPTY_MARKS.includes(shown) ? '' : shown;
}

/** Removes a shell prompt like `$ `, `% ` or `user@host:~/lab$ ` before a command. */
function stripPrompt(line: string): string {
  return line.replace(/^\s*(?:[\w.@~:/-]*[$%#]\s+)/, '');
}

/** Options of `idem-lab probe` that take a value (`--dir D`, `--port N`); `--dir=D` is one word. */
const VALUE_OPTION = /^--?(?:dir|port)$/;

/**
 * The first argument of a probe command line that is not an option: the key ('' for an
 * explicit ''), null for none. Options are passed over, with the value of those taking
 * one: `idem-lab probe --dir ~/lab r5` sends r5.
 */
export function probeKey(line: string): string | null | undefined {
  const m = PROBE_COMMAND.exec(stripPrompt(line));
  if (!m) return undefined;
  const args = m[1];
  let at = 0;
  let skipValue = false;
  // Read word by word from an index: slicing the rest off each time would cost the square of a long line.
  const WORD = /\s*(?:(['"])(.*?)\1|(\S*))/y;
  for (;;) {
    while (at < args.length && /\s/.test(args[at])) at++;
    const rest = args.slice(at, at + 4);
    if (at >= args.length || /^(?:[|>&;<)]|\d*>)/.test(rest)) return null;
    WORD.lastIndex = at;
    const w = WORD.exec(args);
    if (!w || w[0].length === 0) return null;
    at = WORD.lastIndex;
    const quoted = w[1] !== undefined;
    const word = quoted ? `${w[1]}${w[2]}${w[1]}` : w[3];
    if (skipValue) {
      skipValue = false;
      continue;
    }
    if (!quoted && /^-./.test(word)) {
      skipValue = VALUE_OPTION.test(word);
      continue;
    }
    if (quoted) return w[2].startsWith('{') ? null : w[2];
    return word.startsWith('{') || word.startsWith('"$') ? null : word.replace(/[;&|)]+$/, '');
  }
}

/** The key an `Idempotency-Key` header on a line carries: curl's `-H 'Idempotency-Key: k'`, hey's, httpie's or xh's `Idempotency-Key:k`. */
export function headerKey(line: string): string | undefined {
  const header = KEY_HEADER.exec(line);
  return header ? keyText(header[1]) : undefined;
}

/**
 * The key a command line sends to POST /pay: a probe's first argument, or a curl command's
 * Idempotency-Key header ('' for an empty one, null when it sends none); undefined when
 * the line is neither command.
 */
export function commandKey(line: string): string | null | undefined {
  const probe = probeKey(line);
  if (probe !== undefined) return probe;
  if (!isCurlCommand(line)) return undefined;
  const header = KEY_HEADER.exec(line);
  if (header) return keyText(header[1]);
  return EMPTY_KEY_HEADER.test(line) ? '' : null;
}

/** Where a JSON value read from the paste ends: its last line, and what follows it on that line. */
interface JsonRead {
  value: unknown;
  /** Index of the line the value ends on. */
  end: number;
  /** The rest of that line after the value, e.g. a shell prompt printed right after a body without a newline. */
  rest: string;
}

/**
 * Parses the JSON value that starts at the first `open` of lines[i] and may run over
 * following lines (pretty-printed): brackets are matched outside strings, then the text
 * between is parsed. Undefined when that is not JSON.
 */
function readJson(lines: string[], i: number, open: '{' | '[', budget: { chars: number }): JsonRead | undefined {
  const first = lines[i].replace(/^\s*<\s?/, '');
  let text = '';
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (let j = i; j < lines.length && j < i + 200; j++) {
    // Past the budget a value is read on its own line only: linear time however many lines open one.
    if (j > i && budget.chars <= 0) return undefined;
    const line = j === i ? first.slice(first.indexOf(open)) : lines[j].replace(/^\s*<\s?/, '');
    budget.chars -= line.length + 1;
    for (let k = 0; k < line.length; k++) {
      const ch = line[k];
      if (inString) {
        if (escaped) escaped = false;
        else if (ch === '\\') escaped = true;
        else if (ch === '"') inString = false;
      } else if (ch === '"') {
        inString = true;
      } else if (ch === '{' || ch === '[') {
        depth++;
      } else if (ch === '}' || ch === ']') {
        depth--;
        if (depth === 0) {
          try {
            return { value: JSON.parse(text + line.slice(0, k + 1)), end: j, rest: line.slice(k + 1) };
          } catch {
            return undefined;
          }
        }
      }
    }
    if (inString) return undefined; // a JSON string never spans lines
    text += line + '\n';
  }
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nullKey(text: string | undefined | null): string | null {
  if (text === undefined || text === null) return null;
  const t = text.trim();
  return t === '' || t === '-' || /^(null|none)$/i.test(t) ? null : t;
}

function toLedgerRow(obj: Record<string, unknown>): LedgerRow | undefined {
  const id = Number(obj.payment_id);
  if (!Number.isInteger(id)) return undefined;
  const key = obj.idempotency_key ?? obj.key;
  return {
    payment_id: id,
    idempotency_key: nullKey(key === undefined || key === null ? null : String(key)),
    user: String(obj.user ?? ''),
    amount: Number(obj.amount),
    created_at: String(obj.created_at ?? ''),
  };
}

const COLUMN_ALIASES: Record<string, keyof LedgerRow> = {
  payment_id: 'payment_id',
  idempotency_key: 'idempotency_key',
  key: 'idempotency_key',
  user: 'user',
  amount: 'amount',
  created_at: 'created_at',
};

/** sqlite3's box mode draws its columns with `│`: read them as `|`. */
function unbox(line: string): string {
  return line.replace(/[│┃║]/g, '|');
}

/** A rule under or around a table header: `----  ----`, `|---|---|`, `+----+`, `├────┼────┤`. */
const TABLE_RULE = /^[-=+|:\s─━┄┈┌┐└┘├┤┬┴┼╭╮╯╰═╔╗╚╝╠╣╦╩╬]+$/;

/**
 * Reads a ledger table whose header is lines[i]: ledger.sh and idem-lab ledger (aligned
 * columns, where an empty key leaves its column blank), or sqlite3 with `.headers on` in
 * list, column, table, markdown or box mode.
 */
function readLedgerTable(lines: string[], i: number): { rows: LedgerRow[]; next: number } {
  const header = unbox(lines[i]);
  const piped = header.includes('|');
  const split = (line: string) =>
    piped ? line.split('|').map((c) => c.trim()).filter((c, idx, all) => !(c === '' && (idx === 0 || idx === all.length - 1))) : line.trim().split(/\s+/);
  const names = split(header);
  const columns = names.map((name) => COLUMN_ALIASES[name.toLowerCase()]);
  /** Where each column starts in an aligned table, to read a row with a blank cell. */
  const starts: number[] = [];
  if (!piped) {
    let from = 0;
    for (const name of names) {
      const at = header.indexOf(name, from);
      starts.push(at);
      from = at + name.length;
    }
  }
  const aligned = (line: string) => starts.map((start, idx) => line.slice(start, idx + 1 < starts.length ? starts[idx + 1] : undefined).trim());
  const rows: LedgerRow[] = [];
  let j = i + 1;
  for (; j < lines.length; j++) {
    const line = unbox(lines[j]).trimEnd();
    if (line.trim() !== '' && TABLE_RULE.test(line)) continue;
    let cells = split(line);
    if (!piped && cells.length === names.length - 1) cells = aligned(line);
    if (cells.length < 4 || !/^\d+$/.test(cells[0])) break;
    const obj: Record<string, unknown> = {};
    columns.forEach((column, idx) => {
      if (column) obj[column] = cells[idx];
    });
    const row = toLedgerRow(obj);
    if (row) rows.push(row);
  }
  return { rows, next: j };
}

/** A row of `sqlite3 lab.db 'select * from ledger'` (list mode, no header). */
const SQLITE_ROW = /^\s*(\d+)\|([^|]*)\|([^|]+)\|(\d+)\|(.+)$/;
/** A row of ledger.sh without its header (`./ledger.sh | grep k1`): it ends with the created_at timestamp; a blank key leaves four cells. */
const LEDGER_SH_ROW = /^\s*(\d+)\s+(?:(\S+)\s+)?(\S+)\s+(\d+)\s+(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?)\s*$/;

/**
 * Finds every response and every ledger row in a paste.
 * Never throws: what it cannot read it passes over.
 */
export function parsePaste(text: string): Paste {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  /** The lines as read: a JSON value may leave the rest of its last line to read on. */
  const work = [...lines];
  const responses: PastedResponse[] = [];
  const ledger: LedgerRow[] = [];
  /** The key of the request whose response is expected next. */
  let pendingKey: string | null | undefined;
  let current: PastedResponse | undefined;
  /** Characters JSON values may be read over across lines, in all: a few times the paste (see readJson). */
  const budget = { chars: text.length + 4096 };
  let i = 0;
  while (i < work.length) {
    const line = work[i];
    const status = STATUS_LINE.exec(line);
    if (status) {
      const code = Number(status[1]);
      if (code >= 200) {
        // 1xx (100 Continue) is an interim answer: the response to the request follows it.
        current = { line: i + 1, status: code };
        if (pendingKey !== undefined) current.key = pendingKey;
        pendingKey = undefined;
        responses.push(current);
      }
      i++;
      continue;
    }
    if (CURL_DATA_NOTE.test(line) || JOB_NOTICE.test(line)) {
      i++;
      continue;
    }
    // A body first: a shell prompt printed right after it on the same line is read after it.
    const trimmed = line.replace(/^\s*<\s?/, '').trimStart();
    if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
      const json = readJson(work, i, trimmed[0] as '{' | '[', budget);
      if (json) {
        if (Array.isArray(json.value)) {
          for (const item of json.value) {
            const row = isRecord(item) ? toLedgerRow(item) : undefined;
            if (row) ledger.push(row);
          }
          current = undefined;
        } else if (current && current.body === undefined && isRecord(json.value)) {
          current.body = json.value;
        } else if (isRecord(json.value) && 'payment_id' in json.value && 'idempotency_key' in json.value) {
          const row = toLedgerRow(json.value);
          if (row) ledger.push(row);
        }
        if (json.rest.trim() !== '') {
          work[json.end] = json.rest;
          i = json.end;
        } else {
          i = json.end + 1;
        }
        continue;
      }
    }
    // A command continued with `\` (curl -H ... \ on the next lines) is read as one line.
    let command = line;
    let span = 1;
    if (CONTINUED.test(line)) {
      // At most MAX_CONTINUED lines, joined once: a paste of 1 MB of `\` lines must not be re-joined from every line.
      const parts = [line.replace(CONTINUED, ' ')];
      while (i + span < work.length && span < MAX_CONTINUED) {
        const next = work[i + span].replace(/^\s*>\s?/, '');
        span++;
        if (!CONTINUED.test(next)) {
          parts.push(next);
          break;
        }
        parts.push(next.replace(CONTINUED, ' '));
      }
      command = parts.join('');
    }
    const key = commandKey(command);
    if (key !== undefined) {
      pendingKey = key;
      current = undefined;
      i += span;
      continue;
    }
    if (REQUEST_LINE.test(line)) {
      const header = KEY_HEADER.exec(line);
      // probe.sh prints the key on its request line; curl -v prints it on a header line below.
      pendingKey = header ? keyText(header[1]) : NO_KEY_MARK.test(line) || VERBOSE_REQUEST_LINE.test(line) ? null : undefined;
      current = undefined;
      i++;
      continue;
    }
    if (/^\s*>\s*Idempotency-Key:/i.test(line)) {
      pendingKey = keyText(KEY_HEADER.exec(line)?.[1] ?? '');
      i++;
      continue;
    }
    const replayed = REPLAYED_HEADER.exec(line);
    if (replayed && current) {
      current.replayed = replayed[1];
      i++;
      continue;
    }
    if (/\bpayment_id\b/.test(line) && /\buser\b/.test(line) && /\bamount\b/.test(line) && !line.includes('{')) {
      const table = readLedgerTable(work, i);
      ledger.push(...table.rows);
      current = undefined;
      i = Math.max(table.next, i + 1);
      continue;
    }
    const sqlite = SQLITE_ROW.exec(line);
    const plain = sqlite ? undefined : LEDGER_SH_ROW.exec(line);
    const cells = sqlite ?? plain;
    if (cells) {
      const row = toLedgerRow({ payment_id: cells[1], idempotency_key: cells[2], user: cells[3], amount: cells[4], created_at: cells[5] });
      if (row) ledger.push(row);
    }
    i++;
  }
  return { responses, ledger: dedupeLedger(ledger), lines };
}

/** A ledger pasted twice (before and after) lists a row twice: keep each payment_id once. */
function dedupeLedger(rows: LedgerRow[]): LedgerRow[] {
  const seen = new Map<number, LedgerRow>();
  for (const row of rows) seen.set(row.payment_id, row);
  return [...seen.values()].sort((a, b) => a.payment_id - b.payment_id);
}

/** The payment_id of a response body, when it has an integer one. */
export function paymentId(response: PastedResponse): number | undefined {
  const id = response.body?.payment_id;
  return typeof id === 'number' && Number.isInteger(id) ? id : undefined;
}

/** One line describing a pasted response, for details: `line 12: HTTP 201, payment_id 3`. */
export function describeResponse(response: PastedResponse): string {
  const parts = [t('paste.line', { line: response.line, status: response.status })];
  if (response.key !== undefined) parts.push(response.key === null ? t('paste.noKey') : t('paste.key', { key: JSON.stringify(response.key) }));
  const id = paymentId(response);
  if (id !== undefined) parts.push(`payment_id ${id}`);
  if (response.replayed) parts.push(`Idempotency-Replayed: ${response.replayed}`);
  return parts.join(t('paste.join'));
}
