import { CheckFailed, inPart } from '../../grader/failure.js';
import { expectReplay, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { responseJson } from '../../grader/http.js';
import { t } from '../../i18n/index.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';

/** Where the advanced contract serves a payment's state now: `/payments/{id}` (docs/server-contract.md). */
export function paymentPath(id: number): string {
  return `/payments/${id}`;
}

/**
 * The path a 201's Location header links to, required to be payment `id`'s state:
 * `/payments/{id}`, as a path or as an absolute URL whose path it is (RFC 9110 §10.2.2
 * allows a URI reference; the host is the server's to choose, behind a proxy say), with
 * no query and no fragment.
 * @throws CheckFailed when the header is missing or links elsewhere
 */
function linkOf(exchange: Exchange, id: number, what: string): string {
  const want = paymentPath(id);
  if (exchange.location === undefined || exchange.location.trim() === '') {
    throw new CheckFailed(t('step.14.noLocation', { what, path: want }), t('step.14.link.why'), { exchanges: [exchange] });
  }
  let url: URL | undefined;
  try {
    url = new URL(exchange.location.trim(), 'http://127.0.0.1');
  } catch {
    url = undefined;
  }
  if (!url || url.pathname !== want || url.search !== '' || url.hash !== '') {
    throw new CheckFailed(t('step.14.wrongLocation', { what, location: exchange.location, id, path: want }), t('step.14.link.why'), { exchanges: [exchange] });
  }
  return want;
}

/**
 * A replay of the first payment: its first response unchanged (status and body: a field
 * added, changed or left out fails), with the Location of the first.
 * @throws CheckFailed naming what differs
 */
function replayWithLink(first: Exchange, replay: Exchange, id: number, what: string): void {
  expectReplay(first, replay, t('step.14.then.why'));
  linkOf(replay, id, what);
}

/**
 * GET on the payment's link: 200 and the payment as it is now, the first response's
 * payment_id, user, amount and charged_at with `status` (and `refunded_at` once refunded).
 * @throws CheckFailed naming what the state got wrong
 */
async function expectState(ctx: LiveContext, server: ServerInstance, link: string, payment: Record<string, unknown>, status: 'charged' | 'refunded'): Promise<Exchange> {
  const got = await ctx.request(server, 'GET', link);
  expectStatus(got, 200, t('step.14.stateStatus', { link }), t('step.14.now.why'));
  const state = responseJson(got) as Record<string, unknown> | undefined;
  const wrong = ['payment_id', 'user', 'amount', 'charged_at'].filter((field) => state?.[field] !== payment[field]);
  if (state?.status !== status || (status === 'refunded' && typeof state.refunded_at !== 'string')) wrong.push('status');
  if (wrong.length > 0) {
    throw new CheckFailed(t('step.14.state', { link, status, fields: wrong.join(', ') }), t('step.14.now.why'), { exchanges: [got] });
  }
  return got;
}

/**
 * Step 14 (advanced track): a stored response tells what happened then, and a link tells
 * what is true now (the essay's last point: a replay after a refund must not be rebuilt
 * from the payment's current state; Stripe answers a replay with the first response and
 * serves the object's state at its own URL). The first 201 and every replay carry
 * `Location: /payments/{id}` (docs/server-contract.md, "The advanced track"); GET on it
 * shows `status: "charged"`, then `"refunded"` after `POST /payments/{id}/refund` (served
 * by the frame), while every replay still answers the first 201, unchanged: before the
 * refund, after it, and after a restart on the same database. A second payment is made
 * first, so a link to another payment (the newest, say) is caught.
 */
export const step: Step = {
  id: '14',
  slug: 'state',
  get title() {
    return t('step.14.title');
  },
  cost: 2,
  async live(ctx: LiveContext) {
    const a = await ctx.startServer({ priority: 600 });
    const key = ctx.freshKey();
    const body = ctx.data.payment();
    const first = await ctx.pay(a, { key, body });
    expectStatus(first, 201, t('check.first201'), t('step.14.first.why'));
    const payment = paymentOf(first);
    const id = payment.payment_id as number;
    const link = linkOf(first, id, t('step.14.what.first'));
    // A second payment, newer than the first: a replay must still link to its own.
    const second = await ctx.pay(a, { key: ctx.freshKey(), body: ctx.data.payment() });
    expectStatus(second, 201, t('check.first201'), t('step.14.first.why'));
    linkOf(second, paymentOf(second).payment_id as number, t('step.14.what.second'));

    await inPart(t('step.14.part.before'), async () => {
      await expectState(ctx, a, link, payment, 'charged');
      replayWithLink(first, await ctx.pay(a, { key, body }), id, t('step.14.what.replay'));
    });
    const refund = await ctx.request(a, 'POST', `${link}/refund`);
    expectStatus(refund, 200, t('step.14.refund', { link }), t('step.14.refund.why'));
    await inPart(t('step.14.part.after'), async () => {
      replayWithLink(first, await ctx.pay(a, { key, body }), id, t('step.14.what.replay'));
      await expectState(ctx, a, link, payment, 'refunded');
    });
    // The record and the refund live in the database: a restarted server still knows both.
    await ctx.stopServer(a);
    ctx.renewCopies();
    const b = await ctx.startServer({ priority: 200 });
    await inPart(t('step.14.part.restart'), async () => {
      replayWithLink(first, await ctx.pay(b, { key, body }), id, t('step.14.what.replay'));
      await expectState(ctx, b, link, payment, 'refunded');
    });
    return t('step.14.pass', { link });
  },
  get hints() {
    return [t('step.14.hint.1'), t('step.14.hint.2'), t('step.14.hint.3')];
  },
};
