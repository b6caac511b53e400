/**
 * The lab's tracks. The basic track (steps/basic/) is the lab sheet's eight steps; the
 * engine (grader/) is given a track and never imports this folder.
 */
import type { Track } from '../grader/track.js';
import { BASIC } from './basic/index.js';

export { BASIC, STEPS, selectSteps } from './basic/index.js';

/** Every track, the basic one first. */
export const TRACKS: readonly Track[] = [BASIC];
