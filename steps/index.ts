import { step as duplicate } from './01-duplicate.js';
import { step as replay } from './02-replay.js';
import { step as nokey } from './03-nokey.js';
import { step as conflict } from './04-conflict.js';
import { step as race } from './05-race.js';
import { step as persist } from './06-persist.js';
import { step as retry } from './07-retry.js';
import { step as notes } from './08-notes.js';
import { SetupError } from '../grader/failure.js';
import type { Step } from './types.js';
import { t } from '../i18n/index.js';

/** Every step of the lab, in order. */
export const STEPS: readonly Step[] = [duplicate, replay, nokey, conflict, race, persist, retry, notes];

/**
 * Finds steps by id ('3', '03') or slug ('nokey'); all steps for an empty list.
 * @throws SetupError (a usage error: exit 2) naming the unknown selector and listing the known ones
 */
export function selectSteps(selectors: string[]): Step[] {
  if (selectors.length === 0) return [...STEPS];
  const chosen: Step[] = [];
  for (const selector of selectors) {
    const wanted = selector.trim().toLowerCase();
    const step = STEPS.find((s) => s.slug === wanted || s.id === wanted.padStart(2, '0'));
    if (!step) {
      throw new SetupError(t('cli.unknownStep', { step: selector, list: STEPS.map((s) => `${s.id} (${s.slug})`).join(', ') }));
    }
    if (!chosen.includes(step)) chosen.push(step);
  }
  return chosen.sort((a, b) => a.id.localeCompare(b.id));
}
