import fs from 'node:fs';
import path from 'node:path';
import { language, type Lang } from '../i18n/index.js';
import { LAB_DIR } from './paths.js';
import { readState } from './workspace.js';
import type { Track } from '../grader/track.js';
import { DEFAULT_TRACK, TRACKS } from '../steps/index.js';

/**
 * A track's bundled sheet in a language (default: the first track's, LAB.md's).
 * @throws Error when the track has no sheet, or its file is missing
 */
export function bundledSheet(lang: Lang, track: Track = DEFAULT_TRACK): string {
  if (!track.sheet) throw new Error(`track ${track.id} has no sheet`);
  return fs.readFileSync(path.resolve(LAB_DIR, track.sheet.source(lang)), 'utf8');
}

/**
 * Every step's text in the current language (see i18n): the sheet of each of `tracks`
 * (default: every track, steps/index.ts TRACKS) in order, each the workspace's own
 * (LAB.md, ADVANCED.md) when it is there in that language, else the bundled one. A step's
 * section is found in it by sheetSection.
 */
export function readSheet(workspace?: string, tracks: readonly Track[] = TRACKS): string {
  const laidIn = workspace ? (readState(workspace).lang ?? 'en') : undefined;
  return tracks.flatMap((track) => {
    if (!track.sheet) return [];
    const own = workspace ? path.join(workspace, track.sheet.name) : undefined;
    if (own && fs.existsSync(own) && laidIn === language()) return [fs.readFileSync(own, 'utf8')];
    return [bundledSheet(language(), track)];
  }).join('\n\n');
}

/**
 * One step's section of the lab sheet: from its level-2 heading (`## 03 · ...`) to the next
 * heading of level 1 or 2 (the next step, or the next sheet's title). Undefined when the
 * sheet has no such heading.
 */
export function sheetSection(sheet: string, stepId: string): string | undefined {
  const lines = sheet.split('\n');
  const start = lines.findIndex((line) => new RegExp(`^##\\s+${stepId}\\b`).test(line));
  if (start < 0) return undefined;
  const next = lines.findIndex((line, i) => i > start && /^#{1,2}\s/.test(line));
  return lines.slice(start, next < 0 ? undefined : next).join('\n').trimEnd();
}
