/**
 * `idem-lab track [ID]`: which track the workspace follows, and a switch to another. A
 * track lays its files and sheet beside those of the track it builds on (the advanced
 * track: ADVANCED.md beside LAB.md) and gives an older server.py the frame it needs,
 * keeping the learner's handle_pay (lab/frame.ts). Every track comes from steps/index.ts.
 */
import path from 'node:path';
import { formatProgress } from '../grader/reporters/human.js';
import type { ChalkInstance } from 'chalk';
import { language, listOf, t } from '../i18n/index.js';
import { upgradeFrames } from '../lab/frame.js';
import { recordedServer } from '../lab/runner.js';
import { readSheet, sheetSection } from '../lab/sheet.js';
import { layWorkspace, lineage, openWorkspace, readState, updateState } from '../lab/workspace.js';
import { workspaceDir } from '../lab/paths.js';
import { TRACKS } from '../steps/index.js';
import { currentTrack, passedIn, resolveTrack, stepsLeftBefore, trackName } from './shared/tracks.js';
import { outputOf, type Output } from './shared/output.js';

/** Per track: `* basic     8 steps, 8 pass`, the current one starred. */
function trackLines(workspace: string, c: ChalkInstance): string[] {
  const current = currentTrack(workspace);
  return TRACKS.map((track) => {
    const passed = passedIn(track, workspace);
    const mark = track === current ? c.green('*') : ' ';
    return `${mark} ${track.id.padEnd(9)} ${t('cli.track.line', { first: track.steps[0].id, last: track.steps[track.steps.length - 1].id, total: track.steps.length, passed })}`;
  });
}

/**
 * `idem-lab track`: lists the tracks and their progress; `idem-lab track ID`: makes ID the
 * workspace's track (laying its files and sheet, and renewing an old server.py's frame
 * after a backup when it has one: the advanced track's), then shows its progress, the
 * steps of the tracks it builds on that do not pass yet, its first step not passing yet
 * and its sheet's name.
 * @returns 0
 * @throws SetupError for an unknown track or a folder that is no workspace
 */
export function trackCommand(id: string | undefined, options: { dir?: string; out?: Output }): number {
  const out = outputOf(options);
  const { c } = out;
  const print = (line: string) => out.log(line);
  const { workspace } = openWorkspace(workspaceDir(options));
  if (id === undefined) {
    for (const line of trackLines(workspace, c)) print(line);
    print(c.dim(t('cli.track.switch', { ids: listOf(TRACKS.map((tr) => tr.id)) })));
    return 0;
  }
  const wanted = resolveTrack(id);
  const report = layWorkspace(workspace, false, language(), wanted);
  if (report.written.length) print(t('cli.laidOut', { files: listOf(report.written), dir: workspace }));
  for (const frame of upgradeFrames(workspace, wanted)) {
    if (frame.kind === 'upgraded') {
      print(c.yellow(t('cli.track.upgraded', { dir: frame.backup })));
      if (recordedServer(workspace, readState(workspace)).kind === 'ours') print(t('cli.track.restart'));
    }
    if (frame.kind === 'no-markers') print(c.yellow(t('cli.track.noMarkers')));
  }
  updateState(workspace, (s) => {
    s.track = wanted.id;
  });
  const track = currentTrack(workspace);
  const steps = readState(workspace).steps ?? {};
  print('');
  print(formatProgress(passedIn(track, workspace), track.steps.length, c));
  const left = stepsLeftBefore(wanted, workspace);
  if (left.length > 0 && wanted.buildsOn) {
    print(c.yellow(t('cli.track.buildsOn', { steps: listOf(left.map((s) => s.id)), base: trackName(wanted.buildsOn), track: trackName(wanted) })));
  }
  const next = track.steps.find((s) => steps[s.id]?.status !== 'pass') ?? track.steps[0];
  const section = sheetSection(readSheet(workspace), next.id);
  if (section) print(`\n${section}`);
  const sheet = lineage(wanted).reverse().find((tr) => tr.sheet)?.sheet;
  if (sheet) print(`\n${c.dim(t('cli.track.footer', { sheet: sheet.name, dir: path.basename(workspace) }))}`);
  return 0;
}
