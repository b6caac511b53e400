/**
 * A step's texts: `idem-lab show` (its section of the lab sheet) and `idem-lab hint` (its
 * next hint), which the menu and watch mode show too. Shared layer of bin/.
 */
import { t } from '../../i18n/index.js';
import { SetupError } from '../../grader/failure.js';
import { readSheet, sheetSection } from '../../lab/sheet.js';
import { updateState } from '../../lab/workspace.js';
import { stepOrCurrent, workspaceDir, type WorkspaceOptions } from './progress.js';
import { outputOf } from './output.js';

/** `idem-lab show [N]`: the step's section of the lab sheet; without N, the current step's. */
export function showCommand(selector: string | undefined, options: WorkspaceOptions): number {
  const out = outputOf(options);
  const workspace = workspaceDir(options);
  const step = stepOrCurrent(selector, workspace);
  const section = sheetSection(readSheet(workspace), step.id);
  if (!section) throw new SetupError(t('cli.show.noSection', { id: step.id }));
  out.log(section);
  return 0;
}

/**
 * `idem-lab hint [N]`: the step's next hint, one more each time (without N, the current
 * step's); `--reset` starts over.
 * @param options.more the line under the hints while more remain: what gives the next
 *   one where the hints are shown (default: run `idem-lab hint N` again)
 */
export function hintCommand(selector: string | undefined, options: WorkspaceOptions & { reset?: boolean; more?: string }): number {
  const out = outputOf(options);
  const { c } = out;
  const workspace = workspaceDir(options);
  const step = stepOrCurrent(selector, workspace);
  let before = 0;
  const state = updateState(workspace, (s) => {
    before = options.reset ? 0 : (s.hintsShown?.[step.id] ?? 0);
    s.hintsShown = { ...(s.hintsShown ?? {}), [step.id]: Math.min(before + 1, step.hints.length) };
  });
  const shown = state.hintsShown?.[step.id] ?? 1;
  const hints = step.hints;
  hints.slice(0, shown).forEach((hint, i) => out.log(t('cli.hint', { n: i + 1, total: hints.length, id: step.id, slug: step.slug, hint })));
  // Past the last hint, say there are no more rather than "that was the last" again.
  const last = before >= hints.length ? t('cli.hint.none', { id: step.id, total: hints.length }) : t('cli.hint.last', { id: step.id });
  out.log(c.dim(shown < hints.length ? (options.more ?? t('cli.hint.more', { id: step.id })) : last));
  return 0;
}
