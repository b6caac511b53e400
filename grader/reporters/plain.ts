/**
 * Plain-text pieces of a verdict shared by the machine reporters: the same words the
 * human reporter prints, without colour, split into the explanation and the transcript.
 */
import { Chalk } from 'chalk';
import { formatResult } from './human.js';
import type { StepResult } from '../types.js';
import { visible } from '../visible.js';

const PLAIN = new Chalk({ level: 0 });

/** `02 replay: Replay the stored response`: a step's name in every machine report. */
export function stepName(result: Pick<StepResult, 'id' | 'slug' | 'title'>): string {
  return `${result.id} ${result.slug}: ${result.title}`;
}

/**
 * Everything the human reporter prints under a verdict's header line, without colour and
 * without the 4-space indent: the message, why it matters, what was found, what was sent
 * and what came back, the ledger rows, the server's output, notes and the hint pointer.
 * Lines end in '\n' only; learner-controlled text (bodies, server output) is included with its control characters shown as escapes (formatResult, visible.ts).
 */
export function plainBody(result: StepResult): string {
  return formatResult(result, PLAIN)
    .split('\n')
    .slice(1)
    .map((line) => line.replace(/^ {4}/, ''))
    .join('\n');
}

/**
 * Control characters other than tab and newline (ANSI colour codes a server printed, a
 * stray NUL) as visible escapes like `\x1b`, for formats that cannot carry them (XML 1.0,
 * YAML) or readers that would act on them: grader/visible.ts visible().
 */
export const visibleControls = visible;

/** At most `max` characters of `text`, marked when shortened. */
export function truncate(text: string, max: number, marker = '… (truncated)'): string {
  return text.length <= max ? text : text.slice(0, Math.max(0, max - marker.length)) + marker;
}

/** At most `max` characters: the end of `text`, marked at the start when shortened (for logs, whose end matters). */
export function truncateStart(text: string, max: number, marker = '(earlier output cut) …'): string {
  return text.length <= max ? text : marker + text.slice(text.length - Math.max(0, max - marker.length));
}

/** `6 of 8 steps pass`, `1 of 1 step passes`, `0 of 1 step passes`: agreeing with the number of steps. */
export function stepsPass(passed: number, total: number): string {
  return `${passed} of ${total} ${total === 1 ? 'step passes' : 'steps pass'}`;
}
