import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SetupError } from '../grader/failure.js';
import { DEFAULT_COMMAND, type ServerCommand } from '../grader/server.js';
import { readRegularSync } from '../grader/safe-read.js';
import type { Status } from '../grader/types.js';
import { LAB_DIR } from './paths.js';
import { t, type Lang } from '../i18n/index.js';

/**
 * Files `idem-lab start` copies into a workspace: [name in lab/, name in the workspace,
 * executable]; LAB.md is the lab sheet in the given language.
 */
export function labFiles(lang: Lang = 'en'): ReadonlyArray<readonly [string, string, boolean]> {
  return [
    ['server.py', 'server.py', false],
    ['probe.sh', 'probe.sh', true],
    ['ledger.sh', 'ledger.sh', true],
    [`LAB.${lang}.md`, 'LAB.md', false],
  ];
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
  port?: number;
  /** The learner's language (en, ko or zh), chosen at start; `--lang` overrides it per command. */
  lang?: string;
  /** sha256 of each file as `start` laid it, to tell a learner's change from the original. */
  laid?: Record<string, string>;
  steps?: Record<string, StepState>;
  /** How many hints of each step were shown, by step id. */
  hintsShown?: Record<string, number>;
}

function sha256(file: string): string {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** The state file of a workspace; {} when there is none or it is unreadable. */
export function readState(workspace: string): WorkspaceState {
  try {
    return JSON.parse(fs.readFileSync(path.join(workspace, STATE_DIR, 'state.json'), 'utf8')) as WorkspaceState;
  } catch {
    return {};
  }
}

/** Writes the state file (creating .idem-lab/), atomically: a crash never leaves half a file. */
export function writeState(workspace: string, state: WorkspaceState): void {
  const dir = path.join(workspace, STATE_DIR);
  fs.mkdirSync(dir, { recursive: true });
  const tmp = path.join(dir, `state.json.${process.pid}`);
  fs.writeFileSync(tmp, JSON.stringify(state, null, 2) + '\n');
  fs.renameSync(tmp, path.join(dir, 'state.json'));
}

/** Changes the state file by a function of its current content. */
export function updateState(workspace: string, change: (state: WorkspaceState) => void): WorkspaceState {
  const state = readState(workspace);
  change(state);
  writeState(workspace, state);
  return state;
}

/** What `layWorkspace` did with each file. */
export interface LayReport {
  /** Files copied because they were missing or out of date. */
  written: string[];
  /** Files the learner changed, left alone (without --force). */
  kept: string[];
}

/**
 * Copies the lab's files into `dir` (created if missing). A file the learner changed
 * since it was laid, or that was there before, is kept unless `force`; one still as laid
 * is refreshed. LAB.md is the sheet in `lang`, so a sheet still as laid follows a change of language.
 * @throws SetupError when `dir` exists and is not a folder
 */
export function layWorkspace(dir: string, force: boolean, lang: Lang = 'en'): LayReport {
  if (fs.existsSync(dir) && !fs.statSync(dir).isDirectory()) throw new SetupError(t('cli.notFolder', { dir }));
  fs.mkdirSync(dir, { recursive: true });
  const state = readState(dir);
  const laid = { ...(state.laid ?? {}) };
  const report: LayReport = { written: [], kept: [] };
  for (const [source, target, executable] of labFiles(lang)) {
    const dest = path.join(dir, target);
    const source_ = path.join(LAB_DIR, source);
    if (fs.existsSync(dest) && sha256(dest) === sha256(source_)) {
      laid[target] = sha256(dest); // already as shipped: nothing to lay
      continue;
    }
    if (fs.existsSync(dest) && !force && sha256(dest) !== laid[target]) {
      report.kept.push(target);
      continue;
    }
    fs.copyFileSync(source_, dest);
    if (executable) fs.chmodSync(dest, 0o755);
    laid[target] = sha256(dest);
    report.written.push(target);
  }
  writeState(dir, { ...readState(dir), laid });
  return report;
}

/**
 * Checks that a folder can be graded: it exists and holds server.py (or names another
 * server command in idem-lab.json as {"server": ["node", "server.js"]}).
 * @returns the absolute workspace path and the server command
 * @throws SetupError saying what is missing
 */
export function openWorkspace(dir: string): { workspace: string; command: ServerCommand } {
  const workspace = path.resolve(dir);
  if (!fs.existsSync(workspace)) {
    throw new SetupError(t('cli.noFolder', { dir: workspace }));
  }
  if (!fs.statSync(workspace).isDirectory()) throw new SetupError(t('cli.isFile', { dir: workspace }));
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
    throw new SetupError(`idem-lab.json is not valid JSON: ${(err as Error).message}`);
  }
  if (config.server === undefined) return undefined;
  if (!Array.isArray(config.server) || config.server.length === 0 || !config.server.every((s) => typeof s === 'string')) {
    throw new SetupError('idem-lab.json: "server" must be a command as a list of strings, e.g. ["python3", "server.py"]');
  }
  const [file0, ...args] = config.server as string[];
  return { file: file0, args };
}
