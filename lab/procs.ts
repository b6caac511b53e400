/**
 * Telling one process from another on Linux, from /proc (proc(5)): a pid alone can be
 * reused by the kernel once its process has ended, but a pid together with its start time
 * (field 22 of /proc/<pid>/stat, in clock ticks since boot) names one process for ever.
 */
import fs from 'node:fs';
import { procStat } from '../grader/process.js';

/** What /proc says about a live process. */
export interface ProcessIdentity {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: when the process started, in clock ticks after boot. */
  startTime: number;
  /** Field 3: R, S, D, Z (zombie: ended, not yet reaped), T ... */
  state: string;
}

/**
 * The identity of `pid` from /proc/<pid>/stat (grader/process.ts procStat, which parses
 * it), or undefined when there is no such process (or no /proc). Never throws.
 */
export function processIdentity(pid: number): ProcessIdentity | undefined {
  const stat = procStat(pid);
  return stat && { pid, startTime: stat.startTicks, state: stat.state };
}

/** Whether `pid` is alive (not a zombie) and started at `startTime` (field 22): the same process. */
export function isSameProcess(pid: number, startTime: number): boolean {
  const identity = processIdentity(pid);
  return identity !== undefined && identity.state !== 'Z' && identity.startTime === startTime;
}

/** The working folder of `pid` (the target of /proc/<pid>/cwd), or undefined when it cannot be read. Never throws. */
export function processCwd(pid: number): string | undefined {
  try {
    return fs.readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return undefined;
  }
}
