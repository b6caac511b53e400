import { setTimeout as delay } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { CheckFailed } from './failure.js';
import { t } from '../i18n/index.js';
import { DEFAULT_PAYMENT, responseJson } from './http.js';
import { expectCharges, expectRows } from './expect-http.js';
import type { LiveContext } from './context.js';
import type { ServerInstance } from './server.js';
import type { Exchange } from './types.js';

/** Requests per race round: the lab sheet's ten simultaneous requests. */
export const RACE_SIZE = 10;

/** How long a locked round holds the database's write lock while its requests arrive, in ms. */
export const LOCK_HOLD_MS = 250;

/** How a race round is run. */
export interface RaceOptions {
  /**
   * Hold the database's write lock for LOCK_HOLD_MS while the requests arrive, so every
   * look-up happens before any claim: a check-then-insert, however narrow its window,
   * charges more than once every time instead of now and then.
   */
  lockDatabase?: boolean;
}

/**
 * One race round: RACE_SIZE requests with one fresh key (and a user of their own), sent all
 * at once, spread over `servers` in turn. Passes when the ledger holds one row for the key,
 * charge() ran once for the user, every answer is the same 201 or a 409 for a request
 * still in flight, and at least one is a 201.
 * @returns the key used
 * @throws CheckFailed naming the first broken rule, with the round's exchanges
 */
export async function raceRound(ctx: LiveContext, servers: ServerInstance[], round: number, options: RaceOptions = {}): Promise<string> {
  const key = ctx.freshKey(`race${round}`);
  const user = `racer-${key}`;
  const requests = Array.from({ length: RACE_SIZE }, () => ({ key, body: { user, amount: DEFAULT_PAYMENT.amount } }));
  let release = options.lockDatabase ? ctx.holdWriteLock() : undefined;
  let exchanges: Exchange[];
  try {
    const answers = ctx.paySimultaneously(servers, requests);
    if (release) {
      await delay(LOCK_HOLD_MS);
      release();
      release = undefined;
    }
    exchanges = await answers;
  } finally {
    release?.();
  }
  const where = servers.length > 1 ? t('check.race.splitOver', { servers: servers.map((s) => s.label).join(t('check.race.and')) }) : t('check.race.oneServer');
  const unanswered = exchanges.filter((e) => e.error !== undefined);
  if (unanswered.length > 0) {
    throw new CheckFailed(
      t('check.race.unanswered', { round, count: unanswered.length, size: RACE_SIZE, where, error: String(unanswered[0].error) }),
      t('check.race.unanswered.why'),
      { exchanges: unanswered },
    );
  }
  const broken = exchanges.filter((e) => e.status !== 201 && e.status !== 409);
  if (broken.length > 0) {
    throw new CheckFailed(
      t('check.race.broken', { round, size: RACE_SIZE, where, count: broken.length, status: String(broken[0].status) }),
      t('check.race.broken.why'),
      { exchanges: broken },
    );
  }
  const successes = exchanges.filter((e) => e.status === 201);
  if (successes.length === 0) {
    throw new CheckFailed(
      t('check.race.noSuccess', { round, size: RACE_SIZE, where }),
      t('check.race.noSuccess.why'),
      { exchanges },
    );
  }
  const firstBody = responseJson(successes[0]);
  const different = successes.filter((e) => !isDeepStrictEqual(responseJson(e), firstBody));
  if (different.length > 0) {
    throw new CheckFailed(
      t('check.race.different', { round, count: successes.length, where }),
      t('check.race.different.why'),
      { exchanges: [successes[0], ...different] },
    );
  }
  const why = t('check.race.rows.why', { size: RACE_SIZE });
  expectRows(ctx, key, 1, exchanges, why);
  expectCharges(ctx, { user }, 1, exchanges, why);
  return key;
}
