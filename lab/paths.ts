import { fileURLToPath } from 'node:url';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The package's root folder, where lab/, fixtures/ and package.json live. Compiled code
 * runs from dist/<folder>/, sources from <folder>/: both find the root two or one up.
 */
export const PACKAGE_ROOT = (() => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const up = path.resolve(here, '..');
  return path.basename(up) === 'dist' ? path.resolve(up, '..') : up;
})();

/** The folder of files copied into a learner's workspace. */
export const LAB_DIR = path.join(PACKAGE_ROOT, 'lab');

/**
 * The workspace a command works in when no --dir is given: the nearest folder, from
 * `from` upward (as git finds its repository), holding `.idem-lab/` (what `idem-lab
 * start` made) or a `server.py`; `from` itself when there is none, so `start` lays a
 * new workspace where it is run.
 * @param from an absolute or relative folder (default: the current directory)
 */
export function findWorkspace(from: string = process.cwd()): string {
  const start = path.resolve(from);
  for (let dir = start; ; dir = path.dirname(dir)) {
    if (isDir(path.join(dir, '.idem-lab')) || isFile(path.join(dir, 'server.py'))) return dir;
    if (path.dirname(dir) === dir) return start;
  }
}

function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** The workspace folder: --dir, else the nearest workspace from the current directory upward (findWorkspace). */
export function workspaceDir(options: { dir?: string }): string {
  return options.dir !== undefined ? path.resolve(options.dir) : findWorkspace();
}

/**
 * Whether `dir` is the folder of idem-lab itself (a clone of its repository or the
 * installed package): the package root, or its lab/ folder of files to copy, which holds
 * a server.py of its own. Neither is a learner's workspace.
 * @param dir an absolute or relative folder
 */
export function isToolFolder(dir: string): boolean {
  const resolved = path.resolve(dir);
  return resolved === PACKAGE_ROOT || resolved === LAB_DIR;
}
