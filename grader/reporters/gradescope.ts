/**
 * The gradescope reporter: the results.json Gradescope's autograder harness reads from
 * /autograder/results/results.json after run_autograder
 * (https://gradescope-autograders.readthedocs.io/en/latest/specs/): the total `score`, the
 * `execution_time` in whole seconds, an `output` for the whole submission, `visibility`
 * and `stdout_visibility`, and one test per step with its `name`, `number` (the step id),
 * `score`, `max_score`, `status` (`passed` or `failed`), `output` (what was sent and what
 * came back) and `visibility` (the step's, from the grading config: hidden, after the due
 * date, after publishing, or visible).
 */
import { formatPoints, type GradeReport } from '../grading.js';
import { plainBody, stepName, stepsPass } from './plain.js';

/** One test of Gradescope's results.json. */
export interface GradescopeTest {
  name: string;
  /** The step id, e.g. "02": Gradescope sorts and shows tests by it. */
  number: string;
  score: number;
  max_score: number;
  /** Gradescope's two statuses: a step in error (could not be graded) is `failed`, its output says why. */
  status: 'passed' | 'failed';
  output: string;
  visibility: 'visible' | 'hidden' | 'after_due_date' | 'after_published';
}

/** Gradescope's results.json as idem-lab writes it. */
export interface GradescopeResults {
  score: number;
  /** Wall time of the grading in whole seconds. */
  execution_time: number;
  output: string;
  /** Of the whole result: visible (each test keeps its own). */
  visibility: 'visible';
  /** run_autograder's own output (the grader's log), for staff only. */
  stdout_visibility: 'hidden';
  tests: GradescopeTest[];
}

/** The overall line of `output`: `6 of 8 steps pass: 6/8 points.` with the run's status when it is not pass. */
function overall(report: GradeReport): string {
  const passed = report.steps.filter((s) => s.result.status === 'pass').length;
  const steps = stepsPass(passed, report.steps.length);
  const lines = [`idem-lab: ${steps}: ${formatPoints(report.score)}/${formatPoints(report.maxScore)} points. Status: ${report.status}${report.requiredPassed ? '' : ' (a required step did not pass)'}.`];
  if (report.status === 'error' && report.message) lines.push('', report.message);
  return lines.join('\n');
}

/** The results object of a report (see GradescopeResults). */
export function gradescopeResults(report: GradeReport): GradescopeResults {
  return {
    score: report.score,
    execution_time: Math.round(report.steps.reduce((total, s) => total + s.result.ms, 0) / 1000),
    output: overall(report),
    visibility: 'visible',
    stdout_visibility: 'hidden',
    tests: report.steps.map(({ result, points, score, required, visibility }) => ({
      name: `${stepName(result)}${required ? '' : ' (optional)'}`,
      number: result.id,
      score,
      max_score: points,
      status: result.status === 'pass' ? 'passed' : 'failed',
      output: result.status === 'pass' ? result.message : `${result.status === 'error' ? 'Could not be graded: ' : ''}${plainBody(result)}`,
      visibility,
    })),
  };
}

/** The gradescope reporter: results.json as text (2-space indented, ending in a newline). */
export function formatGradescope(report: GradeReport): string {
  return JSON.stringify(gradescopeResults(report), null, 2) + '\n';
}
