/**
 * The learner's own server: `idem-lab start`, `stop` and `restart`, which the menu and
 * watch mode run too (watch restarts it after a save). Shared layer of bin/. Each prints
 * through the Output it is given and returns the exit code (0 done, 1 failed).
 */
import fs from 'node:fs';
import path from 'node:path';
import { language, listOf, t } from '../../i18n/index.js';
import { SetupError } from '../../grader/failure.js';
import { shellQuote } from '../../grader/wire.js';
import { upgradeFrames } from '../../lab/frame.js';
import { SERVER_LOG, logTail, startLabServer, stopLabServer } from '../../lab/runner.js';
import { readSheet, sheetSection } from '../../lab/sheet.js';
import { isToolFolder, PACKAGE_ROOT } from '../../lab/paths.js';
import { layWorkspace, openWorkspace, updateState } from '../../lab/workspace.js';
import { currentTrack, resolveTrack } from './tracks.js';
import { stepList, workspaceDir, type WorkspaceOptions } from './progress.js';
import { outputOf, type Output } from './output.js';

function printStart(outcome: Awaited<ReturnType<typeof startLabServer>>, workspace: string, out: Output): number {
  const { c } = out;
  switch (outcome.kind) {
    case 'already':
      out.log(t('cli.already', { pid: outcome.pid, port: outcome.port }));
      return 0;
    case 'started':
      if (outcome.movedFrom !== undefined) out.log(c.yellow(t('cli.portMoved', { from: outcome.movedFrom, port: outcome.port })));
      out.log(t('cli.started', { pid: outcome.pid, port: outcome.port, log: path.join(workspace, SERVER_LOG) }));
      return 0;
    case 'failed':
      out.log(c.red(t('cli.startFailed', { reason: outcome.reason })));
      if (outcome.log) out.log(`${t('cli.logEnd', { log: SERVER_LOG })}\n${outcome.log}`);
      return 1;
  }
}

/**
 * `idem-lab start`: lay the workspace for its track (LAB.md in the chosen language, which
 * the workspace then keeps; with `--track advanced` ADVANCED.md too, and an older
 * server.py's frame renewed around the learner's handle_pay: see Track), start the server, show the track's steps and
 * its first step.
 * @param options.brief only lay the workspace and start the server, without the step list
 *   and the first step (the menu shows those itself)
 * @throws SetupError for an unknown --track
 */
export async function startCommand(options: WorkspaceOptions & { lang?: string; port?: number; force?: boolean; brief?: boolean; track?: string }): Promise<number> {
  const out = outputOf(options);
  const { c } = out;
  const workspace = workspaceDir(options);
  // Run in a clone of the tool with no --dir, start would lay the lab out among the tool's own files.
  if (isToolFolder(workspace)) throw new SetupError(t('cli.startInRepository', { dir: workspace }));
  // The command line chose the language (--lang, else this workspace's, else LANG/LC_ALL).
  const lang = language();
  const chosen = options.track === undefined ? undefined : resolveTrack(options.track);
  const track = chosen ?? currentTrack(fs.existsSync(workspace) ? workspace : undefined);
  const report = layWorkspace(workspace, options.force ?? false, lang, track);
  updateState(workspace, (s) => {
    s.lang = lang;
    s.startedAt ??= new Date().toISOString();
    if (chosen) s.track = chosen.id;
  });
  if (report.written.length) out.log(t('cli.laidOut', { files: listOf(report.written), dir: workspace }));
  if (report.kept.length) out.log(t(report.kept.length === 1 ? 'cli.kept.one' : 'cli.kept.many', { files: report.kept.join(', ') }));
  if (report.backup) out.log(c.yellow(t('cli.backedUp', { dir: path.relative(workspace, report.backup) })));
  for (const frame of upgradeFrames(workspace, track)) {
    if (frame.kind === 'upgraded') out.log(c.yellow(t('cli.track.upgraded', { dir: frame.backup })));
    if (frame.kind === 'no-markers') out.log(c.yellow(t('cli.track.noMarkers')));
  }
  const { command } = openWorkspace(workspace);
  const code = printStart(await startLabServer(workspace, command, options.port), workspace, out);
  // Step 01 and the sheet's ./probe.sh run in the workspace: said last, where it is read.
  const cd = cdAdvice(workspace);
  if (options.brief) {
    if (cd) out.log(c.bold(cd));
    return code;
  }
  const onPath = await pathAdvice();
  if (onPath) out.log(`\n${c.yellow(onPath)}`);
  out.log(`\n${t('cli.stepsHeading')}\n${stepList(workspace, c)}\n`);
  out.log(sheetSection(readSheet(workspace), currentTrack(workspace).steps[0].id) ?? '');
  out.log(`\n${c.dim(t('cli.startFooter'))}`);
  if (cd) out.log(c.bold(cd));
  return code;
}

/**
 * `Next: cd /home/me/idem-lab. …` when the current directory is not in `workspace` (the
 * sheet's ./probe.sh and step 01 run there), else undefined. The folder is quoted for a
 * POSIX shell when it needs to be.
 */
export function cdAdvice(workspace: string, cwd: string = process.cwd()): string | undefined {
  const inside = path.relative(workspace, path.resolve(cwd));
  if (inside === '' || (!inside.startsWith('..') && !path.isAbsolute(inside))) return undefined;
  return t('cli.cd', { dir: shellQuote(workspace) });
}

/** `idem-lab stop`: stop the recorded server by its process group. */
export async function stopCommand(options: WorkspaceOptions): Promise<number> {
  const out = outputOf(options);
  const { c } = out;
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const outcome = await stopLabServer(workspace, command);
  if (outcome.damaged !== undefined) out.error(`idem-lab: ${outcome.damaged}`);
  if (outcome.kind === 'none') out.log(t('cli.stop.none'));
  if (outcome.kind === 'dead') out.log(c.yellow(`${t('cli.stop.dead', { pid: outcome.pid, log: SERVER_LOG })}\n${logTail(workspace)}`));
  if (outcome.kind === 'stopped') out.log(t('cli.stop.stopped', { pid: outcome.pid }));
  if (outcome.kind === 'foreign') out.log(c.yellow(t('cli.stop.foreign', { pid: outcome.pid })));
  if (outcome.kind === 'failed') out.log(c.red(t('cli.stop.failed', { pid: outcome.pid })));
  return outcome.kind === 'failed' ? 1 : 0;
}

/** `idem-lab restart`: stop, then start on the same port. */
export async function restartCommand(options: WorkspaceOptions): Promise<number> {
  const out = outputOf(options);
  const { c } = out;
  const { workspace, command } = openWorkspace(workspaceDir(options));
  const stopped = await stopLabServer(workspace, command);
  if (stopped.kind === 'stopped') out.log(t('cli.stop.stopped', { pid: stopped.pid }));
  if (stopped.kind === 'dead') out.log(c.yellow(t('cli.restart.dead', { pid: stopped.pid })));
  if (stopped.kind === 'foreign') out.log(c.yellow(t('cli.stop.foreign', { pid: stopped.pid })));
  if (stopped.kind === 'failed') {
    out.log(c.red(t('cli.stop.failed', { pid: stopped.pid })));
    return 1;
  }
  return printStart(await startLabServer(workspace, command), workspace, out);
}

/**
 * The folder on PATH (`env.PATH`) holding an executable named `name`, or undefined.
 * Entries inside node_modules/.bin are skipped: npx and npm scripts add those for one run
 * only, and the learner's own shell will not have them.
 */
export function onPath(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir === '' || dir.split(path.sep).includes('node_modules')) continue;
    try {
      fs.accessSync(path.join(dir, name), fs.constants.X_OK);
      return dir;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * When `idem-lab` does not resolve on PATH (so the lab sheet's `idem-lab check 05` would
 * be "command not found"), the exact fix for this machine, in the learner's language;
 * undefined when it resolves. The fix is `export PATH=...` when npm's global bin folder
 * already holds idem-lab (linked, but that folder is not on PATH), else `npm link` in this
 * package's folder, with a user-level npm prefix first when the global one is not writable.
 */
export async function pathAdvice(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  if (onPath('idem-lab', env)) return undefined;
  const { execa } = await import('execa');
  const prefix = await execa('npm', ['prefix', '-g'], { env, reject: false, timeout: 10_000, stdin: 'ignore' });
  const bin = prefix.exitCode === 0 && String(prefix.stdout).trim() ? path.join(String(prefix.stdout).trim(), 'bin') : undefined;
  const root = PACKAGE_ROOT;
  if (bin && fs.existsSync(path.join(bin, 'idem-lab'))) {
    return t('cli.path.notOnPath', { fix: `export PATH="${bin}:$PATH"`, bin });
  }
  let writable = false;
  try {
    if (bin) fs.accessSync(fs.existsSync(bin) ? bin : path.dirname(bin), fs.constants.W_OK);
    writable = bin !== undefined;
  } catch {
    writable = false;
  }
  const fix = writable
    ? `cd ${shellQuote(root)} && npm link`
    : `npm config set prefix ~/.npm-global && export PATH="$HOME/.npm-global/bin:$PATH" && cd ${shellQuote(root)} && npm link`;
  return t('cli.path.notLinked', { fix });
}
