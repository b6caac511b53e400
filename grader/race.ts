import { isDeepStrictEqual } from 'node:util';
import { CheckFailed } from './failure.js';
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
  const where = servers.length > 1 ? `split over servers ${servers.map((s) => s.label).join(' and ')}` : 'on one server';
  const unanswered = exchanges.filter((e) => e.error !== undefined);
  if (unanswered.length > 0) {
    throw new CheckFailed(
      `Round ${round}: ${unanswered.length} of ${RACE_SIZE} simultaneous requests with one key (${where}) got no answer (${unanswered[0].error}).`,
      'A request that waits for another must still answer in bounded time: the stored response, or 409 while the first is in flight.',
      { exchanges: unanswered },
    );
  }
  const broken = exchanges.filter((e) => e.status !== 201 && e.status !== 409);
  if (broken.length > 0) {
    throw new CheckFailed(
      `Round ${round}: every answer to ${RACE_SIZE} simultaneous requests with one key (${where}) must be the one success (201) or 409 while the first is in flight; ${broken.length} got HTTP ${broken[0].status}.`,
      'The losers of the race are retries of a payment that is happening: an error like 500 tells the client it failed, so it tries again, with a new key.',
      { exchanges: broken },
    );
  }
  const successes = exchanges.filter((e) => e.status === 201);
  if (successes.length === 0) {
    throw new CheckFailed(
      `Round ${round}: none of ${RACE_SIZE} simultaneous requests with one key (${where}) succeeded; all got 409.`,
      'One of them must be the first and charge; the others replay it or wait.',
      { exchanges },
    );
  }
  const firstBody = responseJson(successes[0]);
  const different = successes.filter((e) => !isDeepStrictEqual(responseJson(e), firstBody));
  if (different.length > 0) {
    throw new CheckFailed(
      `Round ${round}: the ${successes.length} successful answers to simultaneous requests with one key (${where}) must be one and the same response.`,
      'Different answers under one key mean the payment was charged, or at least reported, more than once.',
      { exchanges: [successes[0], ...different] },
    );
  }
  expectRows(ctx, key, 1, exchanges, `${RACE_SIZE} simultaneous requests with one key are one payment: a check-then-insert lets them all see "no key yet" and charge.`);
  return key;
}
