/**
 * Reading what servers wrote in the folders they may write (a pod's HOME, its /tmp, its
 * working folder and its database's folder), bounded and without ever being led elsewhere.
 *
 * Those folders are the servers', and servers may still run while they are read: any entry
 * may be a link, a FIFO, or be swapped for one at any moment. So every entry is reached as
 * safe-walk.ts reaches it (as workspace-image.ts does): through the folder above it held
 * open, opened `O_NOFOLLOW | O_NONBLOCK` and checked with fstat to be the entry lstat saw
 * (a regular file, or a folder) before a byte is read; links are never followed, FIFOs,
 * sockets and devices never opened, and a folder's names are read no further than the
 * entries bound reaches. Engine code only: no lab specifics.
 */
import fs from 'node:fs';
import path from 'node:path';
import { listNames, lstatEntry, openDir, openEntry, type Names, type OpenedEntry } from './safe-walk.js';

/** One regular file read: where it is and (at most the bound of) its bytes. */
export interface WrittenFile {
  /** Its absolute path on the grader's side (for naming it only: never opened by it). */
  path: string;
  /** Its path relative to the folder it was found under (a `roots` entry). */
  rel: string;
  /** The folder (a `roots` entry) it was found under. */
  root: string;
  /** Its size by fstat, in bytes. */
  size: number;
  /** Its first bytes: all of it when `bytes.length === size`. */
  bytes: Buffer;
}

/** What readWritten read, and whether a bound stopped it before it read all it was to read first (anything but the `later` folders). */
export interface WrittenRead {
  files: WrittenFile[];
  /** The bound that left something unread outside the `later` folders: `files`, `bytes` (a file read only in part, or the total), `entries` or `depth`; undefined when nothing was. */
  cut?: 'files' | 'bytes' | 'entries' | 'depth';
}

/** The bounds of readWritten. */
export interface WrittenLimits {
  /** Regular files read, at most. */
  files: number;
  /** Bytes read of one file, at most. */
  fileBytes: number;
  /** Bytes read of all files together, at most. */
  totalBytes: number;
  /** Folders within folders, at most (a root is depth 0). */
  depth: number;
  /** Entries looked at (files, folders, links and the rest), at most: a folder of a million names is not listed to the end. */
  entries: number;
}

/**
 * The regular files under `roots` (folders, absolute), depth first in name order, each
 * read from its start up to the bounds (see the module comment for how). Entries for which
 * `skip(path, stat)` is true are passed over (a folder with all under it); folders for
 * which `later(path)` is true are read after everything else (e.g. the learner's own
 * folders, which fill the bounds with files no server wrote). A file empty, or whose
 * inode is among `skipInodes` (a hard link to a file of the grader's), is passed over.
 * A root that is not a folder (or is a link) is passed over. Never throws for what is
 * under the roots: an entry that vanishes or changes kind is passed over.
 * @returns the files read, in the order found, and `cut` when a bound left something
 *   unread before the `later` folders (so a caller can refuse to judge what it did not read)
 */
export function readWritten(
  roots: readonly string[],
  limits: WrittenLimits,
  options: { skip?: (full: string, stat: fs.Stats) => boolean; later?: (full: string) => boolean; skipInodes?: ReadonlySet<number> } = {},
): WrittenRead {
  const files: WrittenFile[] = [];
  let total = 0;
  let entries = 0;
  let cut: WrittenRead['cut'];
  /** Whether the folders read now are `later` ones, whose cuts are not reported. */
  let deferredPhase = false;
  const cutBy = (bound: NonNullable<WrittenRead['cut']>) => {
    if (!deferredPhase) cut ??= bound;
  };
  const deferred: Array<{ fd: number; full: string; root: string; depth: number }> = [];
  const full = () => files.length >= limits.files || total >= limits.totalBytes || entries >= limits.entries;
  /** Says which bound is full, before something is left unread for it. */
  const cutFull = () => cutBy(files.length >= limits.files ? 'files' : total >= limits.totalBytes ? 'bytes' : 'entries');

  const readFile = (fd: number, size: number): Buffer => {
    const max = Math.min(limits.fileBytes, limits.totalBytes - total, size);
    const buffer = Buffer.alloc(Math.max(0, max));
    let length = 0;
    while (length < buffer.length) {
      const n = fs.readSync(fd, buffer, length, buffer.length - length, length);
      if (n === 0) break;
      length += n;
    }
    return buffer.subarray(0, length);
  };

  /** Reads the folder open as `dirFd` (closed by the caller). */
  const walk = (dirFd: number, dir: string, root: string, depth: number) => {
    let listed: Names;
    try {
      // No more names than the entries bound can still look at (and whether there were more).
      listed = listNames(dirFd, Math.max(0, limits.entries - entries));
    } catch {
      return;
    }
    for (const name of listed.names) {
      if (full()) return cutFull();
      entries++;
      const host = path.join(dir, name);
      const stat = lstatEntry(dirFd, name);
      if (stat === undefined) continue; // gone meanwhile
      // A link, FIFO, socket or device: never opened.
      if (!stat.isFile() && !stat.isDirectory()) continue;
      if (options.skip?.(host, stat)) continue;
      if (stat.isDirectory() && depth >= limits.depth) {
        cutBy('depth');
        continue;
      }
      if (stat.isFile() && (stat.size === 0 || options.skipInodes?.has(stat.ino))) continue;
      let entry: OpenedEntry | undefined;
      try {
        entry = openEntry(dirFd, name, stat);
      } catch {
        continue; // unopenable: unread
      }
      // Swapped meanwhile for a link, a socket, another entry or nothing: passed over, unread.
      if (entry === undefined) continue;
      const { fd, stat: opened } = entry;
      let keep = false;
      try {
        if (opened.isDirectory()) {
          if (options.later?.(host)) {
            deferred.push({ fd, full: host, root, depth: depth + 1 });
            keep = true;
          } else walk(fd, host, root, depth + 1);
        } else if (!options.skipInodes?.has(opened.ino)) {
          const bytes = readFile(fd, opened.size);
          total += bytes.length;
          if (bytes.length < opened.size) cutBy('bytes');
          if (bytes.length > 0) files.push({ path: host, rel: path.relative(root, host), root, size: opened.size, bytes });
        }
      } catch {
        // unreadable: passed over
      } finally {
        if (!keep) fs.closeSync(fd);
      }
    }
    // Names left unread: the entries bound (or another) is full now, as it would be at the next name.
    if (listed.more) cutFull();
  };

  for (const root of roots) {
    if (full()) {
      cutFull();
      break;
    }
    let fd: number;
    try {
      fd = openDir(root);
    } catch {
      continue;
    }
    try {
      walk(fd, root, root, 0);
    } finally {
      fs.closeSync(fd);
    }
  }
  // The deferred folders, each still open: what is in them now, reached through them.
  deferredPhase = true;
  while (deferred.length > 0) {
    const next = deferred.shift()!;
    try {
      if (!full()) walk(next.fd, next.full, next.root, next.depth);
    } finally {
      fs.closeSync(next.fd);
    }
  }
  return { files, cut };
}
