/**
 * `idem-lab chaos`: the learner's server behind a lossy network, paid by a client that
 * retries with exponential backoff and full jitter under one Idempotency-Key per payment
 * (grader/chaos/). It ends with a table (payments, requests, retries, the provider's
 * charges, ledger rows, duplicates) and a chart of the waits before retries.
 *
 * Exit codes: 0 when every payment was charged exactly once, with one ledger row; with
 * --no-key, 0 when no payment was charged more than once (a server that refuses keyless
 * payments passes: the client is told at once and no money moves). 1 when a payment was
 * charged twice or more, answered 2xx without a charge, refused, given up on, or the
 * ledger does not match; also when the server does not start (as `check`). 2 for bad
 * usage (an option out of range, no workspace, no interpreter, a sandbox required but
 * not starting).
 */
import type { ChalkInstance } from 'chalk';
import { t } from '../i18n/index.js';
import { CheckFailed, SetupError } from '../grader/failure.js';
import { installExitHooks } from '../grader/cleanup.js';
import { randomSeed } from '../grader/seed.js';
import { commandExists, resolveInterpreter } from '../grader/server.js';
import { colourFor } from '../grader/reporters/human.js';
import { DEFAULT_BACKOFF } from '../grader/chaos/backoff.js';
import { DEFAULT_FAULTS } from '../grader/chaos/faults.js';
import { CHAOS_DEFAULTS, runChaos, type ChaosResult } from '../grader/chaos/run.js';
import { exactlyOnce } from '../grader/chaos/tally.js';
import { chartCharset, formatTally, formatWaits } from '../grader/chaos/render.js';
import { openWorkspace } from '../lab/workspace.js';
import { workspaceDir } from '../lab/paths.js';
import { runLimitsOf, sandboxFor, sandboxWarning, seedOption } from './shared/check.js';

/** The options of `idem-lab chaos`, as commander gives them (text, unparsed). */
export interface ChaosCommandOptions {
  dir?: string;
  /** --payments N: how many payments, a whole number from 1 to MAX_PAYMENTS (default 20). */
  payments?: string;
  /** --loss P: the share of attempts lost, from 0 to below 1 (default 0.3). */
  loss?: string;
  /** --seed S: a whole number from 0 to 2^32 - 1 (default: IDEM_LAB_SEED, else a new one). */
  seed?: string;
  /** false with --no-key: no Idempotency-Key header at all. */
  key?: boolean;
  /** --timeout SECONDS: the client's whole time limit (default 15). */
  timeout?: string;
  /** --sandbox auto|required|off, as for `check` (default auto). */
  sandbox?: string;
  /** --ascii: draw the charts with ASCII characters only (see render.ts chartCharset). */
  ascii?: boolean;
}

/** How many of the payments charged more than once the verdict lists by key. */
const DOUBLED_SHOWN = 10;

/** The most payments one run makes. */
export const MAX_PAYMENTS = 500;
/** The longest --timeout, s. */
export const MAX_TIMEOUT_S = 600;

/** Exit codes of `idem-lab chaos`. */
export const CHAOS_EXIT = { once: 0, broken: 1, usage: 2 } as const;

/** The settings the options ask for, checked. @throws SetupError naming the option and what it takes */
export function chaosSettings(options: ChaosCommandOptions): { payments: number; loss: number; seed: number; keyed: boolean; deadlineMs: number } {
  const payments = options.payments ?? '20';
  if (!/^\d+$/.test(payments.trim()) || Number(payments) < 1 || Number(payments) > MAX_PAYMENTS) {
    throw new SetupError(t('chaos.badPayments', { value: payments, max: MAX_PAYMENTS }));
  }
  const lossText = options.loss ?? String(DEFAULT_FAULTS.loss);
  const loss = Number(lossText);
  if (lossText.trim() === '' || !Number.isFinite(loss) || loss < 0 || loss >= 1) throw new SetupError(t('chaos.badLoss', { value: lossText }));
  const timeoutText = options.timeout ?? String(CHAOS_DEFAULTS.deadlineMs / 1000);
  const timeout = Number(timeoutText);
  if (timeoutText.trim() === '' || !Number.isFinite(timeout) || timeout <= 0 || timeout > MAX_TIMEOUT_S) {
    throw new SetupError(t('chaos.badTimeout', { value: timeoutText, max: MAX_TIMEOUT_S }));
  }
  return { payments: Number(payments), loss, seed: seedOption(options.seed) ?? randomSeed(), keyed: options.key !== false, deadlineMs: Math.round(timeout * 1000) };
}

/**
 * What a run's numbers say, one sentence each, and whether the run is what it should be
 * (see the exit codes in the module comment).
 */
export function chaosVerdict(result: ChaosResult, keyed: boolean): { ok: boolean; lines: string[] } {
  const { tally } = result;
  const lines: string[] = [];
  const n = tally.payments;
  if (tally.duplicates > 0) {
    lines.push(t(keyed ? 'chaos.verdict.duplicates' : 'chaos.verdict.noKeyDuplicates', { n: tally.duplicates, payments: n }));
    // Which ones: the keys to look up in ./ledger.sh and ./statement.sh.
    lines.push(t('chaos.doubled.heading'));
    for (const d of tally.doubled.slice(0, DOUBLED_SHOWN)) lines.push(`  ${t('chaos.doubled.line', { key: d.key ?? t('chaos.doubled.noKey'), user: d.user, amount: d.amount, n: d.charges })}`);
    if (tally.doubled.length > DOUBLED_SHOWN) lines.push(`  ${t('chaos.doubled.more', { n: tally.doubled.length - DOUBLED_SHOWN })}`);
  }
  if (tally.missing > 0) lines.push(t('chaos.verdict.missing', { n: tally.missing }));
  if (tally.strayCharges > 0 || tally.strayRows > 0) lines.push(t('chaos.verdict.strays', { charges: tally.strayCharges, rows: tally.strayRows }));
  const charged = tally.chargesPerPayment.filter((c) => c > 0).length;
  if (tally.charges !== undefined && tally.rowsPerPayment.some((r, i) => r !== tally.chargesPerPayment[i])) lines.push(t('chaos.verdict.rows', { rows: tally.ledgerRows, charges: tally.charges }));
  if (!keyed) {
    const ok = lines.length === 0;
    if (ok) lines.push(tally.refused === n && charged === 0 ? t('chaos.verdict.noKeyRefused') : t('chaos.verdict.noKeyOnce'));
    return { ok, lines };
  }
  if (tally.refused > 0) lines.push(t('chaos.verdict.refused', { n: tally.refused }));
  if (tally.gaveUp > 0) lines.push(t('chaos.verdict.gaveUp', { n: tally.gaveUp }));
  const ok = exactlyOnce(tally) && lines.length === 0;
  if (ok) lines.push(t('chaos.verdict.once', { payments: n, replays: tally.replays }));
  return { ok, lines };
}

/**
 * `idem-lab chaos`: runs the chaos run on the workspace's server and writes its table,
 * chart and verdict through `write`.
 * @param write where the output goes (default: stdout)
 * @param colour the colours to use (default: stdout's, NO_COLOR honoured)
 * @returns the exit code (CHAOS_EXIT)
 * @throws SetupError for bad options or a workspace that cannot run (exit 2 on the command line)
 */
export async function chaosCommand(options: ChaosCommandOptions, write: (text: string) => void = (text) => void process.stdout.write(text), colour: ChalkInstance = colourFor(process.stdout)): Promise<number> {
  const settings = chaosSettings(options);
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const runLimits = runLimitsOf();
  if (!commandExists(command.file, workspace)) throw new SetupError(t('cli.noInterpreter', { file: command.file }));
  const [choice, resolved] = await Promise.all([sandboxFor(options.sandbox, 'auto'), resolveInterpreter(command, workspace)]);
  const { sandbox } = choice;
  installExitHooks();
  const say = (line = '') => write(`${line}\n`);
  const warning = sandboxWarning(choice);
  if (warning) say(colour.yellow(warning));
  say(t('chaos.heading', { payments: settings.payments, percent: Math.round(settings.loss * 1000) / 10, seed: settings.seed }));
  say(colour.dim(settings.keyed ? t('chaos.keys.each') : t('chaos.keys.none')));
  say(colour.dim(t('chaos.fresh')));
  let result: ChaosResult;
  try {
    result = await runChaos({
      workspace,
      command: { ...resolved, ...(sandbox ? { sandbox } : {}) },
      seed: settings.seed,
      payments: settings.payments,
      keyed: settings.keyed,
      faults: { ...DEFAULT_FAULTS, loss: settings.loss },
      backoff: DEFAULT_BACKOFF,
      deadlineMs: settings.deadlineMs,
      limits: runLimits,
    });
  } catch (err) {
    if (!(err instanceof CheckFailed)) throw err;
    say(colour.red(err.message));
    say(err.why);
    if (err.evidence.serverOutput) say(`${t('chaos.serverOutput')}\n${err.evidence.serverOutput.trimEnd()}`);
    return CHAOS_EXIT.broken;
  }
  say();
  for (const line of formatTally(result.tally)) say(`  ${line}`);
  say();
  for (const line of formatWaits(result.tally.retryWaitsMs, DEFAULT_BACKOFF, chartCharset(options.ascii))) say(line);
  say();
  const verdict = chaosVerdict(result, settings.keyed);
  for (const line of verdict.lines) say(verdict.ok ? colour.green(line) : colour.red(line));
  if (!verdict.ok && settings.keyed && result.tally.duplicates > 0) say(t('chaos.next'));
  const again = [`--seed ${settings.seed}`, `--payments ${settings.payments}`, `--loss ${settings.loss}`, ...(settings.keyed ? [] : ['--no-key'])].join(' ');
  say(colour.dim(t('chaos.again', { args: again, seconds: (result.ms / 1000).toFixed(1) })));
  return verdict.ok ? CHAOS_EXIT.once : CHAOS_EXIT.broken;
}
