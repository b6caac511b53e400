/**
 * Renewing files in a folder a sandboxed server can write, without following its links.
 *
 * The grader may run as root (CI runners do), and whatever a server leaves in its folder
 * (a symbolic link named like a file the grader is about to write, a FIFO in place of its
 * database) must never make the grader read or write outside that folder. Every open here
 * is `O_NOFOLLOW` and checked with fstat to be a regular file; every new file is created
 * `O_EXCL` under a random name with mode 0600 (never the student's mode), and only then
 * renamed over the old entry (rename replaces a link itself, never its target).
 * Engine code only: no lab specifics.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

/** The largest file renewFile copies, bytes: above RLIMIT_FSIZE of the sandbox (sandbox.ts), so a server's own file always fits. */
export const RENEW_MAX_BYTES = 256 * 1024 * 1024;

/**
 * Whether `file` is absent or a regular file (not a link, FIFO, socket, device or folder),
 * by lstat: what the grader may hand to a library that opens by name (sqlite).
 */
export function absentOrRegular(file: string): boolean {
  try {
    return fs.lstatSync(file).isFile();
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/**
 * Removes each of `files` that exists and is not a regular file (a link is removed, never
 * its target). Used before the grader opens a sqlite database by name: its `-wal`, `-shm`
 * and `-journal` files, made links by a server, would otherwise be opened (and sqlite
 * truncates a `-shm` it opens first) wherever they point.
 * @returns the entries removed
 */
export function removeUnsafe(files: string[]): string[] {
  const removed: string[] = [];
  for (const file of files) {
    if (absentOrRegular(file)) continue;
    fs.rmSync(file, { recursive: true, force: true });
    removed.push(file);
  }
  return removed;
}

/**
 * Replaces `file` by a new file with the same bytes, made by the grader: opened with
 * `O_NOFOLLOW` and checked to be a regular file of at most RENEW_MAX_BYTES; the copy is
 * created `O_EXCL | O_NOFOLLOW` with mode 0600 under a random name in the same folder,
 * given to `owner` (uid, gid) when set (the sandbox's user, when the grader is root), and
 * renamed over `file`. An entry that is not a regular file (a link, a FIFO) or is too large
 * is removed instead, unread.
 * @returns true when renewed, false when there was nothing (or nothing safe) to renew
 * @throws Error on an I/O error other than the entry's being missing or unsafe
 */
export function renewFile(file: string, owner?: { uid: number; gid: number }): boolean {
  let source: number;
  try {
    source = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return false;
    // ELOOP: a symbolic link; ENXIO: a socket; anything else the grader cannot open as a file.
    fs.rmSync(file, { recursive: true, force: true });
    return false;
  }
  const fresh = path.join(path.dirname(file), `.idem-lab-renew-${randomBytes(6).toString('hex')}`);
  let target: number | undefined;
  try {
    const stat = fs.fstatSync(source);
    if (!stat.isFile() || stat.size > RENEW_MAX_BYTES) {
      fs.rmSync(file, { recursive: true, force: true });
      return false;
    }
    target = fs.openSync(fresh, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    const buffer = Buffer.allocUnsafe(1024 * 1024);
    let copied = 0;
    for (;;) {
      const n = fs.readSync(source, buffer, 0, buffer.length, null);
      if (n === 0) break;
      copied += n;
      if (copied > RENEW_MAX_BYTES) throw new Error(`${file} grew past ${RENEW_MAX_BYTES} bytes while it was renewed`);
      fs.writeSync(target, buffer, 0, n);
    }
    if (owner) fs.fchownSync(target, owner.uid, owner.gid);
    fs.fchmodSync(target, 0o600);
    fs.closeSync(target);
    target = undefined;
    fs.renameSync(fresh, file);
    return true;
  } catch (err) {
    fs.rmSync(fresh, { force: true });
    throw err;
  } finally {
    fs.closeSync(source);
    if (target !== undefined) fs.closeSync(target);
  }
}

/**
 * Gives every entry under `dir` (and `dir` itself) to `owner`, never following a link
 * (lchown; folders are entered by lstat only). The folder a sandbox writes, when the
 * grader is root and the server runs as the sandbox's own unprivileged user. Folders are
 * made searchable by all (o+x), so that bwrap, root without CAP_DAC_OVERRIDE, can enter them.
 */
export function chownTree(dir: string, owner: { uid: number; gid: number }, skip: (full: string) => boolean = () => false): void {
  const walk = (full: string) => {
    if (skip(full)) return;
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(full);
    } catch {
      return;
    }
    if (stat.uid !== owner.uid || stat.gid !== owner.gid) fs.lchownSync(full, owner.uid, owner.gid);
    if (stat.isDirectory()) {
      // bwrap, still root but without CAP_DAC_OVERRIDE, enters the folder before it hands
      // over to the owner (--chdir): a folder of the owner's must be searchable by others.
      if ((stat.mode & 0o711) !== 0o711) fs.chmodSync(full, (stat.mode & 0o7777) | 0o711);
      for (const entry of fs.readdirSync(full)) walk(path.join(full, entry));
    }
  };
  walk(dir);
}
