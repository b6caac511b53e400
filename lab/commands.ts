/**
 * The learner's commands: start, stop, restart, status, probe, ledger, show, hint.
 * Each prints to stdout and returns the process exit code (0 done, 1 failed, 2 setup).
 */
import path from 'node:path';
import { language, t } from '../i18n/index.js';
import { send, DEFAULT_PAYMENT } from '../grader/http.js';
import { readLedger } from '../grader/ledger.js';
import { formatStatement, readStatement } from '../grader/statement.js';
import { SetupError } from '../grader/failure.js';
import { colourFor, formatProgress } from '../grader/reporters/human.js';
import { formatExchange, formatLedger } from '../grader/wire.js';
import { STEPS, selectSteps } from '../steps/index.js';
import { DEFAULT_PORT, PROVIDER_LOG, SERVER_LOG, isHealthy, logTail, recordedServer, startLabServer, stopLabServer } from './runner.js';
import { readSheet, sheetSection } from './sheet.js';
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
      console.log(t('cli.already', { pid: outcome.pid, port: outcome.port }));
      return 0;
    case 'started':
      if (outcome.movedFrom !== undefined) console.log(c.yellow(t('cli.portMoved', { from: outcome.movedFrom, port: outcome.port })));
      console.log(t('cli.started', { pid: outcome.pid, port: outcome.port, log: path.join(workspace, SERVER_LOG) }));
      return 0;
    case 'failed':
      console.log(c.red(t('cli.startFailed', { reason: outcome.reason })));
      if (outcome.log) console.log(`${t('cli.logEnd', { log: SERVER_LOG })}\n${outcome.log}`);
      return 1;
  }
}

/**
 * `idem-lab start`: lay the workspace (LAB.md in the chosen language, which the workspace
 * then keeps), start the server, show the steps and step 01.
 * @param options.brief only lay the workspace and start the server, without the step list
 *   and step 01 (the menu shows those itself)
 */
export async function startCommand(options: WorkspaceOptions & { lang?: string; port?: number; force?: boolean; brief?: boolean }): Promise<number> {
  const workspace = workspaceDir(options);
  // The command line chose the language (--lang, else this workspace's, else LANG/LC_ALL).
  const lang = language();
  const report = layWorkspace(workspace, options.force ?? false, lang);
  updateState(workspace, (s) => {
    s.lang = lang;
  });
  if (report.written.length) console.log(t('cli.laidOut', { files: report.written.join(', '), dir: workspace }));
  if (report.kept.length) console.log(t(report.kept.length === 1 ? 'cli.kept.one' : 'cli.kept.many', { files: report.kept.join(', ') }));
  const { command } = openWorkspace(workspace);
  const code = printStart(await startLabServer(workspace, command, options.port), workspace);
  if (options.brief) return code;
  console.log(`\n${t('cli.stepsHeading')}\n${stepList(workspace)}\n`);
  console.log(sheetSection(readSheet(workspace), '01') ?? '');
  console.log(`\n${c.dim(t('cli.startFooter'))}`);
  return code;
}

/** `idem-lab stop`: stop the recorded server by its process group. */
export async function stopCommand(options: WorkspaceOptions): Promise<number> {
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const outcome = await stopLabServer(workspace, command);
  if (outcome.kind === 'none') console.log(t('cli.stop.none'));
  if (outcome.kind === 'dead') console.log(c.yellow(`${t('cli.stop.dead', { pid: outcome.pid, log: SERVER_LOG })}\n${logTail(workspace)}`));
  if (outcome.kind === 'stopped') console.log(t('cli.stop.stopped', { pid: outcome.pid }));
  if (outcome.kind === 'foreign') console.log(c.yellow(t('cli.stop.foreign', { pid: outcome.pid })));
  if (outcome.kind === 'failed') console.log(c.red(t('cli.stop.failed', { pid: outcome.pid })));
  return outcome.kind === 'failed' ? 1 : 0;
}

/** `idem-lab restart`: stop, then start on the same port. */
export async function restartCommand(options: WorkspaceOptions): Promise<number> {
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const stopped = await stopLabServer(workspace, command);
  if (stopped.kind === 'stopped') console.log(t('cli.stop.stopped', { pid: stopped.pid }));
  if (stopped.kind === 'dead') console.log(c.yellow(t('cli.restart.dead', { pid: stopped.pid })));
  if (stopped.kind === 'foreign') console.log(c.yellow(t('cli.stop.foreign', { pid: stopped.pid })));
  if (stopped.kind === 'failed') {
    console.log(c.red(t('cli.stop.failed', { pid: stopped.pid })));
    return 1;
  }
  return printStart(await startLabServer(workspace, command), workspace);
}

/** `idem-lab status`: the server's state and every step's last verdict. */
export async function statusCommand(options: WorkspaceOptions): Promise<number> {
  const { workspace } = openWorkspace(workspaceDir(options));
  const state = readState(workspace);
  const recorded = recordedServer(workspace, state);
  if (recorded.kind === 'none') {
    console.log(t('cli.status.none'));
  } else if (recorded.kind === 'gone') {
    console.log(c.yellow(t('cli.status.crashed', { pid: recorded.pid, log: SERVER_LOG })));
  } else if (recorded.kind === 'foreign') {
    console.log(c.yellow(t('cli.status.foreign', { pid: recorded.pid })));
  } else {
    const healthy = state.port ? await isHealthy(state.port) : false;
    console.log(`${t('cli.status.running', { pid: recorded.pid, port: String(state.port) })}${healthy ? '' : c.yellow(t('cli.status.unhealthy'))}`);
  }
  const steps = state.steps ?? {};
  const passed = STEPS.filter((s) => steps[s.id]?.status === 'pass').length;
  console.log(formatProgress(passed, STEPS.length, c) + '\n');
  for (const step of STEPS) {
    const s = steps[step.id];
    const when = s?.passedAt ? c.dim(`  ${t('cli.status.lastPassed', { when: s.passedAt })}`) : s ? c.dim(`  ${t('cli.status.lastChecked', { when: s.checkedAt })}`) : '';
    const mark = !s ? c.dim(t('cli.status.notTried')) : s.status === 'pass' ? c.green(t('cli.status.passed')) : c.red(t('cli.status.failed'));
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
    console.log(c.dim(t('cli.probe.noServer', { port })));
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

/**
 * `idem-lab statement`: what the payment provider charged (the workspace's provider.log,
 * or $IDEM_PROVIDER_LOG), each charge beside its ledger row, as ./statement.sh prints it.
 */
export function statementCommand(options: WorkspaceOptions): number {
  const workspace = workspaceDir(options);
  const log = path.resolve(workspace, process.env.IDEM_PROVIDER_LOG ?? PROVIDER_LOG);
  const charges = readStatement(log);
  if (charges === undefined) {
    console.log(t('cli.statement.none', { log }));
    return 1;
  }
  const rows = readLedger(path.resolve(workspace, process.env.IDEM_DB ?? 'lab.db'));
  const lines = formatStatement(charges, rows, {
    columns: [t('cli.statement.at'), t('cli.statement.user'), t('cli.statement.amount'), t('cli.statement.pid'), t('cli.statement.ledger')],
    noRow: t('cli.statement.noRow'),
    payment: (id) => t('cli.statement.payment', { id }),
    unpaid: (id) => t('cli.statement.unpaid', { id }),
    summary: (n, m) => t('cli.statement.summary', { charges: n, rows: m }),
  });
  for (const line of lines) console.log(line);
  return 0;
}

/** `idem-lab show N`: the step's section of the lab sheet. */
export function showCommand(selector: string, options: WorkspaceOptions): number {
  const [step] = selectSteps([selector]);
  const section = sheetSection(readSheet(workspaceDir(options)), step.id);
  if (!section) throw new SetupError(t('cli.show.noSection', { id: step.id }));
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
  const hints = step.hints;
  hints.slice(0, shown).forEach((hint, i) => console.log(t('cli.hint', { n: i + 1, total: hints.length, id: step.id, slug: step.slug, hint })));
  console.log(c.dim(shown < hints.length ? t('cli.hint.more', { id: step.id }) : t('cli.hint.last', { id: step.id })));
  return 0;
}
