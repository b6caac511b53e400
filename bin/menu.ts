/**
 * `idem-lab` alone in a terminal: a menu of the steps with their state, the server's
 * state and the progress, and the actions a learner takes most: read a step, check it,
 * show a hint, start, stop or restart the server. Without a terminal it prints the step
 * list and returns: nothing ever waits for input in CI. It prints, and prompts, through
 * the Output it is given (output.ts), so a test can drive it in process.
 */
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { t } from '../i18n/index.js';
import select, { Separator } from '@inquirer/select';
import { SetupError } from '../grader/failure.js';
import { formatProgress } from '../grader/reporters/human.js';
import type { ChalkInstance } from 'chalk';
import { currentTrack, passedIn, trackName } from './shared/tracks.js';
import { isToolFolder } from '../lab/paths.js';
import type { Step, Track } from '../grader/track.js';
import { localTime, nextStepToDo, stepList, workspaceDir, type WorkspaceOptions } from './shared/progress.js';
import { restartCommand, startCommand, stopCommand } from './shared/lab-server.js';
import { hintCommand, showCommand } from './shared/step-texts.js';
import { ownServer } from '../lab/runner.js';
import { openWorkspace, readState } from '../lab/workspace.js';
import { outputOf, processOutput, type Output } from './shared/output.js';

type Choice = { kind: 'step'; step: Step } | { kind: 'start' | 'stop' | 'restart' | 'quit' };
type StepAction = 'read' | 'check' | 'hint' | 'back';

/** Options of the menu. */
export interface MenuOptions extends WorkspaceOptions {
  /** Ends the menu as Ctrl-C does (exit code 0), for a caller that runs it in process. */
  signal?: AbortSignal;
}

/** Whether the menu may run on `out` (default the process's): keys can be read, and the report goes to a terminal. */
export function canPrompt(out: Output = processOutput()): boolean {
  return out.terminal !== undefined && out.isTTY;
}

/** The step list, the progress count and the track, for `idem-lab` without a terminal; coloured by `c` (default: as stdout allows). */
export function stepListText(workspace: string, c: ChalkInstance = processOutput().c): string {
  const track = currentTrack(workspace);
  return `${t('cli.stepsHeading')}\n${stepList(workspace, c)}\n\n${formatProgress(passedIn(track, workspace), track.steps.length, c)}\n${trackLine(track)}`;
}

/** `Track: basic, steps 01-08 (idem-lab track switches)`: which track the menu follows. */
function trackLine(track: Track): string {
  return t('menu.track', { name: trackName(track), first: track.steps[0].id, last: track.steps[track.steps.length - 1].id });
}

/** `running (pid 4242) on http://127.0.0.1:8000`, or why it is not. */
function serverLine(workspace: string): { running: boolean; text: string } {
  const state = readState(workspace);
  try {
    openWorkspace(workspace);
  } catch {
    return { running: false, text: t('menu.server.noWorkspace') };
  }
  const own = ownServer(workspace, state);
  if (own) return { running: true, text: t('menu.server.running', { pid: own.pid, port: String(state.port) }) };
  return { running: false, text: state.pid ? t('menu.server.stopped') : t('menu.server.notRunning') };
}

function isCancel(err: unknown): boolean {
  return err instanceof Error && (err.name === 'ExitPromptError' || err.name === 'AbortPromptError');
}

/** Runs one action; a SetupError is printed on `out` and the menu goes on. */
async function attempt(out: Output, action: () => Promise<number> | number): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (err instanceof SetupError) out.log(`idem-lab: ${err.message}`);
    else throw err;
  }
}

/** Waits for Enter (or Ctrl-C, or `signal`), so what an action printed can be read before the menu returns. */
function pause(prompt: string, terminal: NonNullable<Output['terminal']>, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const rl = readline.createInterface({ input: terminal.input, output: terminal.output });
    const done = () => {
      signal?.removeEventListener('abort', done);
      rl.close();
      resolve();
    };
    signal?.addEventListener('abort', done);
    rl.once('SIGINT', done);
    rl.question(prompt, done);
    if (signal?.aborted) done();
  });
}

/**
 * The menu, until the learner quits (Quit, Ctrl-C or Escape on the main menu, or
 * `options.signal`). Without a terminal on its output (see canPrompt), prints the step
 * list instead. Prompts read keys from `options.out`'s terminal and draw on it.
 * @returns 0
 * @throws SetupError in idem-lab's own folder (paths.ts isToolFolder), saying where the lab goes
 */
export async function menuCommand(options: MenuOptions): Promise<number> {
  const workspace = workspaceDir(options);
  const out = outputOf(options);
  const { c, terminal } = out;
  // In the tool's own folder (just cloned) the menu would offer to start a lab among its files: say where to go instead.
  if (isToolFolder(workspace)) throw new SetupError(t('cli.inRepository', { dir: workspace }));
  if (!canPrompt(out) || !terminal) {
    // In a workspace the step list ends with how to read and check a step; elsewhere with how to make one.
    const laidOut = fs.existsSync(path.join(workspace, '.idem-lab')) || fs.existsSync(path.join(workspace, 'server.py'));
    out.log(`${stepListText(workspace, c)}\n\n${t(laidOut ? 'cli.startFooter' : 'cli.noArgs.more')}`);
    return 0;
  }
  const { signal } = options;
  // The prompts' keys and screen (@inquirer's context).
  const context = { input: terminal.input, output: terminal.output, signal };
  const dir = { dir: workspace, out };
  // The key help under the list, in the learner's language.
  const theme = { style: { keysHelpTip: () => c.dim(`↑↓ ${t('menu.keys.navigate')} • ⏎ ${t('menu.keys.select')}`) } };
  for (;;) {
    const state = readState(workspace);
    const steps = state.steps ?? {};
    const STEPS = currentTrack(workspace).steps;
    const passed = STEPS.filter((s) => steps[s.id]?.status === 'pass').length;
    const server = serverLine(workspace);
    if (signal?.aborted) return 0;
    out.log(`\n${c.bold('idem-lab')}  ${t('menu.tagline')}`);
    out.log(t('menu.server', { state: server.text }));
    out.log(trackLine(currentTrack(workspace)));
    out.log(formatProgress(passed, STEPS.length, c));
    const stepChoices = STEPS.map((step) => {
      const s = steps[step.id];
      const mark = !s ? '·' : s.status === 'pass' ? '✓' : '✗';
      const said = !s
        ? t('menu.state.notTried')
        : s.status === 'pass'
          ? t('menu.state.passed', { when: localTime(s.passedAt) })
          : s.passedAt
            ? t('menu.state.failedBefore', { when: localTime(s.checkedAt), passed: localTime(s.passedAt) })
            : t('menu.state.failed', { when: localTime(s.checkedAt) });
      return { name: `${mark} ${step.id} ${step.slug.padEnd(9)} ${step.title}`, value: { kind: 'step', step } as Choice, description: said };
    });
    const serverChoices: { name: string; value: Choice }[] = server.running
      ? [
          { name: t('menu.restart'), value: { kind: 'restart' } },
          { name: t('menu.stop'), value: { kind: 'stop' } },
        ]
      : [{ name: t('menu.start'), value: { kind: 'start' } }];
    const todo = nextStepToDo(workspace);
    let choice: Choice;
    try {
      choice = await select<Choice>({
        message: t('menu.choose'),
        theme,
        choices: [...stepChoices, new Separator(), ...serverChoices, { name: t('menu.quit'), value: { kind: 'quit' } }],
        default: stepChoices.find((ch) => ch.value.kind === 'step' && ch.value.step === todo)?.value,
        pageSize: STEPS.length + 4,
        loop: false,
      }, context);
    } catch (err) {
      if (isCancel(err)) return 0;
      throw err;
    }
    if (choice.kind === 'quit') return 0;
    const back = c.dim(`\n${t('menu.pause')}`);
    if (choice.kind === 'start') await attempt(out, () => startCommand({ ...dir, lang: state.lang, brief: true }));
    if (choice.kind === 'stop') await attempt(out, () => stopCommand(dir));
    if (choice.kind === 'restart') await attempt(out, () => restartCommand(dir));
    if (choice.kind !== 'step') {
      await pause(back, terminal, signal);
      continue;
    }
    const step = choice.step;
    let action: StepAction;
    try {
      action = await select<StepAction>({
        message: `${step.id} ${step.slug}: ${step.title}`,
        choices: [
          { name: t('menu.read'), value: 'read' },
          { name: t('menu.check'), value: 'check' },
          { name: t('menu.hint'), value: 'hint' },
          { name: t('menu.back'), value: 'back' },
        ],
        theme,
        loop: false,
      }, context);
    } catch (err) {
      if (isCancel(err)) continue;
      throw err;
    }
    if (action === 'read') await attempt(out, () => showCommand(step.id, dir));
    if (action === 'hint') await attempt(out, () => hintCommand(step.id, { ...dir, more: t('menu.hint.more', { hint: t('menu.hint') }) }));
    if (action === 'check') await attempt(out, async () => (await import('./shared/check.js')).checkCommand([step.id], dir));
    if (action !== 'back') await pause(back, terminal, signal);
  }
}
