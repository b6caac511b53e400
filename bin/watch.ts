/**
 * `idem-lab watch`: re-checks the current step whenever server.py or that step's file is
 * saved, restarting the learner's server first when server.py changed, and moves on to
 * the next step when it passes (like rustlings' watch mode). Saves in quick succession
 * are merged: one check at a time, and one follow-up check for everything saved during it.
 * A verdict on a file that changed while it was checked (a save still being written, as
 * an editor or a slow disk does in several writes) is not kept: watch says so and checks
 * the file again as it is.
 * It prints, and reads its keys, through the Output it is given (output.ts), so a test can
 * run it in process and stop it with an AbortSignal.
 */
import path from 'node:path';
import { listOf, t } from '../i18n/index.js';
import readline from 'node:readline';
import { watch as watchFiles } from 'chokidar';
import { grade } from '../grader/engine.js';
import { killAllServersNow } from '../grader/server.js';
import { runExitTasks } from '../grader/cleanup.js';
import { formatProgress, formatResult } from '../grader/reporters/human.js';
import { runSettings } from './shared/check.js';
import { chooseSteps } from './shared/tracks.js';
import { Coalescer } from '../lab/coalesce.js';
import { labSummary, nextStepToDo, passedCount, saveVerdicts, type WorkspaceOptions } from './shared/progress.js';
import { restartCommand } from './shared/lab-server.js';
import { hintCommand } from './shared/step-texts.js';
import { DEFAULT_PORT, ownServer } from '../lab/runner.js';
import { readState, sha256 } from '../lab/workspace.js';
import { outputOf } from './shared/output.js';

/** Options of `idem-lab watch`. */
export interface WatchOptions extends WorkspaceOptions {
  /** Quiet time after the last save before a check starts, in ms (default 200). */
  debounceMs?: number;
  /** Stops watch mode as q does (exit code 0), for a caller that runs it in process. */
  signal?: AbortSignal;
}


/** Files whose changes say nothing about the lab: the database, logs, editor leftovers. */
const NOISE = /(?:^|\/)(?:\.[^/]+|[^/]*\.(?:db|db-journal|db-wal|db-shm|log|swp|swx|tmp)|[^/]*~|__pycache__|node_modules)$/;

/**
 * Watches the workspace until the learner quits (q, Ctrl-C, SIGTERM, `options.signal`) or
 * every step passes. Keys are read from `options.out`'s terminal when it has one.
 * Checks the current step once at the start. Stops every server a check started before it
 * returns; leaves the learner's own server running (restarted when server.py changed).
 * @param selector the step to start with (id or slug); default the first one not passing
 * @returns 0 (quitting is not a failure)
 * @throws SetupError for a folder that is no workspace or an unknown step
 */
export async function watchCommand(selector: string | undefined, options: WatchOptions): Promise<number> {
  const { workspace, command, track, limits: runLimits } = await runSettings([], options);
  const STEPS = track.steps;
  let current = selector ? chooseSteps([selector], track)[0] : nextStepToDo(workspace);
  // A step named that passes already is being refactored: watch stays on it.
  const stayOn = selector && current && readState(workspace).steps?.[current.id]?.status === 'pass' ? current : undefined;
  // Set when a restart after a save failed (watch stopped the server): the next save starts it again.
  let serverDown = false;
  // Set when the step watch stays on failed its last check here: its next pass "passes again".
  let stayOnFailed = false;
  const out = outputOf(options);
  const { c } = out;
  if (!current) {
    out.log(c.green(t('watch.allPass', { total: STEPS.length })));
    return 0;
  }
  const serverFile = command.args[command.args.length - 1] ?? command.file;
  const keyboard = out.terminal?.input;
  const keys = keyboard !== undefined;
  const watchedNames = () => [serverFile, ...(current?.file ? [current.file.name] : [])];
  /** A watched file's content as a sha256 (hex), '' when it cannot be read (missing, or replaced mid-save). */
  const contentOf = (name: string): string => {
    try {
      return sha256(path.join(workspace, name));
    } catch {
      return '';
    }
  };

  const footer = () => {
    const files = watchedNames().join(t('watch.and'));
    const actions = keys ? t('watch.keys') : t('watch.noKeys');
    out.log(c.dim(`\n${t('watch.footer', { files, id: current?.id ?? '', slug: current?.slug ?? '', actions })}`));
  };

  let stopping = false;
  let finish!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (finish = resolve));

  const check = async ({ reasons }: { reasons: string[] }) => {
    const step = current;
    if (!step || stopping) return;
    if (out.isTTY) out.write('\x1b[2J\x1b[H');
    // A save of a file the step now watched does not watch (the last step's file, written
    // again while its check ran, before watch moved on) is no reason to check this one.
    const saved = reasons.filter((r) => r !== 'start' && r !== 'key' && watchedNames().includes(r));
    if (saved.length === 0 && !reasons.some((r) => r === 'start' || r === 'key')) return;
    if (saved.length) out.log(c.dim(t('watch.saved', { files: listOf(saved) })));
    // What the check grades: compared after it, so that a verdict on a half-written save is never kept.
    const graded = new Map(watchedNames().map((name) => [name, contentOf(name)]));
    if (saved.includes(serverFile)) {
      if (ownServer(workspace) || serverDown) serverDown = (await restartCommand({ dir: workspace, out })) !== 0;
      else out.log(c.dim(t('watch.serverNotRunning')));
    }
    out.log(t('watch.checking', { id: step.id, slug: step.slug }));
    const [result] = await grade({ workspace, command, steps: [step], concurrency: 1, limits: runLimits });
    if (stopping) return;
    const changed = [...graded].filter(([name, was]) => contentOf(name) !== was).map(([name]) => name);
    if (changed.length > 0) {
      out.log(c.dim(t('watch.changedDuring', { files: listOf(changed) })));
      for (const name of changed) runs.trigger(name);
      return;
    }
    saveVerdicts(workspace, [result], out);
    out.log(formatResult(result, c, { replayPort: readState(workspace).port ?? DEFAULT_PORT }));
    out.log(formatProgress(passedCount(workspace), STEPS.length, c));
    if (result.status === 'pass' && step === stayOn) {
      out.log(c.dim(t(stayOnFailed ? 'watch.passesAgain' : 'watch.stayOn', { id: step.id })));
    } else if (result.status === 'pass') {
      const next = nextStepToDo(workspace, step);
      if (!next) {
        // The summary's heading says the lab is done; no second line says it again.
        out.log(`\n${labSummary(workspace, c)}`);
        finish(0);
        return;
      }
      current = next;
      out.log(`\n${c.bold(t('watch.next', { id: next.id, slug: next.slug }))}  ${next.title}`);
      out.log(c.dim(t('watch.nextHow', { id: next.id, files: watchedNames().join(t('watch.or')) })));
    }
    if (step === stayOn) stayOnFailed = result.status !== 'pass';
    footer();
  };

  const runs = new Coalescer(check, options.debounceMs ?? 200, (err) => out.error(`idem-lab: ${(err as Error).stack ?? err}`));
  const watcher = watchFiles(workspace, {
    depth: 0,
    ignoreInitial: true,
    ignored: (p: string) => p !== workspace && NOISE.test(p),
    awaitWriteFinish: { stabilityThreshold: 60, pollInterval: 20 },
  });
  const onFile = (file: string) => {
    const name = path.relative(workspace, path.resolve(workspace, file));
    if (watchedNames().includes(name)) runs.trigger(name);
  };
  watcher.on('add', onFile).on('change', onFile);
  await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));

  const stop = () => finish(0);
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const signal of signals) process.on(signal, stop);
  options.signal?.addEventListener('abort', stop);
  if (options.signal?.aborted) stop();
  // Whatever a check leaves to clean up is cleaned up at exit (once, however often watch ran in this process).
  if (!process.listeners('exit').includes(runExitTasks)) process.on('exit', runExitTasks);
  const onKey = (text: string | undefined, key: { name?: string; ctrl?: boolean } | undefined) => {
    if ((key?.ctrl && key.name === 'c') || text === 'q') stop();
    else if (text === 'c' || key?.name === 'return') runs.trigger('key');
    else if (text === 'h' && current) hintCommand(current.id, { dir: workspace, out, more: t('watch.hint.more') });
  };
  if (keyboard) {
    readline.emitKeypressEvents(keyboard);
    keyboard.setRawMode?.(true);
    keyboard.on('keypress', onKey);
    keyboard.resume();
  }

  runs.trigger('start');
  const code = await finished;

  stopping = true;
  runs.close();
  await watcher.close();
  for (const signal of signals) process.off(signal, stop);
  options.signal?.removeEventListener('abort', stop);
  if (keyboard) {
    keyboard.off('keypress', onKey);
    keyboard.setRawMode?.(false);
    keyboard.pause();
  }
  // A check in progress loses its servers now and ends at once; its own cleanup then runs.
  killAllServersNow();
  await Promise.race([runs.idle(), new Promise((resolve) => setTimeout(resolve, 3000).unref())]);
  out.log(c.dim(t('watch.stopped')));
  return code;
}
