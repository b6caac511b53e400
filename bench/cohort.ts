/**
 * Benchmark of cohort grading: the wall time of `idem-lab grade` over a cohort of fixture
 * workspaces (every solution in fixtures/solutions/ in turn, the starter included), once
 * per --jobs value, run as an instructor runs it. Measured, never asserted: these
 * machines are shared and noisy. bench/bench.ts calls benchCohort; run alone with
 * `node dist/bench/cohort.js [SIZE]`.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';
import { execa } from 'execa';
import { buildWorkspace, racySteps, solutionNames } from '../fixtures/build.js';
import { CLI, tempDir } from '../test/support.js';

/** What to measure. */
export interface CohortBenchOptions {
  /** How many workspaces in the cohort (default 20). */
  size?: number;
  /** The --jobs values to time, in order (default [1, 2]). */
  jobs?: number[];
}

/** One timed run of `idem-lab grade`. */
export interface CohortBenchResult {
  jobs: number;
  workspaces: number;
  /** Wall time of the whole command, in ms. */
  ms: number;
  /** ms / workspaces. */
  msPerWorkspace: number;
  /** Rows per status in the gradebook. */
  pass: number;
  fail: number;
  error: number;
}

interface GradebookJson {
  students: Array<{ student: string; status: 'pass' | 'fail' | 'error'; steps: Record<string, { status: string }> }>;
}

/**
 * Builds `size` fixture workspaces in a temporary folder and times `idem-lab grade` over
 * them once per --jobs value. The folder is removed afterwards.
 * @throws Error when grade exits with a code other than 0 (a fixture became an error
 *   row) or when two --jobs values disagree on a verdict
 */
export async function benchCohort(options: CohortBenchOptions = {}): Promise<CohortBenchResult[]> {
  const size = options.size ?? 20;
  const jobsList = options.jobs ?? [1, 2];
  const root = tempDir('idem-lab-bench-cohort-');
  try {
    const names = solutionNames();
    const dirs = Array.from({ length: size }, (_, i) => {
      const name = names[i % names.length];
      return buildWorkspace(path.join(root.dir, `${String(i + 1).padStart(2, '0')}-${name}`), name);
    });
    const results: CohortBenchResult[] = [];
    let first: GradebookJson | undefined;
    for (const jobs of jobsList) {
      const json = path.join(root.dir, `gradebook-${jobs}.json`);
      const started = performance.now();
      const run = await execa('node', [CLI, 'grade', ...dirs, '--jobs', String(jobs), '--json', json], { reject: false, env: { NO_COLOR: '1' } });
      const ms = performance.now() - started;
      if (run.exitCode !== 0) throw new Error(`idem-lab grade --jobs ${jobs}: exit ${run.exitCode}\n${run.stdout}\n${run.stderr}`);
      const book = JSON.parse(fs.readFileSync(json, 'utf8')) as GradebookJson;
      if (first) {
        const steady = (student: GradebookJson['students'][number], i: number) =>
          JSON.stringify(Object.entries(student.steps).filter(([id]) => !racySteps(names[i % names.length]).includes(id)));
        const differ = book.students.filter((s, i) => steady(s, i) !== steady(first!.students[i], i)).map((s) => s.student);
        if (differ.length) throw new Error(`--jobs ${jobs} and --jobs ${jobsList[0]} disagree on ${differ.join(', ')}`);
      }
      first ??= book;
      const count = (status: string) => book.students.filter((s) => s.status === status).length;
      results.push({ jobs, workspaces: size, ms, msPerWorkspace: ms / size, pass: count('pass'), fail: count('fail'), error: count('error') });
    }
    return results;
  } finally {
    root.remove();
  }
}

/** One line per result, in bench.ts's style: `idem-lab grade (20 workspaces, --jobs 2)   41234 ms   (2062 ms per workspace)`. */
export function formatCohortBench(results: CohortBenchResult[]): string[] {
  return results.map((r) => {
    const label = `idem-lab grade (${r.workspaces} workspaces, --jobs ${r.jobs})`;
    return `${label.padEnd(48)} ${r.ms.toFixed(0).padStart(6)} ms   (${r.msPerWorkspace.toFixed(0)} ms per workspace; ${r.pass} pass, ${r.fail} fail, ${r.error} error)`;
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const size = process.argv[2] ? Number(process.argv[2]) : undefined;
  console.log(`cohort grading, one run per --jobs value, ${new Date().toISOString()}`);
  for (const line of formatCohortBench(await benchCohort({ size }))) console.log(line);
}
