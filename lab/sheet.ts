import fs from 'node:fs';
import path from 'node:path';
import { language, type Lang } from '../i18n/index.js';
import { LAB_DIR } from './paths.js';
import { readState } from './workspace.js';

/** The bundled lab sheet in a language. */
export function bundledSheet(lang: Lang): string {
  return fs.readFileSync(path.join(LAB_DIR, `LAB.${lang}.md`), 'utf8');
}

/**
 * The lab sheet's Markdown in the current language (see i18n): the workspace's LAB.md when
 * there is one in that language, else the bundled sheet of that language.
 */
export function readSheet(workspace?: string): string {
  const own = workspace ? path.join(workspace, 'LAB.md') : undefined;
  const laidIn = workspace ? (readState(workspace).lang ?? 'en') : undefined;
  if (own && fs.existsSync(own) && laidIn === language()) return fs.readFileSync(own, 'utf8');
  return bundledSheet(language());
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
