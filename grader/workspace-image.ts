/**
 * The image of a learner's workspace that a live check's servers run from: one bounded,
 * read-only copy per check, made once, never following a link of the learner's.
 *
 * The workspace is the student's: while it is copied, one of their servers running
 * without a sandbox may swap a file for a link, a FIFO or a huge file. So every entry is
 * reached as safe-walk.ts reaches it: through the folder above it held open (as
 * `/proc/self/fd/N/name`, the openat of Node.js), opened `O_NOFOLLOW | O_NONBLOCK` and
 * checked with fstat to be the entry lstat saw before a byte is read; its size is judged by st_size
 * before reading (a sparse file of 2 GB is refused, never expanded). Links are copied
 * as links, verbatim, never followed; FIFOs, sockets and devices are passed over.
 * Engine code only: no lab specifics.
 */
import fs from 'node:fs';
import path from 'node:path';
import { t } from '../i18n/index.js';
import { entryPath, listNames, lstatEntry, openDir, openEntry } from './safe-walk.js';

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

/** The bounds of a workspace's image (docs/safe-grading.md). */
export interface ImageLimits {
  /** The largest file copied, bytes (by st_size, so a sparse file counts at its full size). */
  fileBytes: number;
  /** All files together, bytes. */
  totalBytes: number;
  /** Files, folders and links copied, in all. */
  entries: number;
  /** Entries at the top of the workspace (each is bound on its own into a sandbox). */
  topEntries: number;
  /** Folders within folders. */
  depth: number;
}

/** Defaults: a lab's workspace with a virtual environment (pip included) fits many times over. */
export const DEFAULT_IMAGE_LIMITS: ImageLimits = {
  fileBytes: 16 * 1024 * 1024,
  totalBytes: 64 * 1024 * 1024,
  entries: 20_000,
  topEntries: 512,
  depth: 48,
};

/** A workspace over one of ImageLimits: a setup error (exit 2 in `check`, an error row in `grade`) that names the file. */
export class WorkspaceTooLarge extends Error {
  /** The entry at fault, relative to the workspace. */
  readonly file: string;
  constructor(message: string, file: string) {
    super(message);
    this.name = 'WorkspaceTooLarge';
    this.file = file;
  }
}

/** One entry at the top of an image, as a server's working folder shows it. */
export interface TopEntry {
  name: string;
  kind: 'file' | 'dir' | 'link';
  /**
   * Where its content is: the image's copy, or (for a `node_modules` folder, which is not
   * copied) the learner's own folder, bound read-only into a sandbox. A link's target, for a link.
   */
  source: string;
}

/** What copyImage made. */
export interface Image {
  /** The image's folder (absolute). */
  dir: string;
  /** Its top entries, each to be bound read-only (or linked) into a server's working folder. */
  top: TopEntry[];
  /** Inode numbers of the image's files (a server's hard link to one is not its own writing). */
  inodes: Set<number>;
  /** Bytes copied. */
  bytes: number;
  /** Entries copied. */
  entries: number;
}

/** Names at the top of the workspace never copied: the learner's own runtime files and history. */
export const NOT_COPIED = /^(lab\.db(-wal|-shm|-journal)?|provider\.log|s\.log|\.idem-lab|\.git|__pycache__)$/;

/** A folder that is not copied but, when a real folder (not a link), bound read-only as it is: its size is the package manager's. */
export const BOUND_AS_IS = new Set(['node_modules']);

/**
 * Copies the learner's `workspace` into the new folder `dest` under `limits`: folders
 * (mode 0755), regular files (mode 0444, or 0555 when the learner's was executable; owned
 * by the grader), links verbatim. Passes over NOT_COPIED at the top, FIFOs, sockets,
 * devices and any folder holding `exclude` (the check's own temporary folder, when it
 * lies inside the workspace).
 * @param workspace the learner's workspace, absolute (the instructor's path: followed)
 * @param dest a folder that does not exist yet; its parent must
 * @throws WorkspaceTooLarge when a file, the whole, the entry count, the top or the depth is over its limit (dest is then removed)
 * @throws Error on an I/O error of the grader's side
 */
export function copyImage(workspace: string, dest: string, exclude: string, limits: ImageLimits = DEFAULT_IMAGE_LIMITS): Image {
  const image: Image = { dir: dest, top: [], inodes: new Set(), bytes: 0, entries: 0 };
  const root = fs.realpathSync(workspace);
  const buffer = Buffer.allocUnsafe(1024 * 1024);
  const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  const tooLarge = (key: 'file' | 'total' | 'entries' | 'top' | 'depth', rel: string, bytes = 0): never => {
    const max = { file: limits.fileBytes, total: limits.totalBytes, entries: limits.entries, top: limits.topEntries, depth: limits.depth }[key];
    const shown = key === 'file' || key === 'total' ? mib(max) : String(max);
    throw new WorkspaceTooLarge(t(`check.workspaceTooLarge.${key}`, { file: rel, bytes, size: mib(bytes), max: shown }), rel);
  };

  /** Copies the open regular file `fd` (st_size `size`) into a new file `to`, at most `size` bytes, refusing one that grows past the limit. */
  const copyFile = (fd: number, size: number, executable: boolean, to: string, rel: string) => {
    const out = fs.openSync(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    try {
      let copied = 0;
      for (;;) {
        const n = fs.readSync(fd, buffer, 0, buffer.length, null);
        if (n === 0) break;
        copied += n;
        // Grown since fstat: judged again, so a file being written meanwhile is bounded too.
        if (copied > limits.fileBytes) tooLarge('file', rel, copied);
        if (image.bytes - size + copied > limits.totalBytes) tooLarge('total', rel, image.bytes - size + copied);
        fs.writeSync(out, buffer, 0, n);
      }
      image.bytes += copied - size;
      fs.fchmodSync(out, executable ? 0o555 : 0o444);
      image.inodes.add(fs.fstatSync(out).ino);
    } finally {
      fs.closeSync(out);
    }
  };

  const walk = (dirFd: number, to: string, rel: string, depth: number) => {
    if (depth > limits.depth) tooLarge('depth', rel);
    // At the top, no more names than the bound on top entries, and one more to learn that it is over.
    const listed = listNames(dirFd, depth === 0 ? limits.topEntries : Infinity);
    if (depth === 0 && listed.more) tooLarge('top', '.');
    for (const name of listed.names) {
      const relName = rel === '' ? name : `${rel}/${name}`;
      const hostPath = path.join(root, relName);
      if (depth === 0 && NOT_COPIED.test(name)) continue;
      // A folder that holds the check's own temporary folder is not copied into itself.
      if (exclude === hostPath || exclude.startsWith(hostPath + path.sep)) continue;
      const stat = lstatEntry(dirFd, name);
      if (stat === undefined) continue; // gone meanwhile
      if (!stat.isFile() && !stat.isDirectory() && !stat.isSymbolicLink()) continue; // FIFO, socket, device
      if (++image.entries > limits.entries) tooLarge('entries', relName);
      const target = path.join(to, name);
      if (stat.isSymbolicLink()) {
        let link: string;
        try {
          link = fs.readlinkSync(entryPath(dirFd, name));
        } catch {
          image.entries--;
          continue; // swapped meanwhile for something else: passed over
        }
        fs.symlinkSync(link, target);
        if (depth === 0) image.top.push({ name, kind: 'link', source: link });
        continue;
      }
      if (depth === 0 && stat.isDirectory() && BOUND_AS_IS.has(name)) {
        // Bound read-only from the learner's folder, not copied: checked to be a folder, not a link to one.
        image.entries--;
        image.top.push({ name, kind: 'dir', source: hostPath });
        continue;
      }
      // Judged by st_size before any byte is read: a sparse file is never expanded.
      if (stat.isFile() && stat.size > limits.fileBytes) tooLarge('file', relName, stat.size);
      if (stat.isFile() && image.bytes + stat.size > limits.totalBytes) tooLarge('total', relName, image.bytes + stat.size);
      // Swapped meanwhile for a link, a socket, another entry or nothing: passed over, unread.
      const entry = openEntry(dirFd, name, stat);
      if (entry === undefined) continue;
      const { fd, stat: opened } = entry;
      try {
        if (opened.isDirectory()) {
          fs.mkdirSync(target, { mode: 0o755 });
          fs.chmodSync(target, 0o755);
          walk(fd, target, relName, depth + 1);
        } else {
          if (opened.size > limits.fileBytes) tooLarge('file', relName, opened.size);
          image.bytes += opened.size;
          if (image.bytes > limits.totalBytes) tooLarge('total', relName, image.bytes);
          copyFile(fd, opened.size, (opened.mode & 0o111) !== 0, target, relName);
        }
      } finally {
        fs.closeSync(fd);
      }
      if (depth === 0 && fs.existsSync(target)) image.top.push({ name, kind: stat.isDirectory() ? 'dir' : 'file', source: target });
    }
  };

  fs.mkdirSync(dest, { mode: 0o755 });
  fs.chmodSync(dest, 0o755);
  const rootFd = openDir(root, true);
  try {
    walk(rootFd, dest, '', 0);
    return image;
  } catch (err) {
    fs.rmSync(dest, { recursive: true, force: true });
    throw err;
  } finally {
    fs.closeSync(rootFd);
  }
}

/**
 * Fills a server's working folder `podDir` (which exists) from `image`, without copying a
 * byte. `placeholders`: for a sandbox, each top entry becomes an empty file or folder that
 * the image's entry (or the learner's node_modules) is bound over read-only (see
 * imageBinds); links are made as they are. Otherwise (no sandbox) the image's folders are
 * made again and its files hard-linked (read-only by their mode), node_modules linked.
 */
export function fillPod(image: Image, podDir: string, placeholders: boolean): void {
  for (const entry of image.top) {
    const to = path.join(podDir, entry.name);
    if (entry.kind === 'link') fs.symlinkSync(entry.source, to);
    else if (placeholders) {
      if (entry.kind === 'dir') fs.mkdirSync(to, { mode: 0o755 });
      else fs.closeSync(fs.openSync(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644));
    } else if (!entry.source.startsWith(image.dir + path.sep)) fs.symlinkSync(entry.source, to);
    else linkTree(entry.source, to);
  }
}

/** Makes `from` (of the image) again at `to`: folders made, files hard-linked (copied where a link cannot be made), links as they are. */
function linkTree(from: string, to: string): void {
  const stat = fs.lstatSync(from);
  if (stat.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(from), to);
  else if (stat.isDirectory()) {
    fs.mkdirSync(to, { mode: 0o755 });
    for (const name of fs.readdirSync(from)) linkTree(path.join(from, name), path.join(to, name));
  } else {
    try {
      fs.linkSync(from, to);
    } catch {
      fs.copyFileSync(from, to, fs.constants.COPYFILE_EXCL);
    }
  }
}

/**
 * The read-only binds that show `image` in the sandboxed working folder `podDir` filled
 * with placeholders (fillPod): `[source, dest]` pairs, links left out (they are in place).
 */
export function imageBinds(image: Image, podDir: string): Array<[string, string]> {
  return image.top.filter((e) => e.kind !== 'link').map((e) => [e.source, path.join(podDir, e.name)]);
}

/**
 * For a server command run from the workspace (`file` relative with a folder, such as a
 * virtual environment's `.venv/bin/python`), the Python installation its links lead to
 * outside the image, to be bound back read-only where a mask hides it (pyenv's under
 * /root, say): its root folder, or undefined when `file` stays inside the image or leads
 * elsewhere. Only a real Python installation is named (`bin/python3[.N]` with
 * `lib/python3.N/os.py` beside it): a link of the learner's never opens any other host
 * folder to the sandbox. Never throws.
 */
export function interpreterHome(image: Image, file: string): string | undefined {
  if (path.isAbsolute(file) || !file.includes('/')) return undefined;
  try {
    const real = fs.realpathSync(path.join(image.dir, file));
    if (real.startsWith(image.dir + path.sep)) return undefined;
    const version = /^python(3\.\d+)$/.exec(path.basename(real))?.[1] ?? /^python3$/.exec(path.basename(real))?.[0];
    if (!version || path.basename(path.dirname(real)) !== 'bin') return undefined;
    const home = path.dirname(path.dirname(real));
    const lib = path.join(home, 'lib');
    const stdlib = fs.readdirSync(lib).find((name) => /^python3\.\d+$/.test(name) && (version === 'python3' || name === `python${version}`) && fs.lstatSync(path.join(lib, name, 'os.py')).isFile());
    return stdlib && home !== '/' ? home : undefined;
  } catch {
    return undefined;
  }
}
