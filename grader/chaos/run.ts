/**
 * A whole chaos run, started the way a live check starts its server: the learner's
 * server runs from a copy of the workspace in a temporary folder of its own, on a fresh
 * database and provider's statement (never the learner's lab.db), in the sandbox the
 * caller chose; the client (client.ts) sends its payments through the lossy proxy; then
 * the server is stopped, and the statement and the ledger (read-only, from the sqlite
 * file) are added up against what the client meant to pay (tally.ts).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { LiveContext } from '../context.js';
import { makeGraderTempDir } from '../engine.js';
import { atExit } from '../cleanup.js';
import { markRun } from '../stale.js';
import { TestData, type Seed } from '../seed.js';
import type { ServerCommand } from '../server.js';
import type { Charge } from '../statement.js';
import type { LedgerRow } from '../types.js';
import { DEFAULT_BACKOFF, type BackoffPolicy } from './backoff.js';
import { runPayments, type IntendedPayment, type PaymentRun } from './client.js';
import { DEFAULT_FAULTS, type NetworkFaults } from './faults.js';
import { tallyRun, type ChaosTally } from './tally.js';
import type { Limits } from '../limits.js';

/** What a chaos run needs. Times in ms. */
export interface ChaosSettings {
  /** The learner's workspace (absolute): the server runs from a copy of it. */
  workspace: string;
  /** How the server is started (with its sandbox, if any); `python3 server.py` when absent. */
  command?: ServerCommand;
  seed: Seed;
  /** How many payments to make, once each. */
  payments: number;
  /** Whether each payment sends an Idempotency-Key (the same with every retry); false: no header at all. */
  keyed: boolean;
  faults?: NetworkFaults;
  backoff?: BackoffPolicy;
  /** One attempt's time limit (default 2000). */
  attemptTimeoutMs?: number;
  /** The whole client's time limit, the server's start not included (default 15000). */
  deadlineMs?: number;
  /** Payments under way at once (default 4). */
  concurrency?: number;
  /** The run's time limits, in ms (the server's start); default: the environment's, read now. */
  limits?: Limits;
}

/** What a chaos run found. */
export interface ChaosResult {
  runs: PaymentRun[];
  tally: ChaosTally;
  /** The provider's statement, undefined when the server keeps none. */
  charges: Charge[] | undefined;
  rows: LedgerRow[];
  /** How long the client ran, ms (not part of what the seed decides). */
  ms: number;
}

/** Defaults for the per-attempt timeout, the deadline and the payments at once. */
export const CHAOS_DEFAULTS = { attemptTimeoutMs: 2000, deadlineMs: 15_000, concurrency: 4 } as const;

/**
 * The payments of a run of `seed`: each with a user and an amount of its own (so its
 * charges and rows can be told apart) and, when `keyed`, a key of its own (a UUID), all
 * from the seed (seed.ts, scope `chaos`).
 */
export function intendedPayments(seed: Seed, count: number, keyed: boolean): IntendedPayment[] {
  const data = new TestData(seed, 'chaos');
  return Array.from({ length: count }, () => {
    const body = data.payment();
    return keyed ? { key: data.key(), body } : { body };
  });
}

/**
 * Runs the chaos run. The server is stopped (its process group, or its sandbox) and the
 * temporary folder removed before this returns or throws, and on exit should the process
 * be ended meanwhile (call installExitHooks first for signals).
 * @throws CheckFailed (a ServerStartFailed) when the server does not start; CheckFailed when it ignores IDEM_DB
 */
export async function runChaos(settings: ChaosSettings): Promise<ChaosResult> {
  const tmpDir = makeGraderTempDir('lab-');
  const forget = atExit(() => fs.rmSync(tmpDir, { recursive: true, force: true }));
  markRun(tmpDir);
  // As in a live check: the server's folder is inside the marked one, and sees only its own.
  const scratch = path.join(tmpDir, crypto.randomBytes(4).toString('hex'));
  fs.mkdirSync(scratch);
  const ctx = new LiveContext(settings.workspace, scratch, 'chaos', settings.command, settings.seed, settings.limits);
  try {
    const server = await ctx.startServer();
    const started = performance.now();
    const runs = await runPayments({
      target: { label: server.label, port: server.port, socketPath: server.socketPath },
      seed: settings.seed,
      payments: intendedPayments(settings.seed, settings.payments, settings.keyed),
      faults: settings.faults ?? DEFAULT_FAULTS,
      backoff: settings.backoff ?? DEFAULT_BACKOFF,
      attemptTimeoutMs: settings.attemptTimeoutMs ?? CHAOS_DEFAULTS.attemptTimeoutMs,
      deadlineMs: settings.deadlineMs ?? CHAOS_DEFAULTS.deadlineMs,
      concurrency: settings.concurrency ?? CHAOS_DEFAULTS.concurrency,
    });
    const ms = Math.round(performance.now() - started);
    // Stopped first, so that no charge is still on its way when the statement is read.
    await ctx.stopAll();
    const rows = ctx.ledger();
    // The statement is made by the first charge: none at all and no ledger row is no charge, not a server that keeps no statement.
    const charges = ctx.charges() ?? (rows.length === 0 ? [] : undefined);
    return { runs, tally: tallyRun(runs, charges, rows), charges, rows, ms };
  } finally {
    await ctx.stopAll();
    fs.rmSync(tmpDir, { recursive: true, force: true });
    forget();
  }
}
