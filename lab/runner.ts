/**
 * The learner's own server: started detached in its own process group with its output in
 * s.log, recorded in .idem-lab/state.json, stopped by that pid's group (never by name).
 */
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { execa } from 'execa';
import { send } from '../grader/http.js';
import { freePort, killGroup, type ServerCommand } from '../grader/server.js';
import { readState, updateState } from './workspace.js';
import { t } from '../i18n/index.js';

/** The port the lab sheet uses when none is chosen. */
export const DEFAULT_PORT = 8000;
/** How long `start` waits for GET /health, in ms. */
const READY_TIMEOUT_MS = 8000;
/** How long `stop` waits after SIGTERM before SIGKILL, in ms. */
const STOP_GRACE_MS = 2000;

/** The log file of the learner's server, in the workspace. */
export const SERVER_LOG = 's.log';


/**
 * Whether `pid` is a live process running the server command (its command line names the
 * command's last argument, e.g. server.py), so a reused pid is not mistaken for ours.
 */
export function isServerProcess(pid: number | undefined, command: ServerCommand): boolean {
  if (!pid || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (cmdline === '') return false; // a zombie
    const marker = command.args[command.args.length - 1] ?? command.file;
    return cmdline.includes(marker);
  } catch {
    return true; // no /proc: trust kill(0)
  }
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

/**
 * Starts the learner's server detached (own process group, output appended to s.log),
 * unless the recorded one is still running. Uses `port`, else the recorded port, else
 * 8000; when that port is taken by something else and no port was asked for, a free one.
 * Waits up to 8 s for GET /health.
 */
export async function startLabServer(workspace: string, command: ServerCommand, port?: number): Promise<StartOutcome> {
  const state = readState(workspace);
  if (state.pid && state.port && isServerProcess(state.pid, command)) {
    return { kind: 'already', pid: state.pid, port: state.port };
  }
  let chosen = port ?? state.port ?? DEFAULT_PORT;
  let movedFrom: number | undefined;
  if (await portTaken(chosen)) {
    if (port !== undefined) return { kind: 'failed', reason: t('cli.reason.portInUse', { port }), log: '' };
    movedFrom = chosen;
    chosen = await freePort();
  }
  const log = path.join(workspace, SERVER_LOG);
  fs.appendFileSync(log, `--- idem-lab start ${new Date().toISOString()} on port ${chosen} ---\n`);
  // The server writes to s.log itself (a file descriptor it inherits), so it outlives this process.
  const logStream = fs.createWriteStream(log, { flags: 'a' });
  await new Promise((resolve, reject) => logStream.once('open', resolve).once('error', reject));
  const subprocess = execa(command.file, command.args, {
    cwd: workspace,
    env: { PORT: String(chosen), PYTHONUNBUFFERED: '1' },
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
  if (!pid) return { kind: 'failed', reason: t('cli.reason.couldNotRun', { file: command.file }), log: logTail(workspace) };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline && !exited) {
    if (await isHealthy(chosen)) {
      updateState(workspace, (s) => {
        s.pid = pid;
        s.port = chosen;
      });
      return movedFrom === undefined ? { kind: 'started', pid, port: chosen } : { kind: 'started', pid, port: chosen, movedFrom };
    }
    await delay(50);
  }
  killGroup(pid, 'SIGKILL');
  const reason = exited ? t('cli.reason.exited') : t('cli.reason.noHealth', { port: chosen, seconds: READY_TIMEOUT_MS / 1000 });
  return { kind: 'failed', reason, log: logTail(workspace) };
}


/** What `stopLabServer` found. */
export type StopOutcome = { kind: 'stopped'; pid: number } | { kind: 'dead'; pid: number } | { kind: 'none' };

/**
 * Stops the recorded server's process group: SIGTERM, then SIGKILL after 2 s, and forgets
 * its pid. Reports a recorded server that had already died.
 */
export async function stopLabServer(workspace: string, command: ServerCommand): Promise<StopOutcome> {
  const { pid } = readState(workspace);
  if (!pid) return { kind: 'none' };
  const forget = () =>
    updateState(workspace, (s) => {
      delete s.pid;
    });
  if (!isServerProcess(pid, command)) {
    forget();
    return { kind: 'dead', pid };
  }
  killGroup(pid, 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  while (Date.now() < deadline && isServerProcess(pid, command)) await delay(25);
  killGroup(pid, 'SIGKILL');
  forget();
  return { kind: 'stopped', pid };
}
