/**
 * `npm run bench`: wall-clock medians of whole idem-lab commands as a user runs them,
 * on the fixture workspaces (a chaos run with a fixed seed among them). Timing is
 * measured here, never asserted in a test: these machines are shared and noisy. Runs
 * per command: BENCH_RUNS (default 5); then one `idem-lab grade`
 * of a 20-workspace cohort per --jobs value (bench/cohort.ts).
 *
 * Ratios, each measured within this one run so that the machine's load cancels out:
 * - against a stdlib oracle (bench/oracle.py): each step alone, and the oracle doing the
 *   same amount of work (as many server starts and requests as the step made) with
 *   Python's standard library only; the ratio is what the grader and the check's own
 *   rounds add to what the servers cost.
 * - against a previous commit: with BENCH_BASE=DIR (a built checkout of it, `npm ci &&
 *   npm run build` there), the learner's waits (`idem-lab check` of the reference, of one
 *   step 02, 05, 06, and of the advanced track) run alternately with that checkout's CLI
 *   and this one's, and the ratio of the medians is printed (below 1: faster now).
 */
import { execa } from 'execa';
import { CLI, fixtureWorkspace } from '../test/support.js';
import { benchCohort, formatCohortBench } from './cohort.js';
import { grade } from '../grader/engine.js';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_COMMAND, resolveInterpreter, serversStarted } from '../grader/server.js';
import { requestsSent } from '../grader/http.js';
import { ADVANCED_STEPS, STEPS } from '../steps/index.js';
import type { Step } from '../grader/track.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);

/** A timed command: its label, its arguments, and the exit code it must end with. */
interface Case {
  label: string;
  args: string[];
  cwd?: string;
  exitCode: number;
}

/** How many runs ended inconclusive (exit 2 where 0 was expected: a step the loaded machine could not judge); printed at the end. */
let inconclusive = 0;

/** Whether a run ended as `c` expects; an inconclusive check (exit 2 for an expected 0) is counted and timed all the same. */
function exitedAsExpected(c: Case, exitCode: number | undefined): boolean {
  if (exitCode === c.exitCode) return true;
  if (c.exitCode === 0 && exitCode === 2 && c.args[0] === 'check') {
    inconclusive++;
    return true;
  }
  return false;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Runs a case RUNS times after one warm-up and returns the wall times in ms.
 * @throws Error when a run ends with another exit code than expected
 */
async function time(c: Case): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i <= RUNS; i++) {
    const started = performance.now();
    const result = await execa('node', [CLI, ...c.args], { cwd: c.cwd, reject: false, env: { NO_COLOR: '1' } });
    const ms = performance.now() - started;
    if (!exitedAsExpected(c, result.exitCode)) throw new Error(`${c.label}: exit ${result.exitCode}, expected ${c.exitCode}\n${result.stdout}\n${result.stderr}`);
    if (i > 0) times.push(ms);
  }
  return times;
}

/** The stdlib oracle's script (bench/oracle.py, beside this file's source). */
const ORACLE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'oracle.py');

/** The oracle's wall time in ms for `starts` server starts and `requests` POST /pay requests on `workspace`'s server.py. */
async function oracleMs(workspace: string, starts: number, requests: number): Promise<number> {
  const { stdout } = await execa('python3', [ORACLE, path.join(workspace, 'server.py'), String(starts), String(requests)]);
  return Number(stdout.trim());
}

/**
 * Each of `steps` graded alone on `workspace`, RUNS times, beside the stdlib oracle doing
 * the same number of server starts and requests:
 * `05 race  1523 ms (min …, max …)  11 starts, 140 requests  oracle 900 ms  1.69×`.
 */
async function stepTimes(workspace: string, steps: readonly Step[]): Promise<string[]> {
  const command = await resolveInterpreter(DEFAULT_COMMAND, workspace);
  const lines: string[] = [];
  for (const step of steps) {
    const times: number[] = [];
    const oracle: number[] = [];
    let work = { starts: 0, requests: 0 };
    for (let i = 0; i < RUNS; i++) {
      const before = { starts: serversStarted(), requests: requestsSent() };
      const [result] = await grade({ workspace, steps: [step], command });
      if (result.inconclusive) inconclusive++;
      else if (result.status !== 'pass') throw new Error(`step ${step.id} of the reference did not pass: ${result.message}`);
      times.push(result.ms);
      work = { starts: serversStarted() - before.starts, requests: requestsSent() - before.requests };
      if (work.starts > 0) oracle.push(await oracleMs(workspace, work.starts, work.requests));
    }
    const versus = oracle.length ? `   ${work.starts} starts, ${work.requests} requests   oracle ${median(oracle).toFixed(0)} ms   ${(median(times) / median(oracle)).toFixed(2)}×` : '   (file step)';
    lines.push(`${`${step.id} ${step.slug}`.padEnd(40)} ${median(times).toFixed(0).padStart(6)} ms   (min ${Math.min(...times)}, max ${Math.max(...times)})${versus}`);
  }
  return lines;
}

/**
 * The learner's waits run alternately with the CLI of a built checkout at `base` and with
 * this one's, RUNS times each: a line per case with both medians and their ratio.
 */
async function versusBase(base: string, cases: Case[]): Promise<string[]> {
  const baseCli = path.join(base, 'dist', 'bin', 'idem-lab.js');
  const lines: string[] = [];
  for (const c of cases) {
    const times = { base: [] as number[], now: [] as number[] };
    for (let i = 0; i <= RUNS; i++) {
      const order: Array<['base' | 'now', string]> = i % 2 ? [['now', CLI], ['base', baseCli]] : [['base', baseCli], ['now', CLI]];
      for (const [which, cli] of order) {
        const started = performance.now();
        const result = await execa('node', [cli, ...c.args], { cwd: c.cwd, reject: false, env: { NO_COLOR: '1' } });
        const ms = performance.now() - started;
        if (!exitedAsExpected(c, result.exitCode)) throw new Error(`${c.label} (${which}): exit ${result.exitCode}, expected ${c.exitCode}\n${result.stdout}\n${result.stderr}`);
        if (i > 0) times[which].push(ms);
      }
    }
    const [b, n] = [median(times.base), median(times.now)];
    lines.push(`${c.label.padEnd(48)} base ${b.toFixed(0).padStart(6)} ms   now ${n.toFixed(0).padStart(6)} ms   ${(n / b).toFixed(2)}×`);
  }
  return lines;
}

const reference = fixtureWorkspace('reference');
const starter = fixtureWorkspace('starter');
const advanced = fixtureWorkspace('advanced/reference');
const advancedIds = ADVANCED_STEPS.map((s) => s.id);
try {
  const cases: Case[] = [
    { label: 'idem-lab --help', args: ['--help'], exitCode: 0 },
    { label: 'idem-lab check (reference, all 8 steps pass)', args: ['check'], cwd: reference.dir, exitCode: 0 },
    { label: 'idem-lab check (starter, 02-06 fail)', args: ['check'], cwd: starter.dir, exitCode: 1 },
    { label: `idem-lab check ${advancedIds[0]}-${advancedIds[advancedIds.length - 1]} (advanced reference)`, args: ['check', ...advancedIds], cwd: advanced.dir, exitCode: 0 },
    { label: 'idem-lab chaos (reference, seed 42, 20 payments)', args: ['chaos', '--seed', '42'], cwd: reference.dir, exitCode: 0 },
  ];
  console.log(`median wall time of ${RUNS} runs each (after one warm-up), ${new Date().toISOString()}`);
  for (const c of cases) {
    const times = await time(c);
    console.log(`${c.label.padEnd(48)} ${median(times).toFixed(0).padStart(6)} ms   (min ${Math.min(...times).toFixed(0)}, max ${Math.max(...times).toFixed(0)})`);
  }
  console.log(`\neach step of the reference alone, in process (median of ${RUNS} runs)`);
  for (const line of await stepTimes(reference.dir, STEPS)) console.log(line);
  console.log(`\neach advanced step of the advanced reference alone, in process (median of ${RUNS} runs)`);
  for (const line of await stepTimes(advanced.dir, ADVANCED_STEPS)) console.log(line);
  if (process.env.BENCH_BASE) {
    console.log(`\nagainst ${process.env.BENCH_BASE}, alternately, median of ${RUNS} runs each (a ratio below 1: faster now)`);
    const waits: Case[] = [
      { label: 'idem-lab check (reference, 8 steps)', args: ['check'], cwd: reference.dir, exitCode: 0 },
      ...['02', '05', '06'].map((id) => ({ label: `idem-lab check ${id} (reference, one step: the watch loop's wait)`, args: ['check', id], cwd: reference.dir, exitCode: 0 })),
      { label: `idem-lab check ${advancedIds[0]}-${advancedIds[advancedIds.length - 1]} (advanced reference)`, args: ['check', ...advancedIds], cwd: advanced.dir, exitCode: 0 },
    ];
    for (const line of await versusBase(process.env.BENCH_BASE, waits)) console.log(line);
  }
  console.log(`\ncohort grading, one run per --jobs value (BENCH_COHORT=0 skips it)`);
  if (process.env.BENCH_COHORT !== '0') for (const line of formatCohortBench(await benchCohort())) console.log(line);
  if (inconclusive > 0) console.log(`\n${inconclusive} check run(s) ended inconclusive (exit 2: the machine was too busy to judge a step); their times are counted`);
} finally {
  reference.remove();
  advanced.remove();
  starter.remove();
}
