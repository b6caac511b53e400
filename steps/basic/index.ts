import { step as duplicate } from './01-duplicate.js';
import { step as replay } from './02-replay.js';
import { step as nokey } from './03-nokey.js';
import { step as conflict } from './04-conflict.js';
import { step as race } from './05-race.js';
import { step as persist } from './06-persist.js';
import { step as retry } from './07-retry.js';
import { step as notes } from './08-notes.js';
import { selectSteps as select, type Step, type Track } from '../../grader/track.js';

/** Every step of the basic track (the lab sheet's eight), in order. */
export const STEPS: readonly Step[] = [duplicate, replay, nokey, conflict, race, persist, retry, notes];

/**
 * The basic track: the lab sheet's eight steps. A workspace gets the starter server, the
 * scripts the sheet runs and the sheet (LAB.md), from lab/.
 */
export const BASIC: Track = {
  id: 'basic',
  steps: STEPS,
  files: [
    { source: 'server.py', name: 'server.py' },
    { source: 'probe.sh', name: 'probe.sh', executable: true },
    { source: 'ledger.sh', name: 'ledger.sh', executable: true },
    { source: 'statement.sh', name: 'statement.sh', executable: true },
  ],
  sheet: { source: (lang) => `LAB.${lang}.md`, name: 'LAB.md' },
};

/**
 * Finds basic steps by id ('3', '03') or slug ('nokey'); all steps for an empty list (see grader/track.ts).
 * @throws SetupError (a usage error: exit 2) naming the unknown selector and listing the known ones
 */
export function selectSteps(selectors: string[]): Step[] {
  return select(STEPS, selectors);
}
