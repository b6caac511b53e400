/**
 * The learner's commands: start, stop, restart, status, probe, ledger, show, hint.
 * Each prints to stdout and returns the process exit code (0 done, 1 failed, 2 setup).
 */
import path from 'node:path';
import { send, DEFAULT_PAYMENT } from '../grader/http.js';
import { readLedger } from '../grader/ledger.js';
import { SetupError } from '../grader/failure.js';
import { colourFor, formatProgress } from '../grader/reporters/human.js';
import { formatExchange, formatLedger } from '../grader/wire.js';
import { STEPS, selectSteps } from '../steps/index.js';
import { DEFAULT_PORT, SERVER_LOG, isHealthy, isServerProcess, logTail, startLabServer, stopLabServer } from './runner.js';
import { readSheet, sheetSection, SHEET_LANGUAGES } from './sheet.js';
import { layWorkspace, openWorkspace, readState, updateState } from './workspace.js';

const c = colourFor(process.stdout);

/** Options every workspace command takes. */
export interface WorkspaceOptions {
  dir?: string;
}

/** The workspace folder: --dir, else the current directory. */
export function workspaceDir(options: WorkspaceOptions): string {
  return path.resolve(options.dir ?? process.cwd());
}

/** The step list with each step's last verdict: `✓ 01 duplicate  Reproduce ...`. */
export function stepList(workspace: string | undefined): string {
  const steps = workspace ? (readState(workspace).steps ?? {}) : {};
  return STEPS.map((step) => {
    const state = steps[step.id];
    const mark = !state ? c.dim('·') : state.status === 'pass' ? c.green('✓') : c.red('✗');
    const file = step.file ? c.dim(`  ${step.file.name}`) : '';
    return `  ${mark} ${step.id} ${step.slug.padEnd(9)} ${step.title}${file}`;
  }).join('\n');
}

function printStart(outcome: Awaited<ReturnType<typeof startLabServer>>, workspace: string): number {
  switch (outcome.kind) {
    case 'already':
      console.log(`The payment server is already running (pid ${outcome.pid}) on http://127.0.0.1:${outcome.port}.`);
      return 0;
    case 'started':
      if (outcome.movedFrom !== undefined) console.log(c.yellow(`Port ${outcome.movedFrom} is taken by another program; using ${outcome.port}.`));
      console.log(`Started the payment server (pid ${outcome.pid}) on http://127.0.0.1:${outcome.port}; its output goes to ${path.join(workspace, SERVER_LOG)}.`);
      return 0;
    case 'failed':
      console.log(c.red(`The payment server did not start: ${outcome.reason}.`));
      if (outcome.log) console.log(`The end of ${SERVER_LOG}:\n${outcome.log}`);
      return 1;
  }
}

/** `idem-lab start`: lay the workspace, start the server, show the steps and step 01. */
/**
 * @param options.brief only lay the workspace and start the server, without the step list
 *   and step 01 (the menu shows those itself)
 */
export async function startCommand(options: WorkspaceOptions & { lang?: string; port?: number; force?: boolean; brief?: boolean }): Promise<number> {
  const workspace = workspaceDir(options);
  const lang = options.lang ?? 'en';
  if (!(SHEET_LANGUAGES as readonly string[]).includes(lang)) {
    console.log(c.yellow(`The lab sheet is not yet written in "${lang}"; using English.`));
  }
  const report = layWorkspace(workspace, options.force ?? false);
  updateState(workspace, (s) => {
    s.lang = lang;
  });
  if (report.written.length) console.log(`Laid out ${report.written.join(', ')} in ${workspace}.`);
  if (report.kept.length) console.log(`Kept your changed ${report.kept.join(', ')} (idem-lab start --force resets ${report.kept.length === 1 ? 'it' : 'them'}).`);
  const { command } = openWorkspace(workspace);
  const code = printStart(await startLabServer(workspace, command, options.port), workspace);
  if (options.brief) return code;
  console.log(`\nThe steps:\n${stepList(workspace)}\n`);
  console.log(sheetSection(readSheet(workspace), '01') ?? '');
  console.log(`\n${c.dim('idem-lab show N reads a step, idem-lab check N grades it, idem-lab status shows where you are.')}`);
  return code;
}

/** `idem-lab stop`: stop the recorded server by its process group. */
export async function stopCommand(options: WorkspaceOptions): Promise<number> {
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const outcome = await stopLabServer(workspace, command);
  if (outcome.kind === 'none') console.log('No payment server was started here (nothing recorded in .idem-lab/state.json).');
  if (outcome.kind === 'dead') console.log(c.yellow(`The payment server (pid ${outcome.pid}) was not running any more: it may have crashed. The end of ${SERVER_LOG}:\n${logTail(workspace)}`));
  if (outcome.kind === 'stopped') console.log(`Stopped the payment server (pid ${outcome.pid}).`);
  return 0;
}

/** `idem-lab restart`: stop, then start on the same port. */
export async function restartCommand(options: WorkspaceOptions): Promise<number> {
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const stopped = await stopLabServer(workspace, command);
  if (stopped.kind === 'stopped') console.log(`Stopped the payment server (pid ${stopped.pid}).`);
  if (stopped.kind === 'dead') console.log(c.yellow(`The payment server (pid ${stopped.pid}) had already stopped.`));
  return printStart(await startLabServer(workspace, command), workspace);
}

/** `idem-lab status`: the server's state and every step's last verdict. */
export async function statusCommand(options: WorkspaceOptions): Promise<number> {
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const state = readState(workspace);
  if (!state.pid) {
    console.log('Server: not running (idem-lab start starts it).');
  } else if (!isServerProcess(state.pid, command)) {
    console.log(c.yellow(`Server: pid ${state.pid} is recorded but no longer running; it may have crashed (see ${SERVER_LOG}). idem-lab restart starts it again.`));
  } else {
    const healthy = state.port ? await isHealthy(state.port) : false;
    console.log(`Server: running, pid ${state.pid}, http://127.0.0.1:${state.port}${healthy ? '' : c.yellow(' (not answering GET /health)')}`);
  }
  const steps = state.steps ?? {};
  const passed = STEPS.filter((s) => steps[s.id]?.status === 'pass').length;
  console.log(formatProgress(passed, STEPS.length, c) + '\n');
  for (const step of STEPS) {
    const s = steps[step.id];
    const when = s?.passedAt ? c.dim(`  last passed ${s.passedAt}`) : s ? c.dim(`  last checked ${s.checkedAt}`) : '';
    const mark = !s ? c.dim('· not tried') : s.status === 'pass' ? c.green('✓ passed') : c.red('✗ failed');
    console.log(`  ${step.id} ${step.slug.padEnd(9)} ${mark}${when}`);
  }
  return 0;
}

/** `idem-lab probe [KEY] [BODY]`: one POST /pay to the running server, printed as probe.sh does. */
export async function probeCommand(key: string | undefined, body: string | undefined, options: WorkspaceOptions & { port?: number }): Promise<number> {
  const workspace = workspaceDir(options);
  const port = options.port ?? readState(workspace).port ?? DEFAULT_PORT;
  const exchange = await send({ label: 'lab', port }, 'POST', '/pay', { key, body: body ?? JSON.stringify(DEFAULT_PAYMENT) }, { connectMs: 2000, answerMs: 10_000 });
  for (const line of formatExchange(exchange)) console.log(line);
  if (exchange.error) {
    console.log(c.dim(`(is the server running on port ${port}? idem-lab status)`));
    return 1;
  }
  return 0;
}

/** `idem-lab ledger`: every ledger row of the workspace's lab.db, as ledger.sh prints them. */
export function ledgerCommand(options: WorkspaceOptions): number {
  const workspace = workspaceDir(options);
  const db = path.resolve(workspace, process.env.IDEM_DB ?? 'lab.db');
  for (const line of formatLedger(readLedger(db))) console.log(line);
  return 0;
}

/** `idem-lab show N`: the step's section of the lab sheet. */
export function showCommand(selector: string, options: WorkspaceOptions): number {
  const [step] = selectSteps([selector]);
  const section = sheetSection(readSheet(workspaceDir(options)), step.id);
  if (!section) throw new SetupError(`the lab sheet has no section for step ${step.id}`);
  console.log(section);
  return 0;
}

/** `idem-lab hint N`: the step's next hint, one more each time; `--reset` starts over. */
export function hintCommand(selector: string, options: WorkspaceOptions & { reset?: boolean }): number {
  const [step] = selectSteps([selector]);
  const workspace = workspaceDir(options);
  const state = updateState(workspace, (s) => {
    const shown = options.reset ? 0 : (s.hintsShown?.[step.id] ?? 0);
    s.hintsShown = { ...(s.hintsShown ?? {}), [step.id]: Math.min(shown + 1, step.hints.length) };
  });
  const shown = state.hintsShown?.[step.id] ?? 1;
  step.hints.slice(0, shown).forEach((hint, i) => console.log(`Hint ${i + 1} of ${step.hints.length} for ${step.id} ${step.slug}: ${hint}`));
  if (shown < step.hints.length) console.log(c.dim(`idem-lab hint ${step.id} again for the next one.`));
  return 0;
}
