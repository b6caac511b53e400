/**
 * A control group per check: the memory and the number of processes of all the servers of
 * one check (one student's, in `grade`) bounded together, where the grader may make one.
 *
 * Per-process limits (sandbox.ts, setrlimit) let four children hold four times 1 GiB; a
 * cgroup bounds their sum. It needs root (or a delegated hierarchy) and a mounted cgroup
 * file system with the memory and pids controllers: cgroup v2 at /sys/fs/cgroup (the
 * controllers enabled for the subtree `idem-lab`), or the v1 hierarchies
 * /sys/fs/cgroup/memory and /sys/fs/cgroup/pids. Where neither can be made the rlimits
 * alone hold (docs/safe-grading.md says what that leaves open).
 *
 * A server joins its check's cgroup before it runs anything: it is started through
 * `/bin/sh -c`, which writes its own pid into each `cgroup.procs` and then execs the
 * sandbox (JOIN_SCRIPT). Engine code only: no lab specifics.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { procStat } from './process.js';

/** What the cgroup of one check bounds. */
export interface CgroupLimits {
  /** Memory of all its processes together, bytes (memory.max; v1 memory.limit_in_bytes). */
  memoryBytes: number;
  /** Processes and threads of all its processes together (pids.max). */
  processes: number;
}

/** Defaults: four Python servers with a thread per request fit many times over; a fork bomb or four 1 GiB children do not. */
export const DEFAULT_CGROUP_LIMITS: CgroupLimits = { memoryBytes: 1024 * 1024 * 1024, processes: 512 };

/** The root of the cgroup file systems. */
const CGROUP_ROOT = '/sys/fs/cgroup';
/** The folder of idem-lab's own cgroups in each hierarchy. */
const PARENT = 'idem-lab';

/** Which cgroup file system the grader found, and where its cgroups go. */
type Layout = { kind: 'v2'; parent: string } | { kind: 'v1'; memory: string; pids: string };

let layout: Layout | string | undefined;

function writable(dir: string): boolean {
  try {
    fs.accessSync(dir, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function mkdirOnce(dir: string): void {
  try {
    fs.mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

/**
 * Finds (once per process) where cgroups can be made: v2 with memory and pids enabled for
 * the subtree, else v1. Never throws.
 * @returns the layout, or why none (one line)
 */
function findLayout(root = CGROUP_ROOT): Layout | string {
  if (layout !== undefined) return layout;
  try {
    const controllers = path.join(root, 'cgroup.controllers');
    if (fs.existsSync(controllers)) {
      const have = fs.readFileSync(controllers, 'utf8').split(/\s+/);
      if (!have.includes('memory') || !have.includes('pids')) return (layout = 'cgroup v2 without the memory and pids controllers');
      if (!writable(root)) return (layout = `${root} is not writable (the grader is not root)`);
      const parent = path.join(root, PARENT);
      mkdirOnce(parent);
      fs.writeFileSync(path.join(root, 'cgroup.subtree_control'), '+memory +pids');
      fs.writeFileSync(path.join(parent, 'cgroup.subtree_control'), '+memory +pids');
      return (layout = { kind: 'v2', parent });
    }
    const memory = path.join(root, 'memory');
    const pids = path.join(root, 'pids');
    if (!fs.existsSync(path.join(memory, 'cgroup.procs')) || !fs.existsSync(path.join(pids, 'cgroup.procs'))) return (layout = 'no cgroup file system with the memory and pids controllers');
    if (!writable(memory) || !writable(pids)) return (layout = `${root} is not writable (the grader is not root)`);
    mkdirOnce(path.join(memory, PARENT));
    mkdirOnce(path.join(pids, PARENT));
    return (layout = { kind: 'v1', memory: path.join(memory, PARENT), pids: path.join(pids, PARENT) });
  } catch (err) {
    return (layout = `no cgroup could be made: ${(err as Error).message}`);
  }
}

/**
 * Whether checks get a cgroup here; undefined when they do, else why not (one line).
 * Never throws.
 */
export function cgroupUnavailable(): string | undefined {
  const found = findLayout();
  return typeof found === 'string' ? found : undefined;
}

/** The shell script that moves itself into each cgroup.procs named before `--` and then execs the rest. */
export const JOIN_SCRIPT = 'while [ "$1" != "--" ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"';

/** The cgroup of one check: its folders (one for v2, two for v1). */
export class CheckCgroup {
  /** The cgroup folders, each with its cgroup.procs. */
  readonly dirs: string[];
  private users = 0;

  private constructor(dirs: string[]) {
    this.dirs = dirs;
  }

  /**
   * Makes the cgroup named `name` (a check's) with `limits`, or returns undefined where
   * cgroups cannot be made here (cgroupUnavailable says why). Never throws.
   */
  static make(name: string, limits: CgroupLimits = DEFAULT_CGROUP_LIMITS): CheckCgroup | undefined {
    const found = findLayout();
    if (typeof found === 'string') return undefined;
    sweepStaleCgroups(found);
    // The grader's pid in the name: a later run removes the cgroups of graders that are gone.
    const leaf = `${process.pid}-${procStat(process.pid)?.startTicks ?? 0}-${createHash('sha256').update(name).digest('hex').slice(0, 16)}`;
    try {
      if (found.kind === 'v2') {
        const dir = path.join(found.parent, leaf);
        mkdirOnce(dir);
        fs.writeFileSync(path.join(dir, 'memory.max'), String(limits.memoryBytes));
        fs.writeFileSync(path.join(dir, 'memory.swap.max'), '0');
        fs.writeFileSync(path.join(dir, 'pids.max'), String(limits.processes));
        return new CheckCgroup([dir]);
      }
      const memory = path.join(found.memory, leaf);
      const pids = path.join(found.pids, leaf);
      mkdirOnce(memory);
      mkdirOnce(pids);
      fs.writeFileSync(path.join(memory, 'memory.limit_in_bytes'), String(limits.memoryBytes));
      try {
        fs.writeFileSync(path.join(memory, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
      } catch {
        // no swap accounting: the machine has no swap to bound
      }
      fs.writeFileSync(path.join(pids, 'pids.max'), String(limits.processes));
      return new CheckCgroup([memory, pids]);
    } catch {
      return undefined;
    }
  }

  /**
   * The command that runs `file args` inside this cgroup: `/bin/sh -c JOIN_SCRIPT`, the
   * cgroup.procs files, `--`, then the command. Counts one more user until `release`.
   */
  wrap(file: string, args: string[]): [string, string[]] {
    this.users++;
    return ['/bin/sh', ['-c', JOIN_SCRIPT, 'idem-lab-cgroup', ...this.dirs.map((d) => path.join(d, 'cgroup.procs')), '--', file, ...args]];
  }

  /**
   * One user is done (its process exited); the cgroup is removed once none is left and it
   * is empty. Never throws.
   * @returns true when no user is left (make it again for the next server)
   */
  release(): boolean {
    if (--this.users > 0) return false;
    for (const dir of this.dirs) {
      try {
        fs.rmdirSync(dir);
      } catch {
        // still in use (a process ending) or gone: the next run's sweep removes it
      }
    }
    return true;
  }

  /** The memory its processes hold now, bytes (memory.current; v1 memory.usage_in_bytes); undefined when unknown. */
  memoryUsed(): number | undefined {
    for (const file of ['memory.current', 'memory.usage_in_bytes']) {
      try {
        return Number(fs.readFileSync(path.join(this.dirs[0]!, file), 'utf8'));
      } catch {
        // the other layout's name
      }
    }
    return undefined;
  }
}

/** Removes the empty cgroups of graders no longer running (named `<pid>-<start ticks>-…`). Never throws. */
function sweepStaleCgroups(found: Layout): void {
  const parents = found.kind === 'v2' ? [found.parent] : [found.memory, found.pids];
  for (const parent of parents) {
    let entries: string[] = [];
    try {
      entries = fs.readdirSync(parent);
    } catch {
      continue;
    }
    for (const entry of entries) {
      const m = /^(\d+)-(\d+)-[0-9a-f]+$/.exec(entry);
      if (!m) continue;
      const stat = procStat(Number(m[1]));
      if (stat && stat.state !== 'Z' && (m[2] === '0' || String(stat.startTicks) === m[2])) continue;
      try {
        fs.rmdirSync(path.join(parent, entry));
      } catch {
        // not empty yet
      }
    }
  }
}
