/**
 * What must happen however this process ends: servers stopped, temporary folders removed.
 * Tasks run synchronously on exit, and on SIGINT/SIGTERM/SIGHUP before exiting with
 * 128 + the signal's number.
 */
const tasks = new Set<() => void>();

/** Registers a synchronous task for exit; returns the function that unregisters it. */
export function atExit(task: () => void): () => void {
  tasks.add(task);
  return () => {
    tasks.delete(task);
  };
}

/** Runs every registered task now, once each; a task that throws does not stop the others. */
export function runExitTasks(): void {
  for (const task of [...tasks]) {
    tasks.delete(task);
    try {
      task();
    } catch {
      // best effort: the process is ending
    }
  }
}

let installed = false;

/** Makes the registered tasks run on exit and on SIGINT, SIGTERM and SIGHUP. Safe to call more than once. */
export function installExitHooks(): void {
  if (installed) return;
  installed = true;
  process.on('exit', runExitTasks);
  const codes: Record<string, number> = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 };
  for (const signal of Object.keys(codes) as NodeJS.Signals[]) {
    process.once(signal, () => {
      runExitTasks();
      process.exit(codes[signal]);
    });
  }
}
