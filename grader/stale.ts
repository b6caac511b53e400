/**
 * What a grader killed outright (SIGKILL, out of memory, a CI time-out) leaves behind:
 * temporary folders and the servers using them. Every temporary folder of a live check
 * holds a marker file naming the grader process that made it (pid and start time, so a
 * reused pid is not mistaken for it); a later run removes the folders whose grader is
 * gone, after killing, by pid, every process whose IDEM_DB lies in such a folder (which
 * only servers the grader started, and what they started, carry). Never by a name pattern.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { procStat } from './process.js';

/** The marker file's name inside a temporary folder. */
export const RUN_MARKER = '.idem-lab-run.json';

/** What the marker records. */
interface RunMarker {
  /** The grader process. */
  pid: number;
  /** Its start time in clock ticks after boot (/proc/PID/stat field 22); 0 where unknown. */
  startTicks: number;
}

/** Marks `dir` as a temporary folder of this process (see the module comment). Never throws. */
export function markRun(dir: string): void {
  const marker: RunMarker = { pid: process.pid, startTicks: procStat(process.pid)?.startTicks ?? 0 };
  try {
    fs.writeFileSync(path.join(dir, RUN_MARKER), JSON.stringify(marker) + '\n', { mode: 0o600 });
  } catch {
    // a folder that cannot be marked is still removed by this run
  }
}

/** Whether the grader that wrote `marker` still runs. */
function alive(marker: RunMarker): boolean {
  const stat = procStat(marker.pid);
  if (!stat || stat.state === 'Z') return false;
  return marker.startTicks === 0 || stat.startTicks === marker.startTicks;
}

function readMarker(dir: string): RunMarker | undefined {
  try {
    const file = path.join(dir, RUN_MARKER);
    const stat = fs.lstatSync(file);
    // Only a marker this user wrote counts.
    if (!stat.isFile() || stat.size > 4096 || stat.uid !== process.getuid?.()) return undefined;
    const marker = JSON.parse(fs.readFileSync(file, 'utf8')) as RunMarker;
    return Number.isInteger(marker.pid) && marker.pid > 0 ? marker : undefined;
  } catch {
    return undefined;
  }
}

/** Pids of the live processes whose IDEM_DB lies in one of `dirs`. */
function processesUsing(dirs: string[]): number[] {
  const pids: number[] = [];
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return pids;
  }
  const prefixes = dirs.map((d) => `IDEM_DB=${d}${path.sep}`);
  for (const entry of entries) {
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const env = fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (env.some((v) => prefixes.some((p) => v.startsWith(p)))) pids.push(pid);
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

let swept = false;

/**
 * Stops the servers and removes the temporary folders that graders no longer running
 * left in `tmpRoot` (default os.tmpdir()). Runs once per process unless `force`.
 * Never throws.
 * @returns what it did: the folders removed and the processes killed
 */
export function sweepStaleRuns(tmpRoot = os.tmpdir(), force = false): { dirs: string[]; killed: number[] } {
  const done = { dirs: [] as string[], killed: [] as number[] };
  if (swept && !force) return done;
  swept = true;
  let entries: fs.Dirent[] = [];
  try {
    entries = fs.readdirSync(tmpRoot, { withFileTypes: true });
  } catch {
    return done;
  }
  const stale: string[] = [];
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const dir = path.join(tmpRoot, entry.name);
    const marker = readMarker(dir);
    if (marker && !alive(marker)) stale.push(dir);
  }
  if (stale.length === 0) return done;
  for (const pid of processesUsing(stale)) {
    try {
      process.kill(pid, 'SIGKILL');
      done.killed.push(pid);
    } catch {
      // gone meanwhile
    }
  }
  for (const dir of stale) {
    try {
      fs.rmSync(dir, { recursive: true, force: true });
      done.dirs.push(dir);
    } catch {
      // left for the next run
    }
  }
  return done;
}
