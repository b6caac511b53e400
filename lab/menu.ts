/**
 * `idem-lab` alone in a terminal: a menu of the steps with their state, the server's
 * state and the progress, and the actions a learner takes most: read a step, check it,
 * show a hint, start, stop or restart the server. Without a terminal it prints the step
 * list and returns: nothing ever waits for input in CI.
 */
import readline from 'node:readline';
import select, { Separator } from '@inquirer/select';
import { SetupError } from '../grader/failure.js';
import { colourFor, formatProgress } from '../grader/reporters/human.js';
import { DEFAULT_COMMAND } from '../grader/server.js';
import { STEPS } from '../steps/index.js';
import type { Step } from '../steps/types.js';
import { hintCommand, restartCommand, showCommand, startCommand, stepList, stopCommand, workspaceDir, type WorkspaceOptions } from './commands.js';
import { isServerProcess } from './runner.js';
import { nextStepToDo } from './watch.js';
import { openWorkspace, readState } from './workspace.js';

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
  const passed = STEPS.filter((s) => steps[s.id]?.status === 'pass').length;
  return `The steps:\n${stepList(workspace)}\n\n${formatProgress(passed, STEPS.length, c)}`;
}

/** `running (pid 4242) on http://127.0.0.1:8000`, or why it is not. */
function serverLine(workspace: string): { running: boolean; text: string } {
  const state = readState(workspace);
  let command = DEFAULT_COMMAND;
  try {
    command = openWorkspace(workspace).command;
  } catch {
    return { running: false, text: 'no workspace here yet (Start lays one out)' };
  }
  if (state.pid && isServerProcess(state.pid, command)) return { running: true, text: `running (pid ${state.pid}) on http://127.0.0.1:${state.port}` };
  return { running: false, text: state.pid ? 'stopped (it may have crashed: see s.log)' : 'not running' };
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
    console.log(`${stepListText(workspace)}\n\nidem-lab start lays out a workspace and starts the server; idem-lab --help lists every command.`);
    return 0;
  }
  const c = colourFor(process.stdout);
  const dir = { dir: workspace };
  for (;;) {
    const state = readState(workspace);
    const steps = state.steps ?? {};
    const passed = STEPS.filter((s) => steps[s.id]?.status === 'pass').length;
    const server = serverLine(workspace);
    console.log(`\n${c.bold('idem-lab')}  press twice, charge once`);
    console.log(`Server: ${server.text}`);
    console.log(formatProgress(passed, STEPS.length, c));
    const stepChoices = STEPS.map((step) => {
      const s = steps[step.id];
      const mark = !s ? '·' : s.status === 'pass' ? '✓' : '✗';
      const said = !s ? 'not tried' : s.status === 'pass' ? `passed ${s.passedAt ?? ''}` : `failed ${s.checkedAt}${s.passedAt ? `, last passed ${s.passedAt}` : ''}`;
      return { name: `${mark} ${step.id} ${step.slug.padEnd(9)} ${step.title}`, value: { kind: 'step', step } as Choice, description: said };
    });
    const serverChoices: { name: string; value: Choice }[] = server.running
      ? [
          { name: 'Restart the payment server', value: { kind: 'restart' } },
          { name: 'Stop the payment server', value: { kind: 'stop' } },
        ]
      : [{ name: 'Start the payment server', value: { kind: 'start' } }];
    const todo = nextStepToDo(workspace);
    let choice: Choice;
    try {
      choice = await select<Choice>({
        message: 'Choose a step or an action',
        choices: [...stepChoices, new Separator(), ...serverChoices, { name: 'Quit', value: { kind: 'quit' } }],
        default: stepChoices.find((ch) => ch.value.kind === 'step' && ch.value.step === todo)?.value,
        pageSize: STEPS.length + 4,
        loop: false,
      });
    } catch (err) {
      if (isCancel(err)) return 0;
      throw err;
    }
    if (choice.kind === 'quit') return 0;
    const back = c.dim('\n[Enter] back to the menu ');
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
          { name: 'Read the step', value: 'read' },
          { name: 'Check it', value: 'check' },
          { name: 'Show a hint', value: 'hint' },
          { name: 'Back', value: 'back' },
        ],
        loop: false,
      });
    } catch (err) {
      if (isCancel(err)) continue;
      throw err;
    }
    if (action === 'read') await attempt(() => showCommand(step.id, dir));
    if (action === 'hint') await attempt(() => hintCommand(step.id, dir));
    if (action === 'check') await attempt(async () => (await import('../grader/check-command.js')).checkCommand([step.id], dir));
    if (action !== 'back') await pause(back);
  }
}
