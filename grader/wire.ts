/**
 * The text form of requests, responses and ledger rows, shared by `idem-lab probe`,
 * `idem-lab ledger` and failure transcripts. It is the same form `probe.sh` and
 * `ledger.sh` print, so what a learner pastes from either reads back the same way.
 */
import http from 'node:http';
import type { Exchange, LedgerRow } from './types.js';
import { t } from '../i18n/index.js';

/** Bodies longer than this many characters are shortened in transcripts. */
export const BODY_PREVIEW_CHARS = 400;

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}${t('wire.more', { n: text.length - max })}`;
}

/**
 * `POST /pay  Idempotency-Key: k1  {"user":"u1","amount":1000}`; `(no Idempotency-Key)` or
 * `Idempotency-Key: (empty)` in the learner's language, as probe.sh prints them (the paste
 * reader reads the marks of every language). Other headers sent follow the key
 * (`X-Forwarded-For: 198.51.100.23`), then, for a request sent as a second client, where
 * it came from: `(from 127.3.4.5)`, or 127.0.0.1 and why not the second address.
 */
export function formatRequestLine(exchange: Exchange): string {
  const key = exchange.key === undefined ? t('probe.noKey') : `Idempotency-Key: ${exchange.key === '' ? t('probe.emptyKey') : exchange.key}`;
  const parts = [`${exchange.method} ${exchange.path}`];
  if (exchange.method === 'POST') parts.push(key);
  for (const [name, value] of Object.entries(exchange.headers ?? {})) parts.push(`${name}: ${value}`);
  if (exchange.client) parts.push(exchange.client.fallback === undefined ? t('wire.from', { address: exchange.client.address }) : t('wire.fromFallback', { address: exchange.client.address, why: exchange.client.fallback }));
  if (exchange.method === 'POST') parts.push(exchange.requestBody);
  return parts.join('  ');
}

/** Characters a POSIX shell word may hold unquoted (Python's shlex.quote uses the same set). */
const SHELL_SAFE = /^[\w@%+=:,./-]+$/;

/**
 * One word quoted for a POSIX shell: unchanged when it has only safe characters, else in
 * single quotes, with each `'` written as `'\''`. The empty word is `''`.
 */
export function shellQuote(word: string): string {
  if (SHELL_SAFE.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The exchange as a curl command line that sends the same request again, quoted for a
 * POSIX shell: `curl -sS -i -X POST http://127.0.0.1:8000/pay -H 'Content-Type: application/json'
 * -H 'Idempotency-Key: k1' --data '{"user":"u1","amount":1000}'`. An empty key is sent as
 * `-H 'Idempotency-Key;'` (curl's way to send a header with no value); no key, no header.
 * Other headers sent follow as `-H`; a request sent as a second client binds its address
 * (`--interface 127.3.4.5`).
 * @param port the port to send it to (default: the exchange's own, which a grader's server
 *   no longer listens on once the check is over; pass the learner's server's port)
 * @param maxBody characters of request body to show; a longer body is cut and the line
 *   then says so after the command, since it would no longer replay the same request
 */
export function curlCommand(exchange: Exchange, port = exchange.port, maxBody = Infinity): string {
  const args = ['curl', '-sS', '-i'];
  if (exchange.method !== 'GET') args.push('-X', exchange.method);
  // A second client's request leaves from its address (curl binds it: --interface takes an address too).
  if (exchange.client && exchange.client.fallback === undefined) args.push('--interface', exchange.client.address);
  args.push(`http://127.0.0.1:${port}${exchange.path}`);
  // The other headers sent, after the key on a POST (as formatRequestLine shows them).
  const headers = Object.entries(exchange.headers ?? {}).flatMap(([name, value]) => ['-H', `${name}: ${value}`]);
  if (exchange.method !== 'POST') args.push(...headers);
  if (exchange.method === 'POST') {
    args.push('-H', 'Content-Type: application/json');
    if (exchange.key !== undefined) args.push('-H', exchange.key === '' ? 'Idempotency-Key;' : `Idempotency-Key: ${exchange.key}`);
    args.push(...headers);
    const body = exchange.requestBody.length <= maxBody ? exchange.requestBody : exchange.requestBody.slice(0, maxBody);
    args.push('--data', body);
    if (body !== exchange.requestBody) return `${args.map(shellQuote).join(' ')}  # ${t('wire.bodyCut', { n: exchange.requestBody.length - maxBody })}`;
  }
  return args.map(shellQuote).join(' ');
}

/**
 * The exchange as probe.sh prints it: the request line, `HTTP 201 Created`, the
 * Idempotency-Replayed header when present, the body. A request that got no answer
 * prints `no answer: ...` instead of the status.
 * @param maxBody characters of body to show; Infinity for all
 */
export function formatExchange(exchange: Exchange, maxBody = Infinity): string[] {
  const lines = [formatRequestLine(exchange)];
  if (exchange.status === undefined) {
    lines.push(t('wire.noAnswer', { error: exchange.error ?? '?' }));
    return lines;
  }
  lines.push(`HTTP ${exchange.status} ${http.STATUS_CODES[exchange.status] ?? ''}`.trimEnd());
  if (exchange.replayed !== undefined) lines.push(`${exchange.replayedName ?? 'Idempotency-Replayed'}: ${exchange.replayed}`);
  if (exchange.replayLike !== undefined) lines.push(...exchange.replayLike.split('; '));
  if (exchange.replayedAlias !== undefined) lines.push(`Idempotent-Replayed: ${exchange.replayedAlias}`);
  if (exchange.location !== undefined) lines.push(`Location: ${exchange.location}`);
  if (exchange.responseBody) lines.push(shorten(exchange.responseBody, maxBody));
  return lines;
}

/** The header of the ledger table, as ledger.sh prints it. */
export const LEDGER_COLUMNS = ['payment_id', 'idempotency_key', 'user', 'amount', 'created_at'] as const;

/** The ledger as a table with aligned columns and `-` for a missing key, as ledger.sh prints it. */
export function formatLedger(rows: LedgerRow[]): string[] {
  const cells = rows.map((r) => [String(r.payment_id), r.idempotency_key ?? '-', r.user, String(r.amount), r.created_at]);
  const table = [[...LEDGER_COLUMNS], ...cells];
  const widths = LEDGER_COLUMNS.map((_, i) => Math.max(...table.map((row) => row[i].length)));
  return table.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '));
}
