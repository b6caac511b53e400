/**
 * The json reporter: a results file in the shape of Exercism's test-runner results.json,
 * version 3 (https://exercism.org/docs/building/tooling/test-runners/interface), plus the
 * points: `score` and `max_score` at the top and on every test.
 */
import type { GradeReport } from '../grading.js';
import type { Status } from '../types.js';
import { plainBody, stepName, truncateStart } from './plain.js';

/** Exercism's limit on a test's `output`, in characters, and its wording when cut. */
export const OUTPUT_LIMIT = 500;
const OUTPUT_TRUNCATED = '(Output was truncated to its last 500 chars.)\n…';

/** One test (one step) of results.json. */
export interface ResultsTest {
  /** `02 replay: Replay the stored response`. */
  name: string;
  status: Status;
  /** On a fail or error: what was expected, why, what was found and the transcript; null on a pass. */
  message: string | null;
  /** What the learner's server printed (its last lines), at most 500 characters (the end kept); absent when it printed nothing relevant. */
  output?: string;
  /** The command that grades this step alone. */
  test_code: string;
  /** The step number, which is the lab sheet's task number (1 to 8). */
  task_id: number;
  /** Points earned: max_score on a pass, 0 otherwise. */
  score: number;
  /** What the step is worth. */
  max_score: number;
  /** Whether a failure of this step fails the run. */
  required: boolean;
}

/** results.json: Exercism's version 3 with `score` and `max_score` added. */
export interface ResultsFile {
  version: 3;
  /** pass: every step passed; fail: one did not; error: the grader could not grade, or the server could not start. */
  status: Status;
  /** Why the run is an error; null otherwise. */
  message: string | null;
  score: number;
  max_score: number;
  tests: ResultsTest[];
}

/** The results object of a report (see ResultsFile). */
export function resultsFile(report: GradeReport): ResultsFile {
  return {
    version: 3,
    status: report.status,
    message: report.status === 'error' ? (report.message ?? 'The grader could not grade this workspace.') : null,
    score: report.score,
    max_score: report.maxScore,
    tests: report.steps.map(({ result, points, score, required }) => {
      const test: ResultsTest = {
        name: stepName(result),
        status: result.status,
        message: result.status === 'pass' ? null : plainBody(result),
        test_code: `idem-lab check ${result.id}`,
        task_id: Number(result.id),
        score,
        max_score: points,
        required,
      };
      if (result.serverOutput) test.output = truncateStart(result.serverOutput.trimEnd(), OUTPUT_LIMIT, OUTPUT_TRUNCATED);
      return test;
    }),
  };
}

/** The json reporter: results.json as text (2-space indented, ending in a newline). */
export function formatJson(report: GradeReport): string {
  return JSON.stringify(resultsFile(report), null, 2) + '\n';
}
