/**
 * The learner's own server, on the grader's process lifecycle (grader/process.ts: spawned
 * in its own process group, waited for with the same time limit, stopped with the same
 * grace period): started detached, so it outlives the command, with its output in s.log,
 * recorded in .idem-lab/state.json (pid, start time, folder) before it is waited for, and
 * stopped by that pid's group (never by name) only once /proc proves the pid is still
 * that process, running in this workspace.
 */
import fs from 'node:fs';
import path from 'node:path';
import { send } from '../grader/http.js';
import { contractEnv, freePort, type ServerCommand } from '../grader/server.js';
import { endingPolled, procStat, readyTimeoutMs, spawnInGroup, stopGroup, waitUntilReady } from '../grader/process.js';
import { SetupError } from '../grader/failure.js';
import { lockState, readState, updateState, writeState, type WorkspaceState } from './workspace.js';
import { isSameProcess, processCwd, processIdentity } from './procs.js';
import { rethrowFileProblem } from './safe-fs.js';
import { t } from '../i18n/index.js';

/** The port the lab sheet uses when none is chosen. */
export const DEFAULT_PORT = 8000;

/** The log file of the learner's server, in the workspace. */
export const SERVER_LOG = 's.log';

/** The provider's statement in a workspace: charge() appends a JSON line per charge (IDEM_PROVIDER_LOG). */
export const PROVIDER_LOG = 'provider.log';


/** What the state file's record of a server amounts to, as /proc shows it now. */
export type RecordedServer =
  | { kind: 'none' }
  /** Proven: the same process (pid and start time) that start recorded, running in this workspace. */
  | { kind: 'ours'; pid: number; startTime: number; port?: number }
  /** The recorded process has ended (or is a zombie). */
  | { kind: 'gone'; pid: number }
  /** The pid is alive but is not the recorded server: reused by another program, in another folder, or never proven (no start time recorded). */
  | { kind: 'foreign'; pid: number };

/** The real path of a folder, or the path itself when it cannot be resolved. */
function realFolder(dir: string): string {
  try {
    return fs.realpathSync(dir);
  } catch {
    return path.resolve(dir);
  }
}

/**
 * Whether the state's recorded server is proven to be this workspace's: its pid is alive
 * with the start time recorded at start (so a reused pid is not mistaken for it) and
 * its working folder (/proc/<pid>/cwd) is this workspace (so a state file copied from
 * another workspace does not reach that workspace's server). Never throws.
 */
export function recordedServer(workspace: string, state: WorkspaceState): RecordedServer {
  const { pid, startTime } = state;
  if (!pid) return { kind: 'none' };
  const identity = processIdentity(pid);
  if (!identity || identity.state === 'Z') return { kind: 'gone', pid };
  if (startTime === undefined || identity.startTime !== startTime) return { kind: 'foreign', pid };
  if (processCwd(pid) !== realFolder(workspace)) return { kind: 'foreign', pid };
  return { kind: 'ours', pid, startTime, port: state.port };
}

/**
 * The server `idem-lab start` left running in this workspace, found in /proc without the
 * state file: a process-group leader (start spawns it as one) whose working folder is this
 * workspace and whose environment is the one start gives it (IDEM_DB is this workspace's
 * lab.db), with its start time and PORT: what recordedServer would have proven. Undefined
 * when there is none, or several (no guess). Linux only (/proc). Never throws.
 */
export function serverInProc(workspace: string): Pick<WorkspaceState, 'pid' | 'startTime' | 'port' | 'cwd'> | undefined {
  const folder = realFolder(workspace);
  const dbs = new Set([`IDEM_DB=${path.join(path.resolve(workspace), 'lab.db')}`, `IDEM_DB=${path.join(folder, 'lab.db')}`]);
  const found: Array<Pick<WorkspaceState, 'pid' | 'startTime' | 'port' | 'cwd'>> = [];
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    const pid = Number(entry);
    const stat = procStat(pid);
    if (!stat || stat.pgid !== pid || stat.state === 'Z' || processCwd(pid) !== folder) continue;
    try {
      const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      if (!env.some((v) => dbs.has(v))) continue;
      const port = Number(env.find((v) => v.startsWith('PORT='))?.slice(5));
      found.push({ pid, startTime: stat.startTicks, cwd: folder, ...(Number.isInteger(port) && port > 0 ? { port } : {}) });
    } catch {
      // gone, or not ours to read
    }
  }
  return found.length === 1 ? found[0] : undefined;
}

/**
 * The state to find the workspace's server by: the state file, or, when it is damaged
 * (readState's SetupError), the server found in /proc (serverInProc) and why the file
 * could not be used (`damaged`, readState's sentence). Other errors are thrown.
 */
export function serverRecord(workspace: string): { state: WorkspaceState; damaged?: string } {
  try {
    return { state: readState(workspace) };
  } catch (err) {
    if (!(err instanceof SetupError)) throw err;
    return { state: serverInProc(workspace) ?? {}, damaged: err.message };
  }
}

/** The workspace's own running server (see recordedServer), or undefined. Never throws for a dead or foreign pid. */
export function ownServer(workspace: string, state: WorkspaceState = readState(workspace)): { pid: number; port?: number } | undefined {
  const recorded = recordedServer(workspace, state);
  return recorded.kind === 'ours' ? { pid: recorded.pid, port: recorded.port } : undefined;
}

/** Whether GET /health on the port answers 200 within a second (half a second to connect). */
export async function isHealthy(port: number): Promise<boolean> {
  const health = await send({ label: 'lab', port }, 'GET', '/health', undefined, { connectMs: 500, answerMs: 1000 });
  return health.status === 200;
}

async function portTaken(port: number): Promise<boolean> {
  const probe = await send({ label: 'lab', port }, 'GET', '/health', undefined, { connectMs: 300, answerMs: 300 });
  return probe.error === undefined || probe.errorCode !== 'refused';
}

/** The last `lines` lines of s.log. */
export function logTail(workspace: string, lines = 15): string {
  try {
    return fs.readFileSync(path.join(workspace, SERVER_LOG), 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** What `startLabServer` did. */
export type StartOutcome =
  | { kind: 'started'; pid: number; port: number; movedFrom?: number }
  | { kind: 'already'; pid: number; port: number }
  | { kind: 'failed'; reason: string; log: string };

const DEFERRED_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** How many withSignalsDeferred calls are running; a signal dispatched meanwhile is held in `heldSignal`. */
let deferring = 0;
let heldSignal: NodeJS.Signals | undefined;
let relayInstalled = false;

/**
 * The listener withSignalsDeferred keeps on SIGINT, SIGTERM and SIGHUP for good, once
 * installed. Node.js hands a signal to its listeners on a later turn of the event loop: a
 * listener removed between the signal's arrival and that turn never hears of it, and the
 * signal is lost (a Ctrl-C right after the server was recorded let `start` go on and
 * succeed). So the listener stays, and does what the signal's default would when nothing
 * is deferring and no other listener takes the signal: it steps aside and raises it again.
 */
function onDeferredSignal(signal: NodeJS.Signals): void {
  if (deferring > 0) {
    heldSignal ??= signal;
    return;
  }
  raiseAsDefault(signal);
}

/** Raises `signal` again with its default action (the process ends by it), unless another listener of this process takes it. */
function raiseAsDefault(signal: NodeJS.Signals): void {
  if (process.listeners(signal).some((l) => l !== onDeferredSignal)) return;
  process.off(signal, onDeferredSignal);
  process.kill(process.pid, signal);
}

/**
 * Runs `fn` with SIGINT, SIGTERM and SIGHUP held back: one that arrives meanwhile is
 * raised again once `fn` is done, so Ctrl-C cannot fall between starting a server and
 * recording it. Its listener stays installed afterwards (onDeferredSignal says why).
 */
async function withSignalsDeferred<T>(fn: () => Promise<T>): Promise<T> {
  if (!relayInstalled) {
    relayInstalled = true;
    for (const signal of DEFERRED_SIGNALS) process.on(signal, onDeferredSignal);
  }
  deferring++;
  try {
    return await fn();
  } finally {
    deferring--;
    if (deferring === 0 && heldSignal !== undefined) {
      const signal = heldSignal;
      heldSignal = undefined;
      raiseAsDefault(signal);
    }
  }
}

/**
 * Starts the learner's server detached (own process group, output appended to s.log),
 * unless the recorded one is still running. Uses `port`, else the recorded port, else
 * 8000; when that port is taken by something else and no port was asked for, a free one.
 * The server is recorded (pid, start time, folder, port) under the state lock before it
 * is waited for, so an interrupted start leaves a server `stop` knows, and a second start
 * at the same time finds it ('already'). Waits for GET /health as the grader does
 * (grader/process.ts waitUntilReady, readyTimeoutMs: IDEM_LAB_START_TIMEOUT_MS, default
 * 10 s); a server that exits or does not answer in time is killed with its group and forgotten.
 * @throws SetupError when s.log or the state file cannot be written (full disk,
 *   read-only workspace), or when IDEM_LAB_START_TIMEOUT_MS is not a positive whole
 *   number; no server is left running then
 */
export async function startLabServer(workspace: string, command: ServerCommand, port?: number): Promise<StartOutcome> {
  let timeoutMs: number;
  try {
    timeoutMs = readyTimeoutMs();
  } catch (err) {
    throw new SetupError((err as Error).message);
  }
  const launched = await withSignalsDeferred(async (): Promise<StartOutcome | { pid: number; startTime: number; spawnedAt: number; chosen: number; movedFrom?: number; exited: () => boolean }> => {
    const release = lockState(workspace);
    try {
      const state = readState(workspace);
      const recorded = recordedServer(workspace, state);
      if (recorded.kind === 'ours') return { kind: 'already', pid: recorded.pid, port: state.port ?? DEFAULT_PORT };
      let chosen = port ?? state.port ?? DEFAULT_PORT;
      let movedFrom: number | undefined;
      if (await portTaken(chosen)) {
        if (port !== undefined) return { kind: 'failed', reason: t('cli.reason.portInUse', { port }), log: '' };
        movedFrom = chosen;
        chosen = await freePort();
      }
      const log = path.join(workspace, SERVER_LOG);
      let logFd: number;
      try {
        fs.appendFileSync(log, `--- idem-lab start ${new Date().toISOString()} on port ${chosen} ---\n`);
        // The server writes to s.log itself (a file descriptor it inherits), so it outlives this process.
        logFd = fs.openSync(log, 'a');
      } catch (err) {
        rethrowFileProblem(err, log);
      }
      let subprocess: ReturnType<typeof spawnInGroup>;
      try {
        subprocess = spawnInGroup(command.file, command.args, {
          cwd: workspace,
          // The learner's environment (a virtualenv's, say) with the variables the grader gives
          // its servers (the statement in provider.log, the ledger in lab.db), so the
          // learner's own runs look like graded ones.
          env: { ...process.env, ...contractEnv({ port: chosen, dbPath: path.join(workspace, 'lab.db'), providerLog: path.join(workspace, PROVIDER_LOG) }) },
          stdio: ['ignore', logFd, logFd],
        });
      } finally {
        fs.closeSync(logFd);
      }
      // Detached: this command does not wait for it to end, and it does not end with this command.
      subprocess.unref();
      let exited = false;
      subprocess.once('exit', () => (exited = true)).once('error', () => (exited = true));
      const pid = subprocess.pid;
      const spawnedAt = performance.now();
      if (!pid) return { kind: 'failed', reason: `could not run ${command.file}`, log: logTail(workspace) };
      const identity = processIdentity(pid);
      try {
        writeState(workspace, { ...state, pid, startTime: identity?.startTime ?? 0, cwd: realFolder(workspace), port: chosen });
      } catch (err) {
        // It could not be recorded: no command would know it.
        await stopGroup(pid, endingPolled(() => exited), { graceMs: 0 });
        throw err;
      }
      return { pid, startTime: identity?.startTime ?? 0, spawnedAt, chosen, movedFrom, exited: () => exited };
    } finally {
      release();
    }
  });
  if ('kind' in launched) return launched;
  const { pid, startTime, chosen, movedFrom } = launched;
  const ended = () => launched.exited() || !isSameProcess(pid, startTime);
  const readiness = await waitUntilReady({ probe: () => isHealthy(chosen), ended, timeoutMs, since: launched.spawnedAt });
  if (readiness === 'ready') {
    return movedFrom === undefined ? { kind: 'started', pid, port: chosen } : { kind: 'started', pid, port: chosen, movedFrom };
  }
  // Nothing more is asked of a server that did not come up: its group is killed at once.
  if (!ended()) await stopGroup(pid, endingPolled(ended), { graceMs: 0 });
  forgetIfStill(workspace, pid, startTime);
  const reason = readiness === 'ended' ? t('cli.reason.exited') : t('cli.reason.noHealth', { port: chosen, seconds: timeoutMs / 1000 });
  return { kind: 'failed', reason, log: logTail(workspace) };
}

/** Removes the server record when it still names this process (a later start's record is kept). */
function forgetIfStill(workspace: string, pid: number, startTime: number | undefined): void {
  updateState(workspace, (s) => {
    if (s.pid !== pid || s.startTime !== startTime) return;
    delete s.pid;
    delete s.startTime;
    delete s.cwd;
  });
}

/**
 * What `stopLabServer` found: stopped (proven gone), dead (had ended already), foreign
 * (the pid is another program now: left running), failed (still running after SIGKILL,
 * e.g. not ours to signal), none (nothing recorded).
 */
export type StopOutcome =
  | { kind: 'stopped'; pid: number }
  | { kind: 'dead'; pid: number }
  | { kind: 'foreign'; pid: number }
  | { kind: 'failed'; pid: number }
  | { kind: 'none' };

/**
 * Stops the recorded server's process group when it is proven to be this workspace's
 * (see recordedServer), as the grader stops its servers (grader/process.ts stopGroup):
 * SIGTERM, then SIGKILL after STOP_GRACE_MS (1.5 s, the server contract's), and forgets
 * it once it is gone; 'failed' when it is still there KILL_WAIT_MS after the SIGKILL.
 * A pid that now names another process is never signalled; the record is forgotten.
 */
export async function stopLabServer(workspace: string, _command?: ServerCommand): Promise<StopOutcome & { damaged?: string }> {
  // A damaged state file does not hide the server: it is found in /proc (serverRecord), and the file is left for the learner.
  const { state, damaged } = serverRecord(workspace);
  const said = damaged === undefined ? {} : { damaged };
  const forget = (pid: number, startTime: number | undefined) => {
    if (damaged === undefined) forgetIfStill(workspace, pid, startTime);
  };
  const recorded = recordedServer(workspace, state);
  if (recorded.kind === 'none') return { ...recorded, ...said };
  const { pid } = recorded;
  if (recorded.kind !== 'ours') {
    forget(pid, state.startTime);
    return recorded.kind === 'gone' ? { kind: 'dead', pid, ...said } : { kind: 'foreign', pid, ...said };
  }
  const { startTime } = recorded;
  // Not a child of this process: its end is seen in /proc (the pid gone, a zombie, or another start time).
  const { ended } = await stopGroup(pid, endingPolled(() => !isSameProcess(pid, startTime)));
  if (!ended) return { kind: 'failed', pid, ...said };
  forget(pid, startTime);
  return { kind: 'stopped', pid, ...said };
}
