import { Inconclusive, Starved } from './gate.js';
import { runPool } from './pool.js';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { language, t } from '../i18n/index.js';
import path from 'node:path';
import { LiveContext } from './context.js';
import { atExit } from './cleanup.js';
import { auditPayments } from './audit.js';
import { randomSeed, type Seed } from './seed.js';
import { limits, type Limits } from './limits.js';
import { CheckFailed, ServerStartFailed } from './failure.js';
import { MAX_BODY_BYTES } from './http.js';
import type { ServerCommand } from './server.js';
import type { Exchange, LedgerRow, StepResult } from './types.js';
import type { Step } from './track.js';
import { FileRefused, MAX_ANSWER_BYTES, readInside, type FileKind } from './safe-read.js';
import { markRun, sweepStaleRuns } from './stale.js';

/**
 * Reads a step's answer file: a regular file inside the workspace, at most
 * MAX_ANSWER_BYTES, never a FIFO, device, directory or a link out of the workspace.
 * @throws CheckFailed saying which and why, the file unread
 */
async function readAnswer(workspace: string, name: string, stepId: string): Promise<string> {
  try {
    return await readInside(workspace, name);
  } catch (err) {
    if (!(err instanceof FileRefused)) throw err;
    const why = t('check.fileRefused.why');
    switch (err.kind) {
      case 'missing':
        throw new CheckFailed(t('check.fileMissing', { file: name, workspace }), t('check.fileMissing.why', { id: stepId }));
      case 'outside':
        throw new CheckFailed(t('check.fileOutside', { file: name, target: err.detail }), why);
      case 'not-regular':
        throw new CheckFailed(t('check.fileNotRegular', { file: name, kind: t(`file.kind.${err.detail as FileKind}`) }), why);
      case 'too-large':
        throw new CheckFailed(t('check.fileTooLarge', { file: name, bytes: err.detail, max: MAX_ANSWER_BYTES }), why);
      default:
        throw new CheckFailed(t('check.fileUnreadable', { file: name, error: err.detail }), t('check.fileUnreadable.why'));
    }
  }
}

/** What to grade. */
export interface GradeOptions {
  /** The learner's workspace (absolute path), holding server.py and the step files. */
  workspace: string;
  /** The steps to grade, in order. */
  steps: readonly Step[];
  /** How to start the learner's server; `python3 server.py` when absent. */
  command?: ServerCommand;
  /** How many steps to grade at once (default DEFAULT_STEP_CONCURRENCY); 1 grades one after another. */
  concurrency?: number;
  /** Called with each verdict, in step order, as soon as it and those before it are known. */
  onResult?(result: StepResult): void;
  /**
   * When a step's server could not start at all (see StepResult.startFailed), fail the
   * live checks not yet begun with the same verdict instead of trying to start it again. Bounds
   * the time a broken repository costs (a server that never listens costs the start time
   * limit once, not once per step); used by cohort grading. Default false: every live
   * check tries for itself.
   */
  stopAfterStartFailure?: boolean;
  /**
   * Cuts grading short when aborted (e.g. a per-workspace time limit): the running live
   * check's servers are stopped at once, and that step and every later live step get
   * status `error` with the abort reason (an Error's message, or the reason's text).
   * File-only steps are still graded: they cannot hang.
   */
  signal?: AbortSignal;
  /**
   * The seed of the keys, users and amounts the live checks send (see seed.ts); a new
   * random one when absent. Every verdict carries it, so a run can be replayed exactly.
   */
  seed?: Seed;
  /**
   * The run's time limits, in ms (a server's start, a request's answer), read once by the
   * caller (RunSettings.limits); default: the environment's, read once when grading begins.
   */
  limits?: Limits;
}

/** How many bytes a new temporary folder must take before a check uses it: room for the check's sqlite file and statement. */
const TMP_ROOM_BYTES = 256 * 1024;

/**
 * Makes a temporary folder for one check under os.tmpdir() (TMPDIR) and proves it can
 * hold files by writing and removing 256 KB, so a full or read-only temporary folder is
 * the grader's error, not a server that "fails to start" (a failed step of the learner's).
 * @returns the folder's path
 * @throws Error saying the grader could not use its temporary folder (check.tmpUnusable);
 *   nothing is left behind then
 */
export function makeGraderTempDir(prefix: string): string {
  const parent = os.tmpdir();
  let dir: string | undefined;
  try {
    dir = fs.mkdtempSync(path.join(parent, prefix));
    const probe = path.join(dir, 'room');
    fs.writeFileSync(probe, Buffer.alloc(TMP_ROOM_BYTES));
    fs.rmSync(probe);
    return dir;
  } catch (err) {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(t('check.tmpUnusable', { dir: parent, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message }));
  }
}

/** How many of a failing check's exchanges to show when the check did not pick them. */
const DEFAULT_EXCHANGES_SHOWN = 6;

function baseResult(step: Step): StepResult {
  const result: StepResult = { id: step.id, slug: step.slug, title: step.title, status: 'pass', message: '', details: [], warnings: [], exchanges: [], ms: 0 };
  if (step.file) result.file = step.file.name;
  return result;
}

/**
 * The ledger rows charged under the keys of the shown exchanges, read from the database
 * they went to; undefined when no exchange carried a key or the database cannot be read
 * (the failure then speaks for itself).
 */
function ledgerInvolved(ctx: LiveContext, exchanges: Exchange[]): LedgerRow[] | undefined {
  const keys = new Set(exchanges.map((e) => e.key).filter((k): k is string => k !== undefined && k !== ''));
  if (keys.size === 0) return undefined;
  // The database the first shown exchange went to (a check's instances may have databases of their own).
  const db = ctx.databases().find((d) => exchanges.length > 0 && d.exchanges.includes(exchanges[0]));
  try {
    return ctx.ledger(db).filter((row) => row.idempotency_key !== null && keys.has(row.idempotency_key));
  } catch {
    return undefined;
  }
}

/** At most this many exchanges are shown for one failure. */
const MAX_EXCHANGES_SHOWN = 12;

/**
 * The exchanges a check attached (`shown`), with what was sent from the first request with
 * one of their idempotency keys up to the last of them, in the order sent (`all`, every
 * exchange of the step): a failed replay is shown with the request it repeats and any
 * payment made in between, the losers of a race with its winner; only those sent to servers
 * on the databases of the attached ones (`databases`: each database with the exchanges sent
 * to its servers, LiveContext.databases()), so a part run beside on a database of its own
 * (06's slow split on D and E) is left out. At most MAX_EXCHANGES_SHOWN: then the first two
 * and the attached.
 */
export function withTheirHistory(shown: Exchange[], all: readonly Exchange[], databases: ReadonlyArray<{ exchanges: readonly Exchange[] }>): Exchange[] {
  const keys = new Set(shown.map((e) => e.key).filter((k): k is string => k !== undefined && k !== ''));
  const first = all.findIndex((e) => shown.includes(e) || (e.key !== undefined && keys.has(e.key)));
  const last = Math.max(...shown.map((e) => all.indexOf(e)));
  if (first < 0 || last < first) return shown;
  const theirs = databases.filter((d) => shown.some((e) => d.exchanges.includes(e)));
  const story = all.slice(first, last + 1).filter((e) => shown.includes(e) || theirs.some((d) => d.exchanges.includes(e)));
  return story.length > MAX_EXCHANGES_SHOWN ? [...story.slice(0, 2), ...shown.filter((e) => !story.slice(0, 2).includes(e))].slice(0, MAX_EXCHANGES_SHOWN) : story;
}

/** The verdicts that ended on a start or request bound run out while starved (gate.ts Starved): graded again by grade(). */
const starvedResults = new WeakSet<StepResult>();

/**
 * How many times a step is graded in all while each try ends with a bound run out while the
 * machine starved the server or the grader (gate.ts Starved), before it is reported
 * inconclusive (exit 2). Each try uses the run's seed: the same keys, bodies and order.
 */
export const STARVED_STEP_TRIES = 3;

function applyFailure(result: StepResult, err: unknown, ctx: LiveContext | undefined): void {
  if (err instanceof CheckFailed) {
    result.status = 'fail';
    result.message = err.message;
    result.why = err.why;
    result.details.push(...(err.evidence.details ?? []));
    result.exchanges = err.evidence.exchanges ? (ctx ? withTheirHistory(err.evidence.exchanges, ctx.exchanges, ctx.databases()) : err.evidence.exchanges) : (ctx?.exchanges.slice(-DEFAULT_EXCHANGES_SHOWN) ?? []);
    if (err.evidence.ledger) result.ledger = err.evidence.ledger;
    else if (ctx) {
      const rows = ledgerInvolved(ctx, result.exchanges);
      if (rows) result.ledger = rows;
    }
    // The output of the servers the shown exchanges went to: a step with several servers shows the one at fault.
    const output = err.evidence.serverOutput ?? ctx?.serverOutput([...new Set(result.exchanges.map((e) => e.server))]);
    if (output) result.serverOutput = output;
    if (err instanceof ServerStartFailed && ctx !== undefined && ctx.startedCount === 0) result.startFailed = true;
  } else if (err instanceof Inconclusive) {
    // Not the learner's failure and not the grader's bug: the machine was too busy to tell (exit 2).
    result.status = 'error';
    result.inconclusive = true;
    if (err instanceof Starved) starvedResults.add(result);
    result.message = err.message;
    if (ctx) result.exchanges = ctx.exchanges.slice(-DEFAULT_EXCHANGES_SHOWN);
  } else {
    result.status = 'error';
    result.message = t('check.graderError', { error: (err as Error).message ?? String(err) });
    if (ctx) result.exchanges = ctx.exchanges.slice(-DEFAULT_EXCHANGES_SHOWN);
  }
}

/** The failure of a check in which a response was longer than the grader reads, or undefined. */
function tooLong(ctx: LiveContext): CheckFailed | undefined {
  const long = ctx.exchanges.find((e) => e.truncated);
  if (!long) return undefined;
  return new CheckFailed(t('check.bodyTooLong', { request: `${long.method} ${long.path}`, server: long.server, kb: MAX_BODY_BYTES / 1024 }), t('check.bodyTooLong.why'), { exchanges: [long] });
}

/** The sentence an abort signal's reason gives. */
function abortReason(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : String(reason ?? 'grading was cancelled');
}

/** Turns a verdict into "stopped": status error with the abort reason, evidence kept. */
function markStopped(result: StepResult, signal: AbortSignal): void {
  result.status = 'error';
  result.message = `Grading was stopped before this step finished: ${abortReason(signal)}`;
  delete result.why;
  delete result.startFailed;
}

async function gradeStep(step: Step, options: GradeOptions & { seed: Seed; limits: Limits }): Promise<StepResult> {
  const started = performance.now();
  const result = baseResult(step);
  if (step.live) result.seed = options.seed;
  const said: string[] = [];
  let ctx: LiveContext | undefined;
  let tmpDir: string | undefined;
  let phase: 'live' | 'file' = 'live';
  let forgetTmpDir: (() => void) | undefined;
  const { signal } = options;
  // Only a live check can hang; a file check after an abort is still graded (it is instant).
  let cut = false;
  const onAbort = () => {
    if (phase !== 'live' || !step.live) return;
    cut = true;
    void ctx?.abort(signal ? abortReason(signal) : 'grading was cancelled');
  };
  signal?.addEventListener('abort', onAbort);
  try {
    if (signal?.aborted && step.live) {
      cut = true;
      throw new Error(abortReason(signal));
    }
    if (step.live) {
      // A neutral name: nothing in the server's paths tells a grader's run from the learner's.
      tmpDir = makeGraderTempDir('lab-');
      const dir = tmpDir;
      forgetTmpDir = atExit(() => fs.rmSync(dir, { recursive: true, force: true }));
      markRun(dir);
      // The servers get a folder inside the marked one: in a sandbox they see only theirs,
      // so the grader's mark of the run (stale.ts) is not a sign of being graded.
      const scratch = path.join(dir, crypto.randomBytes(4).toString('hex'));
      fs.mkdirSync(scratch);
      ctx = new LiveContext(options.workspace, scratch, step.id, options.command, options.seed, options.limits);
      said.push(await step.live(ctx));
      const long = ctx.overrun ?? tooLong(ctx);
      if (long) throw long;
      // Every live check ends with the money and the whole ledger against every request it
      // sent, once the servers are stopped (so no charge is still on its way).
      await ctx.stopAll();
      auditPayments(ctx);
      result.exchanges = ctx.exchanges;
    }
    if (step.file) {
      phase = 'file';
      const text = await readAnswer(options.workspace, step.file.name, step.id);
      said.push(step.file.check(text, { warn: (m) => result.warnings.push(m) }));
    }
    result.message = said.join(language() === 'zh' ? '' : ' ');
  } catch (err) {
    // Servers stopped for writing past the disk bound, or an endless body, explain whatever failed after it.
    applyFailure(result, (phase === 'live' && ctx && (ctx.overrun ?? tooLong(ctx))) || err, phase === 'live' ? ctx : undefined);
    result.failedPart = phase;
    if (phase === 'file' && said.length > 0) result.details.unshift(t('check.liveFirst', { said: said[0] }));
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (ctx) {
      // abort, not stopAll: a server of this check still starting (a start the check did
      // not wait for, once a part failed) is stopped as soon as it is up, not left running.
      await ctx.abort('the check is over');
      result.warnings.push(...ctx.warnings);
      for (const left of ctx.leftRunning()) result.warnings.push(t('check.leftRunning', left));
    }
    if (tmpDir) fs.rmSync(tmpDir, { recursive: true, force: true });
    forgetTmpDir?.();
  }
  if (cut && signal) markStopped(result, signal);
  result.ms = Math.round(performance.now() - started);
  return result;
}

/** How many steps are graded at once by default: live checks wait mostly on the network and on Python starting. */
export const DEFAULT_STEP_CONCURRENCY = 3;

/**
 * The verdict on a live step not tried because the server could not start in another
 * step: the same failure, said to come from that step.
 */
function notTriedAgain(step: Step, earlier: StepResult): StepResult {
  const result = baseResult(step);
  result.status = 'fail';
  result.message = earlier.message;
  if (earlier.why) result.why = earlier.why;
  result.details = [`Not started again for this step: the server could not start in step ${earlier.id}.`];
  if (earlier.serverOutput) result.serverOutput = earlier.serverOutput;
  result.failedPart = 'live';
  result.startFailed = true;
  return result;
}

/**
 * Grades the steps, up to `concurrency` at a time (default 3), each with its own servers,
 * ports and temporary database, and returns one verdict per step in the order given;
 * `onResult` is called in that order too. A step's live check runs before its file
 * check: the server is fixed first, then its output is pasted into the file.
 * Never throws for a learner's mistake: a broken server or a missing file is a failed
 * step. Every server is stopped before return.
 * @throws Error when `limits` is not given and a limit variable of the environment is bad (limits.ts)
 */
export async function grade(given: GradeOptions): Promise<StepResult[]> {
  const options = { ...given, seed: given.seed ?? randomSeed(), limits: given.limits ?? limits() };
  if (options.steps.some((s) => s.live)) sweepStaleRuns();
  const concurrency = Math.max(1, options.concurrency ?? DEFAULT_STEP_CONCURRENCY);
  const pending = options.steps.map(() => {
    let resolve!: (result: StepResult) => void;
    const promise = new Promise<StepResult>((r) => (resolve = r));
    return { promise, resolve };
  });
  // The costliest steps start first (see Step.cost); `pending` keeps the reporting order.
  const costOf = (step: Step) => step.cost ?? (step.live ? 1 : 0);
  const order = options.steps.map((_, i) => i).sort((a, b) => costOf(options.steps[b]) - costOf(options.steps[a]));
  let notStarted: StepResult | undefined;
  const workers = runPool(
    options.steps.length,
    concurrency,
    async (i) => {
      const step = options.steps[i];
      let result = notStarted && step.live ? notTriedAgain(step, notStarted) : await gradeStep(step, options);
      for (let tries = 1; starvedResults.has(result) && tries < STARVED_STEP_TRIES && !options.signal?.aborted; tries++) result = await gradeStep(step, options);
      if (options.stopAfterStartFailure && result.startFailed && !notStarted) notStarted = result;
      pending[i].resolve(result);
    },
    { order },
  );
  const results: StepResult[] = [];
  for (const { promise } of pending) {
    const result = await promise;
    results.push(result);
    options.onResult?.(result);
  }
  await workers;
  return results;
}
