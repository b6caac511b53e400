/**
 * The json reporter: a results file in the shape of Exercism's test-runner results.json,
 * version 3 (https://exercism.org/docs/building/tooling/test-runners/interface), plus the
 * points: `score` and `max_score` at the top and on every test.
 */
import type { GradeReport } from '../grading.js';
import type { Status } from '../types.js';
import { splitLabel } from '../printed.js';
import { plainBody, stepName } from './plain.js';
import { visibleDeep } from '../visible.js';

/** Exercism's limit on a test's `output`, in characters. */
export const OUTPUT_LIMIT = 500;

/**
 * What the learner's server printed, from a verdict's serverOutput: at most the last
 * OUTPUT_LIMIT characters, nothing added (Exercism shows `output` as the student's own
 * output). The grader's label on each line (`[A] `, printed.ts) is taken out when one
 * server printed all of it, and kept when several did, so that each line still says whose it is.
 */
export function learnerOutput(serverOutput: string): string {
  const lines = serverOutput.trimEnd().split('\n').map(splitLabel);
  const servers = new Set(lines.map((l) => l.label));
  const text = (servers.size === 1 ? lines.map((l) => l.text) : serverOutput.trimEnd().split('\n')).join('\n').trimEnd();
  return text.length <= OUTPUT_LIMIT ? text : text.slice(text.length - OUTPUT_LIMIT);
}

/**
 * results.json's top-level status: the run's own (GradeReport.status), as in every other
 * output (the gradebook, Classroom, JUnit's properties). `error` when nothing could be
 * graded, and also when the server could not start or answered nothing, which is
 * Exercism's rule read for a server (`error` when the tests could not run; "for
 * interpreted languages, a runtime error such as a syntax error"): the file steps may
 * have passed, but no live test ran. `pass` when every step passed, else `fail`.
 */
export function resultsStatus(report: GradeReport): Status {
  if (report.steps.length === 0) return report.status === 'pass' ? 'pass' : 'error';
  return report.status;
}

/** One test (one step) of results.json. */
export interface ResultsTest {
  /** `02 replay: Replay the stored response`. */
  name: string;
  status: Status;
  /** On a fail or error: what was expected, why, what was found and the transcript; null on a pass. */
  message: string | null;
  /** Only what the learner's server printed (no label or note of the grader's), its last 500 characters at most; absent when it printed nothing. */
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
  /** pass: every step passed; error: nothing could be graded, or the server could not start or answered nothing; fail otherwise (see resultsStatus). */
  status: Status;
  /** Why nothing could be graded when status is error; null otherwise (each test carries its own message). */
  message: string | null;
  score: number;
  max_score: number;
  tests: ResultsTest[];
  /** How confined the servers were (sandbox.ts Confinement): on, host-network or off; absent when no server ran. */
  sandbox?: 'on' | 'host-network' | 'off';
  /** Why `sandbox` is less than on: bwrap's complaint when `--sandbox auto` fell back, or `--sandbox off`. */
  sandbox_reason?: string;
}

/** The results object of a report (see ResultsFile). */
export function resultsFile(report: GradeReport): ResultsFile {
  const status = resultsStatus(report);
  return visibleDeep({
    version: 3,
    status,
    message: status === 'error' ? (report.message ?? report.steps[0]?.result.message ?? 'The grader could not grade this workspace.') : null,
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
      const output = result.serverOutput ? learnerOutput(result.serverOutput) : '';
      if (output !== '') test.output = output;
      return test;
    }),
    ...(report.sandbox ? { sandbox: report.sandbox.confinement } : {}),
    ...(report.sandbox?.reason && report.sandbox.confinement !== 'on' ? { sandbox_reason: report.sandbox.reason } : {}),
  } satisfies ResultsFile);
}

/** The json reporter: results.json as text (2-space indented, ending in a newline). */
export function formatJson(report: GradeReport): string {
  return JSON.stringify(resultsFile(report), null, 2) + '\n';
}
