/**
 * Writing the runner's files so that a fault costs nothing: a write goes to a temporary
 * file beside the target and is renamed over it (a crash or a full disk never leaves half
 * a file, and never a stray temporary one), and the errors a person can act on (a full
 * disk, a read-only folder, a refused permission) become one sentence (SetupError) instead
 * of a stack trace.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SetupError } from '../grader/failure.js';
import { t } from '../i18n/index.js';

/** errno codes of a file-system fault a person can act on, with the message key that says what to do. */
const ACTIONABLE = {
  ENOSPC: 'fs.full',
  EDQUOT: 'fs.full',
  EROFS: 'fs.readOnly',
  EACCES: 'fs.denied',
  EPERM: 'fs.denied',
} as const;

/**
 * The one-sentence SetupError for a file-system fault a person can act on (full disk or
 * quota: ENOSPC/EDQUOT, read-only file system: EROFS, permission: EACCES/EPERM), naming
 * `file` (else the path the error names); undefined for any other error.
 */
export function fileProblem(err: unknown, file?: string): SetupError | undefined {
  const e = err as NodeJS.ErrnoException | undefined;
  const key = e && typeof e.code === 'string' ? ACTIONABLE[e.code as keyof typeof ACTIONABLE] : undefined;
  if (!key) return undefined;
  const where = file ?? e?.path ?? '?';
  return new SetupError(t(key, { file: where, dir: path.dirname(where) }));
}

/** Rethrows `err` as fileProblem's SetupError when it is such a fault, else as it is. */
export function rethrowFileProblem(err: unknown, file?: string): never {
  throw fileProblem(err, file) ?? err;
}

/** A temporary name beside `file`, unique to this process and call: `state.json.1234.9f3a.tmp`. */
function tempBeside(file: string): string {
  return `${file}.${process.pid}.${crypto.randomBytes(3).toString('hex')}.tmp`;
}

/**
 * Writes `data` to `file` atomically: into a temporary file in the same folder, flushed to
 * disk, then renamed over `file`. On any failure the temporary file is removed and `file`
 * is as it was.
 * @param mode permission bits of the new file (default 0o644, less the umask)
 * @throws SetupError for a full disk, a read-only folder or a refused permission; the
 *   underlying Error otherwise
 */
export function writeFileAtomic(file: string, data: string | Buffer, mode = 0o644): void {
  const tmp = tempBeside(file);
  try {
    const fd = fs.openSync(tmp, 'wx', mode);
    try {
      fs.writeFileSync(fd, data);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    rethrowFileProblem(err, file);
  }
}

/**
 * Copies `source` to `dest` atomically (see writeFileAtomic), keeping nothing half-copied.
 * @throws SetupError as writeFileAtomic does
 */
export function copyFileAtomic(source: string, dest: string, mode = 0o644): void {
  writeFileAtomic(dest, fs.readFileSync(source), mode);
}

/**
 * Creates `dir` (and its parents) if missing.
 * @returns the function that removes what was created here, if it is still empty (for a failure after it)
 * @throws SetupError for a full disk, a read-only folder or a refused permission
 */
export function makeDir(dir: string): () => void {
  let first: string | undefined;
  try {
    first = fs.mkdirSync(dir, { recursive: true });
  } catch (err) {
    // Node's recursive mkdir reports ENOENT where the folder above is read-only: ask plainly for the real cause.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && fs.existsSync(path.dirname(dir))) {
      try {
        fs.mkdirSync(dir);
        first = dir;
      } catch (plain) {
        rethrowFileProblem(plain, dir);
      }
    } else {
      rethrowFileProblem(err, dir);
    }
  }
  return () => {
    if (first === undefined) return;
    // from the deepest folder up to the first one created, each only if empty
    for (let d = dir; d.length >= first.length; d = path.dirname(d)) {
      try {
        fs.rmdirSync(d);
      } catch {
        return;
      }
    }
  };
}
