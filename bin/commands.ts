/**
 * The learner's commands: start, stop, restart, status, probe, ledger, show, hint.
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
import type { ChalkInstance } from 'chalk';
import { formatExchange, formatLedger, shellQuote } from '../grader/wire.js';
import type { Step, Track } from '../grader/track.js';
import { allSteps, chooseSteps, currentTrack, isFirstTrack, passedIn, resolveTrack, trackName } from './tracks.js';
import { upgradeFrames } from '../lab/frame.js';
import { DEFAULT_PORT, PROVIDER_LOG, SERVER_LOG, isHealthy, logTail, recordedServer, startLabServer, stopLabServer } from '../lab/runner.js';
import { readSheet, sheetSection } from '../lab/sheet.js';
import fs from 'node:fs';
import { isToolFolder, LAB_DIR, PACKAGE_ROOT, workspaceDir } from '../lab/paths.js';
import { backUp, backupFiles, layWorkspace, listBackups, openWorkspace, readState, sha256, updateState } from '../lab/workspace.js';
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

function printStart(outcome: Awaited<ReturnType<typeof startLabServer>>, workspace: string, out: Output): number {
  const { c } = out;
  switch (outcome.kind) {
    case 'already':
      out.log(t('cli.already', { pid: outcome.pid, port: outcome.port }));
      return 0;
    case 'started':
      if (outcome.movedFrom !== undefined) out.log(c.yellow(t('cli.portMoved', { from: outcome.movedFrom, port: outcome.port })));
      out.log(t('cli.started', { pid: outcome.pid, port: outcome.port, log: path.join(workspace, SERVER_LOG) }));
      return 0;
    case 'failed':
      out.log(c.red(t('cli.startFailed', { reason: outcome.reason })));
      if (outcome.log) out.log(`${t('cli.logEnd', { log: SERVER_LOG })}\n${outcome.log}`);
      return 1;
  }
}

/**
 * `idem-lab start`: lay the workspace for its track (LAB.md in the chosen language, which
 * the workspace then keeps; with `--track advanced` ADVANCED.md too, and an older
 * server.py's frame renewed around the learner's handle_pay: see Track), start the server, show the track's steps and
 * its first step.
 * @param options.brief only lay the workspace and start the server, without the step list
 *   and the first step (the menu shows those itself)
 * @throws SetupError for an unknown --track
 */
export async function startCommand(options: WorkspaceOptions & { lang?: string; port?: number; force?: boolean; brief?: boolean; track?: string }): Promise<number> {
  const out = outputOf(options);
  const { c } = out;
  const workspace = workspaceDir(options);
  // Run in a clone of the tool with no --dir, start would lay the lab out among the tool's own files.
  if (isToolFolder(workspace)) throw new SetupError(t('cli.startInRepository', { dir: workspace }));
  // The command line chose the language (--lang, else this workspace's, else LANG/LC_ALL).
  const lang = language();
  const chosen = options.track === undefined ? undefined : resolveTrack(options.track);
  const track = chosen ?? currentTrack(fs.existsSync(workspace) ? workspace : undefined);
  const report = layWorkspace(workspace, options.force ?? false, lang, track);
  updateState(workspace, (s) => {
    s.lang = lang;
    s.startedAt ??= new Date().toISOString();
    if (chosen) s.track = chosen.id;
  });
  if (report.written.length) out.log(t('cli.laidOut', { files: listOf(report.written), dir: workspace }));
  if (report.kept.length) out.log(t(report.kept.length === 1 ? 'cli.kept.one' : 'cli.kept.many', { files: report.kept.join(', ') }));
  if (report.backup) out.log(c.yellow(t('cli.backedUp', { dir: path.relative(workspace, report.backup) })));
  for (const frame of upgradeFrames(workspace, track)) {
    if (frame.kind === 'upgraded') out.log(c.yellow(t('cli.track.upgraded', { dir: frame.backup })));
    if (frame.kind === 'no-markers') out.log(c.yellow(t('cli.track.noMarkers')));
  }
  const { command } = openWorkspace(workspace);
  const code = printStart(await startLabServer(workspace, command, options.port), workspace, out);
  // Step 01 and the sheet's ./probe.sh run in the workspace: said last, where it is read.
  const cd = cdAdvice(workspace);
  if (options.brief) {
    if (cd) out.log(c.bold(cd));
    return code;
  }
  const onPath = await pathAdvice();
  if (onPath) out.log(`\n${c.yellow(onPath)}`);
  out.log(`\n${t('cli.stepsHeading')}\n${stepList(workspace, c)}\n`);
  out.log(sheetSection(readSheet(workspace), currentTrack(workspace).steps[0].id) ?? '');
  out.log(`\n${c.dim(t('cli.startFooter'))}`);
  if (cd) out.log(c.bold(cd));
  return code;
}

/**
 * `Next: cd /home/me/idem-lab. …` when the current directory is not in `workspace` (the
 * sheet's ./probe.sh and step 01 run there), else undefined. The folder is quoted for a
 * POSIX shell when it needs to be.
 */
export function cdAdvice(workspace: string, cwd: string = process.cwd()): string | undefined {
  const inside = path.relative(workspace, path.resolve(cwd));
  if (inside === '' || (!inside.startsWith('..') && !path.isAbsolute(inside))) return undefined;
  return t('cli.cd', { dir: shellQuote(workspace) });
}

/** `idem-lab stop`: stop the recorded server by its process group. */
export async function stopCommand(options: WorkspaceOptions): Promise<number> {
  const out = outputOf(options);
  const { c } = out;
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const outcome = await stopLabServer(workspace, command);
  if (outcome.damaged !== undefined) out.error(`idem-lab: ${outcome.damaged}`);
  if (outcome.kind === 'none') out.log(t('cli.stop.none'));
  if (outcome.kind === 'dead') out.log(c.yellow(`${t('cli.stop.dead', { pid: outcome.pid, log: SERVER_LOG })}\n${logTail(workspace)}`));
  if (outcome.kind === 'stopped') out.log(t('cli.stop.stopped', { pid: outcome.pid }));
  if (outcome.kind === 'foreign') out.log(c.yellow(t('cli.stop.foreign', { pid: outcome.pid })));
  if (outcome.kind === 'failed') out.log(c.red(t('cli.stop.failed', { pid: outcome.pid })));
  return outcome.kind === 'failed' ? 1 : 0;
}

/** `idem-lab restart`: stop, then start on the same port. */
export async function restartCommand(options: WorkspaceOptions): Promise<number> {
  const out = outputOf(options);
  const { c } = out;
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const stopped = await stopLabServer(workspace, command);
  if (stopped.kind === 'stopped') out.log(t('cli.stop.stopped', { pid: stopped.pid }));
  if (stopped.kind === 'dead') out.log(c.yellow(t('cli.restart.dead', { pid: stopped.pid })));
  if (stopped.kind === 'foreign') out.log(c.yellow(t('cli.stop.foreign', { pid: stopped.pid })));
  if (stopped.kind === 'failed') {
    out.log(c.red(t('cli.stop.failed', { pid: stopped.pid })));
    return 1;
  }
  return printStart(await startLabServer(workspace, command), workspace, out);
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

/** `idem-lab show [N]`: the step's section of the lab sheet; without N, the current step's. */
export function showCommand(selector: string | undefined, options: WorkspaceOptions): number {
  const out = outputOf(options);
  const workspace = workspaceDir(options);
  const step = stepOrCurrent(selector, workspace);
  const section = sheetSection(readSheet(workspace), step.id);
  if (!section) throw new SetupError(t('cli.show.noSection', { id: step.id }));
  out.log(section);
  return 0;
}

/**
 * `idem-lab hint [N]`: the step's next hint, one more each time (without N, the current
 * step's); `--reset` starts over.
 * @param options.more the line under the hints while more remain: what gives the next
 *   one where the hints are shown (default: run `idem-lab hint N` again)
 */
export function hintCommand(selector: string | undefined, options: WorkspaceOptions & { reset?: boolean; more?: string }): number {
  const out = outputOf(options);
  const { c } = out;
  const workspace = workspaceDir(options);
  const step = stepOrCurrent(selector, workspace);
  let before = 0;
  const state = updateState(workspace, (s) => {
    before = options.reset ? 0 : (s.hintsShown?.[step.id] ?? 0);
    s.hintsShown = { ...(s.hintsShown ?? {}), [step.id]: Math.min(before + 1, step.hints.length) };
  });
  const shown = state.hintsShown?.[step.id] ?? 1;
  const hints = step.hints;
  hints.slice(0, shown).forEach((hint, i) => out.log(t('cli.hint', { n: i + 1, total: hints.length, id: step.id, slug: step.slug, hint })));
  // Past the last hint, say there are no more rather than "that was the last" again.
  const last = before >= hints.length ? t('cli.hint.none', { id: step.id, total: hints.length }) : t('cli.hint.last', { id: step.id });
  out.log(c.dim(shown < hints.length ? (options.more ?? t('cli.hint.more', { id: step.id })) : last));
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

/**
 * The folder on PATH (`env.PATH`) holding an executable named `name`, or undefined.
 * Entries inside node_modules/.bin are skipped: npx and npm scripts add those for one run
 * only, and the learner's own shell will not have them.
 */
export function onPath(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir === '' || dir.split(path.sep).includes('node_modules')) continue;
    try {
      fs.accessSync(path.join(dir, name), fs.constants.X_OK);
      return dir;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * When `idem-lab` does not resolve on PATH (so the lab sheet's `idem-lab check 05` would
 * be "command not found"), the exact fix for this machine, in the learner's language;
 * undefined when it resolves. The fix is `export PATH=...` when npm's global bin folder
 * already holds idem-lab (linked, but that folder is not on PATH), else `npm link` in this
 * package's folder, with a user-level npm prefix first when the global one is not writable.
 */
export async function pathAdvice(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  if (onPath('idem-lab', env)) return undefined;
  const { execa } = await import('execa');
  const prefix = await execa('npm', ['prefix', '-g'], { env, reject: false, timeout: 10_000, stdin: 'ignore' });
  const bin = prefix.exitCode === 0 && String(prefix.stdout).trim() ? path.join(String(prefix.stdout).trim(), 'bin') : undefined;
  const root = PACKAGE_ROOT;
  if (bin && fs.existsSync(path.join(bin, 'idem-lab'))) {
    return t('cli.path.notOnPath', { fix: `export PATH="${bin}:$PATH"`, bin });
  }
  let writable = false;
  try {
    if (bin) fs.accessSync(fs.existsSync(bin) ? bin : path.dirname(bin), fs.constants.W_OK);
    writable = bin !== undefined;
  } catch {
    writable = false;
  }
  const fix = writable
    ? `cd ${shellQuote(root)} && npm link`
    : `npm config set prefix ~/.npm-global && export PATH="$HOME/.npm-global/bin:$PATH" && cd ${shellQuote(root)} && npm link`;
  return t('cli.path.notLinked', { fix });
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

/** `1 h 12 min` or `42 min` (at least 1 min), in the learner's language. */
export function formatDuration(ms: number): string {
  const minutes = Math.max(1, Math.round(ms / 60_000));
  return minutes >= 60 ? t('summary.hours', { h: Math.floor(minutes / 60), m: minutes % 60 }) : t('summary.minutes', { m: minutes });
}

/**
 * The end-of-track summary, for when every step of `track` (default: the workspace's)
 * passes: what each step proved, how long the lab took (from `startedAt` in state.json,
 * else the workspace's .idem-lab folder, to the last pass), where the learner's answers
 * are, and how to see the reference answers; coloured by `c` (default: as stdout allows).
 */
export function labSummary(workspace: string, c: ChalkInstance = processOutput().c, track: Track = currentTrack(workspace)): string {
  const state = readState(workspace);
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
