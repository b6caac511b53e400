import { CheckFailed } from '../../grader/failure.js';
import { expectReplay, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { raceRound } from '../../grader/race.js';
import { chargeMs } from '../../grader/limits.js';
import { t } from '../../i18n/index.js';
import type { LiveContext } from '../../grader/context.js';
import type { Exchange } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';

/** The provider's latency on 09's server, in ms: the race's waiters find the first request in flight for this long. */
export const RACE_CHARGE_MS = 300;

/** The replay headers an answer carried, lower-cased and trimmed: Idempotency-Replayed and Stripe's Idempotent-Replayed. */
function replayHeaders(exchange: Exchange): string[] {
  return [exchange.replayed, exchange.replayedAlias].filter((v): v is string => v !== undefined).map((v) => v.trim().toLowerCase());
}

/**
 * Whether an answer says it is a replay: Idempotency-Replayed (or Stripe's
 * Idempotent-Replayed) `true`, in any case, and neither header saying anything else.
 */
export function saysReplayed(exchange: Exchange): boolean {
  const values = replayHeaders(exchange);
  return values.length > 0 && values.every((v) => v === 'true');
}

/**
 * A first response, or a refusal, must not say it is a replay (the essay: the header tells
 * the client and whoever reads the logs whether the answer was processed anew): each
 * replay header it carries says `false`, or there is none.
 * @throws CheckFailed naming the answer
 */
export function notReplayed(exchange: Exchange, what: string): void {
  const said = (v: string | undefined) => v !== undefined && v.trim().toLowerCase() !== 'false';
  // `replayed` holds Stripe's header only when it came alone (see Exchange.replayedAlias): it is named as ours then.
  const header = said(exchange.replayed) ? 'Idempotency-Replayed' : 'Idempotent-Replayed';
  const value = said(exchange.replayed) ? exchange.replayed : said(exchange.replayedAlias) ? exchange.replayedAlias : undefined;
  if (value !== undefined) {
    throw new CheckFailed(t('step.09.notReplay', { what, header, value }), t('step.09.notReplay.why'), { exchanges: [exchange] });
  }
}

/**
 * A replay must say so with `Idempotency-Replayed: true`.
 * @throws CheckFailed naming the replay and the header it carried
 */
function replayed(first: Exchange, replay: Exchange, what: string): void {
  expectReplay(first, replay, t('step.09.replay.why'));
  if (!saysReplayed(replay)) {
    // A header named like it (a misspelling) is named: "missing" alone would hide what the server did send.
    const value = replay.replayed ?? (replay.replayLike !== undefined ? t('step.09.noHeaderBut', { sent: replay.replayLike }) : t('step.09.noHeader'));
    throw new CheckFailed(t('step.09.unmarked', { what, value }), t('step.09.unmarked.why'), { exchanges: [first, replay] });
  }
}

/**
 * Step 09 (advanced track): every replay carries `Idempotency-Replayed: true`, a first
 * response never does, nor does a refusal (the essay's replay header; Stripe names it
 * `Idempotent-Replayed`, which is taken as the same). Checked on plain retries, on a retry
 * after a refused different body, and on a race of ten simultaneous requests with one key:
 * exactly one of its 201 answers is the first response, every other 201 says it is a replay.
 */
export const step: Step = {
  id: '09',
  slug: 'replayed',
  get title() {
    return t('step.09.title');
  },
  async live(ctx: LiveContext) {
    // A provider slow enough (RACE_CHARGE_MS) that the race's nine other requests always
    // find the first one still in flight and wait for it, however loaded the machine.
    // B: a second pod on the same database, from a copy of its own, started beside A: a
    // replay there says so too (a mark kept in one process's memory does not).
    const [server, pod] = await Promise.all([
      ctx.startServer({ priority: 1200, chargeMs: Math.max(RACE_CHARGE_MS, chargeMs()) }),
      ctx.startServer({ priority: 600, ownCopy: true }),
    ]);
    const key = ctx.freshKey();
    const body = ctx.data.payment();
    const first = await ctx.pay(server, { key, body });
    expectStatus(first, 201, t('check.first201'), t('step.09.first.why'));
    paymentOf(first);
    notReplayed(first, t('step.09.what.first'));
    const retry = await ctx.pay(server, { key, body });
    replayed(first, retry, t('step.09.what.retry'));
    const elsewhere = await ctx.pay(pod, { key, body });
    replayed(first, elsewhere, t('step.09.what.otherPod'));
    const conflict = await ctx.pay(server, { key, body: { user: body.user, amount: body.amount + 1 } });
    expectStatus(conflict, 422, t('step.09.conflict'), t('step.09.conflict.why'));
    notReplayed(conflict, t('step.09.what.refusal'));
    const again = await ctx.pay(server, { key, body });
    replayed(first, again, t('step.09.what.afterConflict'));
    const other = await ctx.pay(server, { key: ctx.freshKey(), body });
    expectStatus(other, 201, t('step.09.other'), t('step.09.first.why'));
    notReplayed(other, t('step.09.what.newKey'));

    // Ten at once, sent while the database is locked: one claims the key and charges, the
    // other nine find it in flight and wait for its record.
    const round = await raceRound(ctx, [server], t('step.09.race'), { lockDatabase: true });
    const raced = ctx.exchanges.filter((e) => e.key === round.key);
    for (const refusal of raced.filter((e) => e.status !== undefined && e.status !== 201)) notReplayed(refusal, t('step.09.what.raceRefusal', { status: refusal.status! }));
    const answers = raced.filter((e) => e.status === 201);
    const firsts = answers.filter((e) => !saysReplayed(e));
    if (firsts.length !== 1) {
      throw new CheckFailed(t('step.09.raceFirsts', { count: answers.length, firsts: firsts.length }), t('step.09.raceFirsts.why'), { exchanges: answers });
    }
    for (const answer of answers) if (answer !== firsts[0]) replayed(firsts[0], answer, t('step.09.what.race'));
    // No replay in the race (the others were told 409 while the first was in flight) is no fault: say so, not "0".
    // The pass names the header the server sent (Stripe's Idempotent-Replayed is taken as ours).
    const header = retry.replayedAlias === undefined ? (retry.replayedName ?? 'Idempotency-Replayed') : 'Idempotency-Replayed';
    return answers.length > 1 ? t('step.09.pass', { count: answers.length - 1, header }) : t('step.09.pass.raceRefused', { header });
  },
  get hints() {
    return [t('step.09.hint.1'), t('step.09.hint.2'), t('step.09.hint.3')];
  },
};
