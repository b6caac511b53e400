import { expect } from '../grader/failure.js';
import { t } from '../i18n/index.js';
import { commandKey, describeResponse, parsePaste } from '../grader/paste.js';
import { raceRound } from '../grader/race.js';
import type { Step } from './types.js';

/** How many rounds of simultaneous requests the live check sends. */
export const RACE_ROUNDS = 3;

/**
 * The raced key in a paste: the key of a probe, or of a curl request to /pay, started in a
 * loop or in the background, else `race` (lab sheet).
 */
function racedKey(lines: string[]): string {
  for (const line of lines) {
    if (!/\bfor\b|\bseq\b|&\s*($|[;)]|pids|done)/.test(line)) continue;
    const key = commandKey(line.replace(/^.*?\bdo\b\s*/, ''));
    if (typeof key === 'string' && key !== '' && !key.startsWith('$')) return key;
  }
  return 'race';
}

/**
 * Step 05: ten simultaneous requests with one key make one ledger row. Live: several
 * rounds, each with a fresh key; every answer the same 201 or 409 while in flight (lab sheet, step 5).
 */
export const step: Step = {
  id: '05',
  slug: 'race',
  get title() {
    return t('step.05.title');
  },
  file: {
    name: '05-race.txt',
    check(text) {
      const paste = parsePaste(text);
      const key = racedKey(paste.lines);
      expect(paste.ledger.length > 0, t('step.05.file.noLedger'), t('step.05.file.noLedger.why'), {
        details: paste.responses.map(describeResponse),
      });
      const rows = paste.ledger.filter((row) => row.idempotency_key === key);
      expect(
        rows.length === 1,
        t('step.05.file.rows', { key: JSON.stringify(key), count: rows.length }),
        t('step.05.file.rows.why'),
        { ledger: rows.length > 0 ? rows : paste.ledger },
      );
      return t('step.05.file.pass', { key: JSON.stringify(key) });
    },
  },
  async live(ctx) {
    const server = await ctx.startServer();
    for (let round = 1; round <= RACE_ROUNDS; round++) {
      await raceRound(ctx, [server], round);
    }
    return t('step.05.pass', { rounds: RACE_ROUNDS });
  },
  get hints() {
    return [t('step.05.hint.1'), t('step.05.hint.2'), t('step.05.hint.3')];
  },
};
