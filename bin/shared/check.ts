/**
 * A grading run of one workspace: `idem-lab check`, which the menu runs too, and what
 * watch, grade and chaos share with it (the sandbox and its warning, the seed, the
 * preparation of a run). Shared layer of bin/.
 */
import fs from 'node:fs';
import { listOf, t } from '../../i18n/index.js';
import path from 'node:path';
import { SetupError } from '../../grader/failure.js';
import { grade, makeGraderTempDir } from '../../grader/engine.js';
import { parseSeed, type Seed } from '../../grader/seed.js';
import { limits, type Limits } from '../../grader/limits.js';
import { installExitHooks } from '../../grader/cleanup.js';
import { commandExists, resolveInterpreter, type ServerCommand } from '../../grader/server.js';
import { chooseSandboxFor, NoSandbox, SANDBOX_MODES, type SandboxChoice, type SandboxMode } from '../../grader/sandbox.js';
import { visible } from '../../grader/visible.js';
import { formatProgress, formatResult, formatSummary } from '../../grader/reporters/human.js';
import type { StepResult } from '../../grader/types.js';
import { allSteps, chooseSteps, configForTrack, passedIn, resolveTrack, verifyPin } from './tracks.js';
import type { Step, Track } from '../../grader/track.js';
import { defaultGradingConfig, pointsOf, readGradingConfig, scoreResults, setupErrorReport, workspaceGradingConfig, type GradeReport, type GradingConfig } from '../../grader/grading.js';
import { chooseReporters, writeReports, type ReporterChoice } from '../../grader/reporters/index.js';
import type { GithubOptions } from '../../grader/reporters/github.js';
import { openWorkspace, readState, type WorkspaceState } from '../../lab/workspace.js';
import { DEFAULT_PORT } from '../../lab/runner.js';
import { labSummary, saveVerdicts, workspaceDir, type WorkspaceOptions } from './progress.js';
import { outputOf } from './output.js';

/** Exit codes of `idem-lab check`: every step passed, some failed, or grading could not run. */
export const EXIT = { pass: 0, fail: 1, setup: 2 } as const;

/**
 * One grading run of one workspace, settled once before any server starts and passed down
 * (issue 23: a run is one settings object): `check` builds it with every field, `watch`
 * (the first fields) for each of its checks.
 */
export interface RunSettings {
  /** The workspace, absolute. */
  workspace: string;
  /** Its state file as read once at the start of the run (lab/workspace.ts readState); {} for none. */
  state: WorkspaceState;
  /** The track graded: --track, else the workspace's (state, then idem-lab.json), else basic. */
  track: Track;
  /** The steps graded: the ones named, else the track's. */
  steps: Step[];
  /** The server command, its interpreter resolved and its sandbox set when a live step runs. */
  command: ServerCommand;
  /** How confined the servers are (undefined when no step is live): see sandbox.ts. */
  confinement?: SandboxChoice;
  /** The limits the run grades under (IDEM_LAB_START_TIMEOUT_MS, ...), read once. */
  limits: Limits;
}

/** What `check` adds to a run's settings: its grading config, seed and time limit. */
export interface CheckSettings extends RunSettings {
  /** The grading config as it applies to the track (configForTrack), its pin verified. */
  config: GradingConfig;
  /** --seed, else IDEM_LAB_SEED; undefined: a new seed per run. */
  seed?: Seed;
  /** --time-limit in ms from the process's start; undefined: none. */
  timeLimitMs?: number;
}

/**
 * The run's time limits, read once from the environment (limits.ts), for a command to pass
 * down (GradeOptions.limits, CohortOptions.limits, ChaosSettings.limits).
 * @throws SetupError naming the bad variable
 */
export function runLimitsOf(): Limits {
  try {
    return limits();
  } catch (err) {
    throw new SetupError((err as Error).message);
  }
}

/**
 * Settles a grading run: the workspace and its state (read once), its server command, the
 * track (--track, else the workspace's) and the chosen steps (the track's when none are
 * named), the limits, and, when a step is live, the sandbox and the resolved interpreter.
 * @throws SetupError for a missing workspace, a damaged state file, an unknown track or
 *   step, a bad limit variable or a missing interpreter
 */
export async function runSettings(selectors: string[], options: WorkspaceOptions & { sandbox?: string; track?: string }): Promise<RunSettings> {
  const { workspace, command } = openWorkspace(workspaceDir(options));
  // Read once, now: a damaged state file is said before grading (SetupError), not after.
  const state = readState(workspace);
  const track = resolveTrack(options.track, workspace, state);
  const steps = chooseSteps(selectors, track);
  const runLimits = runLimitsOf();
  // Only live checks start servers: the sandbox probe and the interpreter's look-up (both
  // start a process) run side by side, and not at all for file checks.
  const live = steps.some((s) => s.live);
  if (live && !commandExists(command.file, workspace)) {
    throw new SetupError(t('cli.noInterpreter', { file: command.file }));
  }
  if (live) {
    try {
      fs.rmSync(makeGraderTempDir('idem-lab-check-'), { recursive: true, force: true });
    } catch (err) {
      throw new SetupError((err as Error).message);
    }
  }
  const [choice, resolved] = await Promise.all([live ? sandboxFor(options.sandbox, 'auto') : undefined, live ? resolveInterpreter(command, workspace) : command]);
  const sandbox = choice?.sandbox;
  return { workspace, state, command: { ...resolved, ...(sandbox ? { sandbox } : {}) }, steps, track, limits: runLimits, ...(choice ? { confinement: choice } : {}) };
}

/**
 * runSettings with what `check` adds: the grading config (--config, else the workspace's
 * idem-lab.json, else the defaults; its --config-sha256 pin verified), the seed and the
 * time limit.
 * @throws SetupError as runSettings, and for a bad config, a broken pin, a bad seed or time limit
 */
export async function checkSettings(selectors: string[], options: CheckOptions): Promise<CheckSettings> {
  const run = await runSettings(selectors, options);
  const read = configFor(options, run.workspace);
  if (options.configSha256 !== undefined) verifyPin(options.configSha256, read, run.track);
  const seed = seedOption(options.seed);
  const limitMs = timeLimitMs(options.timeLimit);
  return { ...run, config: configForTrack(read, run.track), ...(seed !== undefined ? { seed } : {}), ...(limitMs !== undefined ? { timeLimitMs: limitMs } : {}) };
}

/**
 * The sandbox for a --sandbox value (`fallback` when absent) and how confined it leaves the
 * servers, see sandbox.ts chooseSandboxFor.
 * @param hide folders the servers must not see
 * @throws SetupError for a value other than auto, required or off, and when a required
 *   sandbox does not start (naming bubblewrap) or would keep the host's network
 */
export async function sandboxFor(value: string | undefined, fallback: SandboxMode, hide: string[] = []): Promise<SandboxChoice> {
  const mode = (value ?? fallback) as SandboxMode;
  if (!SANDBOX_MODES.includes(mode)) throw new SetupError(t('cli.badSandbox', { value: String(value) }));
  try {
    return await chooseSandboxFor(mode, hide);
  } catch (err) {
    if (err instanceof NoSandbox) throw new SetupError(t(err.weakened ? 'cli.noPrivateNetwork' : 'cli.noSandbox', { reason: visible(err.message) }));
    throw err;
  }
}

/**
 * The warning line for a sandbox that fell back (`--sandbox auto` without a full one), in
 * the learner's language; undefined when nothing fell back.
 */
export function sandboxWarning(choice: Pick<SandboxChoice, 'confinement' | 'reason' | 'fallback'> | undefined): string | undefined {
  if (!choice?.fallback || choice.confinement === 'on') return undefined;
  return t(choice.confinement === 'off' ? 'cli.sandboxFallback.off' : 'cli.sandboxFallback.hostNetwork', { reason: visible(choice.reason ?? '') });
}

/** Options of `idem-lab check` besides the workspace. */
export interface CheckOptions extends WorkspaceOptions {
  /** --reporter values: `NAME` or `NAME=FILE`, comma-separated or repeated (see chooseReporters). */
  reporter?: string[];
  /** --output FILE: where the json, junit or tap reporter writes. */
  output?: string;
  /** --config FILE: the grading config (points, required); default: the workspace's idem-lab.json. */
  config?: string;
  /** --seed N: the seed of the live checks' keys, users and amounts; default IDEM_LAB_SEED, else a new one. */
  seed?: string;
  /** --sandbox auto|required|off (default auto: a learner runs their own code), see sandbox.ts. */
  sandbox?: string;
  /** --track ID: grade that track's steps when none are named (default: the workspace's track). */
  track?: string;
  /**
   * --config-sha256 HEX: grade only when the config's points, required steps, visibility
   * and track hash to this (see tracks.ts configDigest); written into the workflow by
   * `ci init`, so that editing idem-lab.json in a student's repository does not change the mark.
   */
  configSha256?: string;
  /**
   * --time-limit SECONDS: stop grading this long after the process started (its servers
   * stopped, the steps not finished in error), e.g. to stay within a test runner's bound
   * (Exercism: 20 s).
   */
  timeLimit?: string;
}

/**
 * The --time-limit in ms; undefined when not given.
 * @throws SetupError unless a number of seconds above 0
 */
export function timeLimitMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new SetupError(t('check.badTimeLimit', { value }));
  return Math.round(n * 1000);
}

/**
 * The seed a check uses: --seed, else IDEM_LAB_SEED, else undefined (a new one per run).
 * @throws SetupError when the given seed is not a whole number from 0 to 2^32 - 1
 */
export function seedOption(given: string | undefined, env: NodeJS.ProcessEnv = process.env): Seed | undefined {
  const text = given ?? (env.IDEM_LAB_SEED || undefined);
  if (text === undefined) return undefined;
  try {
    return parseSeed(text);
  } catch (err) {
    throw new SetupError(t('cli.badSeed', { seed: text }));
  }
}

/**
 * The exit code for a scored run: 2 when a step could not be graded (the grader's own
 * error, a setup error), 1 when a required step did not pass, else 0. A server that could
 * not start fails its steps (1): the checks ran, the learner has work to do.
 */
export function exitCodeForReport(report: GradeReport): number {
  if (report.steps.some((s) => s.result.status === 'error')) return EXIT.setup;
  return report.requiredPassed ? EXIT.pass : EXIT.fail;
}

/** Where the github reporter's annotations point: the workspace relative to the repository root, and the server's source file. */
export function githubOptions(workspace: string, command: ServerCommand, env: NodeJS.ProcessEnv = process.env): GithubOptions {
  const relative = path.relative(env.GITHUB_WORKSPACE || process.cwd(), workspace).split(path.sep).join('/');
  const options: GithubOptions = {};
  if (!relative.startsWith('..') && !path.isAbsolute(relative)) options.workspacePath = relative;
  const script = command.args.find((arg) => !arg.startsWith('-') && fs.existsSync(path.join(workspace, arg)));
  if (script && options.workspacePath !== undefined) options.serverFile = script;
  return options;
}

/** The grading config of a check: --config, else the workspace's idem-lab.json, else the defaults. */
function configFor(options: CheckOptions, workspace: string): GradingConfig {
  return options.config ? readGradingConfig(options.config, allSteps()) : workspaceGradingConfig(workspace, allSteps());
}

/**
 * A check that cannot grade (SetupError) still writes the machine reporters' files, with
 * status error and the reason, so CI always has a results file; then exits 2.
 */
function reportSetupError(err: SetupError, selectors: string[], options: CheckOptions, choices: ReporterChoice[]): number {
  let steps: Step[] = [];
  let config = defaultGradingConfig();
  try {
    steps = chooseSteps(selectors, resolveTrack(options.track, workspaceDir(options)));
  } catch {
    // an unknown step: the report lists none
  }
  try {
    config = configFor(options, workspaceDir(options));
  } catch {
    // the config is what is wrong: the defaults stand in
  }
  try {
    writeReports(setupErrorReport(err.message, config, steps), choices, { stdout: outputOf(options).write });
  } finally {
    outputOf(options).error(`idem-lab: ${err.message}`);
  }
  return EXIT.setup;
}

/**
 * `idem-lab check [N...]`: grade, report, save the verdicts, return the exit code (see
 * exitCodeForReport). The human reporter prints each verdict as it comes; the others
 * write once grading is done (see reporters/index.ts).
 * @throws SetupError for a usage error (a wrong --reporter/--output) or, with the human
 *   reporter only, an unusable workspace; machine reporters get a results file instead
 */
export async function checkCommand(selectors: string[], options: CheckOptions): Promise<number> {
  const choices = chooseReporters(options.reporter ?? [], options.output);
  const human = choices.some((c) => c.name === 'human');
  let settings: CheckSettings;
  try {
    settings = await checkSettings(selectors, options);
  } catch (err) {
    if (err instanceof SetupError && choices.some((c) => c.name !== 'human')) return reportSetupError(err, selectors, options, choices);
    throw err;
  }
  const { workspace, state, command, steps, track, confinement, config, seed, timeLimitMs: limitMs } = settings;
  installExitHooks();
  const out = outputOf(options);
  const { c } = out;
  // A sandbox that fell back is said before any server runs: on the human output, else on stderr (and in every report).
  const warning = sandboxWarning(confinement);
  if (warning) {
    if (human) out.log(c.yellow(warning));
    else out.error(`idem-lab: ${warning}`);
  }
  const replayPort = state.port ?? DEFAULT_PORT;
  const controller = new AbortController();
  // The limit counts from the process's start (performance.now() is ms since then), not from here.
  const timer = limitMs === undefined ? undefined : setTimeout(() => controller.abort(new Error(t('check.timeLimit', { seconds: limitMs / 1000 }))), Math.max(0, limitMs - performance.now()));
  let results: StepResult[];
  try {
    results = await grade({
      workspace,
      command,
      steps,
      seed,
      limits: settings.limits,
      signal: controller.signal,
      onResult: human ? (result) => out.log(formatResult(result, c, { replayPort, points: pointsOf(config, result.id) }) + '\n') : undefined,
    });
  } finally {
    clearTimeout(timer);
  }
  const passedBefore = passedIn(track, state);
  const after = saveVerdicts(workspace, results, out, state);
  const report = scoreResults(results, config);
  if (confinement) report.sandbox = { confinement: confinement.confinement, fallback: confinement.fallback, ...(confinement.reason ? { reason: confinement.reason } : {}) };
  if (human) {
    out.log(formatSummary(results, c, report));
    out.log(formatProgress(passedIn(track, after), track.steps.length, c));
    const passed = results.filter((r) => r.status === 'pass').map((r) => r.id);
    if (passed.length) out.log(c.dim(t('solution.open', { ids: listOf(passed), id: passed[passed.length - 1] })));
    if (passedBefore < track.steps.length && passedIn(track, after) === track.steps.length) out.log(`\n${labSummary(workspace, c, track, after)}`);
  }
  writeReports(report, choices, { github: githubOptions(workspace, command), stdout: out.write });
  return exitCodeForReport(report);
}
