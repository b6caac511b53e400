/**
 * `idem-lab` alone in a terminal: a menu of the steps with their state, the server's
 * state and the progress, and the actions a learner takes most: read a step, check it,
 * show a hint, start, stop or restart the server. Without a terminal it prints the step
 * list and returns: nothing ever waits for input in CI.
 */
import readline from 'node:readline';
import { t } from '../i18n/index.js';
import select, { Separator } from '@inquirer/select';
import { SetupError } from '../grader/failure.js';
import { colourFor, formatProgress } from '../grader/reporters/human.js';
import { currentTrack } from './tracks.js';
import type { Step } from '../grader/track.js';
import { hintCommand, localTime, restartCommand, showCommand, startCommand, stepList, stopCommand, workspaceDir, type WorkspaceOptions } from './commands.js';
import { ownServer } from '../lab/runner.js';
import { nextStepToDo } from './watch.js';
import { openWorkspace, readState } from '../lab/workspace.js';

type Choice = { kind: 'step'; step: Step } | { kind: 'start' | 'stop' | 'restart' | 'quit' };
type StepAction = 'read' | 'check' | 'hint' | 'back';

/** Whether the menu may run: stdin and stdout are both terminals. */
export function canPrompt(): boolean {
  return process.stdin.isTTY === true && process.stdout.isTTY === true;
}

/** The step list and the progress count, for `idem-lab` without a terminal. */
export function stepListText(workspace: string): string {
  const c = colourFor(process.stdout);
  const steps = readState(workspace).steps ?? {};
  const STEPS = currentTrack(workspace).steps;
  const passed = STEPS.filter((s) => steps[s.id]?.status === 'pass').length;
  return `${t('cli.stepsHeading')}\n${stepList(workspace)}\n\n${formatProgress(passed, STEPS.length, c)}`;
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

/** Runs one action; a SetupError is printed and the menu goes on. */
async function attempt(action: () => Promise<number> | number): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (err instanceof SetupError) console.log(`idem-lab: ${err.message}`);
    else throw err;
  }
}

/** Waits for Enter (or Ctrl-C), so what an action printed can be read before the menu returns. */
function pause(prompt: string): Promise<void> {
  return new Promise((resolve) => {
    const rl = readline.createInterface({ input: process.stdin, output: process.stdout });
    const done = () => {
      rl.close();
      resolve();
    };
    rl.once('SIGINT', done);
    rl.question(prompt, done);
  });
}

/**
 * The menu, until the learner quits (Quit, Ctrl-C or Escape on the main menu). Without a
 * terminal on stdin and stdout, prints the step list instead.
 * @returns 0
 */
export async function menuCommand(options: WorkspaceOptions): Promise<number> {
  const workspace = workspaceDir(options);
  if (!canPrompt()) {
    console.log(`${stepListText(workspace)}\n\n${t('cli.noArgs.more')}`);
    return 0;
  }
  const c = colourFor(process.stdout);
  const dir = { dir: workspace };
  // The key help under the list, in the learner's language.
  const theme = { style: { keysHelpTip: () => c.dim(`↑↓ ${t('menu.keys.navigate')} • ⏎ ${t('menu.keys.select')}`) } };
  for (;;) {
    const state = readState(workspace);
    const steps = state.steps ?? {};
    const STEPS = currentTrack(workspace).steps;
    const passed = STEPS.filter((s) => steps[s.id]?.status === 'pass').length;
    const server = serverLine(workspace);
    console.log(`\n${c.bold('idem-lab')}  ${t('menu.tagline')}`);
    console.log(t('menu.server', { state: server.text }));
    console.log(formatProgress(passed, STEPS.length, c));
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
      });
    } catch (err) {
      if (isCancel(err)) return 0;
      throw err;
    }
    if (choice.kind === 'quit') return 0;
    const back = c.dim(`\n${t('menu.pause')}`);
    if (choice.kind === 'start') await attempt(() => startCommand({ ...dir, lang: state.lang, brief: true }));
    if (choice.kind === 'stop') await attempt(() => stopCommand(dir));
    if (choice.kind === 'restart') await attempt(() => restartCommand(dir));
    if (choice.kind !== 'step') {
      await pause(back);
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
      });
    } catch (err) {
      if (isCancel(err)) continue;
      throw err;
    }
    if (action === 'read') await attempt(() => showCommand(step.id, dir));
    if (action === 'hint') await attempt(() => hintCommand(step.id, { ...dir, more: t('menu.hint.more', { hint: t('menu.hint') }) }));
    if (action === 'check') await attempt(async () => (await import('./check-command.js')).checkCommand([step.id], dir));
    if (action !== 'back') await pause(back);
  }
}
