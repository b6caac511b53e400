import { fileURLToPath } from 'node:url';
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
