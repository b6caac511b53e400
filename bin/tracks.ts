/**
 * Which track a command follows: the workspace's (state.json `track`, chosen by
 * `start --track` or `idem-lab track`), basic when it names none. Steps are found by id or
 * slug in every track, since ids are unique across tracks (01-08 basic, 09 on advanced).
 */
import { BASIC, TRACKS, trackById } from '../steps/index.js';
import { selectSteps, type Step, type Track } from '../grader/track.js';
import { readState } from '../lab/workspace.js';
import { SetupError } from '../grader/failure.js';
import { listOf, t } from '../i18n/index.js';
import type { GradingConfig } from '../grader/grading.js';

/** The track the workspace follows (basic without a workspace, or when its state names none). */
export function currentTrack(workspace?: string): Track {
  const id = workspace ? readState(workspace).track : undefined;
  return (id && trackById(id)) || BASIC;
}

/** Every step of every track, in id order. */
export function allSteps(): Step[] {
  return TRACKS.flatMap((track) => track.steps).sort((a, b) => a.id.localeCompare(b.id));
}

/**
 * The steps `selectors` name, by id or slug, in any track; the steps of `track` when there
 * are none.
 * @throws SetupError (exit 2) naming an unknown selector and listing every step
 */
export function chooseSteps(selectors: string[], track: Track): Step[] {
  return selectors.length === 0 ? [...track.steps] : selectSteps(allSteps(), selectors);
}


/**
 * The track a command grades or shows: `id` when given (--track), else the workspace's.
 * @throws SetupError (exit 2) for an unknown id, listing the tracks
 */
export function resolveTrack(id: string | undefined, workspace?: string): Track {
  if (id === undefined) return currentTrack(workspace);
  const track = trackById(id.trim().toLowerCase());
  if (!track) throw new SetupError(t('cli.track.unknown', { track: id, list: listOf(TRACKS.map((tr) => tr.id)) }));
  return track;
}

/** How many of a track's steps pass, by the verdicts saved in the workspace. */
export function passedIn(track: Track, workspace: string): number {
  const steps = readState(workspace).steps ?? {};
  return track.steps.filter((s) => steps[s.id]?.status === 'pass').length;
}

/**
 * A grading config as it applies to a run of `track`: a "required" list that names none
 * of the track's steps (a basic config used on the advanced track) leaves every step of
 * the track required, instead of none, so that a failing step still fails the run.
 */
export function configForTrack(config: GradingConfig, track: Track): GradingConfig {
  if (config.required === undefined || track.steps.some((s) => config.required!.includes(s.id))) return config;
  return { ...config, required: undefined };
}

/** A track's name in the learner's language (`advanced`, `심화`, `进阶`); its id when it has no name there. */
export function trackName(track: Track): string {
  const key = `track.name.${track.id}`;
  return key === 'track.name.basic' || key === 'track.name.advanced' ? t(key) : track.id;
}
