/**
 * Walking a folder that someone else may change while it is walked (a learner's
 * workspace, a folder a server writes), without ever being led elsewhere: the one way
 * workspace-image.ts and written-files.ts reach an entry.
 *
 * A folder is held open (`O_DIRECTORY | O_NOFOLLOW`) and each of its entries is reached
 * through it, as `/proc/self/fd/N/name` (the openat of Node.js: no path is resolved again
 * from the top, so a folder above swapped for a link leads nowhere). An entry is lstat'ed
 * first, and only a regular file or a folder is ever opened: `O_NOFOLLOW | O_NONBLOCK`
 * (a link swapped in meanwhile fails with ELOOP, a FIFO cannot make the open wait), then
 * checked with fstat to be the very entry lstat saw (same kind, same inode). Links,
 * FIFOs, sockets and devices are never opened. A folder's names are read one at a time
 * (opendir), so a folder of a million names is not listed whole when a bound stops the
 * walk first. Engine code only: no lab specifics.
 */
import fs from 'node:fs';

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = fs.constants;

/** The errors of an entry's open that mean it changed since its lstat (a link: ELOOP; a socket: ENXIO; gone: ENOENT; no longer a folder: ENOTDIR). */
const SWAPPED = new Set(['ELOOP', 'ENXIO', 'ENOENT', 'ENOTDIR']);

/**
 * Where entry `name` of the folder open as `dirFd` is reached: `/proc/self/fd/{dirFd}/{name}`.
 * For lstat, readlink and open only; never a path to show.
 */
export function entryPath(dirFd: number, name: string): string {
  return `/proc/self/fd/${dirFd}/${name}`;
}

/**
 * Opens the folder `dir` (absolute) for a walk: `O_RDONLY | O_DIRECTORY | O_NONBLOCK`,
 * and `O_NOFOLLOW` unless `follow` (a root the grader was given, whose own path may be a link).
 * @returns its fd (close it with fs.closeSync)
 * @throws Error (ENOTDIR, ELOOP, ENOENT, …) when it is no folder, a link (without `follow`), or missing
 */
export function openDir(dir: string, follow = false): number {
  return fs.openSync(dir, O_RDONLY | O_DIRECTORY | (follow ? 0 : O_NOFOLLOW | O_NONBLOCK));
}

/** A folder's names as listNames read them. */
export interface Names {
  /** The names read, sorted (JavaScript's string order). */
  names: string[];
  /** True when the folder has more names than were read (`max` stopped the listing). */
  more: boolean;
}

/**
 * The names in the folder open as `dirFd` (`.` and `..` left out), read one at a time and
 * no more than `max + 1`: at most `max` are returned, and `more` says whether there was
 * another, so a caller bounded to `max` entries learns that its bound is hit without the
 * folder's being listed whole. `max` Infinity: all of them.
 * @param max how many names are wanted at most (a whole number, 0 or more, or Infinity)
 * @returns the names read, sorted, and whether more were left unread
 * @throws Error when the folder cannot be read
 */
export function listNames(dirFd: number, max = Infinity): Names {
  const dir = fs.opendirSync(`/proc/self/fd/${dirFd}`, { bufferSize: 32 });
  const names: string[] = [];
  let more = false;
  try {
    for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
      if (names.length >= max) {
        more = true;
        break;
      }
      names.push(entry.name);
    }
  } finally {
    dir.closeSync();
  }
  return { names: names.sort(), more };
}

/**
 * lstat of entry `name` of the folder open as `dirFd`.
 * @returns its stats, or undefined when it is gone (or cannot be looked at)
 */
export function lstatEntry(dirFd: number, name: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(entryPath(dirFd, name));
  } catch {
    return undefined;
  }
}

/** An entry openEntry opened: its fd and its fstat, the same kind and inode as the lstat it was opened by. */
export interface OpenedEntry {
  fd: number;
  stat: fs.Stats;
}

/**
 * Opens entry `name` of the folder open as `dirFd`, which lstat saw as `seen` (a regular
 * file or a folder: anything else is never opened), `O_RDONLY | O_NOFOLLOW | O_NONBLOCK`
 * (and `O_DIRECTORY` for a folder), and checks with fstat that what is open is that same
 * entry: the same kind and inode.
 * @returns the open fd (the caller closes it) and its fstat; undefined when the entry is
 *   not a regular file or folder, or was swapped meanwhile (for a link, a socket, another
 *   entry, or nothing): passed over, unread
 * @throws Error on any other error of the open or fstat (EACCES, EMFILE, …)
 */
export function openEntry(dirFd: number, name: string, seen: fs.Stats): OpenedEntry | undefined {
  if (!seen.isFile() && !seen.isDirectory()) return undefined;
  let fd: number;
  try {
    fd = fs.openSync(entryPath(dirFd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | (seen.isDirectory() ? O_DIRECTORY : 0));
  } catch (err) {
    if (SWAPPED.has((err as NodeJS.ErrnoException).code ?? '')) return undefined;
    throw err;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (stat.ino === seen.ino && stat.dev === seen.dev && (seen.isFile() ? stat.isFile() : stat.isDirectory())) return { fd, stat };
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
  fs.closeSync(fd);
  return undefined;
}
