import { expect } from '../grader/failure.js';
import { commandKey, describeResponse, headerKey, parsePaste } from '../grader/paste.js';
import { t } from '../i18n/index.js';
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
  // Each command's lines are joined once, at most 64 of them: re-joining a growing command per line would cost its square.
  const parts: string[][] = [];
  let continued = false;
  for (const line of lines) {
    const last = parts[parts.length - 1];
    if (continued && last.length < 64) last.push(line);
    else parts.push([line]);
    continued = /\\\s*$/.test(line);
  }
  const commands = parts.map((p) => p.map((line, i) => (i < p.length - 1 ? line.replace(/\\\s*$/, ' ') : line)).join(''));
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

const showLoop = () => t('step.05.showLoop');

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
      const read = racedKey(paste.lines);
      expect(paste.ledger.length > 0, t('step.05.file.noLedger'), t('step.05.file.noLedger.why'), {
        details: paste.responses.map(describeResponse),
      });
      const key = read ?? 'race';
      if (read === undefined) {
        // No loop line names the key: the lab sheet's key `race`, if the ledger shows it and nothing contradicts it.
        const race = paste.ledger.filter((row) => row.idempotency_key === 'race').length;
        const repeated = repeatedKeys(paste.ledger).filter(([k]) => k !== 'race');
        const several = repeated.map(([k, n]) => t('step.05.file.several', { key: JSON.stringify(k), n })).join(', ');
        expect(
          race > 0,
          t('step.05.file.noKey', { several: several ? t('step.05.file.noKey.several', { several }) : '', showLoop: showLoop() }),
          t('step.05.file.noKey.why'),
          { ledger: paste.ledger },
        );
        expect(
          race > 1 || repeated.length === 0,
          t('step.05.file.unread', { several, showLoop: showLoop() }),
          t('step.05.file.unread.why'),
          { ledger: paste.ledger },
        );
      }
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
  cost: 2,
  async live(ctx) {
    const server = await ctx.startServer();
    // One payment first, so a server that sets the database up on its first request has done so.
    const warmUp = await ctx.pay(server, { key: ctx.freshKey('warmup'), body: DEFAULT_PAYMENT });
    expectStatus(warmUp, 201, t('step.05.warmUp'), t('step.05.warmUp.why'));
    for (let round = 1; round <= RACE_ROUNDS; round++) {
      await raceRound(ctx, [server], round, { lockDatabase: round === 1 });
    }
    return t('step.05.pass', { rounds: RACE_ROUNDS });
  },
  get hints() {
    return [t('step.05.hint.1'), t('step.05.hint.2'), t('step.05.hint.3')];
  },
};
