/**
 * `npm run bench`: wall-clock medians of whole idem-lab commands as a user runs them,
 * on the fixture workspaces (a chaos run with a fixed seed among them). Timing is
 * measured here, never asserted in a test: these machines are shared and noisy. Runs
 * per command: BENCH_RUNS (default 5); then one `idem-lab grade`
 * of a 20-workspace cohort per --jobs value (bench/cohort.ts).
 */
import { execa } from 'execa';
import { CLI, fixtureWorkspace } from '../test/support.js';
import { benchCohort, formatCohortBench } from './cohort.js';
import { grade } from '../grader/engine.js';
import { DEFAULT_COMMAND, resolveInterpreter } from '../grader/server.js';
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
    if (result.exitCode !== c.exitCode) throw new Error(`${c.label}: exit ${result.exitCode}, expected ${c.exitCode}\n${result.stdout}\n${result.stderr}`);
    if (i > 0) times.push(ms);
  }
  return times;
}

/** Each of `steps` graded alone on `workspace`, RUNS times: `05 race  1523 ms (min …, max …)`. */
async function stepTimes(workspace: string, steps: readonly Step[]): Promise<string[]> {
  const command = await resolveInterpreter(DEFAULT_COMMAND, workspace);
  const lines: string[] = [];
  for (const step of steps) {
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const [result] = await grade({ workspace, steps: [step], command });
      if (result.status !== 'pass') throw new Error(`step ${step.id} of the reference did not pass: ${result.message}`);
      times.push(result.ms);
    }
    lines.push(`${`${step.id} ${step.slug}`.padEnd(48)} ${median(times).toFixed(0).padStart(6)} ms   (min ${Math.min(...times)}, max ${Math.max(...times)})`);
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
  console.log(`\ncohort grading, one run per --jobs value (BENCH_COHORT=0 skips it)`);
  if (process.env.BENCH_COHORT !== '0') for (const line of formatCohortBench(await benchCohort())) console.log(line);
} finally {
  reference.remove();
  advanced.remove();
  starter.remove();
}
