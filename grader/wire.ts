/**
 * The text form of requests, responses and ledger rows, shared by `idem-lab probe`,
 * `idem-lab ledger` and failure transcripts. It is the same form `probe.sh` and
 * `ledger.sh` print, so what a learner pastes from either reads back the same way.
 */
import http from 'node:http';
import type { Exchange, LedgerRow } from './types.js';

/** Bodies longer than this many characters are shortened in transcripts. */
export const BODY_PREVIEW_CHARS = 400;

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

/** `POST /pay  Idempotency-Key: k1  {"user":"u1","amount":1000}`; `(no Idempotency-Key)` or `Idempotency-Key: (empty)`. */
export function formatRequestLine(exchange: Exchange): string {
  const key = exchange.key === undefined ? '(no Idempotency-Key)' : `Idempotency-Key: ${exchange.key === '' ? '(empty)' : exchange.key}`;
  const parts = [`${exchange.method} ${exchange.path}`];
  if (exchange.method === 'POST') parts.push(key, exchange.requestBody);
  return parts.join('  ');
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
    lines.push(`no answer: ${exchange.error ?? 'unknown error'}`);
    return lines;
  }
  lines.push(`HTTP ${exchange.status} ${http.STATUS_CODES[exchange.status] ?? ''}`.trimEnd());
  if (exchange.replayed !== undefined) lines.push(`Idempotency-Replayed: ${exchange.replayed}`);
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
