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

/**
 * A file a track lays into a learner's workspace. `source` is relative to the lab's
 * folder of bundled files (the command line resolves it there), or an absolute path.
 */
export interface TrackFile {
  /** Where the bundled file is, e.g. `probe.sh`. */
  source: string;
  /** Its name in the workspace, e.g. `probe.sh`. */
  name: string;
  /** Laid with mode 0755 instead of 0644. */
  executable?: boolean;
}

/** A track's sheet: the text a learner reads, one file per language, with a section per step (`## 03 · ...`). */
export interface TrackSheet {
  /** The bundled sheet in a language (`en`, `ko`, `zh`), as TrackFile.source is: e.g. `LAB.en.md`. */
  source(lang: string): string;
  /** Its name in the workspace, e.g. `LAB.md`. */
  name: string;
}

/**
 * A newer version of a workspace file that a track needs around the learner's own part
 * (which the command line knows how to find and keep), for workspaces laid before it.
 */
export interface TrackFrame {
  /** The workspace file, e.g. `server.py`. */
  name: string;
  /** The bundled file with the frame, as TrackFile.source is. */
  source: string;
  /** Matches a text that has the frame already (nothing to renew). */
  current: RegExp;
}

/**
 * A lab's track: its steps in order, and what a workspace following it gets. Every track
 * of a lab is listed once (this lab's: steps/index.ts TRACKS); the command line derives
 * what it lays, reads and asks from these fields and never names a track itself.
 */
export interface Track {
  /** One word, e.g. `basic`; also what `--track` takes. */
  id: string;
  /** Its steps, in id order. */
  steps: readonly Step[];
  /** The track it builds on: that track's files stay laid and its steps should pass first. */
  buildsOn?: Track;
  /** Its sheet, laid after its files. */
  sheet?: TrackSheet;
  /** The files it lays besides the sheet (those of the track it builds on are laid too, first). */
  files?: readonly TrackFile[];
  /** A frame it needs that a workspace laid for an earlier track may lack. */
  frame?: TrackFrame;
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
