/**
 * grader/safe-walk.ts, the one way a folder someone else may change is walked: a folder's
 * names are read no further than the bound asks (a folder with more names than a walk's
 * entries bound is not listed whole, by readWritten nor by copyImage's top), and an entry
 * is opened only when it is the regular file or folder lstat saw.
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { listNames, lstatEntry, openDir, openEntry } from '../grader/safe-walk.js';
import { readWritten } from '../grader/written-files.js';
import { copyImage, DEFAULT_IMAGE_LIMITS, WorkspaceTooLarge } from '../grader/workspace-image.js';
import { tempDir } from './support.js';

/** How many names a folder's listing had: a folder with this many is well past every bound below. */
const MANY = 600;

/**
 * Runs `run` while every fs.opendirSync hands out names counted: how many entries all the
 * listings read (Dir.readSync calls that returned an entry).
 */
function countingNames<T>(run: () => T): { result: T; read: number } {
  const original = fs.opendirSync;
  let read = 0;
  fs.opendirSync = ((...args: Parameters<typeof fs.opendirSync>) => {
    const dir = original(...args);
    const readSync = dir.readSync.bind(dir);
    dir.readSync = () => {
      const entry = readSync();
      if (entry !== null) read++;
      return entry;
    };
    return dir;
  }) as typeof fs.opendirSync;
  try {
    return { result: run(), read };
  } finally {
    fs.opendirSync = original;
  }
}

function fill(dir: string, count: number): void {
  for (let i = 0; i < count; i++) fs.writeFileSync(path.join(dir, `f${String(i).padStart(4, '0')}`), 'x');
}

test('listNames reads no more than max + 1 names and says that more were left', () => {
  const ws = tempDir('walk-list-');
  try {
    fill(ws.dir, MANY);
    const fd = openDir(ws.dir);
    try {
      const { result, read } = countingNames(() => listNames(fd, 10));
      assert.equal(result.more, true);
      assert.equal(result.names.length, 10);
      assert.deepEqual(result.names, [...result.names].sort(), 'sorted');
      assert.equal(read, 11, 'the folder is not listed whole');
      const all = listNames(fd);
      assert.equal(all.more, false);
      assert.equal(all.names.length, MANY);
      assert.deepEqual(listNames(fd, MANY), { names: all.names, more: false });
    } finally {
      fs.closeSync(fd);
    }
  } finally {
    ws.remove();
  }
});

test('readWritten: a folder with more entries than the bound is read up to the bound only, and the cut is said', () => {
  const pod = tempDir('walk-written-');
  try {
    const tmp = path.join(pod.dir, 'tmp');
    fs.mkdirSync(tmp);
    fill(tmp, MANY);
    const limits = { files: 1000, fileBytes: 1024, totalBytes: 1024 * 1024, depth: 4, entries: 20 };
    const { result, read } = countingNames(() => readWritten([pod.dir], limits));
    assert.equal(result.cut, 'entries');
    // The root's one name, then the 19 entries the bound leaves and one more (to learn that there are more).
    assert.equal(result.files.length, limits.entries - 1);
    assert.equal(read, 1 + limits.entries, `${read} names read`);
    // Under the bound, the whole folder is read, and nothing is cut.
    const whole = readWritten([pod.dir], { ...limits, entries: MANY + 1 });
    assert.equal(whole.cut, undefined);
    assert.equal(whole.files.length, MANY);
  } finally {
    pod.remove();
  }
});

test('copyImage: a workspace with more top entries than the bound is refused without being listed whole', () => {
  const ws = tempDir('walk-image-');
  const out = tempDir('walk-image-out-');
  try {
    fill(ws.dir, MANY);
    const limits = { ...DEFAULT_IMAGE_LIMITS, topEntries: 8 };
    const { result, read } = countingNames(() => {
      try {
        copyImage(ws.dir, path.join(out.dir, 'image'), out.dir, limits);
        return undefined;
      } catch (err) {
        return err;
      }
    });
    assert.ok(result instanceof WorkspaceTooLarge && result.file === '.', String(result));
    assert.equal(read, limits.topEntries + 1, 'the top is not listed whole');
    assert.equal(fs.existsSync(path.join(out.dir, 'image')), false, 'the half-made image is removed');
    // At the bound exactly, the image is made.
    const fits = copyImage(ws.dir, path.join(out.dir, 'fits'), out.dir, { ...limits, topEntries: MANY });
    assert.equal(fits.top.length, MANY);
  } finally {
    ws.remove();
    out.remove();
  }
});

test('openEntry opens only the regular file or folder lstat saw: a link, a FIFO or an entry swapped since is passed over', () => {
  const ws = tempDir('walk-open-');
  try {
    fs.writeFileSync(path.join(ws.dir, 'file'), 'bytes');
    fs.mkdirSync(path.join(ws.dir, 'dir'));
    fs.symlinkSync(path.join(ws.dir, 'file'), path.join(ws.dir, 'link'));
    execFileSync('mkfifo', [path.join(ws.dir, 'fifo')]);
    fs.writeFileSync(path.join(ws.dir, 'swapped'), 'first');
    const fd = openDir(ws.dir);
    try {
      const opened = (name: string) => {
        const seen = lstatEntry(fd, name);
        assert.ok(seen, name);
        const entry = openEntry(fd, name, seen);
        if (entry) fs.closeSync(entry.fd);
        return entry?.stat;
      };
      assert.equal(opened('file')?.isFile(), true);
      assert.equal(opened('dir')?.isDirectory(), true);
      assert.equal(opened('link'), undefined);
      assert.equal(opened('fifo'), undefined);
      assert.equal(lstatEntry(fd, 'gone'), undefined);
      // Swapped after its lstat: for a link to a regular file, then for another file.
      const seen = lstatEntry(fd, 'swapped')!;
      // Kept under another name, so that no new file can be given its inode.
      fs.renameSync(path.join(ws.dir, 'swapped'), path.join(ws.dir, 'kept'));
      fs.symlinkSync(path.join(ws.dir, 'file'), path.join(ws.dir, 'swapped'));
      assert.equal(openEntry(fd, 'swapped', seen), undefined, 'a link swapped in is not followed');
      fs.rmSync(path.join(ws.dir, 'swapped'));
      fs.writeFileSync(path.join(ws.dir, 'other'), 'another file');
      fs.renameSync(path.join(ws.dir, 'other'), path.join(ws.dir, 'swapped'));
      assert.equal(openEntry(fd, 'swapped', seen), undefined, 'another file swapped in is not read');
      // A folder swapped for a file.
      const dirSeen = lstatEntry(fd, 'dir')!;
      fs.renameSync(path.join(ws.dir, 'dir'), path.join(ws.dir, 'kept-dir'));
      fs.writeFileSync(path.join(ws.dir, 'dir'), 'now a file');
      assert.equal(openEntry(fd, 'dir', dirSeen), undefined);
    } finally {
      fs.closeSync(fd);
    }
  } finally {
    ws.remove();
  }
});
