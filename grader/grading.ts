/**
 * Points and required steps: the grading config, and the scored report every reporter
 * formats. A step carries DEFAULT_POINTS unless the config says otherwise; every step is
 * required unless the config names the required ones.
 *
 * The config is a JSON object, usually the "points" and "required" keys of the
 * repository's idem-lab.json (beside "server"):
 *
 *   { "points": { "02": 2, "race": 3 }, "required": ["02", "03", "04", "05", "06"] }
 *
 * Steps are named by id ("02", "2") or slug ("replay"), as on the command line.
 */
import crypto from 'node:crypto';
import type { SandboxChoice } from './sandbox.js';
import fs from 'node:fs';
import path from 'node:path';
import { SetupError } from './failure.js';
import { jsonErrorWhere, t } from '../i18n/index.js';
import type { Status, StepResult } from './types.js';
import { selectSteps, type Step } from './track.js';

/** Points of a step the config does not name. */
export const DEFAULT_POINTS = 1;

/** The config file read from a workspace when no other is named. */
export const CONFIG_FILE = 'idem-lab.json';

/** Points and required steps, resolved to step ids. */
export interface GradingConfig {
  /** Points per step id ('02'); a step not listed carries DEFAULT_POINTS. Non-negative numbers. */
  points: Record<string, number>;
  /** Ids of the steps whose failure fails the run (exit code 1, status fail); every step when undefined. */
  required?: string[];
  /** Who sees a step's verdict, per step id (see VISIBILITIES); a step not listed is 'visible'. */
  visibility?: Record<string, Visibility>;
  /** Where the config came from, for messages: a file path, or 'defaults'. */
  source: string;
}

/**
 * Who sees a step's verdict, in Gradescope's terms (results.json `visibility`,
 * https://gradescope-autograders.readthedocs.io/en/latest/specs/): `visible` always,
 * `after_due_date` once the due date has passed, `after_published` once the marks are
 * published, `hidden` never (the instructor only). Reporters the student reads themselves
 * (the terminal, GitHub Actions' log) cannot hide anything: the student runs them.
 */
export const VISIBILITIES = ['visible', 'hidden', 'after_due_date', 'after_published'] as const;
/** One of VISIBILITIES. */
export type Visibility = (typeof VISIBILITIES)[number];

/** The default config: one point per step, every step required. */
export function defaultGradingConfig(): GradingConfig {
  return { points: {}, source: 'defaults' };
}

function stepId(steps: readonly Step[], selector: string, where: string): string {
  try {
    return selectSteps(steps, [selector])[0].id;
  } catch (err) {
    throw new SetupError(`${where}: ${(err as Error).message}`);
  }
}

/**
 * Reads the grading part of a parsed config object: "points" (an object from step to a
 * non-negative number) and "required" (a list of steps). Other keys are ignored.
 * @param source the file it came from, for messages
 * @param steps the track's steps, which the entries name
 * @throws SetupError naming the file and the wrong entry
 */
export function parseGradingConfig(raw: unknown, source: string, steps: readonly Step[]): GradingConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new SetupError(t('cli.config.object', { file: source }));
  const { points, required, visibility } = raw as { points?: unknown; required?: unknown; visibility?: unknown };
  const config: GradingConfig = { points: {}, source };
  if (points !== undefined) {
    if (typeof points !== 'object' || points === null || Array.isArray(points)) {
      throw new SetupError(t('cli.config.points', { file: source }));
    }
    for (const [selector, value] of Object.entries(points)) {
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
        throw new SetupError(t('cli.config.pointsValue', { file: source, step: selector, value: JSON.stringify(value) }));
      }
      config.points[stepId(steps, selector, `${source}: "points"`)] = value;
    }
  }
  if (required !== undefined) {
    if (!Array.isArray(required) || !required.every((s) => typeof s === 'string')) {
      throw new SetupError(t('cli.config.required', { file: source }));
    }
    config.required = [...new Set(required.map((s: string) => stepId(steps, s, `${source}: "required"`)))].sort();
  }
  if (visibility !== undefined) {
    if (typeof visibility !== 'object' || visibility === null || Array.isArray(visibility)) throw new SetupError(t('cli.config.visibility', { file: source, values: VISIBILITIES.join(', ') }));
    config.visibility = {};
    for (const [selector, value] of Object.entries(visibility)) {
      if (!(VISIBILITIES as readonly unknown[]).includes(value)) {
        throw new SetupError(t('cli.config.visibilityValue', { file: source, step: selector, value: JSON.stringify(value), values: VISIBILITIES.join(', ') }));
      }
      config.visibility[stepId(steps, selector, `${source}: "visibility"`)] = value as Visibility;
    }
  }
  return config;
}

/**
 * Reads a grading config file (JSON) whose entries name `steps`.
 * @throws SetupError when it is missing, not JSON, or wrong
 */
export function readGradingConfig(file: string, steps: readonly Step[]): GradingConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new SetupError(t('cli.config.unreadable', { file, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message }));
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new SetupError(t('cli.config.json', { file, error: jsonErrorWhere(err) }));
  }
  return parseGradingConfig(raw, file, steps);
}

/**
 * The grading config of a workspace: its idem-lab.json when there is one (naming `steps`), else the defaults.
 * @throws SetupError when idem-lab.json is there but wrong
 */
export function workspaceGradingConfig(workspace: string, steps: readonly Step[]): GradingConfig {
  const file = path.join(workspace, CONFIG_FILE);
  return fs.existsSync(file) ? readGradingConfig(file, steps) : defaultGradingConfig();
}

/** The points of a step under a config. */
export function pointsOf(config: GradingConfig, id: string): number {
  return config.points[id] ?? DEFAULT_POINTS;
}

/** Who sees a step's verdict under a config (see VISIBILITIES). */
export function visibilityOf(config: GradingConfig, id: string): Visibility {
  return config.visibility?.[id] ?? 'visible';
}

/**
 * The SHA-256 (64 lowercase hex digits) of what decides a mark: the track's id, every
 * step's points, the required steps and the visibility, resolved to step ids, in a fixed
 * order. The same for two configs that grade alike however they are written ("2" or
 * "02" or "replay", key order, spacing); other keys of the file (its "server") do not
 * count. A workflow pins it (`idem-lab check --config-sha256`) so that a change to the
 * points in a student's own repository stops the grading instead of raising the mark.
 * @param steps the track's steps, whose points are all written out (defaults included)
 */
export function gradingDigest(config: GradingConfig, trackId: string, steps: readonly Step[]): string {
  const ids = steps.map((s) => s.id).sort();
  const canonical = {
    track: trackId,
    points: ids.map((id) => [id, pointsOf(config, id)]),
    required: ids.filter((id) => isRequired(config, id)),
    visibility: ids.map((id) => [id, visibilityOf(config, id)]),
  };
  return crypto.createHash('sha256').update(JSON.stringify(canonical)).digest('hex');
}

/** Whether a step's failure fails the run under a config. */
export function isRequired(config: GradingConfig, id: string): boolean {
  return config.required === undefined || config.required.includes(id);
}

/** One graded step with its points. */
export interface ScoredStep {
  result: StepResult;
  /** What the step is worth. */
  points: number;
  /** What the learner earned: `points` on a pass, 0 otherwise. */
  score: number;
  /** Whether a failure of this step fails the run. */
  required: boolean;
  /** Who sees its verdict (see VISIBILITIES). */
  visibility: Visibility;
}

/**
 * A whole grading run as every reporter sees it: the steps in order with their points,
 * the overall status and the total. Status: `error` when the grader could not grade (a
 * setup error, a step in error), or the learner's server could not start at all, or it
 * started but answered no request (it hangs); `fail` when a step did not pass; `pass`
 * when all did. `requiredPassed` says whether every
 * required step passed, which is what the exit code and CI go by.
 */
export interface GradeReport {
  steps: ScoredStep[];
  status: Status;
  /** Why the run is an error, in one or more sentences; absent unless status is `error`. */
  message?: string;
  /** Points earned, summed over the steps. */
  score: number;
  /** Points possible, summed over the steps. */
  maxScore: number;
  /** Whether every required step passed. */
  requiredPassed: boolean;
  /**
   * How confined the servers of the live steps were (sandbox.ts SandboxChoice): absent when
   * no server ran. A `fallback` (`--sandbox auto` without a full sandbox) is a warning in
   * every report.
   */
  sandbox?: Pick<SandboxChoice, 'confinement' | 'reason' | 'fallback'>;
}

/** Scores verdicts under a config and derives the run's status (see GradeReport). */
export function scoreResults(results: StepResult[], config: GradingConfig): GradeReport {
  const steps = results.map((result) => {
    const points = pointsOf(config, result.id);
    return { result, points, score: result.status === 'pass' ? points : 0, required: isRequired(config, result.id), visibility: visibilityOf(config, result.id) };
  });
  const report: GradeReport = {
    steps,
    status: results.every((r) => r.status === 'pass') ? 'pass' : 'fail',
    score: sum(steps.map((s) => s.score)),
    maxScore: sum(steps.map((s) => s.points)),
    requiredPassed: steps.every((s) => !s.required || s.result.status === 'pass'),
  };
  const errored = results.find((r) => r.status === 'error');
  const notStarted = results.find((r) => r.startFailed);
  const hung = neverAnswered(results);
  if (errored) {
    report.status = 'error';
    report.message = `Step ${errored.id} could not be graded. ${errored.message}`;
  } else if (notStarted) {
    report.status = 'error';
    report.message = `The server could not start, so its steps could not be checked. ${notStarted.message}`;
  } else if (hung) {
    report.status = 'error';
    report.message = `The server answered no request in time (it hangs), so its steps could not be checked. ${hung.message}`;
  }
  return report;
}

/**
 * The first failed live step when the server started but answered no request at all:
 * every live step failed and every exchange it shows got no answer (a hanging server).
 * A live step is one with exchanges; file-only steps have none.
 */
function neverAnswered(results: StepResult[]): StepResult | undefined {
  const live = results.filter((r) => r.exchanges.length > 0);
  if (live.length === 0) return undefined;
  return live.every((r) => r.status === 'fail' && r.exchanges.every((e) => e.status === undefined)) ? live[0] : undefined;
}

/**
 * The report of a run that could not grade at all (no server.py, bad config, missing
 * python3): every chosen step in error with the same message, no points earned.
 * @param steps the steps that were to be graded (a track's, or those chosen of it)
 */
export function setupErrorReport(message: string, config: GradingConfig, steps: readonly Step[]): GradeReport {
  const results: StepResult[] = steps.map((step) => {
    const result: StepResult = { id: step.id, slug: step.slug, title: step.title, status: 'error', message, details: [], warnings: [], exchanges: [], ms: 0 };
    if (step.file) result.file = step.file.name;
    return result;
  });
  return { ...scoreResults(results, config), status: 'error', message, requiredPassed: false };
}

/** The ids of the steps that did not pass, in order. */
export function notPassed(report: GradeReport): string[] {
  return report.steps.filter((s) => s.result.status !== 'pass').map((s) => s.result.id);
}

/** `6` or `2.5`: points as a short number. */
export function formatPoints(points: number): string {
  return Number.isInteger(points) ? String(points) : String(Math.round(points * 100) / 100);
}

function sum(values: number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
