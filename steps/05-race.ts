import { expect } from '../grader/failure.js';
import { commandKey, describeResponse, headerKey, parsePaste } from '../grader/paste.js';
import { t } from '../i18n/index.js';
import { CheckFailed } from '../grader/failure.js';
import { RACE_SIZE, raceRound, where } from '../grader/race.js';
import { checkTimeouts } from '../grader/http.js';
import { chargeMs } from '../grader/limits.js';
import { expectStatus, paymentOf } from '../grader/expect-http.js';
import type { LiveContext } from '../grader/context.js';
import type { ServerInstance } from '../grader/server.js';
import type { LedgerRow } from '../grader/types.js';
import type { Step } from './types.js';

/** How many rounds of simultaneous requests the live check sends to one server. */
export const RACE_ROUNDS = 3;

/** The slow provider's latency for the slow round, in ms: at least 1.2 s, more when the run's is more. */
export function slowChargeMs(): number {
  return Math.max(1200, chargeMs());
}

/** Payments with keys of their own sent with the slow round's duplicates. */
export const OTHER_KEYS = 3;

/**
 * The simulated database round trip of the latency round, in ms (IDEM_DB_MS): longer than
 * ten simultaneous one-statement writes take to get through the database one by one, so
 * that a look-up made after such a write still happens before any of the ten has claimed
 * the key.
 */
export const DB_LATENCY_MS = 250;

/**
 * The slow round: RACE_SIZE duplicates of one payment together with OTHER_KEYS payments
 * of their own, all at once, on a server whose provider takes slowChargeMs(). Every
 * duplicate gets the stored 201 or a 409 however long the first takes; the other
 * payments all succeed, each with its own payment_id, and none waits for another's charge:
 * by the provider's statement, the four charges end less than 1.5 charge times apart (a
 * lock or a transaction held across charge() puts a whole charge time between each).
 * @throws CheckFailed naming what went wrong
 */
async function slowRound(ctx: LiveContext, server: ServerInstance): Promise<void> {
  const slow = slowChargeMs();
  const timeouts = { connectMs: checkTimeouts().connectMs, answerMs: checkTimeouts().answerMs + slow * (OTHER_KEYS + 2) };
  const name = t('step.05.slowRound', { ms: slow });
  const others = Array.from({ length: OTHER_KEYS }, () => ({ key: ctx.freshKey(), body: ctx.data.payment() }));
  const { body, extra } = await raceRound(ctx, [server], 'slow', { name, timeouts }, others);
  const failed = extra.find((e) => e.status !== 201);
  if (failed) {
    throw new CheckFailed(
      t('step.05.othersFailed', { count: OTHER_KEYS, status: String(failed.status ?? failed.error), ms: failed.ms }),
      t('step.05.othersFailed.why'),
      { exchanges: extra },
    );
  }
  const ids = new Set(extra.map((e) => paymentOf(e).payment_id));
  if (ids.size !== extra.length) {
    throw new CheckFailed(t('step.05.othersSame', { count: OTHER_KEYS }), t('step.05.othersFailed.why'), { exchanges: extra });
  }
  // Charges that overlap end within moments of each other; charges made one after another
  // (a lock or a transaction held across charge()) end a charge time or more apart. The
  // statement's times say which, whatever the load on the machine.
  const ends = (ctx.charges() ?? [])
    .filter((c) => [body, ...others.map((o) => o.body)].some((b) => b.user === c.user && b.amount === c.amount))
    .map((c) => Date.parse(c.at))
    .filter((ms) => Number.isFinite(ms));
  const spread = ends.length > 1 ? Math.max(...ends) - Math.min(...ends) : 0;
  if (spread >= 1.5 * slow) {
    throw new CheckFailed(
      t('step.05.serialised', { count: OTHER_KEYS + 1, slow, ms: spread, times: (spread / slow).toFixed(1) }),
      t('step.05.serialised.why'),
      { exchanges: extra },
    );
  }
}

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
    // S: a slow provider, whose round starts as soon as it is up (it takes longest); A: the
    // rounds; L: a slow database round trip.
    const slowDone = ctx
      .startServer({ chargeMs: slowChargeMs() })
      .then((slow) => slowRound(ctx, slow))
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    let server: ServerInstance;
    let latent: ServerInstance;
    try {
      [server, latent] = await Promise.all([ctx.startServer(), ctx.startServer({ dbMs: DB_LATENCY_MS })]);
      // One payment first, so a server that sets the database up on its first request has done so.
      const warmUp = await ctx.pay(server, { key: ctx.freshKey(), body: ctx.data.payment() });
      expectStatus(warmUp, 201, t('step.05.warmUp'), t('step.05.warmUp.why'));
    } catch (err) {
      await slowDone;
      throw err;
    }
    try {
      await raceRound(ctx, [server], 1, { lockDatabase: true });
      // Once the lock is let go: the plain rounds, and beside them the slow-database round.
      // The look-up of a check-then-insert behind another write (an expiry DELETE, an
      // audit row) is not held by the lock; a database round trip widens its window.
      const latency = raceRound(ctx, [latent], 'latency', { name: t('step.05.latencyRound', { ms: DB_LATENCY_MS }) }).then(
        () => undefined,
        (err: unknown) => err,
      );
      let plain: unknown;
      try {
        for (let round = 2; round <= RACE_ROUNDS; round++) await raceRound(ctx, [server], round);
      } catch (err) {
        plain = err;
      }
      const latencyFailure = await latency;
      if (plain !== undefined) throw plain;
      if (latencyFailure !== undefined) throw latencyFailure;
    } finally {
      await slowDone;
    }
    const slowFailure = await slowDone;
    if (slowFailure !== undefined) throw slowFailure;
    return t('step.05.pass', { rounds: RACE_ROUNDS + 2, size: RACE_SIZE, where: where([server]) });
  },
  get hints() {
    return [t('step.05.hint.1'), t('step.05.hint.2'), t('step.05.hint.3')];
  },
};
