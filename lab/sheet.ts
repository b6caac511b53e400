import fs from 'node:fs';
import path from 'node:path';
import { LAB_DIR } from './paths.js';

/** Languages the lab sheet exists in. */
export const SHEET_LANGUAGES = ['en'] as const;

/** The lab sheet's Markdown: the workspace's LAB.md when there is one, else the bundled English one. */
export function readSheet(workspace?: string): string {
  const own = workspace ? path.join(workspace, 'LAB.md') : undefined;
  if (own && fs.existsSync(own)) return fs.readFileSync(own, 'utf8');
  return fs.readFileSync(path.join(LAB_DIR, 'LAB.en.md'), 'utf8');
}

/**
 * One step's section of the lab sheet: from its level-2 heading (`## 03 · ...`) to the next
 * level-2 heading. Undefined when the sheet has no such heading.
 */
export function sheetSection(sheet: string, stepId: string): string | undefined {
  const lines = sheet.split('\n');
  const start = lines.findIndex((line) => new RegExp(`^##\\s+${stepId}\\b`).test(line));
  if (start < 0) return undefined;
  const next = lines.findIndex((line, i) => i > start && /^##\s/.test(line));
  return lines.slice(start, next < 0 ? undefined : next).join('\n').trimEnd();
}
