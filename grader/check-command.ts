import fs from 'node:fs';
import { execaSync } from 'execa';
import { t } from '../i18n/index.js';
import path from 'node:path';
import { SetupError } from './failure.js';
import { grade } from './engine.js';
import { limits } from './limits.js';
import { installExitHooks } from './cleanup.js';
import type { ServerCommand } from './server.js';
import { colourFor, formatProgress, formatResult, formatSummary } from './reporters/human.js';
import type { StepResult } from './types.js';
import { STEPS, selectSteps } from '../steps/index.js';
import { openWorkspace, readState, updateState } from '../lab/workspace.js';
import { DEFAULT_PORT } from '../lab/runner.js';
import { workspaceDir, type WorkspaceOptions } from '../lab/commands.js';

/** Exit codes of `idem-lab check`: every step passed, some failed, or grading could not run. */
export const EXIT = { pass: 0, fail: 1, setup: 2 } as const;

/**
 * Whether `file` can be run: a path that exists, or a name found on PATH.
 */
export function commandExists(file: string): boolean {
  if (file.includes('/')) return fs.existsSync(file);
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir !== '' && fs.existsSync(path.join(dir, file)));
}

/** How many of the lab's steps pass, by the verdicts saved in the workspace. */
export function passedCount(workspace: string): number {
  const steps = readState(workspace).steps ?? {};
  return STEPS.filter((s) => steps[s.id]?.status === 'pass').length;
}

/** Records each verdict for `idem-lab status`; a workspace that cannot be written to is graded all the same. */
export function saveVerdicts(workspace: string, results: StepResult[]): void {
  const now = new Date().toISOString();
  try {
    updateState(workspace, (state) => {
      state.steps = state.steps ?? {};
      for (const r of results) {
        const before = state.steps[r.id];
        state.steps[r.id] = { status: r.status, checkedAt: now, ...(r.status === 'pass' ? { passedAt: now } : before?.passedAt ? { passedAt: before.passedAt } : {}) };
      }
    });
  } catch {
    // a read-only checkout: the verdicts were printed, nothing is lost
  }
}

/** The exit code for a set of verdicts: 0 all pass, 1 a step failed, 2 the grader could not grade one. */
export function exitCodeFor(results: StepResult[]): number {
  if (results.some((r) => r.status === 'error')) return EXIT.setup;
  return results.every((r) => r.status === 'pass') ? EXIT.pass : EXIT.fail;
}

/**
 * Prepares a grading run: the workspace, its server command and the chosen steps.
 * @throws SetupError for a missing workspace, an unknown step or a missing interpreter
 */
export function prepareCheck(selectors: string[], options: WorkspaceOptions): { workspace: string; command: ServerCommand; steps: ReturnType<typeof selectSteps> } {
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const steps = selectSteps(selectors);
  try {
    limits();
  } catch (err) {
    throw new SetupError((err as Error).message);
  }
  if (steps.some((s) => s.live) && !commandExists(command.file)) {
    throw new SetupError(t('cli.noInterpreter', { file: command.file }));
  }
  return { workspace, command: resolveInterpreter(command, workspace), steps };
}

/**
 * For `python3 ...`, the interpreter's real path as seen from the workspace, so that a
 * version-manager shim (pyenv's costs ~0.25 s a start) runs once per grading, not once
 * per server start. Any other command, or a failure to ask, is returned unchanged.
 */
export function resolveInterpreter(command: ServerCommand, workspace: string): ServerCommand {
  if (!/^python3?$/.test(command.file)) return command;
  try {
    const { stdout } = execaSync(command.file, ['-c', 'import sys; print(sys.executable)'], { cwd: workspace, timeout: 10_000 });
    const exe = String(stdout).trim();
    return exe && fs.existsSync(exe) ? { ...command, file: exe } : command;
  } catch {
    return command;
  }
}

/** `idem-lab check [N...]`: grade, print each verdict as it comes, save them, return the exit code. */
export async function checkCommand(selectors: string[], options: WorkspaceOptions): Promise<number> {
  const { workspace, command, steps } = prepareCheck(selectors, options);
  installExitHooks();
  const c = colourFor(process.stdout);
  const replayPort = readState(workspace).port ?? DEFAULT_PORT;
  const results = await grade({
    workspace,
    command,
    steps,
    onResult: (result) => console.log(formatResult(result, c, { replayPort }) + '\n'),
  });
  saveVerdicts(workspace, results);
  console.log(formatSummary(results, c));
  console.log(formatProgress(passedCount(workspace), STEPS.length, c));
  return exitCodeFor(results);
}
