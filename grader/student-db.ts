/**
 * Opening a server's sqlite database (a file in a folder the sandbox can write) without
 * being led elsewhere by a link, a FIFO or a swap.
 *
 * sqlite opens a database by name and follows links; a server can put a link (or a FIFO)
 * where its database was, or swap one in while the grader opens it. So the grader looks
 * at the entry first (lstat: a regular file, not a link), has sqlite open it read-write
 * (an O_RDWR open of a FIFO does not block, where O_RDONLY would hang the grader), and
 * before sqlite reads a byte looks again: the entry must still be that very file (the
 * same device and inode), or it is refused unread. (A server that swaps a link in and out
 * again within those microseconds is the one case this does not see:
 * docs/safe-grading.md.) sqlite
 * opens the -wal and -shm files with O_NOFOLLOW itself; links planted under those names,
 * or as -journal, are removed first (safe-copy.ts removeUnsafe). Connections meant for
 * reading are made `query_only`. Engine code only: no lab specifics.
 */
import fs from 'node:fs';
import Database from 'better-sqlite3';
import { removeUnsafe } from './safe-copy.js';
import { CheckFailed } from './failure.js';
import { t } from '../i18n/index.js';

/** Raised when a database's entry is not a regular file, or another file was opened in its place: the step fails (the server did it). */
export class UnsafeDatabase extends CheckFailed {
  constructor(dbPath: string) {
    super(t('check.unsafeDb', { db: dbPath }), t('check.unsafeDb.why'));
  }
}

/**
 * Opens the sqlite database `dbPath` of a server (see the module comment).
 * @param options.readonly make the connection query_only (it can read, never write)
 * @param options.timeout how long a statement waits for a writer's lock, ms (default 5000)
 * @returns the open connection; close it when done
 * @throws Error with code ENOENT when there is no such file
 * @throws UnsafeDatabase when the entry is a link, a FIFO or anything but a regular file,
 *   or sqlite opened another file than the one looked at
 */
export function openStudentDatabase(dbPath: string, options: { readonly?: boolean; timeout?: number } = {}): Database.Database {
  removeUnsafe([`${dbPath}-wal`, `${dbPath}-shm`, `${dbPath}-journal`]);
  const seen = fs.lstatSync(dbPath);
  if (!seen.isFile()) throw new UnsafeDatabase(dbPath);
  const db = new Database(dbPath, { fileMustExist: true, timeout: options.timeout ?? 5000 });
  // sqlite has only opened the file (it reads on the first statement): the entry must
  // still be the file looked at. (The descriptor sqlite opened cannot be told apart
  // reliably: it reuses one of an earlier connection to the same file.)
  let now: fs.Stats | undefined;
  try {
    now = fs.lstatSync(dbPath);
  } catch {
    now = undefined;
  }
  if (!now || !now.isFile() || now.dev !== seen.dev || now.ino !== seen.ino) {
    db.close();
    throw new UnsafeDatabase(dbPath);
  }
  if (options.readonly) db.pragma('query_only = ON');
  return db;
}
