import { expect } from '../grader/failure.js';
import { commandKey, describeResponse, headerKey, parsePaste } from '../grader/paste.js';
import { raceRound } from '../grader/race.js';
import { DEFAULT_PAYMENT } from '../grader/http.js';
import { expectStatus } from '../grader/expect-http.js';
import type { LedgerRow } from '../grader/types.js';
import type { Step } from './types.js';

/** How many rounds of simultaneous requests the live check sends. */
export const RACE_ROUNDS = 3;

/** A line that sends requests at once: a shell loop, `&`, xargs -P, parallel, or a load tool (hey, oha, ab). */
const LOOP = /\bfor\b|\bwhile\b|\bseq\b|\bxargs\b|\bparallel\b|\bhey\b|\boha\b|\bab\s+-|&\s*($|[;)]|pids|done)/;

/**
 * The raced key in a paste: the key of a probe, or of a request to /pay, started in a loop,
 * in the background or by a load tool: a probe's key argument (its options passed over), or
 * the Idempotency-Key header on the line (curl, hey, httpie, xh). Undefined when no such
 * line names one key. Lines continued with `\` are read as one.
 */
function racedKey(lines: string[]): string | undefined {
  const commands: string[] = [];
  for (const line of lines) {
    const last = commands.length - 1;
    if (last >= 0 && /\\\s*$/.test(commands[last])) commands[last] = commands[last].replace(/\\\s*$/, ' ') + line;
    else commands.push(line);
  }
  for (const line of commands) {
    if (!LOOP.test(line)) continue;
    const command = line.replace(/^.*?\bdo\b\s*/, '');
    const found = [commandKey(command), headerKey(command)];
    const key = found.find((k): k is string => typeof k === 'string' && k !== '' && !k.includes('$'));
    if (key !== undefined) return key;
  }
  return undefined;
}

/** The keys with more than one ledger row, each with its count. */
function repeatedKeys(ledger: LedgerRow[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const row of ledger) if (row.idempotency_key) counts.set(row.idempotency_key, (counts.get(row.idempotency_key) ?? 0) + 1);
  return [...counts].filter(([, n]) => n > 1);
}

const SHOW_LOOP = 'paste the loop command you ran (e.g. for i in $(seq 10); do ./probe.sh r7 & done) above the ledger';

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
      const read = racedKey(paste.lines);
      expect(paste.ledger.length > 0, '05-race.txt must show the ledger (./ledger.sh) after the ten simultaneous probes.', 'Only the ledger shows how many times the raced key was charged.', {
        details: paste.responses.map(describeResponse),
      });
      const key = read ?? 'race';
      if (read === undefined) {
        // No loop line names the key: the lab sheet's key `race`, if the ledger shows it and nothing contradicts it.
        const race = paste.ledger.filter((row) => row.idempotency_key === 'race').length;
        const repeated = repeatedKeys(paste.ledger).filter(([k]) => k !== 'race');
        const several = repeated.map(([k, n]) => `key ${JSON.stringify(k)} with ${n} rows`).join(', ');
        expect(
          race > 0,
          `05-race.txt does not show which key was raced: no loop command in it names one, and the ledger has no row for "race"${several ? ` (it shows ${several})` : ''}; ${SHOW_LOOP}.`,
          'The check counts the ledger rows of the raced key: it has to know which key that was.',
          { ledger: paste.ledger },
        );
        expect(
          race > 1 || repeated.length === 0,
          `05-race.txt: the raced key could not be read from the paste, and the ledger shows ${several}; ${SHOW_LOOP}.`,
          'One row for "race" says nothing if the key you raced was another one, charged several times.',
          { ledger: paste.ledger },
        );
      }
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
    // One payment first, so a server that sets the database up on its first request has done so.
    const warmUp = await ctx.pay(server, { key: ctx.freshKey('warmup'), body: DEFAULT_PAYMENT });
    expectStatus(warmUp, 201, 'A first request with a new key must charge and answer 201.', 'The race rounds need a server that pays at all.');
    for (let round = 1; round <= RACE_ROUNDS; round++) {
      await raceRound(ctx, [server], round, { lockDatabase: round === 1 });
    }
    return `${RACE_ROUNDS} rounds of 10 simultaneous requests with one key each: one ledger row per round, one answer per key.`;
  },
  hints: [
    'Look, then insert is two steps: ten requests can all look before any of them inserts.',
    'Make the claim on the key a single step the database decides: idem.key is a primary key, so only one insert of a key can succeed.',
    'Insert the key (with no response yet) before charging; the request whose insert fails waits for the stored response, or answers 409 while the first is still in flight.',
  ],
};
