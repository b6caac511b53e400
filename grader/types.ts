/**
 * The data the grader produces. Checks fill these; reporters only format them.
 */

/** One ledger row as the server contract defines the `ledger` table. */
export interface LedgerRow {
  payment_id: number;
  /** The Idempotency-Key as the request sent it; null when the request had none. */
  idempotency_key: string | null;
  user: string;
  amount: number;
  /** ISO-8601 UTC text written by the server. */
  created_at: string;
}

/**
 * One HTTP request the grader sent and what came back, kept for the transcript.
 * `key` is undefined when no Idempotency-Key header was sent, '' when it was sent empty.
 */
export interface Exchange {
  /** Which server instance answered: 'A', 'B', ... in the order the check started them. */
  server: string;
  /** The port of that instance on 127.0.0.1. */
  port: number;
  method: 'GET' | 'POST';
  path: string;
  key?: string;
  /** The request body exactly as sent (UTF-8 text), '' for none. */
  requestBody: string;
  /** Request headers sent besides Content-Type and Idempotency-Key (e.g. X-Forwarded-For), by name as sent; absent when none. */
  headers?: Record<string, string>;
  /**
   * Set on a request sent as a second client (http.ts PayRequest.client): the client address
   * the server saw it come from (127.3.4.5, http.ts SECOND_CLIENT_ADDRESS) and, when that
   * address could not be used and it came from 127.0.0.1 instead, why (learner's language),
   * and whether that was because a sandbox relay's second socket was gone (relayMissing).
   */
  client?: { address: string; fallback?: string; relayMissing?: boolean };
  /** The HTTP status; undefined when no answer came (see `error`). */
  status?: number;
  /** The Idempotency-Replayed response header (or Stripe's Idempotent-Replayed, when only that one came), when the server sent one. */
  replayed?: string;
  /** Stripe's Idempotent-Replayed header, when the server sent it beside Idempotency-Replayed. */
  replayedAlias?: string;
  /** The name of the header `replayed` came from when it was not Idempotency-Replayed: 'Idempotent-Replayed' (Stripe's), alone. */
  replayedName?: string;
  /** Headers named like a replay header that are neither of the two (a misspelling, e.g. `idempotency-replay: true`), as `name: value` pairs joined by '; ' (names in lower case, at most 200 characters). */
  replayLike?: string;
  /** The Location response header (RFC 9110 §10.2.2: the resource a 201 created), when the server sent one. */
  location?: string;
  /** The response body as text (at most its first 64 KB, see `truncated`). */
  responseBody?: string;
  /** True when the body was longer than the grader reads (64 KB, http.ts MAX_BODY_BYTES): the exchange was ended there. */
  truncated?: boolean;
  /** Why no answer came: a timeout or a refused connection, in one sentence (in the learner's language). */
  error?: string;
  /** What kind of failure `error` is, for code to test (the sentence is translated). */
  errorCode?: 'refused' | 'connect-timeout' | 'timeout' | 'failed';
  /** Wall time of the exchange in ms. */
  ms: number;
  /**
   * Set when the exchange ran out of time (errorCode timeout or connect-timeout) while the
   * server was kept off a CPU or the grader's event loop lagged (sched.ts starvedFor): its
   * missing answer says nothing about the server. Both figures in ms, and the bound that ran out.
   */
  starved?: { serverWaitMs: number; graderLagMs: number; boundMs: number };
}

/** pass: the step is done; fail: the learner has work to do; error: the grader itself could not grade. */
export type Status = 'pass' | 'fail' | 'error';

/** The verdict on one step, everything a reporter needs. */
export interface StepResult {
  id: string;
  slug: string;
  title: string;
  status: Status;
  /** One sentence: what was expected and why it matters (fail/error), or what was shown (pass). */
  message: string;
  /** Why the expectation matters, one sentence (fail only). */
  why?: string;
  /** Extra lines under the message: what the grader found, in order. */
  details: string[];
  /** Advice that does not fail the step (e.g. "mention jitter"). */
  warnings: string[];
  /** The learner's file the step reads, relative to the workspace, when it has one. */
  file?: string;
  /** The exchanges that matter for the verdict (all of them on a pass, the failing ones on a fail). */
  exchanges: Exchange[];
  /** The ledger rows that matter for the verdict, read from the sqlite file. */
  ledger?: LedgerRow[];
  /** The tail of a server's own output, when the server misbehaved. */
  serverOutput?: string;
  /** Which part of the step did not pass: its live check (the server) or its file check; absent on a pass. */
  failedPart?: 'live' | 'file';
  /**
   * True when the step's first server never came up (it exited during start-up or never
   * answered GET /health in time): the learner's server could not start at all, so the
   * run as a whole is reported as an error rather than as a failed step.
   */
  startFailed?: boolean;
  /**
   * True when the step could not be judged because the machine was too busy (an
   * Inconclusive: see grader/gate.ts); its status is then 'error' and the run exits 2.
   * Not the learner's failure: grading it again on a quieter machine gives a verdict.
   */
  inconclusive?: boolean;
  /** The seed of the test data a live step sent (see grader/seed.ts): `--seed N` sends the same again. */
  seed?: number;
  /** Wall time of the step in ms. */
  ms: number;
}

/**
 * How the audit groups requests sent without an Idempotency-Key header into payments:
 * - `each` (the default): every keyless 201 is a payment of its own, as a server that
 *   requires keys (or charges every keyless request) makes them;
 * - `same-answer`: keyless 201s that sent the same body and answered the same payment_id
 *   are one payment, the later ones its replays, as a server that deduplicates keyless
 *   requests by their body makes them. Still strict: each such payment must have exactly
 *   one charge and one ledger row (without a key), so a "replay" that charged again, or
 *   two answers that share a payment_id for two charges, fail all the same.
 * An empty header ('') is never keyless: those 201s are payments of their own either way.
 */
export type KeylessGrouping = 'each' | 'same-answer';
