import { isDeepStrictEqual } from 'node:util';
import { CheckFailed } from './failure.js';
import { t } from '../i18n/index.js';
import { DEFAULT_PAYMENT, responseJson } from './http.js';
import { expectRows } from './expect-http.js';
import type { LiveContext } from './context.js';
import type { ServerInstance } from './server.js';

/** Requests per race round: the lab sheet's ten simultaneous requests. */
export const RACE_SIZE = 10;

/**
 * One race round: RACE_SIZE requests with one fresh key, sent all at once, spread over
 * `servers` in turn. Passes when the ledger holds one row for the key, every answer is
 * the same 201 or a 409 for a request still in flight, and at least one is a 201.
 * @returns the key used
 * @throws CheckFailed naming the first broken rule, with the round's exchanges
 */
export async function raceRound(ctx: LiveContext, servers: ServerInstance[], round: number): Promise<string> {
  const key = ctx.freshKey(`race${round}`);
  const exchanges = await ctx.paySimultaneously(
    servers,
    Array.from({ length: RACE_SIZE }, () => ({ key, body: DEFAULT_PAYMENT })),
  );
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
  expectRows(ctx, key, 1, exchanges, t('check.race.rows.why', { size: RACE_SIZE }));
  return key;
}
