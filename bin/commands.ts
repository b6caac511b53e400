/**
 * The learner's commands that no other command runs: status, probe, ledger, statement,
 * solution, reset, restore. (start, stop, restart: shared/lab-server.ts; show, hint:
 * shared/step-texts.ts; the menu runs those too.)
 * Each prints through the Output it is given (`options.out`, see output.ts; default the
 * process's own streams) and returns the process exit code (0 done, 1 failed, 2 setup).
 */
import path from 'node:path';
import { language, listOf, type MessageKey, t } from '../i18n/index.js';
import { send, DEFAULT_PAYMENT } from '../grader/http.js';
import { readLedger } from '../grader/ledger.js';
import { formatStatement, readStatement } from '../grader/statement.js';
import { SetupError } from '../grader/failure.js';
import { formatProgress } from '../grader/reporters/human.js';
import { formatExchange, formatLedger } from '../grader/wire.js';
import type { Step } from '../grader/track.js';
import { allSteps, chooseSteps, currentTrack, passedIn } from './shared/tracks.js';
import { DEFAULT_PORT, PROVIDER_LOG, SERVER_LOG, isHealthy, recordedServer } from '../lab/runner.js';
import fs from 'node:fs';
import { LAB_DIR } from '../lab/paths.js';
import { backUp, backupFiles, listBackups, openWorkspace, readState, sha256, updateState } from '../lab/workspace.js';
import { outputOf } from './shared/output.js';
import { localTime, workspaceDir, type WorkspaceOptions } from './shared/progress.js';

/** `idem-lab status`: the server's state and every step's last verdict. */
export async function statusCommand(options: WorkspaceOptions): Promise<number> {
  const out = outputOf(options);
  const { c } = out;
  const { workspace } = openWorkspace(workspaceDir(options));
  const state = readState(workspace);
  const recorded = recordedServer(workspace, state);
  if (recorded.kind === 'none') {
    out.log(t('cli.status.none'));
  } else if (recorded.kind === 'gone') {
    out.log(c.yellow(t('cli.status.crashed', { pid: recorded.pid, log: SERVER_LOG })));
  } else if (recorded.kind === 'foreign') {
    out.log(c.yellow(t('cli.status.foreign', { pid: recorded.pid })));
  } else {
    const healthy = state.port ? await isHealthy(state.port) : false;
    out.log(`${t('cli.status.running', { pid: recorded.pid, port: String(state.port) })}${healthy ? '' : c.yellow(t('cli.status.unhealthy'))}`);
  }
  const steps = state.steps ?? {};
  const track = currentTrack(workspace);
  out.log(formatProgress(passedIn(track, workspace), track.steps.length, c) + '\n');
  for (const step of track.steps) {
    const s = steps[step.id];
    const when = s?.passedAt ? c.dim(`  ${t('cli.status.lastPassed', { when: localTime(s.passedAt) })}`) : s ? c.dim(`  ${t('cli.status.lastChecked', { when: localTime(s.checkedAt) })}`) : '';
    const mark = !s ? c.dim(t('cli.status.notTried')) : s.status === 'pass' ? c.green(t('cli.status.passed')) : c.red(t('cli.status.failed'));
    out.log(`  ${step.id} ${step.slug.padEnd(9)} ${mark}${when}`);
  }
  return 0;
}

/** `idem-lab probe [KEY] [BODY]`: one POST /pay to the running server, printed as probe.sh does. */
export async function probeCommand(key: string | undefined, body: string | undefined, options: WorkspaceOptions & { port?: number }): Promise<number> {
  const out = outputOf(options);
  const { c } = out;
  const workspace = workspaceDir(options);
  const port = options.port ?? readState(workspace).port ?? DEFAULT_PORT;
  const exchange = await send({ label: 'lab', port }, 'POST', '/pay', { key, body: body ?? JSON.stringify(DEFAULT_PAYMENT) }, { connectMs: 2000, answerMs: 10_000 });
  for (const line of formatExchange(exchange)) out.log(line);
  if (exchange.error) {
    out.log(c.dim(t('cli.probe.noServer', { port })));
    return 1;
  }
  return 0;
}

/** `idem-lab ledger`: every ledger row of the workspace's lab.db, as ledger.sh prints them. */
export function ledgerCommand(options: WorkspaceOptions): number {
  const out = outputOf(options);
  const workspace = workspaceDir(options);
  const db = path.resolve(workspace, process.env.IDEM_DB ?? 'lab.db');
  for (const line of formatLedger(ledgerRows(db))) out.log(line);
  return 0;
}

/**
 * The ledger rows of the learner's database (grader/ledger.ts readLedger).
 * @throws SetupError in one sentence (cli.ledger.unreadable) when the file is damaged or no sqlite database, never a stack trace
 */
function ledgerRows(db: string): ReturnType<typeof readLedger> {
  try {
    return readLedger(db);
  } catch (err) {
    if (err instanceof SetupError) throw err;
    // better-sqlite3 says `file is not a database` (code SQLITE_NOTADB); the file system, its code (EACCES).
    const code = (err as NodeJS.ErrnoException).code;
    throw new SetupError(t('cli.ledger.unreadable', { db, error: code === undefined || code.startsWith('SQLITE') ? (err as Error).message.split('\n')[0] : code }));
  }
}

/**
 * `idem-lab statement`: what the payment provider charged (the workspace's provider.log,
 * or $IDEM_PROVIDER_LOG), each charge beside its ledger row, as ./statement.sh prints it.
 */
export function statementCommand(options: WorkspaceOptions): number {
  const out = outputOf(options);
  const workspace = workspaceDir(options);
  const log = path.resolve(workspace, process.env.IDEM_PROVIDER_LOG ?? PROVIDER_LOG);
  const charges = readStatement(log);
  if (charges === undefined) {
    out.log(t('cli.statement.none', { log }));
    return 1;
  }
  const rows = ledgerRows(path.resolve(workspace, process.env.IDEM_DB ?? 'lab.db'));
  const lines = formatStatement(charges, rows, {
    columns: [t('cli.statement.at'), t('cli.statement.user'), t('cli.statement.amount'), t('cli.statement.pid'), t('cli.statement.ledger')],
    noRow: t('cli.statement.noRow'),
    payment: (id) => t('cli.statement.payment', { id }),
    unpaid: (id) => t('cli.statement.unpaid', { id }),
    summary: (n, m) => t('cli.statement.summary', { charges: n, rows: m }),
  });
  for (const line of lines) out.log(line);
  return 0;
}

/**
 * `idem-lab reset N`: puts back step N's starting point, after copying what it replaces
 * into `.idem-lab/backup/<time>/`: server.py as laid for the live steps 02-06, no answer
 * file for 01, 07 and 08 (the file is moved into the backup).
 * @returns 0
 * @throws SetupError for an unknown step or a folder that is no workspace
 */
export function resetCommand(selector: string, options: WorkspaceOptions): number {
  const out = outputOf(options);
  const { c } = out;
  const { workspace } = openWorkspace(workspaceDir(options));
  const step = chooseSteps([selector], currentTrack(workspace))[0];
  const name = step.live ? 'server.py' : step.file?.name;
  if (!name) throw new SetupError(t('cli.unknownStep', { step: selector, list: listOf(allSteps().map((s) => s.id)) }));
  const file = path.join(workspace, name);
  const backup = backUp(workspace, [name]);
  if (step.live) {
    fs.copyFileSync(path.join(LAB_DIR, 'server.py'), file);
    updateState(workspace, (s) => {
      s.laid = { ...(s.laid ?? {}), 'server.py': sha256(file) };
    });
    out.log(t('cli.reset.server', { id: step.id }));
  } else if (backup) {
    fs.rmSync(file, { force: true });
    out.log(t('cli.reset.file', { file: name, id: step.id }));
  } else {
    out.log(t('cli.reset.nothing', { file: name }));
  }
  if (backup) out.log(c.yellow(t('cli.backedUp', { dir: path.relative(workspace, backup) })));
  return 0;
}

/**
 * `idem-lab restore [BACKUP]`: copies the files of a backup back into the workspace, after
 * backing up the versions it replaces. Without BACKUP it takes the newest backup that
 * `start --force`, `reset` or `track` made, never one a restore made (recorded in the
 * state's restoreBackups), so running it twice puts back the same files and the second
 * run changes nothing and says so; the restore's own backup is undone by naming it, as
 * the output says.
 * @returns 0, or 2 when there is no backup
 * @throws SetupError for a folder that is no workspace or a backup that does not exist
 */
export function restoreCommand(which: string | undefined, options: WorkspaceOptions): number {
  const out = outputOf(options);
  const { c } = out;
  const workspace = workspaceDir(options);
  const backups = listBackups(workspace);
  if (backups.length === 0) throw new SetupError(t('cli.restore.none'));
  const madeByRestore = new Set(readState(workspace).restoreBackups ?? []);
  const plain = backups.filter((b) => !madeByRestore.has(path.basename(b)));
  const chosen = which === undefined ? (plain.length > 0 ? plain : backups)[(plain.length > 0 ? plain : backups).length - 1] : backups.find((b) => path.basename(b) === path.basename(which));
  if (!chosen) throw new SetupError(t('cli.restore.unknown', { backup: which ?? '', list: listOf(backups.map((b) => path.basename(b))) }));
  const files = backupFiles(chosen);
  const changed = files.filter((f) => !fs.existsSync(path.join(workspace, f)) || sha256(path.join(workspace, f)) !== sha256(path.join(chosen, f)));
  if (changed.length === 0) {
    out.log(t('cli.restore.already', { files: listOf(files), dir: path.relative(workspace, chosen) }));
    return 0;
  }
  const before = backUp(workspace, changed);
  if (before) {
    updateState(workspace, (s) => {
      s.restoreBackups = [...(s.restoreBackups ?? []), path.basename(before)];
    });
  }
  for (const f of changed) {
    fs.mkdirSync(path.dirname(path.join(workspace, f)), { recursive: true });
    fs.copyFileSync(path.join(chosen, f), path.join(workspace, f));
  }
  out.log(t('cli.restore.done', { files: listOf(changed), dir: path.relative(workspace, chosen) }));
  if (before) out.log(c.yellow(t('cli.restore.undo', { dir: path.relative(workspace, before), name: path.basename(before) })));
  if (changed.includes('server.py')) out.log(c.dim(t('cli.restore.restart')));
  return 0;
}

/** The folder of the reference answers `idem-lab solution` shows; never copied into a workspace. */
export const ANSWERS_DIR = path.join(LAB_DIR, 'answers');

/**
 * The reference answer files of a step in `lab/answers/`, absolute paths: for a live step
 * its handle_pay (`NN-slug.py`), for a step with a file that file (`NN-slug.txt`, or
 * `NN-slug.<lang>.md` for prose, in the learner's language).
 */
export function answerFiles(step: Step, lang = language()): { server?: string; file?: string } {
  const base = path.join(ANSWERS_DIR, `${step.id}-${step.slug}`);
  const out: { server?: string; file?: string } = {};
  // A live step without a handle_pay of its own shares the latest earlier one (06's is 05's).
  if (step.live) {
    out.server = allSteps().filter((s) => s.live && s.id <= step.id)
      .map((s) => path.join(ANSWERS_DIR, `${s.id}-${s.slug}.py`))
      .reverse()
      .find((f) => fs.existsSync(f));
  }
  if (step.file) {
    const ext = path.extname(step.file.name);
    const candidates = [`${base}.${lang}${ext}`, `${base}${ext}`, `${base}.en${ext}`];
    out.file = candidates.find((f) => fs.existsSync(f));
  }
  return out;
}

/**
 * `idem-lab solution [N]`: a reference answer for a step that passes (its last verdict in
 * state.json), as rustlings shows its solutions once an exercise is done: what the answer
 * does, then its handle_pay and its file. Without N, the last step that passed.
 * @returns 0
 * @throws SetupError for an unknown step or one that does not pass yet
 */
export function solutionCommand(selector: string | undefined, options: WorkspaceOptions): number {
  const out = outputOf(options);
  const { c } = out;
  const workspace = workspaceDir(options);
  const steps = readState(workspace).steps ?? {};
  const track = currentTrack(workspace);
  const passing = track.steps.filter((s) => steps[s.id]?.status === 'pass');
  const step = selector !== undefined ? chooseSteps([selector], track)[0] : (passing[passing.length - 1] ?? track.steps[0]);
  if (steps[step.id]?.status !== 'pass') throw new SetupError(t('solution.notPassed', { id: step.id }));
  const answer = answerFiles(step);
  out.log(c.bold(t('solution.heading', { id: step.id, slug: step.slug })));
  out.log(t(`answer.${step.id}` as MessageKey));
  if (answer.server) out.log(`\n${c.dim(t('solution.server'))}\n\n${fs.readFileSync(answer.server, 'utf8').trimEnd()}`);
  if (answer.file && step.file) out.log(`\n${c.dim(t('solution.file', { file: step.file.name }))}\n\n${fs.readFileSync(answer.file, 'utf8').trimEnd()}`);
  // The npm package leaves the reference answers out (they are the graded work); a clone of the repository has them.
  if (!answer.server && !answer.file) out.log(`\n${c.dim(t('solution.notShipped'))}`);
  return 0;
}

