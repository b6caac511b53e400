/**
 * `idem-lab roster FILE`: the students' repositories a cohort workflow clones, one
 * `owner/name` a line on stdout, from either
 *
 * - roster.txt: one `owner/name` a line, `#` comments and blank lines left out; or
 * - a GitHub Classroom roster export (classroom_roster.csv, its header naming
 *   `identifier`, `github_username`, `github_id`, `name`): each student's assignment
 *   repository is `<org>/<assignment>-<github_username>` (Classroom's own naming), so
 *   --org and --assignment are needed; a student with no GitHub account linked yet is
 *   left out with a warning.
 *
 * A name that is not `owner/name` (GitHub's letters: A-Z a-z 0-9 _ . -, no `..`) is left
 * out with a warning, a repeated one is listed once; --only keeps the one repository given
 * (a regrade). The CSV is read with csv-parse (quoted fields, commas in names, a BOM).
 */
import fs from 'node:fs';
import { parse } from 'csv-parse/sync';
import { SetupError } from '../grader/failure.js';
import { escapeData } from '../grader/reporters/github.js';
import { t } from '../i18n/index.js';
import { outputOf, type Output } from './shared/output.js';

/** A repository name as GitHub allows it: `owner/name`, letters, digits, `_ . -`, no `..`. */
export function isRepositoryName(text: string): boolean {
  return /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(text) && !text.includes('..');
}

/** Options of readRoster. */
export interface RosterOptions {
  /** The organization of a Classroom export's repositories. */
  org?: string;
  /** The assignment's repository prefix in a Classroom export (`<prefix>-<username>`). */
  assignment?: string;
  /** Keep only this `owner/name`. */
  only?: string;
}

/** What readRoster found: the repositories, and why any line was left out. */
export interface Roster {
  repos: string[];
  warnings: string[];
}

/** Whether a roster's text is a Classroom export: its first line is a CSV header naming github_username. */
function isClassroomExport(text: string): boolean {
  const first = text.replace(/^\ufeff/, '').split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  return /(^|,)\s*"?github_username"?\s*(,|$)/.test(first);
}

/**
 * The repositories a roster names (see the module's comment).
 * @param source the file name, for messages
 * @throws SetupError for a Classroom export without --org and --assignment, a CSV that
 *   cannot be read, --only naming no repository of the roster, or a roster naming none
 */
export function readRoster(text: string, source: string, options: RosterOptions = {}): Roster {
  const warnings: string[] = [];
  let names: string[];
  if (isClassroomExport(text)) {
    const org = options.org?.trim() ?? '';
    const prefix = options.assignment?.trim() ?? '';
    if (org === '' || prefix === '') throw new SetupError(t('roster.classroomNeeds', { file: source }));
    let rows: Array<Record<string, string>>;
    try {
      rows = parse(text, { columns: true, bom: true, skip_empty_lines: true, trim: true, relax_column_count: true }) as Array<Record<string, string>>;
    } catch (err) {
      throw new SetupError(t('roster.badCsv', { file: source, error: (err as Error).message }));
    }
    names = [];
    for (const row of rows) {
      const user = (row.github_username ?? '').trim();
      if (user === '') warnings.push(t('roster.unlinked', { file: source, student: row.identifier || row.name || '?' }));
      else names.push(`${org}/${prefix}-${user}`);
    }
  } else {
    names = text
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
  }
  const repos: string[] = [];
  for (const name of names) {
    if (!isRepositoryName(name)) warnings.push(t('roster.badName', { file: source, name }));
    else if (!repos.includes(name)) repos.push(name);
  }
  const only = options.only?.trim() ?? '';
  if (only !== '') {
    if (!repos.includes(only)) throw new SetupError(t('roster.notListed', { repo: only, file: source }));
    return { repos: [only], warnings };
  }
  if (repos.length === 0) throw new SetupError(t('roster.empty', { file: source }));
  return { repos, warnings };
}

/**
 * `idem-lab roster FILE [--org ORG --assignment PREFIX] [--only OWNER/NAME]`: prints the
 * repositories one a line; each warning on stderr (a `::warning` annotation in GitHub
 * Actions). Exit code 0, or 2 (SetupError) when the roster names none or cannot be read.
 * @throws SetupError as readRoster, and when the file cannot be read
 */
export function rosterCommand(file: string, options: RosterOptions & { out?: Output; env?: NodeJS.ProcessEnv }): number {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new SetupError(t('roster.unreadable', { file, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message }));
  }
  const roster = readRoster(text, file, options);
  const out = outputOf(options);
  const actions = (options.env ?? process.env).GITHUB_ACTIONS === 'true';
  for (const warning of roster.warnings) out.error(actions ? `::warning title=idem-lab::${escapeData(warning)}` : `idem-lab: ${warning}`);
  for (const repo of roster.repos) out.log(repo);
  return 0;
}
