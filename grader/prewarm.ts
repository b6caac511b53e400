/**
 * Start-up work a command can begin before the grader's modules have loaded: the
 * interpreter look-up (a version manager's shim, such as pyenv's, takes about 0.1 s) and
 * the sandbox probe each start a process, and can run while Node.js compiles the rest.
 * This module imports nothing heavy, so the command line can load it first. Engine code:
 * no lab specifics.
 */
import { execFile } from 'node:child_process';

const lookUps = new Map<string, Promise<string | undefined>>();

/**
 * The real path of the Python interpreter `file` (python or python3) runs as from `cwd`
 * (`sys.executable`, asked with -S: without the site packages, whose .pth files can take
 * tens of ms), asked once per (file, cwd) in this process; undefined when it cannot
 * be asked within 10 s or answers nothing. Never rejects.
 */
export function interpreterPath(file: string, cwd: string): Promise<string | undefined> {
  const id = `${file}\0${cwd}`;
  let lookUp = lookUps.get(id);
  if (!lookUp) {
    lookUp = new Promise((resolve) => {
      try {
        execFile(file, ['-S', '-c', 'import sys; print(sys.executable)'], { cwd, timeout: 10_000 }, (err, stdout) => resolve(err ? undefined : String(stdout).trim() || undefined));
      } catch {
        resolve(undefined);
      }
    });
    lookUps.set(id, lookUp);
  }
  return lookUp;
}

/**
 * Begins what a grading run in `workspace` will ask for first: the default interpreter's
 * look-up and, unless the sandbox is `off`, the sandbox probe (see sandbox.ts). Their
 * answers are kept for when they are asked. Never throws.
 */
export function prewarm(workspace: string, sandbox: string | undefined): void {
  void interpreterPath('python3', workspace);
  if (sandbox !== 'off') {
    import('./sandbox.js')
      .then((m) => m.probeSandbox(m.bwrapPath(), 'private'))
      .catch(() => undefined);
  }
}
