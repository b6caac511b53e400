import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';
import type { ChildProcess } from 'node:child_process';
import { t } from '../i18n/index.js';
import { ServerStartFailed } from './failure.js';
import { labelledOutput, PrintedTail, type PrintedLine } from './printed.js';
import { loadHttpClient, send } from './http.js';
import { chargeMs } from './limits.js';
import { atExit } from './cleanup.js';
import { bwrapArgs, dropPrivileges, podHostname, prlimitArgs, sandboxOwner, withPidOffset, type Sandbox } from './sandbox.js';
import { chownTree } from './safe-copy.js';
import { CheckCgroup } from './cgroup.js';
import { interpreterPath } from './prewarm.js';
import { fakeClockLibrary, withFakeClock } from './fake-clock.js';
import { SchedWatch, StarveMeter, starvedFor, type Starvation } from './sched.js';
import { Starved } from './gate.js';
import { killGroup, procStat, readyTimeoutMs, spawnInGroup, stopGroup, waitUntilReady, type Ending } from './process.js';

/** How a server is started: an executable and its arguments, run in the workspace. */
export interface ServerCommand {
  file: string;
  args: string[];
  /**
   * The sandbox to run it in (see sandbox.ts, chooseSandbox); none when absent. In a
   * sandbox each instance runs in its own copy of the workspace, made in the folder of
   * its IDEM_DB, the only folder it can write.
   */
  sandbox?: Sandbox;
}

/**
 * How a start-up failure names the server (issue 20: a Node server is not `python3
 * server.py`): `server` is the file it runs (the first argument that is not an option, or
 * the program when it has none) and `command` its command line, the program by its base
 * name (`node server.mjs`, `python3 server.py`).
 */
export function commandNames(command: ServerCommand): { server: string; command: string } {
  const program = path.basename(command.file);
  const file = command.args.find((a) => !a.startsWith('-'));
  return { server: file ?? program, command: [program, ...command.args].join(' ') };
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
  const exe = await interpreterPath(command.file, workspace);
  return exe && fs.existsSync(exe) ? { ...command, file: exe } : command;
}

/** What one server instance under test needs. */
export interface StartOptions {
  /** The folder the server runs in (its working directory). */
  workspace: string;
  /** The sqlite file for IDEM_DB, an absolute path. */
  dbPath: string;
  /** A label for transcripts: 'A', 'B', ... */
  label: string;
  /** The TCP port the first try starts the server on (later tries take free ones). Default: a free one (freePort). */
  firstPort?: number;
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
  /**
   * The check's own temporary folder, holding the server's copy of the workspace and the
   * database: the only folder a sandboxed server may write to. Default: IDEM_DB's folder.
   */
  scratch?: string;
  /**
   * A folder of this instance's own inside `scratch` (a pod's), for its HOME (`home`), its
   * /tmp in a sandbox (`tmp-<label>-<port>`) and the socket its relay listens on. Default: scratch.
   */
  ownDir?: string;
  /**
   * Whose server this is: the learner's workspace, an absolute path (default: `scratch`).
   * As root, every sandboxed server of one student runs as that student's own uid, and all
   * of them share one cgroup (cgroup.ts): the bounds on processes and memory hold per
   * student, however many checks of theirs run at once.
   */
  student?: string;
  /**
   * In a sandbox: `[source, dest]` pairs bound read-only, after every other folder, e.g.
   * the workspace image's entries over their placeholders in the working folder
   * (workspace-image.ts imageBinds). Default none; ignored without a sandbox.
   */
  readOnly?: ReadonlyArray<readonly [string, string]>;
  /**
   * Folders inside `scratch` that stay the grader's when the grader is root (never given
   * to the sandbox's user): the workspace image every server of the check shares. Default none.
   */
  shared?: readonly string[];
  /** In a sandbox: more folders bound back read-only where a mask hides them, e.g. the Python installation a virtual environment's interpreter links to. Default none. */
  readable?: readonly string[];
  /**
   * In a sandbox: the folders the server may write, the first holding its HOME and /tmp
   * (`ownDir`), the others its database's folders. Default: `scratch`, all of it.
   */
  writable?: readonly string[];
  /** How long to wait for GET /health to answer 200, in ms, from the spawn (default: readyTimeoutMs(), see process.ts). */
  readyTimeoutMs?: number;
  /**
   * Variables of the track's own contract beyond the basic ones (e.g. the advanced track's
   * IDEM_TTL_S), as name to value. They cannot replace a basic contract variable (PORT,
   * IDEM_DB, IDEM_CHARGE_MS, IDEM_DB_MS, IDEM_PROVIDER_LOG) or PATH and HOME.
   */
  env?: Readonly<Record<string, string>>;
  /**
   * The server's TZ (an IANA zone name, e.g. `Asia/Tokyo`), instead of the grader's own:
   * the contract's times are UTC whatever the zone (docs/server-contract.md). Default: the
   * grader's TZ, if any.
   */
  timeZone?: string;
  /**
   * IDEM_PROVIDER_GATE: the socket of the grader's hand on the provider (gate.ts), in a
   * folder of the grader's own that a sandbox binds in read-only. None when absent.
   */
  gateSocket?: string;
  /**
   * IDEM_DB_GATE=1 beside IDEM_PROVIDER_GATE: the server reports each database statement it
   * runs outside a transaction at the gate and waits for the grader's word (gate.ts,
   * lockstep.ts). `'ends'`: IDEM_DB_GATE=ends, and the statement that ends a transaction
   * (COMMIT) is reported too (step 12's third crash holds it). Default false.
   */
  dbGate?: boolean | 'ends';
  /**
   * Its place in the queue of starts (see startSlot): how long, in ms, the part of the
   * check that waits for this server takes once it is up (default 0). Starts waiting for
   * a slot are served longest first, so a server whose round is slow is not held up by
   * several others starting beside it.
   */
  priority?: number;
  /**
   * The server's wall clock reads this many seconds ahead of the grader's (fake-clock.ts:
   * libfaketime preloaded into the server's command only). Default: its real clock.
   * Requires libfaketime (fakeClockLibrary); the clock of a server that reads it without
   * the C library does not move, which the caller must look for itself.
   */
  clockOffsetS?: number;
}

const OUTPUT_TAIL_BYTES = 4096;
/** The relay a sandboxed server with a network of its own runs behind (relay.ts, compiled beside this file). */
const RELAY = fileURLToPath(new URL('./relay.js', import.meta.url));
/** Its Python twin (grader/relay.py, shipped as source), for a server run by a Python interpreter: it starts several times faster. */
const RELAY_PY = fileURLToPath(new URL('../../grader/relay.py', import.meta.url));

/**
 * The relay command for a server run as `file`: relay.py under the server's own Python
 * interpreter (isolated, without site packages) when `file` is one, else relay.js under
 * this Node.js. A virtual environment's `python` (a link) counts by the interpreter it
 * links to, which runs the relay: a venv's server starts as fast as a plain one's.
 */
function relayCommand(file: string, asRoot = false): { command: string[]; folders: string[] } {
  let real: string | undefined;
  try {
    real = path.isAbsolute(file) ? fs.realpathSync(file) : undefined;
  } catch {
    real = undefined;
  }
  const python = [file, real].find((f): f is string => f !== undefined && /^python3(\.\d+)?$/.test(path.basename(f)));
  // As root the relay runs before the server gives up root: only an interpreter root owns
  // (not one in a student's folder) may run it then.
  if (python && fs.existsSync(RELAY_PY) && (!asRoot || ownedByRoot(python))) {
    return { command: [python, '-I', '-S', RELAY_PY], folders: [path.dirname(RELAY_PY)] };
  }
  return { command: [process.execPath, RELAY], folders: [path.dirname(path.dirname(process.execPath)), path.dirname(RELAY)] };
}
function ownedByRoot(file: string): boolean {
  try {
    const real = fs.realpathSync(file);
    return fs.statSync(real).uid === 0 && fs.statSync(path.dirname(real)).uid === 0;
  } catch {
    return false;
  }
}

/** The longest Unix socket path the grader makes, bytes (sockaddr_un holds 108 with its NUL; 104 on some systems). */
const SOCKET_PATH_MAX = 103;

/**
 * A new folder for one sandboxed server's relay socket, mode 0700, owned by the grader, at
 * a short path (/tmp/idem-lab-s…, else under os.tmpdir()); removed when the server exits.
 * @throws Error when no folder with room for the socket's name can be made (the sandbox
 *   would otherwise have to keep the host's network)
 */
function socketFolder(): string {
  for (const base of ['/tmp', os.tmpdir()]) {
    try {
      const dir = fs.mkdtempSync(path.join(base, 'idem-lab-s'));
      // Room for `/<label>-<port>.sock.other` (the relay's second socket, relay.py).
      if (Buffer.byteLength(dir) + 30 <= SOCKET_PATH_MAX) return dir;
      fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // not writable: the next base
    }
  }
  throw new Error(`no folder for the sandbox's relay socket within ${SOCKET_PATH_MAX} bytes of path: make /tmp writable`);
}

/** How long the rest of a server's processes may take to end after its first process did, in ms. */
const LINGER_MS = 500;

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

/**
 * One running server under test, in its own process group (process.ts: spawnInGroup), or
 * in a sandbox whose first process leads that group.
 */
export class ServerInstance implements Ending {
  readonly label: string;
  readonly port: number;
  readonly dbPath: string;
  readonly pid: number;
  private tail = '';
  /** The same output line by line, in print order among all servers' lines (printed.ts). */
  private readonly printedTail = new PrintedTail(OUTPUT_TAIL_BYTES);
  /** Whether the tail lost its beginning (then output() starts at a whole line). */
  private cut = false;
  private readonly streams: Array<{ destroy(): void } | null | undefined>;
  /** The Unix socket the grader reaches the server through (a sandbox with a network of its own), else undefined: 127.0.0.1:port. */
  socketPath: string | undefined;
  /** True when a process had escaped the group (setsid) and had to be found and killed by pid. */
  escaped = false;
  /**
   * True when it runs in a sandbox: in a pid namespace of its own, so nothing it started
   * outlives the sandbox, and nothing can be left running after it (see kill).
   */
  sandboxed = false;
  /** The file it runs and its command line, as start-up failures name them (commandNames). */
  names = commandNames(DEFAULT_COMMAND);
  private exitInfo: { code?: number; signal?: string } | undefined;
  private readonly exited: Promise<void>;

  /**
   * @param subprocess the server's first process, spawned detached with its stdout and
   *   stderr piped (node:child_process: execa's import alone takes about a tenth of a
   *   second, a twentieth of a whole check)
   */
  constructor(subprocess: ChildProcess, label: string, port: number, dbPath: string) {
    this.label = label;
    this.port = port;
    this.dbPath = dbPath;
    this.pid = subprocess.pid ?? -1;
    this.streams = [subprocess.stdout, subprocess.stderr];
    // stdout and stderr interleaved as they arrive.
    // Each stream's lines also on their own, in print order among all servers' lines.
    const keepFrom = (stream: object) => (chunk: Buffer) => {
      const piece = chunk.toString('utf8');
      this.printedTail.add(stream, piece);
      const text = this.tail + piece;
      if (text.length > OUTPUT_TAIL_BYTES) this.cut = true;
      this.tail = text.slice(-OUTPUT_TAIL_BYTES);
    };
    if (subprocess.stdout) subprocess.stdout.on('data', keepFrom(subprocess.stdout));
    if (subprocess.stderr) subprocess.stderr.on('data', keepFrom(subprocess.stderr));
    this.exited = new Promise((resolve) => {
      // 'close' comes once the process has exited and its output has ended; 'error' when it could not be started at all.
      subprocess.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
        this.exitInfo ??= { code: code ?? undefined, signal: signal ?? undefined };
        resolve();
      });
      subprocess.once('error', (err: NodeJS.ErrnoException) => {
        if (subprocess.pid === undefined) {
          keepFrom(subprocess)(Buffer.from(`${err.message}\n`));
          this.exitInfo ??= { code: undefined, signal: undefined };
          resolve();
        }
      });
    });
  }

  /** The last 4 KiB of what the server printed (stdout and stderr interleaved), from the start of a line. */
  output(): string {
    return this.cut ? this.tail.slice(this.tail.indexOf('\n') + 1) : this.tail;
  }

  /** The same output line by line, each line with its place in the order all servers printed (printed.ts). */
  printed(): PrintedLine[] {
    return this.printedTail.lines();
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
   * How many processes the server left running when it was stopped: processes that
   * outlived the server's own exit on SIGTERM, or that had left its process group
   * (setsid daemons, found by the environment the grader gave them). Each was killed.
   */
  leftRunning = 0;
  private stopping: Promise<void> | undefined;

  /**
   * Stops the whole process group as process.ts stopGroup does: SIGTERM, then SIGKILL
   * after STOP_GRACE_MS (1.5 s); before the SIGKILL, finds by their environment the
   * processes that left the group and kills them by pid too (see `leftRunning`); returns
   * at most KILL_WAIT_MS (1.5 s) later even if some process still holds the output.
   * Idempotent; never throws.
   */
  stop(): Promise<void> {
    this.stopping ??= this.stopOnce();
    return this.stopping;
  }

  private async stopOnce(): Promise<void> {
    let left: FoundProcess[] = [];
    const { ended } = await stopGroup(this.pid, this, {
      beforeKill: async (graceful) => {
        // Whatever still carries this instance's environment, or is still in its group once
        // its leader is gone, was left running by the server. The leader may go first while
        // the rest of the group is still ending on the same SIGTERM (a sandbox's bwrap exits
        // before the server inside it has closed): what ends within LINGER_MS was not left.
        left = processesOf(this.pid, this.port, this.dbPath).filter((p) => p.pgid !== this.pid || graceful);
        for (const until = performance.now() + LINGER_MS; left.length > 0 && performance.now() < until; ) {
          await delay(20);
          left = processesOf(this.pid, this.port, this.dbPath).filter((p) => p.pgid !== this.pid || graceful);
        }
        // The leader may be gone while children it forked live on: the group gets SIGKILL either way (stopGroup).
        killEach(left);
      },
    });
    this.leftRunning = left.length;
    this.escaped = left.some((p) => p.pgid !== this.pid);
    this.forget(ended);
  }

  /**
   * Lets go of the process once it was killed: when it did not end within KILL_WAIT_MS
   * (a process that escaped even SIGKILL can hold the output pipe open for ever), its
   * output stops being read rather than hang.
   */
  private forget(ended: boolean): void {
    if (!ended) this.streams.forEach((stream) => stream?.destroy());
    running.delete(this);
    reservedPorts.delete(this.port);
  }

  /**
   * Kills the whole process group at once (SIGKILL), and any process that left it,
   * found by its environment (stopGroup without a grace period); returns once it has
   * exited, or at most KILL_WAIT_MS (1.5 s) later. For a
   * check that is done with its server: no grace period, so a server's shutdown (an
   * interpreter's, about 30 ms of CPU) costs nothing. Never throws; after stop() or
   * kill(), the first one's promise.
   */
  kill(): Promise<void> {
    this.stopping ??= this.killOnce();
    return this.stopping;
  }

  private async killOnce(): Promise<void> {
    const { ended } = await stopGroup(this.pid, this, { graceMs: 0, beforeKill: () => killEach(processesOf(this.pid, this.port, this.dbPath)) });
    this.forget(ended);
  }

  /** Whether the process ended (and its output with it) within `ms` ms (process.ts Ending). Never rejects. */
  endedWithin(ms: number): Promise<boolean> {
    return Promise.race([this.exited.then(() => true), delay(ms, false, { ref: false })]);
  }

  /** Stops the group at once, synchronously: for process exit. */
  killNow(): void {
    killEach(processesOf(this.pid, this.port, this.dbPath));
    killGroup(this.pid, 'SIGKILL');
    running.delete(this);
  }
}

/** SIGKILL to each of `found` by pid (processes that left a server's group); one gone meanwhile is skipped. */
function killEach(found: FoundProcess[]): void {
  for (const p of found) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
}

/**
 * Whether `file` can be run: a path that exists (a relative one, such as a virtual
 * environment's `.venv/bin/python`, from `workspace`, where the server runs; default the
 * current folder), or a name found on PATH.
 */
export function commandExists(file: string, workspace?: string): boolean {
  if (file.includes('/')) return fs.existsSync(path.resolve(workspace ?? '.', file));
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir !== '' && fs.existsSync(path.join(dir, file)));
}

/** A live process found in /proc. */
interface FoundProcess {
  pid: number;
  /** Its process group. */
  pgid: number;
}

/**
 * The live processes (zombies left out) in the process group `pgid`, or carrying the
 * environment the grader gave one instance (PORT and IDEM_DB as set: only processes this
 * grader started, and what they started, carry both; /proc/PID/environ keeps the
 * environment a process was started with). Linux only (/proc); elsewhere none. Never throws.
 */
function processesOf(pgid: number, port: number, dbPath: string): FoundProcess[] {
  const found: FoundProcess[] = [];
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return found;
  }
  const wanted = [`PORT=${port}`, `IDEM_DB=${dbPath}`];
  for (const entry of entries) {
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const stat = procStat(pid);
      if (!stat || stat.state === 'Z' || stat.state === 'X') continue;
      if (stat.pgid === pgid) {
        found.push({ pid, pgid: stat.pgid });
        continue;
      }
      const env = fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (wanted.every((w) => env.includes(w))) found.push({ pid, pgid: stat.pgid });
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

/**
 * The inodes of the TCP sockets listening on `port` in the grader's network namespace, on
 * 127.0.0.1 or on every address (IPv4 and IPv6), read from /proc/net/tcp and tcp6;
 * undefined where neither can be read (not Linux). Never throws.
 */
function listenerInodes(port: number): Set<string> | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const loopbackOrAny = new Set(['0100007F', '00000000', '00000000000000000000000000000000', '00000000000000000000000001000000', '0000000000000000FFFF00000100007F']);
  const inodes = new Set<string>();
  let read = false;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = fs.readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    read = true;
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10 || cols[3] !== '0A') continue; // 0A: TCP_LISTEN
      const [address, local] = cols[1].split(':');
      if (local === hexPort && loopbackOrAny.has(address)) inodes.add(cols[9]);
    }
  }
  return read ? inodes : undefined;
}

/**
 * Whether the server answering on `instance`'s port is the instance itself: a socket
 * listening on the port is held by one of its processes (its process group, or what
 * carries its environment: processesOf). false when the listener is another process's: a
 * server of another grader or test process took the free port first, this one could not
 * bind it, and GET /health was answered by that stranger (freePort's probe and the bind
 * leave a moment between them). true when it cannot be told (no /proc, an fd not ours to
 * read, a listener found by none of the tables): a start is refused only on evidence.
 * Linux only; never throws.
 */
export function listensItself(instance: { pid: number; port: number; dbPath: string }): boolean {
  const inodes = listenerInodes(instance.port);
  if (inodes === undefined || inodes.size === 0) return true;
  let unreadable = false;
  for (const { pid } of processesOf(instance.pid, instance.port, instance.dbPath)) {
    let fds: string[];
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`);
    } catch {
      unreadable = true;
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m && inodes.has(m[1])) return true;
      } catch {
        // closed meanwhile
      }
    }
  }
  return unreadable;
}

/** A start whose port turned out to be listened on by another process (listensItself): startServer tries another port. Internal. */
class PortTakenByStranger extends Error {
  constructor(readonly port: number) {
    super(`port ${port} is listened on by another process`);
  }
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
  // The caller's folder is already a copy of the workspace for this check (LiveContext).
  const cwd = options.workspace;
  // The start time limit counts from the spawn, not from the wait for a slot.
  const release = await startSlot(options.priority ?? 0);
  const timeoutMs = options.readyTimeoutMs ?? readyTimeoutMs();
  let starvedTries = 0;
  try {
    for (let attempt = 1; ; attempt++) {
      const port = attempt === 1 && options.firstPort !== undefined ? options.firstPort : await freePort();
      const instance = spawnServer(options, port, cwd);
      try {
        await waitReady(instance, timeoutMs);
        startCount++;
        return instance;
      } catch (err) {
        await instance.stop();
        // Another process took the free port between our probe and the bind: try another one.
        if (attempt < 5 && (err instanceof PortTakenByStranger || addressInUse(instance.output()))) continue;
        // The start limit ran out while the server or the grader was starved: it says
        // nothing about the server. Started again, START_STARVED_TRIES times at most.
        if (err instanceof StartStarved) {
          if (++starvedTries < START_STARVED_TRIES) continue;
          throw new Starved(t('check.startStarved', { server: instance.names.server, seconds: timeoutMs / 1000, tries: starvedTries, waited: Math.round(err.seen.serverWaitMs), lag: Math.round(err.seen.graderLagMs) }));
        }
        throw err;
      }
    }
  } finally {
    release();
  }
}

/**
 * How many times a server is started when each start's limit ran out while it (or the
 * grader) was starved (sched.ts starvedFor), before the step is inconclusive (gate.ts Starved).
 */
export const START_STARVED_TRIES = 2;

/** A start whose limit ran out while the server or the grader was starved: what was seen. Internal to startServer. */
class StartStarved extends Error {
  constructor(readonly seen: Starvation) {
    super('start starved');
  }
}

/**
 * How many servers start at once in this process: one per core, and one more for the
 * time a start spends waiting on the disk and on its relay. A start takes about 0.15 s of
 * CPU (an interpreter and its imports); started all at once, ten servers on two cores
 * each take ten times that, and the one a slow round waits for is not up any sooner.
 */
export const START_SLOTS = os.availableParallelism() + 1;

/**
 * The longest a start keeps its slot, in ms: a server that does not come up (one that
 * never listens waits out its whole start time limit) holds up the queue no longer than
 * this; it goes on waiting outside it.
 */
export const SLOT_HOLD_MS = 1000;

let startsRunning = 0;
const startQueue: Array<{ priority: number; order: number; go: () => void }> = [];
let startsQueued = 0;
let dispatching = false;

/** Hands the free slots to the queue's first starts, on the next turn of the event loop. */
function dispatchStarts(): void {
  if (dispatching) return;
  dispatching = true;
  setImmediate(() => {
    dispatching = false;
    startQueue.sort((a, b) => b.priority - a.priority || a.order - b.order);
    while (startsRunning < START_SLOTS && startQueue.length > 0) {
      startsRunning++;
      startQueue.shift()!.go();
    }
  });
}

/**
 * Waits for one of START_SLOTS slots to start a server in, served by `priority` (highest
 * first; equal ones in the order asked). Slots are handed out on the next turn of the
 * event loop, so that the starts asked for together (every step's first ones) are served
 * by priority, not by which step asked first. The slot is given back by the function
 * returned, or SLOT_HOLD_MS after it was taken, whichever comes first.
 * @returns the function that gives the slot back (call it once the server is up or has failed to start; again is harmless)
 */
export async function startSlot(priority: number): Promise<() => void> {
  await new Promise<void>((go) => {
    startQueue.push({ priority, order: startsQueued++, go });
    dispatchStarts();
  });
  let given = false;
  const giveBack = () => {
    if (given) return;
    given = true;
    clearTimeout(timer);
    startsRunning--;
    if (startQueue.length > 0) dispatchStarts();
  };
  const timer = setTimeout(giveBack, SLOT_HOLD_MS);
  timer.unref();
  return giveBack;
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

/** Variables any login has and no secret is in, passed on as they are (a server without USER or TERM knows it is not in a terminal of the learner's). */
const PASSED_THROUGH = new Set(['LANG', 'TZ', 'USER', 'LOGNAME', 'SHELL', 'TERM']);

function passedThrough(env: NodeJS.ProcessEnv): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && (PASSED_THROUGH.has(name) || name.startsWith('LC_'))) kept[name] = value;
  }
  return kept;
}

/**
 * The whole environment of a server instance (nothing else of the grader's is passed on:
 * no tokens, no GITHUB_*, no cloud credentials): PATH, HOME (an empty folder beside
 * IDEM_DB), LANG, LC_*, TZ (StartOptions.timeZone when given), USER, LOGNAME, SHELL and
 * TERM, the track's own variables (StartOptions.env), and the contract's variables; and,
 * when `tmp` is given (a server outside a sandbox, whose /tmp is the machine's), TMPDIR:
 * the instance's own temporary folder, the one a sandbox shows as /tmp, so that what a
 * server keeps in its temporary folder stays among the files the checks read.
 */
export function serverEnv(options: StartOptions, port: number, home: string, tmp?: string): Record<string, string> {
  return {
    ...passedThrough(process.env),
    ...(options.timeZone === undefined ? {} : { TZ: options.timeZone }),
    ...options.env,
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    ...(tmp === undefined ? {} : { TMPDIR: tmp }),
    ...contractEnv({ port, dbPath: options.dbPath, providerLog: options.providerLog ?? path.join(path.dirname(options.dbPath), 'provider.log'), chargeMs: options.chargeMs, dbMs: options.dbMs }),
    ...(options.gateSocket ? { IDEM_PROVIDER_GATE: options.gateSocket } : {}),
    ...(options.gateSocket && options.dbGate ? { IDEM_DB_GATE: options.dbGate === 'ends' ? 'ends' : '1' } : {}),
  };
}

/** The cgroup of each student (StartOptions.student) whose servers have not all exited (see cgroup.ts). */
const cgroups = new Map<string, CheckCgroup>();

/** The cgroup of `student`, made on their first server; undefined where none can be made. */
function studentCgroup(student: string): CheckCgroup | undefined {
  let cgroup = cgroups.get(student);
  if (!cgroup) {
    cgroup = CheckCgroup.make(student);
    if (!cgroup) return undefined;
    cgroups.set(student, cgroup);
  }
  return cgroup;
}

function spawnServer(options: StartOptions, port: number, cwd: string): ServerInstance {
  const command = options.command ?? DEFAULT_COMMAND;
  // The check's own folder: the one place the server may write (its copy of the workspace and the database are in it).
  const scratch = options.scratch ?? path.dirname(options.dbPath);
  const own = options.ownDir ?? scratch;
  const home = path.join(own, 'home');
  fs.mkdirSync(home, { recursive: true });
  // The sandbox's /tmp (see bwrapArgs), one per instance: two pods do not share one. Outside
  // a sandbox, the instance's TMPDIR (serverEnv).
  const tmp = path.join(own, `tmp-${options.label}-${port}`);
  fs.mkdirSync(tmp, { recursive: true });
  const { sandbox } = command;
  // As root, the server runs as the check's own unprivileged user (sandbox.ts sandboxOwner),
  // who must own the folder it writes.
  const student = options.student ?? scratch;
  const owner = sandboxOwner(sandbox, student);
  const shared = options.shared ?? [];
  if (owner) chownTree(scratch, owner, (full) => shared.includes(full));
  // In a sandbox with a network of its own the server is reached through a Unix socket its
  // relay makes in a folder of the grader's at a short path (the kernel allows 107 bytes):
  // never the host's network in silence because the check's folder lies deep.
  const socketDir = sandbox?.network === 'private' ? socketFolder() : undefined;
  const socketPath = socketDir && path.join(socketDir, `${options.label}-${port}.sock`);
  const relay = relayCommand(command.file, owner !== undefined);
  // A clock moved on (StartOptions.clockOffsetS): the preload is set on the server's own command, past the privilege drop.
  const argv = options.clockOffsetS === undefined ? [command.file, ...command.args] : withFakeClock(options.clockOffsetS, [command.file, ...command.args]);
  // The preload's folder, readable in a sandbox (withFakeClock threw already where there is none).
  const clockLibrary = options.clockOffsetS === undefined ? undefined : fakeClockLibrary();
  const server = owner && sandbox ? dropPrivileges(owner, sandbox.limits, argv) : argv;
  // In a sandbox, each start its own host name and pids (podHostname, withPidOffset): pods
  // are told apart. The pids used up before the relay is forked push it and the server it
  // forks further on (pid and parent's pid); without a relay (no network namespace) the
  // server keeps the first pid.
  const inner = socketPath ? withPidOffset([...relay.command, socketPath, String(port), ...server]) : server;
  // Writable: the pod's own folder (HOME, /tmp, its working folder) and its database's
  // folders, bound like the relay's socket folder; then the read-only binds over them.
  const [writable, ...databaseDirs] = options.writable?.length ? options.writable : [scratch];
  const extraWritable = databaseDirs.filter((dir) => dir !== writable && !dir.startsWith(writable + path.sep));
  const readOnly = (options.readOnly ?? []).flatMap(([source, dest]) => ['--ro-bind', source, dest]);
  const sandboxArgs = sandbox && [...bwrapArgs(sandbox, writable, cwd, command.file, [...relay.folders, ...(options.readable ?? []), ...(options.gateSocket ? [path.dirname(options.gateSocket)] : []), ...(clockLibrary ? [path.dirname(clockLibrary)] : [])], tmp, [...(socketDir ? [socketDir] : []), ...extraWritable], podHostname()), ...readOnly, '--', ...inner];
  let [file, args] = !sandbox || !sandboxArgs
    ? withParentDeath(argv[0], argv.slice(1))
    : owner
      ? [sandbox.bwrap, sandboxArgs]
      : [sandbox.prlimit, [...prlimitArgs(sandbox.limits), sandbox.bwrap, ...sandboxArgs]];
  // Memory and processes of all the check's servers together, where a cgroup can be made (cgroup.ts).
  const cgroup = sandbox ? studentCgroup(student) : undefined;
  if (cgroup) [file, args] = cgroup.wrap(file, args);
  const subprocess = spawnInGroup(file, args, { cwd, env: serverEnv(options, port, home, command.sandbox ? undefined : tmp) });
  subprocess.once('close', () => {
    if (socketDir) fs.rmSync(socketDir, { recursive: true, force: true });
    if (cgroup?.release()) cgroups.delete(student);
  });
  const instance = new ServerInstance(subprocess, options.label, port, options.dbPath);
  if (socketPath) instance.socketPath = socketPath;
  instance.sandboxed = sandbox !== undefined;
  instance.names = commandNames(command);
  running.add(instance);
  reservedPorts.add(port);
  return instance;
}

let setprivFound: boolean | undefined;

/**
 * An unsandboxed server's command, run through util-linux `setpriv --pdeathsig SIGKILL`
 * when setpriv is on PATH: the kernel kills the server when the grader dies, even by
 * SIGKILL, when no exit hook runs (prctl PR_SET_PDEATHSIG, kept across its exec). A
 * sandboxed one has bwrap's --die-with-parent. Processes the server forks are not covered
 * (the next run's sweep finds them, stale.ts). Without setpriv, the command unchanged.
 */
function withParentDeath(file: string, args: string[]): [string, string[]] {
  setprivFound ??= commandExists('setpriv');
  return setprivFound ? ['setpriv', ['--pdeathsig', 'SIGKILL', '--', file, ...args]] : [file, args];
}

/**
 * Waits for `instance` to answer GET /health with 200 (process.ts waitUntilReady), at
 * most `timeoutMs` ms from now.
 * @throws ServerStartFailed when it exits first or does not answer in time, with its output tail
 */
async function waitReady(instance: ServerInstance, timeoutMs: number): Promise<void> {
  const since = performance.now();
  const deadline = since + timeoutMs;
  const target = { label: instance.label, port: instance.port, socketPath: instance.socketPath };
  let lastAnswer = t('check.noHealth.never');
  // Whether the server (its CPU wait) or the grader (its event loop) was starved while the limit ran.
  const meter = new StarveMeter(new SchedWatch([{ pid: instance.pid, port: instance.port, dbPath: instance.dbPath }]));
  // The HTTP client loads while the server starts, not when the first health check is due.
  await delay(0);
  loadHttpClient();
  // The Python relay makes its socket once the server takes connections: until then a
  // look at the folder is cheaper than a request that fails. (The Node.js relay makes it at once.)
  while (instance.socketPath && !fs.existsSync(instance.socketPath) && !instance.hasExited && performance.now() < deadline) await delay(10);
  const probe = async () => {
    const health = await send(target, 'GET', '/health', undefined, { connectMs: 500, answerMs: 2000 });
    if (health.status === 200) return true;
    if (health.status !== undefined) lastAnswer = t('check.noHealth.status', { status: health.status });
    // Through a relay, a port nobody listens on closes the connection instead of refusing it.
    else if (health.errorCode !== 'refused' && !(instance.socketPath && /other side closed|socket hang up|ECONNRESET|EPIPE/.test(health.error ?? ''))) lastAnswer = health.error ?? lastAnswer;
    return false;
  };
  let readiness = await waitUntilReady({ since, timeoutMs, ended: () => instance.hasExited, probe });
  const seen = meter.stop();
  if (readiness === 'timeout' && starvedFor(seen, timeoutMs)) {
    // The limit ran out while the server waited for a CPU or the grader could not look: one
    // last look, then it is unclear (startServer starts it again), never the server's failure.
    if (!instance.hasExited && (await probe())) readiness = 'ready';
    else if (!instance.hasExited) throw new StartStarved(seen);
    else readiness = 'ended';
  }
  if (readiness === 'ready') {
    // Unsandboxed, the port is the host's: GET /health may have been answered by another
    // process's server that bound the port first. (In a sandbox the relay's socket is the pod's own.)
    if (!instance.socketPath && !listensItself(instance)) throw new PortTakenByStranger(instance.port);
    return;
  }
  if (readiness === 'ended') {
    throw new ServerStartFailed(
      t('check.serverExited', { how: String(instance.exitDescription), port: instance.port, server: instance.names.server }),
      t('check.serverExited.why'),
      { serverOutput: labelledOutput([instance]), details: [t('check.startedAs', { port: instance.port, db: instance.dbPath, command: instance.names.command })] },
    );
  }
  throw new ServerStartFailed(
    t('check.noHealth', { port: instance.port, seconds: timeoutMs / 1000, last: lastAnswer, server: instance.names.server }),
    t('check.noHealth.why'),
    { serverOutput: labelledOutput([instance]), details: [t('check.startedAs', { port: instance.port, db: instance.dbPath, command: instance.names.command })] },
  );
}

/** Stops every server this process started and has not stopped: on exit or on a signal. */
export function killAllServersNow(): void {
  for (const instance of [...running]) instance.killNow();
}

let startCount = 0;

/** How many servers this process has started and seen ready so far: a figure for the benchmark (bench/bench.ts). */
export function serversStarted(): number {
  return startCount;
}

/** How many servers this process started that are still not stopped (for tests). */
export function runningServerCount(): number {
  return running.size;
}
