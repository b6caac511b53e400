/**
 * What several commands show of a workspace's progress: the current step, the step list,
 * times as the learner's clock shows them, the end-of-track summary, and the saving of
 * verdicts. Shared layer of bin/ (see shared/README in layout.test.ts): used by check,
 * status, the menu and watch; imports nothing of bin/ outside shared/.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { ChalkInstance } from 'chalk';
import { listOf, t, type MessageKey } from '../../i18n/index.js';
import type { Step, Track } from '../../grader/track.js';
import type { StepResult } from '../../grader/types.js';
import { workspaceDir } from '../../lab/paths.js';
import { readState, updateState, type WorkspaceState } from '../../lab/workspace.js';
import { chooseSteps, currentTrack, isFirstTrack, passedIn, resolveTrack, trackName } from './tracks.js';
import { outputOf, processOutput, type Output } from './output.js';

export { workspaceDir };

/** Options every workspace command takes. */
export interface WorkspaceOptions {
  /** --dir: the workspace (default: the one around the current folder, see lab/paths.ts). */
  dir?: string;
  /** Where the command prints (default: the process's stdout and stderr). */
  out?: Output;
}

/**
 * The first step of the workspace's track that does not pass yet, looking after `after`
 * first and then from the start; undefined when every step of the track passes.
 */
export function nextStepToDo(workspace: string, after?: Step): Step | undefined {
  const steps = readState(workspace).steps ?? {};
  const track = currentTrack(workspace).steps;
  const todo = (s: Step) => steps[s.id]?.status !== 'pass';
  const from = after ? track.indexOf(after) + 1 : 0;
  return track.slice(from).find(todo) ?? track.slice(0, from).find(todo);
}

/**
 * The step a command without a step means: `selector` when given (a step of any track),
 * else the current step (the first one of the workspace's track not passing), else the
 * track's last step when every one passes.
 * @throws SetupError for an unknown selector
 */
export function stepOrCurrent(selector: string | undefined, workspace: string): Step {
  const track = currentTrack(workspace);
  if (selector !== undefined) return chooseSteps([selector], track)[0];
  return nextStepToDo(workspace) ?? track.steps[track.steps.length - 1];
}

/** The step list of the workspace's track with each step's last verdict: `✓ 01 duplicate  Reproduce ...`, coloured by `c` (default: as stdout allows). */
export function stepList(workspace: string | undefined, c: ChalkInstance = processOutput().c): string {
  const steps = workspace ? (readState(workspace).steps ?? {}) : {};
  return currentTrack(workspace).steps.map((step) => {
    const state = steps[step.id];
    const mark = !state ? c.dim('·') : state.status === 'pass' ? c.green('✓') : c.red('✗');
    const file = step.file ? c.dim(`  ${step.file.name}`) : '';
    return `  ${mark} ${step.id} ${step.slug.padEnd(9)} ${step.title}${file}`;
  }).join('\n');
}

/**
 * An ISO-8601 time as the learner's clock shows it: `2026-12-01 18:58:03 +09:00`, in the
 * local time zone (TZ, else the system's). Text that is no time is returned as it is.
 */
export function localTime(iso: string | undefined): string {
  const date = new Date(iso ?? '');
  if (Number.isNaN(date.getTime())) return iso ?? '';
  const two = (n: number) => String(n).padStart(2, '0');
  const offset = -date.getTimezoneOffset();
  const zone = `${offset < 0 ? '-' : '+'}${two(Math.floor(Math.abs(offset) / 60))}:${two(Math.abs(offset) % 60)}`;
  return `${date.getFullYear()}-${two(date.getMonth() + 1)}-${two(date.getDate())} ${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())} ${zone}`;
}

/** `1 h 12 min`, `42 min` (at least 1 min from half a minute on) or `12 s` (under half a minute), in the learner's language. */
export function formatDuration(ms: number): string {
  // Under a minute (a graded example, a replayed workspace): the seconds, not "1 min".
  if (ms < 30_000) return t('summary.seconds', { s: Math.max(0, Math.round(ms / 1000)) });
  const minutes = Math.max(1, Math.round(ms / 60_000));
  return minutes >= 60 ? t('summary.hours', { h: Math.floor(minutes / 60), m: minutes % 60 }) : t('summary.minutes', { m: minutes });
}

/**
 * The end-of-track summary, for when every step of `track` (default: the workspace's)
 * passes: what each step proved, how long the lab took (from `startedAt` in state.json,
 * else the workspace's .idem-lab folder, to the last pass), where the learner's answers
 * are, and how to see the reference answers; coloured by `c` (default: as stdout allows).
 * `state`: the workspace's state when the caller holds it (default: read now).
 */
export function labSummary(workspace: string, c: ChalkInstance = processOutput().c, track: Track = currentTrack(workspace), state: WorkspaceState = readState(workspace)): string {
  const passes = track.steps.map((s) => state.steps?.[s.id]?.passedAt).filter((x): x is string => x !== undefined).sort();
  let startedAt = state.startedAt;
  if (!startedAt) {
    try {
      startedAt = fs.statSync(path.join(workspace, '.idem-lab')).birthtime.toISOString();
    } catch {
      startedAt = passes[0];
    }
  }
  const last = passes[passes.length - 1] ?? new Date().toISOString();
  const files = ['server.py', ...track.steps.flatMap((s) => (s.file && fs.existsSync(path.join(workspace, s.file.name)) ? [s.file.name] : []))];
  const lines = [c.green(c.bold(isFirstTrack(track) ? t('summary.heading', { total: track.steps.length }) : t('summary.heading.track', { track: trackName(track), total: track.steps.length }))), '', t('summary.proved')];
  for (const step of track.steps) lines.push(`  ${c.green('✓')} ${step.id} ${step.slug.padEnd(9)} ${t(`summary.${step.id}` as MessageKey)}`);
  lines.push('');
  if (startedAt) lines.push(t('summary.took', { duration: formatDuration(Date.parse(last) - Date.parse(startedAt)), from: localTime(startedAt), to: localTime(last) }));
  lines.push(t('summary.answers', { dir: workspace, files: listOf(files) }));
  lines.push(c.dim(t('summary.solutions')));
  return lines.join('\n');
}

/** How many steps of the workspace's track pass, by the verdicts saved in the workspace. */
export function passedCount(workspace: string): number {
  return passedIn(resolveTrack(undefined, workspace), workspace);
}

/**
 * Records each verdict for `idem-lab status`; a workspace that cannot be written to is
 * graded all the same (why the verdicts were not kept is said on `out`, default stderr).
 * @param before the state the run began with: when the verdicts cannot be written, they
 *   are put into a copy of it, so that the run still shows its progress
 * @returns the workspace's state with the verdicts in it (as written, or that copy)
 */
export function saveVerdicts(workspace: string, results: StepResult[], out: Output = outputOf(undefined), before: WorkspaceState = {}): WorkspaceState {
  const now = new Date().toISOString();
  const record = (state: WorkspaceState) => {
    state.steps = state.steps ?? {};
    for (const r of results) {
      const earlier = state.steps[r.id];
      state.steps[r.id] = { status: r.status, checkedAt: now, ...(r.status === 'pass' ? { passedAt: now } : earlier?.passedAt ? { passedAt: earlier.passedAt } : {}) };
    }
  };
  try {
    return updateState(workspace, record);
  } catch (err) {
    // a read-only checkout: the verdicts were printed, nothing is lost; say why they were not kept
    out.error(`idem-lab: ${t('check.notSaved', { reason: (err as Error).message })}`);
    const copy: WorkspaceState = structuredClone(before);
    record(copy);
    return copy;
  }
}
