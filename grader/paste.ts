/**
 * Reads what learners paste into their step files: the output of `./probe.sh`,
 * `idem-lab probe`, `curl -i` or `curl -v` (responses), and of `./ledger.sh`,
 * `idem-lab ledger`, `GET /ledger` or the sqlite3 shell (ledger rows), in any order,
 * with other text around. Prose is never read as a response: only a status line
 * (`HTTP 201`, `HTTP/1.1 201 Created`) starts one.
 */
import type { LedgerRow } from './types.js';

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
/** The key in a request line or header; `(empty)` is how probe output shows an empty key. */
const KEY_HEADER = /Idempotency-Key:\s*(\(empty\)|[^\s'"{]*)/i;
const NO_KEY_MARK = /\(no Idempotency-Key\)/i;
const REQUEST_LINE = /^\s*(?:>\s*)?POST\s+\S*\/pay\b/;
const PROBE_COMMAND = /(?:probe\.sh|idem-lab\s+probe)(.*)$/;
const CURL_COMMAND = /\bcurl\b.*\/pay\b/;

function keyText(shown: string): string {
  return shown === '(empty)' ? '' : shown;
}

/** Removes a shell prompt like `$ `, `% ` or `user@host:~/lab$ ` before a command. */
function stripPrompt(line: string): string {
  return line.replace(/^\s*(?:[\w.@~:/-]*[$%#]\s+)/, '');
}

/** The first argument of a probe command line: the key ('' for an explicit ''), null for none. */
export function probeKey(line: string): string | null | undefined {
  const m = PROBE_COMMAND.exec(stripPrompt(line));
  if (!m) return undefined;
  const args = m[1].trim();
  if (args === '' || /^[|>&;]/.test(args)) return null;
  const quoted = /^(['"])(.*?)\1/.exec(args);
  if (quoted) return quoted[2].startsWith('{') ? null : quoted[2];
  const word = args.split(/\s+/)[0];
  return word.startsWith('{') || word.startsWith('"$') ? null : word.replace(/[;&|)]+$/, '');
}

/** Parses JSON that starts at lines[i] and may run over following lines; returns it and the next line. */
function readJson(lines: string[], i: number, open: '{' | '['): { value: unknown; next: number } | undefined {
  let text = '';
  for (let j = i; j < lines.length && j < i + 200; j++) {
    text += lines[j].replace(/^\s*<\s?/, '') + '\n';
    try {
      return { value: JSON.parse(text.slice(text.indexOf(open))), next: j + 1 };
    } catch {
      // keep reading: the JSON may be pretty-printed over several lines
    }
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

/** Reads a ledger table (ledger.sh, or sqlite3 with .headers on) whose header is lines[i]. */
function readLedgerTable(lines: string[], i: number): { rows: LedgerRow[]; next: number } {
  const piped = lines[i].includes('|');
  const split = (line: string) =>
    piped ? line.split('|').map((c) => c.trim()).filter((c, idx, all) => !(c === '' && (idx === 0 || idx === all.length - 1))) : line.trim().split(/\s+/);
  const columns = split(lines[i]).map((name) => COLUMN_ALIASES[name.toLowerCase()]);
  const rows: LedgerRow[] = [];
  let j = i + 1;
  for (; j < lines.length; j++) {
    const line = lines[j].trim();
    if (/^[-=+|\s]+$/.test(line) && line !== '') continue; // a rule under the header
    const cells = split(line);
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

const SQLITE_ROW = /^\s*(\d+)\|([^|]*)\|([^|]+)\|(\d+)\|(.+)$/;

/**
 * Finds every response and every ledger row in a paste.
 * Never throws: what it cannot read it passes over.
 */
export function parsePaste(text: string): Paste {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const responses: PastedResponse[] = [];
  const ledger: LedgerRow[] = [];
  /** The key of the request whose response is expected next. */
  let pendingKey: string | null | undefined;
  let current: PastedResponse | undefined;
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const status = STATUS_LINE.exec(line);
    if (status) {
      current = { line: i + 1, status: Number(status[1]) };
      if (pendingKey !== undefined) current.key = pendingKey;
      pendingKey = undefined;
      responses.push(current);
      i++;
      continue;
    }
    const probe = probeKey(line);
    if (probe !== undefined) {
      pendingKey = probe;
      current = undefined;
      i++;
      continue;
    }
    if (REQUEST_LINE.test(line) || CURL_COMMAND.test(line)) {
      const header = KEY_HEADER.exec(line);
      pendingKey = header ? keyText(header[1]) : NO_KEY_MARK.test(line) || CURL_COMMAND.test(line) ? null : undefined;
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
    const trimmed = line.replace(/^\s*<\s?/, '').trimStart();
    if (trimmed.startsWith('{')) {
      const json = readJson(lines, i, '{');
      if (json) {
        if (current && current.body === undefined && isRecord(json.value)) current.body = json.value;
        else if (isRecord(json.value) && 'payment_id' in json.value && 'idempotency_key' in json.value) {
          const row = toLedgerRow(json.value);
          if (row) ledger.push(row);
        }
        i = json.next;
        continue;
      }
    }
    if (trimmed.startsWith('[')) {
      const json = readJson(lines, i, '[');
      if (json && Array.isArray(json.value)) {
        for (const item of json.value) {
          const row = isRecord(item) ? toLedgerRow(item) : undefined;
          if (row) ledger.push(row);
        }
        current = undefined;
        i = json.next;
        continue;
      }
    }
    if (/\bpayment_id\b/.test(line) && /\buser\b/.test(line) && /\bamount\b/.test(line) && !line.includes('{')) {
      const table = readLedgerTable(lines, i);
      ledger.push(...table.rows);
      current = undefined;
      i = Math.max(table.next, i + 1);
      continue;
    }
    const sqlite = SQLITE_ROW.exec(line);
    if (sqlite) {
      const row = toLedgerRow({ payment_id: sqlite[1], idempotency_key: sqlite[2], user: sqlite[3], amount: sqlite[4], created_at: sqlite[5] });
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
  const parts = [`line ${response.line}: HTTP ${response.status}`];
  if (response.key !== undefined) parts.push(response.key === null ? 'no key' : `key ${JSON.stringify(response.key)}`);
  const id = paymentId(response);
  if (id !== undefined) parts.push(`payment_id ${id}`);
  if (response.replayed) parts.push(`Idempotency-Replayed: ${response.replayed}`);
  return parts.join(', ');
}
