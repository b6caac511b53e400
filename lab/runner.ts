/**
 * The learner's own server: started detached in its own process group with its output in
 * s.log, recorded in .idem-lab/state.json (pid, start time, folder) before it is waited
 * for, and stopped by that pid's group (never by name) only once /proc proves the pid is
 * still that process, running in this workspace.
 */
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { send } from '../grader/http.js';
import { contractEnv, freePort, killGroup, type ServerCommand } from '../grader/server.js';
import { lockState, readState, updateState, writeState, type WorkspaceState } from './workspace.js';
import { isSameProcess, processCwd, processIdentity } from './procs.js';
import { rethrowFileProblem } from './safe-fs.js';
import { t } from '../i18n/index.js';

/** The port the lab sheet uses when none is chosen. */
export const DEFAULT_PORT = 8000;
/** How long `start` waits for GET /health, in ms. */
const READY_TIMEOUT_MS = 8000;
/** How long `stop` waits after SIGTERM before SIGKILL, in ms. */
const STOP_GRACE_MS = 2000;

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

/** The workspace's own running server (see recordedServer), or undefined. Never throws for a dead or foreign pid. */
export function ownServer(workspace: string, state: WorkspaceState = readState(workspace)): { pid: number; port?: number } | undefined {
  const recorded = recordedServer(workspace, state);
  return recorded.kind === 'ours' ? { pid: recorded.pid, port: recorded.port } : undefined;
}

/** Whether GET /health on the port answers 200 within a second. */
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

/**
 * Runs `fn` with SIGINT, SIGTERM and SIGHUP held back: one that arrives meanwhile is
 * raised again once `fn` is done, so Ctrl-C cannot fall between starting a server and
 * recording it.
 */
async function withSignalsDeferred<T>(fn: () => Promise<T>): Promise<T> {
  let caught: NodeJS.Signals | undefined;
  const hold = (signal: NodeJS.Signals) => {
    caught ??= signal;
  };
  for (const signal of DEFERRED_SIGNALS) process.on(signal, hold);
  try {
    return await fn();
  } finally {
    for (const signal of DEFERRED_SIGNALS) process.off(signal, hold);
    if (caught && process.listenerCount(caught) === 0) process.kill(process.pid, caught);
  }
}

/**
 * Starts the learner's server detached (own process group, output appended to s.log),
 * unless the recorded one is still running. Uses `port`, else the recorded port, else
 * 8000; when that port is taken by something else and no port was asked for, a free one.
 * The server is recorded (pid, start time, folder, port) under the state lock before it
 * is waited for, so an interrupted start leaves a server `stop` knows, and a second start
 * at the same time finds it ('already'). Waits up to 8 s for GET /health; a server that
 * does not answer is stopped and forgotten.
 * @throws SetupError when s.log or the state file cannot be written (full disk,
 *   read-only workspace); no server is left running then
 */
export async function startLabServer(workspace: string, command: ServerCommand, port?: number): Promise<StartOutcome> {
  // Loaded here, not with the module: \`idem-lab check\` imports this module for its port, and execa's import takes a tenth of a second.
  const { execa } = await import('execa');
  const launched = await withSignalsDeferred(async (): Promise<StartOutcome | { pid: number; startTime: number; chosen: number; movedFrom?: number; exited: () => boolean }> => {
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
      let logStream: fs.WriteStream;
      try {
        fs.appendFileSync(log, `--- idem-lab start ${new Date().toISOString()} on port ${chosen} ---\n`);
        // The server writes to s.log itself (a file descriptor it inherits), so it outlives this process.
        logStream = fs.createWriteStream(log, { flags: 'a' });
        await new Promise((resolve, reject) => logStream.once('open', resolve).once('error', reject));
      } catch (err) {
        rethrowFileProblem(err, log);
      }
      const subprocess = execa(command.file, command.args, {
        cwd: workspace,
        // The same variables the grader gives its servers (the statement in provider.log, the
        // ledger in lab.db), so the learner's own runs look like graded ones.
        env: contractEnv({ port: chosen, dbPath: path.join(workspace, 'lab.db'), providerLog: path.join(workspace, PROVIDER_LOG) }),
        detached: true,
        cleanup: false,
        stdin: 'ignore',
        stdout: logStream,
        stderr: logStream,
        reject: false,
      });
      logStream.close();
      subprocess.unref();
      let exited = false;
      void subprocess.then(() => {
        exited = true;
      });
      const pid = subprocess.pid;
      if (!pid) return { kind: 'failed', reason: `could not run ${command.file}`, log: logTail(workspace) };
      const identity = processIdentity(pid);
      try {
        writeState(workspace, { ...state, pid, startTime: identity?.startTime ?? 0, cwd: realFolder(workspace), port: chosen });
      } catch (err) {
        killGroup(pid, 'SIGKILL'); // it could not be recorded: no command would know it
        throw err;
      }
      return { pid, startTime: identity?.startTime ?? 0, chosen, movedFrom, exited: () => exited };
    } finally {
      release();
    }
  });
  if ('kind' in launched) return launched;
  const { pid, startTime, chosen, movedFrom } = launched;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline && !launched.exited() && isSameProcess(pid, startTime)) {
    if (await isHealthy(chosen)) {
      return movedFrom === undefined ? { kind: 'started', pid, port: chosen } : { kind: 'started', pid, port: chosen, movedFrom };
    }
    await delay(50);
  }
  const exited = launched.exited() || !isSameProcess(pid, startTime);
  if (isSameProcess(pid, startTime)) killGroup(pid, 'SIGKILL');
  forgetIfStill(workspace, pid, startTime);
  const reason = exited ? t('cli.reason.exited') : t('cli.reason.noHealth', { port: chosen, seconds: READY_TIMEOUT_MS / 1000 });
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
 * (see recordedServer): SIGTERM, then SIGKILL after 2 s, and forgets it once it is gone.
 * A pid that now names another process is never signalled; the record is forgotten.
 */
export async function stopLabServer(workspace: string, _command?: ServerCommand): Promise<StopOutcome> {
  const recorded = recordedServer(workspace, readState(workspace));
  if (recorded.kind === 'none') return recorded;
  const { pid } = recorded;
  if (recorded.kind !== 'ours') {
    forgetIfStill(workspace, pid, readState(workspace).startTime);
    return recorded.kind === 'gone' ? { kind: 'dead', pid } : { kind: 'foreign', pid };
  }
  const { startTime } = recorded;
  killGroup(pid, 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  while (Date.now() < deadline && isSameProcess(pid, startTime)) await delay(25);
  // Once the leader is gone its pid is not handed out while its group has members, so this reaches only them.
  killGroup(pid, 'SIGKILL');
  const killDeadline = Date.now() + 1000;
  while (Date.now() < killDeadline && isSameProcess(pid, startTime)) await delay(25);
  if (isSameProcess(pid, startTime)) return { kind: 'failed', pid };
  forgetIfStill(workspace, pid, startTime);
  return { kind: 'stopped', pid };
}
