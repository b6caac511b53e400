/**
 * Which track a command follows: the workspace's (state.json `track`, chosen by
 * `start --track` or `idem-lab track`), else the committed idem-lab.json's `"track"`
 * (written by `ci init --track`: state.json is git-ignored, so a fresh checkout in CI has
 * none), basic when neither names one. Steps are found by id or
 * slug in every track, since ids are unique across tracks (01-08 basic, 09 on advanced).
 */
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_TRACK, TRACKS, trackById } from '../../steps/index.js';
import { selectSteps, type Step, type Track } from '../../grader/track.js';
import { lineage, readState, type WorkspaceState } from '../../lab/workspace.js';
import { SetupError } from '../../grader/failure.js';
import { CATALOGS, listOf, t, type MessageKey } from '../../i18n/index.js';
import { CONFIG_FILE, gradingDigest, type GradingConfig } from '../../grader/grading.js';

/**
 * The `"track"` a grading config file names (idem-lab.json), undefined when it names none
 * or the file is missing or not JSON (reading the points reports those).
 * @throws SetupError (exit 2) when it names a track there is not
 */
export function configTrack(file: string): Track | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
  const id = raw !== null && typeof raw === 'object' ? (raw as { track?: unknown }).track : undefined;
  if (id === undefined) return undefined;
  const track = typeof id === 'string' ? trackById(id.trim().toLowerCase()) : undefined;
  if (!track) throw new SetupError(t('cli.track.unknown', { track: `${file}: ${JSON.stringify(id)}`, list: TRACKS.map((tr) => tr.id).join(', ') }));
  return track;
}

/**
 * The track the workspace follows: its state's, else its idem-lab.json's `"track"`, else
 * the first track (basic). `state`: the workspace's state when the caller has read it
 * already (default: read now).
 */
export function currentTrack(workspace?: string, state: WorkspaceState | undefined = workspace ? readState(workspace) : undefined): Track {
  const id = state?.track;
  const chosen = id && trackById(id);
  if (chosen) return chosen;
  return (workspace && configTrack(path.join(workspace, CONFIG_FILE))) || DEFAULT_TRACK;
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
 * The track a command grades or shows: `id` when given (--track), else the workspace's
 * (`state`: its state when already read).
 * @throws SetupError (exit 2) for an unknown id, listing the tracks
 */
export function resolveTrack(id: string | undefined, workspace?: string, state?: WorkspaceState): Track {
  if (id === undefined) return currentTrack(workspace, state);
  const track = trackById(id.trim().toLowerCase());
  if (!track) throw new SetupError(t('cli.track.unknown', { track: id, list: listOf(TRACKS.map((tr) => tr.id)) }));
  return track;
}

/** How many of a track's steps pass, by the verdicts saved in the workspace (its path, or its state as already read). */
export function passedIn(track: Track, workspace: string | WorkspaceState): number {
  const steps = (typeof workspace === 'string' ? readState(workspace) : workspace).steps ?? {};
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

/** A track's name in the learner's language (message `track.name.<id>`: `advanced`, `심화`, `进阶`); its id when there is no such message. */
export function trackName(track: Track): string {
  const key = `track.name.${track.id}`;
  return Object.hasOwn(CATALOGS.en, key) ? t(key as MessageKey) : track.id;
}

/**
 * The steps of the tracks `track` builds on that do not pass yet in the workspace (by its
 * saved verdicts): what should pass before `track` is taken up. None for the first track.
 */
export function stepsLeftBefore(track: Track, workspace: string): Step[] {
  const steps = readState(workspace).steps ?? {};
  return lineage(track).slice(0, -1).flatMap((t) => t.steps.filter((s) => steps[s.id]?.status !== 'pass'));
}

/**
 * Whether `track` is the lab's first track (basic), whose end is the end of the lab; the
 * others end as "the <name> track".
 */
export function isFirstTrack(track: Track): boolean {
  return track === DEFAULT_TRACK;
}

/**
 * The digest a workflow pins (`idem-lab check --config-sha256`): gradingDigest of the
 * config as it applies to `track` (configForTrack) over the track's steps.
 */
export function configDigest(config: GradingConfig, track: Track): string {
  return gradingDigest(configForTrack(config, track), track.id, track.steps);
}

/**
 * Checks a config against the digest a workflow pinned (see configDigest).
 * @throws SetupError (exit 2) when `pinned` is not 64 hex digits, or the config's
 *   points, required steps, visibility or track differ from the pinned ones
 */
export function verifyPin(pinned: string, config: GradingConfig, track: Track): void {
  if (!/^[0-9a-f]{64}$/i.test(pinned.trim())) throw new SetupError(t('check.pin.bad', { value: pinned }));
  const actual = configDigest(config, track);
  if (actual !== pinned.trim().toLowerCase()) throw new SetupError(t('check.pin.changed', { file: config.source, track: track.id, expected: pinned.trim().toLowerCase(), actual }));
}
