/**
 * The sandbox a server under test runs in: bubblewrap (Debian's `bubblewrap` package,
 * https://github.com/containers/bubblewrap) under prlimit (util-linux).
 *
 * Inside it the server has its own pid namespace (nothing it forks outlives the sandbox,
 * and it cannot signal the grader or another student's server), sees the system
 * read-only, sees an empty read-only /tmp, /var/tmp, /run and home folder, cannot see the folders
 * named in `hide` (the cohort's workspaces), and can write only its check's temporary
 * folder, which holds its own copy of the workspace, IDEM_DB and the provider log, at the
 * same path as outside (the grader opens the same sqlite file). It has a network
 * namespace of its own, loopback only, and the grader reaches it through a Unix socket in
 * that folder (relay.ts); where no network namespace can be made, `--sandbox auto` keeps
 * the host's and reaches it on 127.0.0.1:PORT, and says so as a fallback, while
 * `--sandbox required` refuses (chooseSandboxFor, docs/safe-grading.md).
 * Limits (setrlimit, per process): address space, open files, file size, CPU time, and
 * the number of processes.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { createHash, randomBytes, randomInt } from 'node:crypto';

/** --sandbox: `required` fails when no sandbox starts, `auto` runs without one then, `off` never uses one. */
export type SandboxMode = 'auto' | 'required' | 'off';

/** The sandbox modes, for option parsing. */
export const SANDBOX_MODES: readonly SandboxMode[] = ['auto', 'required', 'off'];

/** Resource limits of a sandboxed server, per process (setrlimit). */
export interface SandboxLimits {
  /** Address space, bytes (RLIMIT_AS). */
  memoryBytes: number;
  /** Open files (RLIMIT_NOFILE). */
  openFiles: number;
  /** Largest file it may write, bytes (RLIMIT_FSIZE). */
  fileBytes: number;
  /** CPU time, s (RLIMIT_CPU). */
  cpuSeconds: number;
  /** Processes and threads it may start beyond those running on the machine when it starts (RLIMIT_NPROC counts per user); as root, those of the check's own user in all. */
  processes: number;
  /** Size of its /dev/shm, bytes (a tmpfs of its own). Default DEFAULT_SHM_BYTES. */
  shmBytes?: number;
}

/** The default size of a sandbox's /dev/shm, bytes. */
export const DEFAULT_SHM_BYTES = 16 * 1024 * 1024;

/**
 * Defaults: room for a Python server with a thread per request, nothing like a fork bomb or a
 * disk filler. Address space is 4 GiB, not the 1 GiB of memory the cgroup allows: glibc reserves
 * 64 MiB of address space per malloc arena, up to 8 arenas per core, so a threaded Python server
 * answering 16 requests at once maps over 1 GiB while 20 MiB of it is resident, and under a
 * 1 GiB RLIMIT_AS its threads got MemoryError (02 and 06 send that many at once).
 */
export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  memoryBytes: 4 * 1024 * 1024 * 1024,
  openFiles: 512,
  fileBytes: 64 * 1024 * 1024,
  cpuSeconds: 300,
  processes: 256,
};

/** A sandbox that was seen to start. */
export interface Sandbox {
  /** The bwrap executable. */
  bwrap: string;
  /** The prlimit executable. */
  prlimit: string;
  /** Folders the server must not see (replaced by empty ones), absolute. */
  hide: string[];
  limits: SandboxLimits;
  /**
   * `private`: a network namespace of its own, loopback only; the grader reaches the
   * server through a Unix-socket relay (relay.ts). `host`: the host's network namespace
   * (where a private one cannot be made), reached on 127.0.0.1:PORT directly.
   */
  network: 'private' | 'host';
}

/** The bwrap the grader uses: IDEM_LAB_BWRAP when set (a path), else `bwrap` on PATH. */
export function bwrapPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.IDEM_LAB_BWRAP || 'bwrap';
}

/**
 * Raised when a sandbox is required and none starts (`weakened` absent), or one starts
 * only weaker than asked (`weakened: 'host-network'`: no network namespace of its own could
 * be made); the message is why, in one line.
 */
export class NoSandbox extends Error {
  constructor(message: string, readonly weakened?: 'host-network') {
    super(message);
  }
}

/**
 * How confined a run's servers are: `on` a sandbox with a network namespace of its own;
 * `host-network` a sandbox that keeps the host's network (it can reach the host's loopback
 * ports and beyond); `off` no sandbox at all (the server runs as the grader's user, with
 * its rights).
 */
export type Confinement = 'on' | 'host-network' | 'off';

/** The sandbox chosen for a run, and how confined it leaves the servers (see chooseSandboxFor). */
export interface SandboxChoice {
  /** The sandbox to run servers in; undefined for `off`. */
  sandbox?: Sandbox;
  confinement: Confinement;
  /** Why the confinement is less than `on`, one line (bwrap's own complaint, or `--sandbox off`); absent for `on`. */
  reason?: string;
  /** True when the confinement is less than asked (`auto` fell back): every report says so as a warning. */
  fallback: boolean;
}

function existingDir(dir: string): boolean {
  try {
    return fs.lstatSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** Whether `inner` is `outer` or inside it. */
function within(inner: string, outer: string): boolean {
  const rel = path.relative(outer, inner);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * The installation an interpreter at `file` belongs to, to be bound back read-only when a
 * mask hides it (e.g. pyenv's under /root): the folder above the `bin` folder that holds
 * the real file (…/versions/3.12.1 for …/versions/3.12.1/bin/python3.12). Undefined when
 * nothing is to be bound: the file is under no mask, is not a regular file in a folder
 * named `bin`, or its installation would be a mask itself or a home folder (/root, /home/NAME,
 * $HOME): a server command a student names, such as `/root/.ssh/id_ed25519` or
 * `/home/grader/bin/x`, never exposes the grader's home to the sandbox.
 */
export function installationOf(file: string, masked: Iterable<string>): string | undefined {
  const real = safeRealpath(file);
  if (!real) return undefined;
  const masks = [...masked];
  if (!masks.some((m) => within(real, m))) return undefined;
  let stat: fs.Stats;
  try {
    stat = fs.statSync(real);
  } catch {
    return undefined;
  }
  if (!stat.isFile() || path.basename(path.dirname(real)) !== 'bin') return undefined;
  const install = path.dirname(path.dirname(real));
  const homes = [os.homedir(), process.env.HOME ?? '', '/root'].filter(Boolean).map((h) => safeRealpath(h) ?? h);
  if (install === '/' || masks.includes(install) || homes.includes(install) || path.dirname(install) === '/home') return undefined;
  return install;
}

/**
 * The bwrap arguments for a server whose writable folder is `writable`, run in `cwd`,
 * executing `file` (an absolute interpreter path keeps working when it lives under a
 * hidden folder, e.g. pyenv's under $HOME: its installation is bound back read-only).
 * `readable`: more folders bound back read-only when a mask hides them. `tmp`: a folder
 * inside `writable` that the server sees as a writable /tmp; without it /tmp is an empty
 * read-only folder. `sockets`: folders of the grader's bound in writable for the relay.
 */
export function bwrapArgs(sandbox: Sandbox, writable: string, cwd: string, file: string, readable: string[] = [], tmp?: string, sockets: string[] = [], hostname?: string): string[] {
  const args = ['--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc'];
  // A host name of its own (podHostname): two pods of one deployment are told apart by it.
  if (hostname) args.push('--hostname', hostname);
  // /dev/shm: a tmpfs of its own, capped (memory a server could otherwise fill without bound).
  args.push('--perms', '1777', '--size', String(sandbox.limits.shmBytes ?? DEFAULT_SHM_BYTES), '--tmpfs', '/dev/shm');
  if (sandbox.network === 'private') args.push('--unshare-net');
  const masked = new Set<string>();
  const homes = [os.homedir(), process.env.HOME ?? '', '/root', '/home', '/tmp', '/var/tmp', '/run', '/var/run', os.tmpdir(), ...sandbox.hide];
  const reals = homes
    .filter((dir) => dir && dir !== '/' && path.isAbsolute(dir))
    .map((dir) => safeRealpath(dir))
    .filter((real): real is string => !!real && real !== '/' && existingDir(real));
  for (const real of reals) {
    // A folder inside another masked one is hidden with it (and could not be masked again: it is gone).
    if (masked.has(real) || reals.some((other) => other !== real && within(real, other))) continue;
    // A folder that holds the writable one is masked all the same; the writable one is bound back below.
    masked.add(real);
    args.push('--tmpfs', real);
  }
  // /tmp writable, as on any machine, but on disk in the server's own folder: a read-only
  // /tmp would tell a server it is being graded, and a tmpfs would let it fill memory.
  // Bound before the folders below, which may lie under /tmp.
  const realTmp = tmp ? safeRealpath('/tmp') : undefined;
  if (tmp && realTmp) args.push('--bind', tmp, realTmp);
  // A folder bound back read-only under a mask: the folders bwrap makes on the way are
  // made 0755 (bwrap makes them 0700, which the sandbox's own user, as root, cannot enter).
  const parents = (real: string) => {
    const mask = [...masked].find((m) => within(real, m) && m !== real);
    if (!mask) return;
    const between: string[] = [];
    for (let dir = path.dirname(real); dir !== mask && within(dir, mask); dir = path.dirname(dir)) between.unshift(dir);
    for (const dir of between) args.push('--perms', '0755', '--dir', dir);
  };
  const bindBack = (real: string) => {
    parents(real);
    args.push('--ro-bind', real, real);
  };
  if (path.isAbsolute(file)) {
    const install = installationOf(file, masked);
    if (install) bindBack(install);
  }
  for (const dir of readable) {
    const real = safeRealpath(dir);
    if (real && real !== '/' && [...masked].some((m) => within(real, m))) bindBack(real);
  }
  parents(writable);
  args.push('--bind', writable, writable);
  // The relay's socket folder (the grader's own, at a short path), bound in for the relay.
  for (const dir of sockets) {
    parents(dir);
    args.push('--bind', dir, dir);
  }
  // The masks are empty and read-only once the writable folder is bound in place.
  for (const dir of masked) if (dir !== realTmp) args.push('--remount-ro', dir);
  args.push('--chdir', cwd);
  // As root: every capability dropped but the two setpriv needs to become the sandbox's
  // own user (dropPrivileges); that user holds none, and no_new_privs keeps it so.
  if (process.getuid?.() === 0) args.push('--cap-drop', 'ALL', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID');
  return args;
}

/**
 * The host name of one sandboxed server start, as a pod of a deployment has one of its
 * own: the machine's name (at most 40 characters) and 6 random hex digits. A server that
 * tells its instances apart by host name (a record scoped by it) sees each start, a
 * restart too, as another instance, as it would under Kubernetes.
 */
export function podHostname(): string {
  const base = (os.hostname().split('.')[0] || 'host').replace(/[^A-Za-z0-9-]/g, '').slice(0, 40) || 'host';
  return `${base}-${randomBytes(3).toString('hex')}`;
}

/** The most process ids a sandboxed start uses up before the server starts (withPidOffset): the offset is drawn from 1 to this. */
export const PID_OFFSET_MAX = 24;

/** The offset of the next start: a random first one, then each start the next (1 to PID_OFFSET_MAX, round). */
let pidTurn = randomInt(PID_OFFSET_MAX);

/**
 * The pid offset of a new start: successive starts of this process take successive
 * offsets, so the starts of one check (a restart, a second instance) never draw the same
 * one, as a draw per start would, once in PID_OFFSET_MAX, and let a pid-scoped record pass;
 * two starts collide only with a multiple of PID_OFFSET_MAX starts between them.
 */
export function nextPidOffset(): number {
  return 1 + (pidTurn++ % PID_OFFSET_MAX);
}

/**
 * `command` behind a shell that first uses up 1 to PID_OFFSET_MAX process ids (forks that
 * exit at once), a new number per start, then forks a subshell that execs `command` (the
 * relay) and waits for it: the relay, and the server it forks, get pids that many further
 * on. In a pid namespace of its own every sandboxed server would otherwise get the same
 * small pid, and the same parent (the relay, at the shell's pid), so a record scoped by
 * pid or by the parent's pid (a claim's owner, a per-process key, a supervisor's pid)
 * would look shared by every instance and every restart; with the offset two starts see
 * different pids and parents, as two pods or a restarted process do (see nextPidOffset).
 * The forks cost about a millisecond each. The shell ignores SIGTERM, SIGINT and SIGHUP
 * (the relay, which `command` must be, sets its own handlers and gives the server the
 * default ones back) and exits with the relay's status, so a stop still reaches the
 * server through the process group and its exit code comes back unchanged. (The shell's
 * own pid does not move: it is the first of the namespace's.)
 */
export function withPidOffset(command: string[], offset = nextPidOffset()): string[] {
  const burn = `trap '' TERM INT HUP; i=0; while [ "$i" -lt ${offset} ]; do (:); i=$((i+1)); done; (exec "$@"); exit $?`;
  return ['/bin/sh', '-c', burn, 'sh', ...command];
}

/** The first uid (and gid) of the range sandboxed servers run as when the grader is root; no login uses it. */
export const SANDBOX_UID_BASE = 0x60000000;
/** How many uids the range holds: a check's uid is drawn from its folder, so two students' checks differ. */
export const SANDBOX_UID_SPAN = 0x01000000;

/**
 * The unprivileged user a sandboxed server of `student` (the learner's workspace, or a
 * check's folder) runs as, when the grader is root (uid 0): a uid and gid of their own per
 * student (drawn from a SHA-256 of the folder's path), so root-only files stay closed and
 * RLIMIT_NPROC, which does not apply to root, bounds every process of that student's
 * servers together. Undefined when the
 * grader is not root (the server then runs as the grader's user, whose limits apply) or
 * without a sandbox.
 */
export function sandboxOwner(sandbox: Sandbox | undefined, student: string): { uid: number; gid: number } | undefined {
  if (!sandbox || process.getuid?.() !== 0) return undefined;
  const n = SANDBOX_UID_BASE + (createHash('sha256').update(path.resolve(student)).digest().readUInt32BE(0) % SANDBOX_UID_SPAN);
  return { uid: n, gid: n };
}

/**
 * The command that runs `inner` as `owner` inside the sandbox (util-linux setpriv): no
 * supplementary groups, no inheritable capabilities and no_new_privs (a setuid binary
 * gains nothing), under the sandbox's limits (prlimit, after the uid changes, so the
 * process count is that user's alone).
 */
export function dropPrivileges(owner: { uid: number; gid: number }, limits: SandboxLimits, inner: string[]): string[] {
  return [
    'setpriv', `--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--clear-groups', '--no-new-privs', '--inh-caps=-all', '--',
    'prlimit', ...prlimitArgs(limits, 0), '--', ...inner,
  ];
}

function safeRealpath(p: string): string | undefined {
  try {
    return fs.realpathSync(p);
  } catch {
    return undefined;
  }
}

/** The prlimit arguments (before the command) for the sandbox's limits. */
export function prlimitArgs(limits: SandboxLimits, running: number = threadsRunning()): string[] {
  return [
    `--as=${limits.memoryBytes}`,
    `--nofile=${limits.openFiles}`,
    `--fsize=${limits.fileBytes}`,
    `--cpu=${limits.cpuSeconds}`,
    `--nproc=${running + limits.processes}`,
  ];
}

/** Threads running on the machine now (/proc/loadavg's fourth field), an upper bound of this user's count. */
function threadsRunning(): number {
  try {
    const total = Number(fs.readFileSync('/proc/loadavg', 'utf8').split(/\s+/)[3]?.split('/')[1]);
    return Number.isFinite(total) ? total : 4096;
  } catch {
    return 4096;
  }
}

const probes = new Map<string, Promise<string | undefined>>();

/**
 * Starts `true` in a sandbox once (per bwrap path, per process) to see whether sandboxes
 * start here. Never throws.
 * @returns undefined when one started, else why not (one line)
 */
export function probeSandbox(bwrap: string = bwrapPath(), network: Sandbox['network'] = 'host'): Promise<string | undefined> {
  const id = `${bwrap}\0${network}`;
  let probe = probes.get(id);
  if (!probe) {
    probe = (async () => {
      let dir: string | undefined;
      try {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-lab-probe-'));
        const sandbox: Sandbox = { bwrap, prlimit: 'prlimit', hide: [], limits: DEFAULT_SANDBOX_LIMITS, network };
        // node:child_process, not execa: this probe runs while the command line is still loading, and execa's import alone takes a tenth of a second.
        const result = await new Promise<{ code: number | string | null | undefined; said: string }>((resolve) => {
          execFile(
            'prlimit',
            [...prlimitArgs(sandbox.limits), bwrap, ...bwrapArgs(sandbox, dir!, dir!, '/bin/sh'), '--', '/bin/sh', '-c', 'echo > ok'],
            { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, timeout: 10_000 },
            (err, stdout, stderr) => resolve({ code: err ? ((err as NodeJS.ErrnoException).code ?? 'failed') : 0, said: String(stderr || stdout || (err ? err.message : '')) }),
          );
        });
        if (result.code === 0 && fs.existsSync(path.join(dir, 'ok'))) return undefined;
        const said = result.said.trim().split('\n').pop();
        return said || (typeof result.code === 'number' ? `exit code ${result.code}` : `it did not start (${String(result.code)})`);
      } catch (err) {
        return (err as Error).message;
      } finally {
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
      }
    })();
    probes.set(id, probe);
  }
  return probe;
}

/**
 * The sandbox to grade with under `mode`, and how confined it leaves the servers. Never a
 * loss of confinement in silence: `required` accepts nothing less than a sandbox with a
 * network namespace of its own, under every limit (the probe runs under them all); `auto`
 * takes the host's network, or no sandbox at all, when that is all that starts, and says
 * so (`confinement` and `reason`, which every report carries).
 * @param hide folders no server may see (the cohort's workspaces)
 * @throws NoSandbox for `required` when no sandbox starts, or only one that keeps the host's network (`weakened`)
 */
export async function chooseSandboxFor(mode: SandboxMode, hide: string[] = []): Promise<SandboxChoice> {
  if (mode === 'off') return { confinement: 'off', reason: '--sandbox off', fallback: false };
  const bwrap = bwrapPath();
  const base = { bwrap, prlimit: 'prlimit', hide: hide.map((d) => path.resolve(d)), limits: DEFAULT_SANDBOX_LIMITS };
  // A network namespace of its own where one can be made, else the host's.
  const noPrivate = await probeSandbox(bwrap, 'private');
  if (noPrivate === undefined) return { sandbox: { ...base, network: 'private' }, confinement: 'on', fallback: false };
  const why = await probeSandbox(bwrap, 'host');
  if (why === undefined) {
    if (mode === 'required') throw new NoSandbox(noPrivate, 'host-network');
    return { sandbox: { ...base, network: 'host' }, confinement: 'host-network', reason: noPrivate, fallback: true };
  }
  if (mode === 'required') throw new NoSandbox(why);
  return { confinement: 'off', reason: why, fallback: true };
}

/**
 * The sandbox to grade with under `mode` (chooseSandboxFor without the confinement).
 * @returns the sandbox, or undefined for `off`, and for `auto` when none starts
 * @throws NoSandbox as chooseSandboxFor
 */
export async function chooseSandbox(mode: SandboxMode, hide: string[] = []): Promise<Sandbox | undefined> {
  return (await chooseSandboxFor(mode, hide)).sandbox;
}
