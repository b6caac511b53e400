/**
 * The disk a check's servers write, bounded for all of them together: a watcher that
 * measures their writable folders every DISK_POLL_MS and calls back once they hold more
 * than a bound, so that the check stops its servers and fails with a clear message
 * instead of filling the grader's disk. RLIMIT_FSIZE (sandbox.ts) still bounds each file
 * as it is written; this bounds their sum, and the number of entries.
 *
 * Measured by allocated blocks (st_blocks), not st_size: a sparse file costs what it
 * holds. Each inode counts once; the workspace image's files (hard-linked into servers'
 * folders without a sandbox) are the grader's, not counted. Never follows a link.
 * Engine code only: no lab specifics.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The bounds on what a check's servers write, together. */
export interface DiskBound {
  /** Bytes allocated, in all. */
  bytes: number;
  /** Files, folders and links, in all. */
  entries: number;
}

/** Defaults: a lab server writes a small sqlite database and a statement; 256 MiB is room for any honest one. */
export const DEFAULT_DISK_BOUND: DiskBound = { bytes: 256 * 1024 * 1024, entries: 20_000 };

/** How often the watcher measures, ms: at a disk's speed a server writes little more than a tenth of the bound between two looks. */
export const DISK_POLL_MS = 100;

/** What a measure found: bytes allocated and entries, and the largest file seen (relative to the root). */
export interface DiskUse {
  bytes: number;
  entries: number;
  largest?: { file: string; bytes: number };
}

/**
 * Measures the folder `root`: bytes allocated and entries, each inode once, passing over
 * `skip` (whole folders) and the inodes in `ignore`. Stops counting once past `bound`
 * (the result is then over it). Never throws: an entry gone meanwhile is passed over.
 */
export function measure(root: string, skip: (full: string) => boolean = () => false, ignore: ReadonlySet<number> = new Set(), bound: DiskBound = DEFAULT_DISK_BOUND): DiskUse {
  const use: DiskUse = { bytes: 0, entries: 0 };
  const seen = new Set<number>();
  const walk = (dir: string) => {
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      if (use.bytes > bound.bytes || use.entries > bound.entries) return;
      const full = path.join(dir, name);
      if (skip(full)) continue;
      let stat: fs.Stats;
      try {
        stat = fs.lstatSync(full);
      } catch {
        continue;
      }
      if (ignore.has(stat.ino) || seen.has(stat.ino)) continue;
      use.entries++;
      seen.add(stat.ino);
      const bytes = stat.blocks * 512;
      use.bytes += bytes;
      if (stat.isFile() && bytes > (use.largest?.bytes ?? 0)) use.largest = { file: path.relative(root, full), bytes };
      if (stat.isDirectory()) walk(full);
    }
  };
  walk(root);
  return use;
}

/**
 * Watches `root` every DISK_POLL_MS (a timer that does not keep the process alive) and
 * calls `over` once, with what it measured, when it holds more than `bound`; the watcher
 * then stops. `skip` and `ignore` as for measure.
 * @returns the function that stops the watcher (idempotent)
 */
export function watchDisk(root: string, over: (use: DiskUse) => void, skip?: (full: string) => boolean, ignore?: ReadonlySet<number>, bound: DiskBound = DEFAULT_DISK_BOUND): () => void {
  const timer = setInterval(() => {
    const use = measure(root, skip, ignore, bound);
    if (use.bytes > bound.bytes || use.entries > bound.entries) {
      clearInterval(timer);
      over(use);
    }
  }, DISK_POLL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
