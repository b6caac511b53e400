import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SetupError } from '../grader/failure.js';
import { DEFAULT_COMMAND, type ServerCommand } from '../grader/server.js';
import { readRegularSync } from '../grader/safe-read.js';
import type { Status } from '../grader/types.js';
import { isToolFolder, LAB_DIR } from './paths.js';
import { isSameProcess, processIdentity } from './procs.js';
import { copyFileAtomic, makeDir, rethrowFileProblem, writeFileAtomic } from './safe-fs.js';
import { CATALOGS, jsonErrorWhere, t, type Lang } from '../i18n/index.js';
import type { Track } from '../grader/track.js';
import { DEFAULT_TRACK, trackById } from '../steps/index.js';

/**
 * A track and the tracks it builds on, the first one first: `advanced` gives
 * [basic, advanced]. What a workspace on a track gets is what each of them lays.
 */
export function lineage(track: Track): Track[] {
  const chain: Track[] = [];
  for (let t: Track | undefined = track; t && !chain.includes(t); t = t.buildsOn) chain.unshift(t);
  return chain;
}

/**
 * Files `idem-lab start` copies into a workspace following `track`: [bundled file (an
 * absolute path, or relative to lab/), name in the workspace, executable]. Each track of
 * its lineage lays its files, then its sheet in `lang` (the basic track: server.py, the
 * scripts, LAB.md; the advanced track adds ADVANCED.md, and the basic track's files stay).
 */
export function labFiles(lang: Lang = 'en', track: Track = DEFAULT_TRACK): ReadonlyArray<readonly [string, string, boolean]> {
  return lineage(track).flatMap((t) => [
    ...(t.files ?? []).map((f) => [f.source, f.name, f.executable ?? false] as const),
    ...(t.sheet ? [[t.sheet.source(lang), t.sheet.name, false] as const] : []),
  ]);
}

/** The runner's folder inside a workspace. */
export const STATE_DIR = '.idem-lab';

/** The last verdict of one step, kept for `idem-lab status`. */
export interface StepState {
  status: Status;
  /** ISO-8601 time of the last check. */
  checkedAt: string;
  /** ISO-8601 time of the last check that passed. */
  passedAt?: string;
}

/** `.idem-lab/state.json`: the server the runner started, the language, and per-step verdicts. */
export interface WorkspaceState {
  /** pid of the detached server, also its process group id. */
  pid?: number;
  /** The server's start time (field 22 of /proc/<pid>/stat): with `pid`, proof that a live process is the one started. */
  startTime?: number;
  /** The folder the server was started in (real path): a process elsewhere is not this workspace's server. */
  cwd?: string;
  port?: number;
  /** The learner's language (en, ko or zh), chosen at start; `--lang` overrides it per command. */
  lang?: string;
  /** sha256 of each file as `start` laid it, to tell a learner's change from the original. */
  laid?: Record<string, string>;
  steps?: Record<string, StepState>;
  /** ISO-8601 time of the first `idem-lab start` here: where the lab's duration is counted from. */
  startedAt?: string;
  /** How many hints of each step were shown, by step id. */
  hintsShown?: Record<string, number>;
  /** The id of the track the learner follows (one of steps/index.ts TRACKS), chosen by `start --track` or `idem-lab track`; basic when absent. */
  track?: string;
  /** Names of the backup folders `idem-lab restore` made of the files it replaced: a plain `restore` passes over them, so running it twice puts back the same backup, never undoing itself. */
  restoreBackups?: string[];
}

/** The sha256 of a file's bytes, as hex. */
export function sha256(file: string): string {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** The state file of a workspace: `<workspace>/.idem-lab/state.json`. */
export function statePath(workspace: string): string {
  return path.join(workspace, STATE_DIR, 'state.json');
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isWhole = (v: unknown, min: number, max = Number.MAX_SAFE_INTEGER) => Number.isInteger(v) && (v as number) >= min && (v as number) <= max;

/** What is wrong with a parsed state file, as a short phrase; undefined when it is a WorkspaceState. */
function stateProblem(state: unknown): string | undefined {
  if (!isRecord(state)) return t('state.problem.notObject');
  const wrong = (field: string) => t('state.problem.field', { field });
  if (state.pid !== undefined && !isWhole(state.pid, 1)) return wrong('pid');
  if (state.startTime !== undefined && !isWhole(state.startTime, 0)) return wrong('startTime');
  if (state.cwd !== undefined && typeof state.cwd !== 'string') return wrong('cwd');
  if (state.port !== undefined && !isWhole(state.port, 1, 65535)) return wrong('port');
  if (state.lang !== undefined && typeof state.lang !== 'string') return wrong('lang');
  if (state.track !== undefined && !(typeof state.track === 'string' && trackById(state.track))) return wrong('track');
  if (state.laid !== undefined && !(isRecord(state.laid) && Object.values(state.laid).every((v) => typeof v === 'string'))) return wrong('laid');
  if (state.restoreBackups !== undefined && !(Array.isArray(state.restoreBackups) && state.restoreBackups.every((v) => typeof v === 'string'))) return wrong('restoreBackups');
  if (state.hintsShown !== undefined && !(isRecord(state.hintsShown) && Object.values(state.hintsShown).every((v) => isWhole(v, 0)))) return wrong('hintsShown');
  if (state.steps !== undefined) {
    if (!isRecord(state.steps)) return wrong('steps');
    for (const [id, step] of Object.entries(state.steps)) {
      const ok = isRecord(step) && ['pass', 'fail', 'error'].includes(step.status as string) && typeof step.checkedAt === 'string' && (step.passedAt === undefined || typeof step.passedAt === 'string');
      if (!ok) return wrong(`steps.${id}`);
    }
  }
  return undefined;
}

/**
 * Keeps a copy of a damaged state file beside it, `state.json.broken-<first 8 hex of its
 * sha256>` (the same damage is copied once), and returns the copy's path, or undefined
 * when no copy could be written.
 */
function keepCopy(file: string, content: Buffer): string | undefined {
  const copy = `${file}.broken-${crypto.createHash('sha256').update(content).digest('hex').slice(0, 8)}`;
  try {
    if (!fs.existsSync(copy)) writeFileAtomic(copy, content);
    return copy;
  } catch {
    return undefined;
  }
}

/**
 * The state file of a workspace; {} when there is none yet.
 * @throws SetupError naming the file when it cannot be read, or holds something other
 *   than a WorkspaceState (truncated, not JSON, `null`, a field of the wrong type); a copy
 *   of it is kept beside it (see keepCopy) and the file itself is left as it is
 */
export function readState(workspace: string): WorkspaceState {
  const file = statePath(workspace);
  let content: Buffer;
  try {
    content = fs.readFileSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new SetupError(t('state.unreadable', { file, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message }));
  }
  let state: unknown;
  let problem: string | undefined;
  try {
    state = JSON.parse(content.toString('utf8'));
    problem = stateProblem(state);
  } catch {
    problem = content.length === 0 ? t('state.problem.empty') : t('state.problem.notJson');
  }
  if (problem === undefined) return state as WorkspaceState;
  const copy = keepCopy(file, content);
  throw new SetupError(copy ? t('state.broken', { file, problem, copy }) : t('state.brokenNoCopy', { file, problem }));
}

/**
 * Writes the state file (creating .idem-lab/), atomically: a crash or a full disk never
 * leaves half a file. Call it under withStateLock (updateState does) when the state was
 * read first, or a parallel command's change is lost.
 * @throws SetupError for a full disk, a read-only workspace or a refused permission
 */
export function writeState(workspace: string, state: WorkspaceState): void {
  makeDir(path.join(workspace, STATE_DIR));
  writeFileAtomic(statePath(workspace), JSON.stringify(state, null, 2) + '\n');
}

/** How long a command waits for another one's hold on the state file, in ms. */
const LOCK_WAIT_MS = 10_000;

/** The state locks this process holds (a second take would wait on itself). */
const held = new Set<string>();

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Takes the workspace's state lock: `.idem-lab/state.lock`, created with O_EXCL and
 * holding "<pid> <start time>" of its holder. A lock whose holder has ended (or whose pid
 * now names another process) is stale and broken. Waits up to 10 s for a live holder.
 * @returns the function that releases the lock (idempotent)
 * @throws SetupError when a live holder keeps it longer, or the folder cannot be written
 */
export function lockState(workspace: string): () => void {
  const dir = path.join(workspace, STATE_DIR);
  const undoDir = makeDir(dir);
  const lock = path.join(dir, 'state.lock');
  if (held.has(lock)) throw new Error(`${lock} is already held by this process: updateState inside withStateLock?`);
  const me = processIdentity(process.pid);
  const mine = `${process.pid} ${me?.startTime ?? 0}\n`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  let holder = '';
  for (;;) {
    try {
      const fd = fs.openSync(lock, 'wx');
      try {
        fs.writeSync(fd, mine);
      } catch (err) {
        fs.closeSync(fd);
        fs.rmSync(lock, { force: true });
        undoDir();
        rethrowFileProblem(err, dir);
      }
      fs.closeSync(fd);
      held.add(lock);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        held.delete(lock);
        try {
          if (fs.readFileSync(lock, 'utf8') === mine) fs.rmSync(lock, { force: true });
        } catch {
          // gone already
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        undoDir();
        rethrowFileProblem(err, dir);
      }
    }
    holder = breakIfStale(lock) ?? holder;
    if (Date.now() > deadline) throw new SetupError(t('state.locked', { file: lock, pid: holder.split(' ')[0] || '?', seconds: LOCK_WAIT_MS / 1000 }));
    sleepSync(5 + Math.random() * 15);
  }
}

/**
 * Removes `lock` when its holder is no longer running; returns the holder's "<pid> <start
 * time>" when it is (or the lock is gone). A lock still empty (its holder between creating
 * and writing it) counts as held for 5 s.
 */
function breakIfStale(lock: string): string | undefined {
  let content: string;
  let stat: fs.Stats;
  try {
    stat = fs.statSync(lock);
    content = fs.readFileSync(lock, 'utf8');
  } catch {
    return undefined; // released meanwhile: try again
  }
  const [pid, start] = content.trim().split(' ').map(Number);
  const live = content.trim() === '' ? Date.now() - stat.mtimeMs < 5000 : pid > 0 && isSameProcess(pid, start);
  if (live) return content.trim();
  try {
    // Remove it only if it is still the same file, not a new holder's that replaced it meanwhile.
    if (fs.statSync(lock).ino === stat.ino) fs.rmSync(lock, { force: true });
  } catch {
    // released meanwhile
  }
  return undefined;
}

/**
 * Runs `fn` holding the workspace's state lock (see lockState), and releases it after,
 * also when `fn` throws or rejects.
 */
export function withStateLock<T>(workspace: string, fn: () => T): T {
  const release = lockState(workspace);
  let result: T;
  try {
    result = fn();
  } catch (err) {
    release();
    throw err;
  }
  if (result instanceof Promise) return result.finally(release) as T;
  release();
  return result;
}

/**
 * Changes the state file by a function of its current content, under the state lock, so
 * that parallel commands (two checks, a check and a hint) each keep their change.
 * @throws SetupError as readState, writeState and lockState do
 */
export function updateState(workspace: string, change: (state: WorkspaceState) => void): WorkspaceState {
  return withStateLock(workspace, () => {
    const state = readState(workspace);
    change(state);
    writeState(workspace, state);
    return state;
  });
}

/** What `layWorkspace` did with each file. */
export interface LayReport {
  /** Files copied because they were missing or out of date. */
  written: string[];
  /** Files the learner changed, left alone (without --force). */
  kept: string[];
  /** With --force: the folder (absolute) holding a copy of every file replaced, when any was. */
  backup?: string;
}

/** Where backups go inside a workspace: one folder per backup, named by its time. */
export const BACKUP_DIR = path.join(STATE_DIR, 'backup');

/**
 * A new backup folder `.idem-lab/backup/<UTC time>` (e.g. 2026-12-01T09-58-03.120Z), made
 * unique when two backups fall in the same millisecond.
 * @returns its absolute path
 */
export function newBackupDir(workspace: string): string {
  const stamp = new Date().toISOString().replace(/:/g, '-');
  let dir = path.join(workspace, BACKUP_DIR, stamp);
  for (let n = 2; fs.existsSync(dir); n++) dir = path.join(workspace, BACKUP_DIR, `${stamp}-${n}`);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Copies workspace files (names relative to the workspace) into one new backup folder,
 * skipping those that do not exist. Nothing is made when none exists.
 * @returns the backup folder, or undefined when there was nothing to copy
 */
export function backUp(workspace: string, names: string[]): string | undefined {
  const present = names.filter((name) => fs.existsSync(path.join(workspace, name)));
  if (present.length === 0) return undefined;
  const dir = newBackupDir(workspace);
  for (const name of present) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.copyFileSync(path.join(workspace, name), path.join(dir, name));
  }
  return dir;
}

/** The backup folders of a workspace, oldest first (absolute paths); [] when there are none. */
export function listBackups(workspace: string): string[] {
  const root = path.join(workspace, BACKUP_DIR);
  try {
    return fs
      .readdirSync(root, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort()
      .map((name) => path.join(root, name));
  } catch {
    return [];
  }
}

/** The files in a backup folder, relative to it, sorted. */
export function backupFiles(backup: string): string[] {
  return (fs.readdirSync(backup, { recursive: true, withFileTypes: true }) as fs.Dirent[])
    .filter((e) => e.isFile())
    .map((e) => path.relative(backup, path.join(e.parentPath ?? e.path, e.name)))
    .sort();
}

/**
 * Copies the lab's files into `dir` (created if missing). A file the learner changed
 * since it was laid, or that was there before, is kept unless `force`, and then copied
 * into a backup folder first (report.backup); one still as laid is refreshed. The files are
 * those of `track` and the tracks it builds on (see labFiles); a sheet is laid in `lang`, so a
 * sheet still as laid follows a change of language.
 * @throws SetupError when `dir` exists and is not a folder
 */
export function layWorkspace(dir: string, force: boolean, lang: Lang = 'en', track: Track = DEFAULT_TRACK): LayReport {
  if (fs.existsSync(dir) && !fs.statSync(dir).isDirectory()) throw new SetupError(t('cli.notFolder', { dir }));
  const undoDir = makeDir(dir);
  try {
    return withStateLock(dir, () => layUnderLock(dir, force, lang, track));
  } catch (err) {
    // folders made for nothing are not left behind (rmdir removes only empty ones)
    try {
      fs.rmdirSync(path.join(dir, STATE_DIR));
    } catch {
      // not empty, or not there: kept
    }
    undoDir();
    throw err;
  }
}

/**
 * The words the workspace's scripts print (statement.sh, ledger.sh, probe.sh), in the
 * workspace's language, by message key: the scripts read them from `.idem-lab/words.json`
 * (SCRIPT_WORDS) and fall back to English without it. Placeholders stay `{name}`.
 */
export const SCRIPT_WORDS = path.join(STATE_DIR, 'words.json');
const SCRIPT_KEYS = [
  'cli.statement.none', 'cli.statement.at', 'cli.statement.user', 'cli.statement.amount', 'cli.statement.pid', 'cli.statement.ledger',
  'cli.statement.noRow', 'cli.statement.payment', 'cli.statement.unpaid', 'cli.statement.summary', 'cli.ledger.none', 'probe.noKey', 'probe.emptyKey',
] as const;

function writeScriptWords(dir: string, lang: Lang): void {
  const words = Object.fromEntries(SCRIPT_KEYS.map((key) => [key, CATALOGS[lang][key]]));
  makeDir(path.join(dir, STATE_DIR));
  writeFileAtomic(path.join(dir, SCRIPT_WORDS), `${JSON.stringify(words, null, 2)}\n`);
}

function layUnderLock(dir: string, force: boolean, lang: Lang, track: Track): LayReport {
  writeScriptWords(dir, lang);
  const state = readState(dir);
  const laid = { ...(state.laid ?? {}) };
  const report: LayReport = { written: [], kept: [] };
  for (const [source, target, executable] of labFiles(lang, track)) {
    const dest = path.join(dir, target);
    const source_ = path.resolve(LAB_DIR, source);
    if (fs.existsSync(dest) && sha256(dest) === sha256(source_)) {
      laid[target] = sha256(dest); // already as shipped: nothing to lay
      continue;
    }
    if (fs.existsSync(dest) && sha256(dest) !== laid[target]) {
      if (!force) {
        report.kept.push(target);
        continue;
      }
      // --force replaces the learner's work: a copy first, so nothing is lost.
      report.backup ??= newBackupDir(dir);
      fs.copyFileSync(dest, path.join(report.backup, target));
    }
    copyFileAtomic(source_, dest, executable ? 0o755 : 0o644);
    laid[target] = sha256(dest);
    report.written.push(target);
  }
  writeState(dir, { ...readState(dir), laid });
  return report;
}

/**
 * Checks that a folder can be graded: it exists, is not idem-lab's own folder (paths.ts
 * isToolFolder), and holds server.py (or names another server command in idem-lab.json
 * as {"server": ["node", "server.js"]}).
 * @returns the absolute workspace path and the server command
 * @throws SetupError saying what is missing
 */
export function openWorkspace(dir: string): { workspace: string; command: ServerCommand } {
  const workspace = path.resolve(dir);
  if (!fs.existsSync(workspace)) {
    throw new SetupError(t('cli.noFolder', { dir: workspace }));
  }
  if (!fs.statSync(workspace).isDirectory()) throw new SetupError(t('cli.isFile', { dir: workspace }));
  // The tool's own folder (where a learner lands after cloning it) is never a workspace: say where to go.
  if (isToolFolder(workspace)) throw new SetupError(t('cli.inRepository', { dir: workspace }));
  const command = configuredCommand(workspace);
  if (!command && !fs.existsSync(path.join(workspace, 'server.py'))) {
    throw new SetupError(t('cli.noServerPy', { dir: workspace }));
  }
  return { workspace, command: command ?? DEFAULT_COMMAND };
}

function configuredCommand(workspace: string): ServerCommand | undefined {
  const file = path.join(workspace, 'idem-lab.json');
  if (!fs.existsSync(file)) return undefined;
  let config: { server?: unknown };
  // A student controls this file: read it only as a regular file of at most 64 KB (a FIFO would block).
  const text = readRegularSync(file, 64 * 1024);
  if (text === undefined) throw new SetupError('idem-lab.json must be a regular file');
  try {
    config = JSON.parse(text) as { server?: unknown };
  } catch (err) {
    throw new SetupError(t('cli.config.json', { file: 'idem-lab.json', error: jsonErrorWhere(err) }));
  }
  if (config.server === undefined) return undefined;
  if (!Array.isArray(config.server) || config.server.length === 0 || !config.server.every((s) => typeof s === 'string')) {
    throw new SetupError(t('cli.config.server', { file: 'idem-lab.json' }));
  }
  const [file0, ...args] = config.server as string[];
  return { file: file0, args };
}
