/**
 * Bounded reads of files a learner or a learner's server controls: only a regular file,
 * never more than a given number of bytes, never a read that can block (a FIFO is refused
 * before it is read: it is opened with O_NONBLOCK and checked with fstat).
 */
import fs from 'node:fs';
import path from 'node:path';

/** Why a file was not read. */
export type RefusedKind = 'missing' | 'outside' | 'not-regular' | 'too-large' | 'unreadable';

/** Raised when a file is not read; `kind` says why, `message` says it in English for logs. */
export class FileRefused extends Error {
  readonly kind: RefusedKind;
  /** For not-regular: a FileKind; for too-large: its size in bytes; for outside: where it points. */
  readonly detail: string;
  constructor(kind: RefusedKind, detail: string, message: string) {
    super(message);
    this.kind = kind;
    this.detail = detail;
  }
}

/** The largest answer file the grader reads, in bytes (1 MB). */
export const MAX_ANSWER_BYTES = 1024 * 1024;

/** What a file that is not a regular one is: the `detail` of a not-regular FileRefused. */
export type FileKind = 'directory' | 'fifo' | 'socket' | 'device' | 'link' | 'other';

function kindOf(stat: fs.Stats): FileKind {
  if (stat.isDirectory()) return 'directory';
  if (stat.isFIFO()) return 'fifo';
  if (stat.isSocket()) return 'socket';
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return 'device';
  if (stat.isSymbolicLink()) return 'link';
  return 'other';
}

const OPEN_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW;

/**
 * Reads `name`, a path relative to `root`, as UTF-8 text, asynchronously.
 * A symbolic link is followed only when it stays inside `root`.
 * @param maxBytes the largest size read (default MAX_ANSWER_BYTES)
 * @throws FileRefused: `missing`; `outside` (it resolves outside root); `not-regular` (a
 *   FIFO, device, socket or directory: never opened for reading); `too-large` (detail: its
 *   size in bytes); `unreadable` (detail: the error code)
 */
export async function readInside(root: string, name: string, maxBytes = MAX_ANSWER_BYTES): Promise<string> {
  const file = path.resolve(root, name);
  let real: string;
  let realRoot: string;
  try {
    realRoot = await fs.promises.realpath(root);
    real = await fs.promises.realpath(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    if (code === 'ENOENT') {
      // A dangling link says where it points: outside is worth saying.
      const target = await fs.promises.readlink(file).catch(() => undefined);
      if (target !== undefined) throw new FileRefused('outside', target, `${name} is a symbolic link to ${target}, which does not exist`);
      throw new FileRefused('missing', '', `${name} does not exist`);
    }
    if (code === 'ELOOP') throw new FileRefused('not-regular', 'link', `${name} is a symbolic link loop`);
    throw new FileRefused('unreadable', code, `${name} cannot be read: ${code}`);
  }
  const relative = path.relative(realRoot, real);
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) {
    throw new FileRefused('outside', real, `${name} points outside the workspace, to ${real}`);
  }
  return readRegular(real, name, maxBytes);
}

async function readRegular(file: string, name: string, maxBytes: number): Promise<string> {
  // Never open what is not a regular file: opening a device can act, opening a FIFO can wait.
  const before = await fs.promises.stat(file).catch(() => undefined);
  if (before && !before.isFile()) throw new FileRefused('not-regular', kindOf(before), `${name} is not a regular file (${kindOf(before)})`);
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(file, OPEN_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    if (code === 'ENOENT') throw new FileRefused('missing', '', `${name} does not exist`);
    if (code === 'ELOOP') throw new FileRefused('not-regular', 'link', `${name} changed into a symbolic link`);
    if (code === 'ENXIO') throw new FileRefused('not-regular', 'socket', `${name} is a socket`);
    throw new FileRefused('unreadable', code, `${name} cannot be read: ${code}`);
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new FileRefused('not-regular', kindOf(stat), `${name} is not a regular file (${kindOf(stat)})`);
    if (stat.size > maxBytes) throw new FileRefused('too-large', String(stat.size), `${name} is ${stat.size} bytes, more than ${maxBytes}`);
    // Read at most one byte more than allowed: a file that grows while read is still bounded.
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > maxBytes) throw new FileRefused('too-large', String(length), `${name} is more than ${maxBytes} bytes`);
    return buffer.subarray(0, length).toString('utf8');
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * Reads a file synchronously, but only if it is a regular file (a FIFO or device is never
 * read, so the call cannot block), and at most `maxBytes` bytes of it: for small files a
 * server under test writes, such as the payment provider's statement.
 * @returns the text, cut to maxBytes; undefined when there is no such file, it is not a
 *   regular file, or it cannot be opened
 */
export function readRegularSync(file: string, maxBytes: number): string | undefined {
  return readRegularBytesSync(file, maxBytes)?.toString('utf8');
}

/**
 * readRegularSync's bytes: at most `maxBytes` of a regular file, opened without following
 * a link (O_NOFOLLOW) and checked to be a regular file once open.
 * @returns the bytes; undefined when there is no such file, it is not a regular file, or it cannot be opened
 */
export function readRegularBytesSync(file: string, maxBytes: number): Buffer | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, OPEN_FLAGS);
  } catch {
    return undefined;
  }
  try {
    if (!fs.fstatSync(fd).isFile()) return undefined;
    const buffer = Buffer.alloc(maxBytes);
    let length = 0;
    while (length < maxBytes) {
      const n = fs.readSync(fd, buffer, length, maxBytes - length, length);
      if (n === 0) break;
      length += n;
    }
    return buffer.subarray(0, length);
  } catch {
    return undefined;
  } finally {
    fs.closeSync(fd);
  }
}
