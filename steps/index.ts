/**
 * The lab's tracks. The basic track (steps/basic/) is the lab sheet's eight steps; the
 * advanced track (steps/advanced/) is the essay's second half. The engine (grader/) is
 * given a track and never imports this folder.
 */
import type { Track } from '../grader/track.js';
import { BASIC } from './basic/index.js';
import { ADVANCED } from './advanced/index.js';

export { BASIC, STEPS, selectSteps } from './basic/index.js';
export { ADVANCED, ADVANCED_STEPS } from './advanced/index.js';

/** Every track, the basic one first. */
export const TRACKS: readonly Track[] = [BASIC, ADVANCED];

/** The track of that id, or undefined. */
export function trackById(id: string): Track | undefined {
  return TRACKS.find((track) => track.id === id);
}
