import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { execa, type ResultPromise } from 'execa';
import { t } from '../i18n/index.js';
import { ServerStartFailed } from './failure.js';
import { send } from './http.js';
import { chargeMs, limits } from './limits.js';
import { atExit } from './cleanup.js';

/** How a server is started: an executable and its arguments, run in the workspace. */
export interface ServerCommand {
  file: string;
  args: string[];
}

/** The server contract's command: `python3 server.py`. */
export const DEFAULT_COMMAND: ServerCommand = { file: 'python3', args: ['server.py'] };

/**
 * For `python3 ...`, the interpreter's real path as seen from the workspace, so that a
 * version-manager shim (pyenv's costs ~0.25 s a start) runs once per grading, not once
 * per server start. Any other command, or a failure to ask (10 s at most), is returned
 * unchanged. Never throws.
 */
export async function resolveInterpreter(command: ServerCommand, workspace: string): Promise<ServerCommand> {
  if (!/^python3?$/.test(command.file)) return command;
  try {
    const { stdout } = await execa(command.file, ['-c', 'import sys; print(sys.executable)'], { cwd: workspace, timeout: 10_000 });
    const exe = String(stdout).trim();
    return exe && fs.existsSync(exe) ? { ...command, file: exe } : command;
  } catch {
    return command;
  }
}

/** What one server instance under test needs. */
export interface StartOptions {
  /** The folder the server runs in (its working directory). */
  workspace: string;
  /** The sqlite file for IDEM_DB, an absolute path. */
  dbPath: string;
  /** A label for transcripts: 'A', 'B', ... */
  label: string;
  /** The command; DEFAULT_COMMAND when absent. */
  command?: ServerCommand;
  /** IDEM_PROVIDER_LOG: where charge() writes the payment provider's statement, if the server keeps one. */
  providerLog?: string;
  /** IDEM_CHARGE_MS, in ms (default: chargeMs(), the caller's IDEM_CHARGE_MS or 50). */
  chargeMs?: number;
  /**
   * IDEM_DB_MS, in ms (default 0): the simulated database round trip that the lab's db()
   * adds after each statement outside a transaction (server contract, optional).
   */
  dbMs?: number;
  /** How long to wait for GET /health to answer 200, in ms (default: limits().startMs). */
  readyTimeoutMs?: number;
}

const OUTPUT_TAIL_BYTES = 4096;
const STOP_GRACE_MS = 1500;

/** Every process group this process started and has not yet seen stopped. */
const running = new Set<ServerInstance>();
atExit(() => killAllServersNow());

/**
 * Ports handed to servers this process started and has not stopped. When several
 * workspaces are graded at once (idem-lab grade --jobs N), the kernel may hand one port
 * to two probes before either server binds it: a reserved port is never handed out
 * again, so one learner's check can never reach another learner's server.
 */
const reservedPorts = new Set<number>();

/**
 * A free TCP port on 127.0.0.1, as the kernel hands it out for port 0, and not reserved
 * by a server this process is running. Another process may take it before the server
 * binds it; startServer retries then.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const port = await kernelFreePort();
    if (!reservedPorts.has(port) || attempt >= 20) return port;
  }
}

function kernelFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.unref();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** One running server under test, in its own process group. */
export class ServerInstance {
  readonly label: string;
  readonly port: number;
  readonly dbPath: string;
  readonly pid: number;
  private tail = '';
  /** Whether the tail lost its beginning (then output() starts at a whole line). */
  private cut = false;
  private readonly streams: Array<{ destroy(): void } | null | undefined>;
  /** True when a process had escaped the group (setsid) and had to be found and killed by pid. */
  escaped = false;
  private exitInfo: { code?: number; signal?: string } | undefined;
  private readonly exited: Promise<void>;

  constructor(subprocess: ResultPromise, label: string, port: number, dbPath: string) {
    this.label = label;
    this.port = port;
    this.dbPath = dbPath;
    this.pid = subprocess.pid ?? -1;
    this.streams = [subprocess.stdout, subprocess.stderr, subprocess.all];
    subprocess.all?.on('data', (chunk: Buffer) => {
      const text = this.tail + chunk.toString('utf8');
      if (text.length > OUTPUT_TAIL_BYTES) this.cut = true;
      this.tail = text.slice(-OUTPUT_TAIL_BYTES);
    });
    this.exited = subprocess.then(
      (result) => {
        this.exitInfo = { code: result.exitCode, signal: result.signal };
      },
      (err: { exitCode?: number; signal?: string }) => {
        this.exitInfo = { code: err.exitCode, signal: err.signal };
      },
    );
  }

  /** The last 4 KiB of what the server printed (stdout and stderr interleaved), from the start of a line. */
  output(): string {
    return this.cut ? this.tail.slice(this.tail.indexOf('\n') + 1) : this.tail;
  }

  /** Whether the process has exited; `exit` says how. */
  get hasExited(): boolean {
    return this.exitInfo !== undefined;
  }

  /** How the process ended, e.g. "exit code 1" or "signal SIGKILL"; undefined while running. */
  get exitDescription(): string | undefined {
    if (!this.exitInfo) return undefined;
    return this.exitInfo.signal ? `signal ${this.exitInfo.signal}` : `exit code ${this.exitInfo.code}`;
  }

  /**
   * Stops the whole process group: SIGTERM, then SIGKILL after 1.5 s; returns at most 1.5 s
   * later even if a process that left the group still holds its output (see `escaped`).
   * Idempotent; never throws.
   */
  async stop(): Promise<void> {
    killGroup(this.pid, 'SIGTERM');
    const graceful = await this.exitedWithin(STOP_GRACE_MS);
    // The leader may be gone while children it forked live on: the group gets SIGKILL either way.
    killGroup(this.pid, 'SIGKILL');
    if (!graceful) {
      // A process that left the group (setsid) can hold the output pipe open for ever:
      // wait a while, then stop reading it rather than hang.
      if (!(await this.exitedWithin(STOP_GRACE_MS))) {
        this.escaped = killEscapees(this.port, this.dbPath) > 0;
        this.streams.forEach((stream) => stream?.destroy());
      }
    }
    running.delete(this);
    reservedPorts.delete(this.port);
  }

  /** Whether the process (and its output) ended within `ms` ms. */
  private exitedWithin(ms: number): Promise<boolean> {
    return Promise.race([this.exited.then(() => true), delay(ms, false, { ref: false })]);
  }

  /** Stops the group at once, synchronously: for process exit. */
  killNow(): void {
    killGroup(this.pid, 'SIGKILL');
    running.delete(this);
  }
}

/**
 * Sends `signal` to the process group led by `pid` (a server started detached).
 * @returns false when there is no such group (it is gone); never throws
 */
export function killGroup(pid: number, signal: NodeJS.Signals): boolean {
  if (pid <= 0) return false;
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Kills, by pid, every process that carries this instance's environment (PORT and
 * IDEM_DB as the grader set them) but left its process group, e.g. a daemon that called
 * setsid. Only processes this grader started can carry both values. Linux only (/proc);
 * elsewhere it finds nothing. Returns how many it killed.
 */
function killEscapees(port: number, dbPath: string): number {
  let killed = 0;
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return 0;
  }
  for (const entry of entries) {
    try {
      const env = fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (env.includes(`PORT=${port}`) && env.includes(`IDEM_DB=${dbPath}`)) {
        process.kill(Number(entry), 'SIGKILL');
        killed++;
      }
    } catch {
      // gone, or not ours to read
    }
  }
  return killed;
}


function addressInUse(output: string): boolean {
  return /address already in use|EADDRINUSE|Errno 98/i.test(output);
}

/**
 * Starts one server on a free port and waits until GET /health answers 200.
 * The server runs in its own process group with PORT, IDEM_DB and IDEM_CHARGE_MS set.
 * @throws ServerStartFailed (a CheckFailed) when it exits during start-up or never answers within readyTimeoutMs;
 *   the server's output tail is attached and the process group is stopped first
 */
export async function startServer(options: StartOptions): Promise<ServerInstance> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const instance = spawnServer(options, port);
    try {
      await waitReady(instance, options.readyTimeoutMs ?? limits().startMs);
      return instance;
    } catch (err) {
      await instance.stop();
      // Another process took the free port between our probe and the bind: try another one.
      if (attempt < 3 && addressInUse(instance.output())) continue;
      throw err;
    }
  }
}

/**
 * The server contract's variables for one server: PORT, IDEM_DB, IDEM_CHARGE_MS,
 * IDEM_DB_MS, IDEM_PROVIDER_LOG, and Python's unbuffered output. The grader and the
 * learner's own `idem-lab start` give a server exactly these, so that nothing in its
 * environment tells a graded run from the learner's (only the values differ).
 */
export function contractEnv(options: { port: number; dbPath: string; providerLog: string; chargeMs?: number; dbMs?: number }): Record<string, string> {
  return {
    PORT: String(options.port),
    IDEM_DB: options.dbPath,
    IDEM_CHARGE_MS: String(options.chargeMs ?? chargeMs()),
    IDEM_DB_MS: String(options.dbMs ?? 0),
    IDEM_PROVIDER_LOG: options.providerLog,
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
  };
}

function spawnServer(options: StartOptions, port: number): ServerInstance {
  const command = options.command ?? DEFAULT_COMMAND;
  const subprocess = execa(command.file, command.args, {
    cwd: options.workspace,
    env: contractEnv({ port, dbPath: options.dbPath, providerLog: options.providerLog ?? path.join(path.dirname(options.dbPath), 'provider.log'), chargeMs: options.chargeMs, dbMs: options.dbMs }),
    detached: true,
    stdin: 'ignore',
    all: true,
    buffer: false,
    reject: false,
  });
  const instance = new ServerInstance(subprocess, options.label, port, options.dbPath);
  running.add(instance);
  reservedPorts.add(port);
  return instance;
}

async function waitReady(instance: ServerInstance, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const target = { label: instance.label, port: instance.port };
  let lastAnswer = t('check.noHealth.never');
  while (performance.now() < deadline) {
    if (instance.hasExited) {
      throw new ServerStartFailed(
        t('check.serverExited', { how: String(instance.exitDescription), port: instance.port }),
        t('check.serverExited.why'),
        { serverOutput: instance.output(), details: [t('check.startedAs', { port: instance.port, db: instance.dbPath })] },
      );
    }
    const health = await send(target, 'GET', '/health', undefined, { connectMs: 500, answerMs: 2000 });
    if (health.status === 200) return;
    if (health.status !== undefined) lastAnswer = t('check.noHealth.status', { status: health.status });
    else if (health.errorCode !== 'refused') lastAnswer = health.error ?? lastAnswer;
    await delay(25);
  }
  throw new ServerStartFailed(
    t('check.noHealth', { port: instance.port, seconds: timeoutMs / 1000, last: lastAnswer }),
    t('check.noHealth.why'),
    { serverOutput: instance.output(), details: [t('check.startedAs', { port: instance.port, db: instance.dbPath })] },
  );
}

/** Stops every server this process started and has not stopped: on exit or on a signal. */
export function killAllServersNow(): void {
  for (const instance of [...running]) instance.killNow();
}

/** How many servers this process started that are still not stopped (for tests). */
export function runningServerCount(): number {
  return running.size;
}
