/**
 * What the engine grades: a track's steps, passed in by the command line (the engine
 * never imports a lab's steps). A step is data plus its checks; a track is its steps in
 * order. Engine code: no lab specifics.
 */
import type { LiveContext } from './context.js';
import { SetupError } from './failure.js';
import { listOf, t } from '../i18n/index.js';

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
 * One step of a track: data plus its checks. The engine runs the live check first,
 * then the file check; either may be absent. Texts for learners live in the track's sheet
 * (the basic track's: lab/LAB.en.md), in the section headed by the step id.
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

/** A lab's track: its steps, in order (the basic track: steps/basic/index.ts; every track: steps/index.ts). */
export interface Track {
  /** One word, e.g. `basic`. */
  id: string;
  /** Its steps, in id order. */
  steps: readonly Step[];
}

/**
 * Finds steps of `steps` by id ('3', '03') or slug ('nokey'); all of them for an empty list.
 * @returns the steps chosen, each once, in id order
 * @throws SetupError (a usage error: exit 2) naming the unknown selector and listing the known ones
 */
export function selectSteps(steps: readonly Step[], selectors: string[]): Step[] {
  if (selectors.length === 0) return [...steps];
  const chosen: Step[] = [];
  for (const selector of selectors) {
    const wanted = selector.trim().toLowerCase();
    const step = steps.find((s) => s.slug === wanted || s.id === wanted.padStart(2, '0'));
    if (!step) {
      throw new SetupError(t('cli.unknownStep', { step: selector, list: listOf(steps.map((s) => `${s.id} (${s.slug})`)) }));
    }
    if (!chosen.includes(step)) chosen.push(step);
  }
  return chosen.sort((a, b) => a.id.localeCompare(b.id));
}
