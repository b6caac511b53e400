import fs from 'node:fs';
import path from 'node:path';
import { language, type Lang } from '../i18n/index.js';
import { LAB_DIR } from './paths.js';
import { readState } from './workspace.js';

/** The sheets of the lab: the basic track's (LAB.md) and the advanced track's (ADVANCED.md), by the name they have in lab/ and in a workspace. */
const SHEETS = [
  { bundled: 'LAB', laid: 'LAB.md' },
  { bundled: 'ADVANCED', laid: 'ADVANCED.md' },
] as const;

/** The bundled lab sheet in a language (the basic track's; `ADVANCED` for the advanced track's). */
export function bundledSheet(lang: Lang, name: 'LAB' | 'ADVANCED' = 'LAB'): string {
  return fs.readFileSync(path.join(LAB_DIR, `${name}.${lang}.md`), 'utf8');
}

/**
 * Every step's text in the current language (see i18n): the basic track's sheet, then the
 * advanced track's, each the workspace's own (LAB.md, ADVANCED.md) when it is there in that
 * language, else the bundled one. A step's section is found in it by sheetSection.
 */
export function readSheet(workspace?: string): string {
  const laidIn = workspace ? (readState(workspace).lang ?? 'en') : undefined;
  return SHEETS.map(({ bundled, laid }) => {
    const own = workspace ? path.join(workspace, laid) : undefined;
    if (own && fs.existsSync(own) && laidIn === language()) return fs.readFileSync(own, 'utf8');
    return bundledSheet(language(), bundled);
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
