/** Matrix grading that tells a verdict from a machine too busy to give one. */
import { grade, type GradeOptions } from '../../grader/engine.js';
import type { StepResult } from '../../grader/types.js';

/** How many times a step the machine was too busy to judge is graded again, alone. */
export const REGRADES = 2;

/**
 * Grades like `grade(options)`, then grades each step that came back inconclusive (the
 * machine was too busy to judge it: StepResult.inconclusive) again on its own, up to
 * REGRADES times, so that a matrix row compares verdicts, not the load of the moment. A step
 * still inconclusive after that stays an 'error' and fails its row. Never re-grades a
 * verdict: a pass or a fail stands as first given.
 */
export async function gradeSettled(options: GradeOptions): Promise<StepResult[]> {
  const results = await grade(options);
  for (let i = 0; i < results.length; i++) {
    for (let n = 0; n < REGRADES && results[i].inconclusive; n++) {
      const step = options.steps.find((s) => s.id === results[i].id);
      if (!step) break;
      [results[i]] = await grade({ ...options, steps: [step] });
    }
  }
  return results;
}
