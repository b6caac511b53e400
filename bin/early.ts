/**
 * What the entry point (idem-lab.ts) reads of the command line before the command line's
 * modules load: only what lets a `check` begin its start-up work early. No side effects.
 */
import path from 'node:path';
import { findWorkspace } from '../lab/paths.js';

/** The options before the command that take a value (cli.ts: the program's own). */
const GLOBAL_WITH_VALUE = new Set(['--lang']);

/**
 * What a `check` on this command line will grade first: its workspace and --sandbox, as
 * cli.ts reads them (`--dir V` or `--dir=V`, else the workspace around the current
 * folder); undefined for any other command. A wrong command line is cli.ts's to report.
 */
export function checkTarget(args: string[]): { workspace: string; sandbox: string | undefined } | undefined {
  let i = 0;
  while (i < args.length && args[i].startsWith('-')) i += GLOBAL_WITH_VALUE.has(args[i]) ? 2 : 1;
  if (args[i] !== 'check') return undefined;
  const value = (name: string): string | undefined => {
    for (let j = i + 1; j < args.length && args[j] !== '--'; j++) {
      if (args[j] === `--${name}`) return args[j + 1];
      if (args[j].startsWith(`--${name}=`)) return args[j].slice(name.length + 3);
    }
    return undefined;
  };
  const dir = value('dir');
  return { workspace: dir !== undefined ? path.resolve(dir) : findWorkspace(), sandbox: value('sandbox') };
}

