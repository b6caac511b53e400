import type { LiveContext } from '../grader/context.js';

/** Where a check may leave advice that does not fail the step. */
export interface Notes {
  /** Advice shown with the verdict, e.g. "mention jitter". */
  warn(message: string): void;
}

/** A check of the learner's file: reads its text, throws CheckFailed, returns what it saw. */
export interface FileCheck {
  /** The file's name in the workspace, e.g. `03-nokey.txt`. */
  name: string;
  /**
   * @param text the file's whole text
   * @returns one sentence saying what the file shows, for the pass verdict
   * @throws CheckFailed when the file does not show what the step asks
   */
  check(text: string, notes: Notes): string;
}

/**
 * One step of the lab: data plus its checks. The engine runs the file check first,
 * then the live check; either may be absent. Texts for learners live in the lab sheet
 * (lab/LAB.en.md), in the section headed by the step id.
 */
export interface Step {
  /** Two digits, '01' to '08'. */
  id: string;
  /** One word, usable on the command line instead of the id: `idem-lab check replay`. */
  slug: string;
  /** A short title for lists. */
  title: string;
  file?: FileCheck;
  /**
   * Grades the learner's server live: starts instances through the context, sends requests,
   * reads the ledger. The engine stops every instance afterwards, pass or fail.
   * @returns one sentence saying what the server did, for the pass verdict
   * @throws CheckFailed when the server does not behave as the step asks
   */
  live?(ctx: LiveContext): Promise<string>;
  /**
   * How long the step takes to grade, relative to one server start and a few requests (1,
   * the default for a live check; 0 without one). The engine starts costly steps first, so
   * grading steps side by side ends sooner; verdicts are reported in step order all the same.
   */
  cost?: number;
  /** Hints from a nudge to the concrete technique, never the solution's code. */
  hints: string[];
}
