import { expect } from '../grader/failure.js';
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
  title: 'Survive ten simultaneous requests',
  file: {
    name: '05-race.txt',
    check(text) {
      const paste = parsePaste(text);
      const key = racedKey(paste.lines);
      expect(paste.ledger.length > 0, '05-race.txt must show the ledger (./ledger.sh) after the ten simultaneous probes.', 'Only the ledger shows how many times the raced key was charged.', {
        details: paste.responses.map(describeResponse),
      });
      const rows = paste.ledger.filter((row) => row.idempotency_key === key);
      expect(
        rows.length === 1,
        `05-race.txt must show exactly one ledger row for the raced key ${JSON.stringify(key)}; it shows ${rows.length}.`,
        'Ten requests with one key are one payment, however close together they arrive.',
        { ledger: rows.length > 0 ? rows : paste.ledger },
      );
      return `05-race.txt shows one ledger row for the raced key ${JSON.stringify(key)}.`;
    },
  },
  async live(ctx) {
    const server = await ctx.startServer();
    for (let round = 1; round <= RACE_ROUNDS; round++) {
      await raceRound(ctx, [server], round);
    }
    return `${RACE_ROUNDS} rounds of 10 simultaneous requests with one key each: one ledger row per round, one answer per key.`;
  },
  hints: [
    'Look, then insert is two steps: ten requests can all look before any of them inserts.',
    'Make the claim on the key a single step the database decides: idem.key is a primary key, so only one insert of a key can succeed.',
    'Insert the key (with no response yet) before charging; the request whose insert fails waits for the stored response, or answers 409 while the first is still in flight.',
  ],
};
