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

/**
 * Every track, the basic one first: the one registry of tracks. The command line and the
 * workspace code (bin/, lab/) derive from it which tracks there are, what each lays and
 * which sheet it reads; adding a track is adding it here.
 */
export const TRACKS: readonly Track[] = [BASIC, ADVANCED];

/** The track a workspace follows until one is chosen: the first of TRACKS. */
export const DEFAULT_TRACK: Track = TRACKS[0];

/** The track of that id, or undefined. */
export function trackById(id: string): Track | undefined {
  return TRACKS.find((track) => track.id === id);
}
