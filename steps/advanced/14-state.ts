import { CheckFailed, inPart } from '../../grader/failure.js';
import { Starved, STARVED_LAG_MS } from '../../grader/gate.js';
import { LOW_SHARE, starvationFigures, starvedError, starvedFor, type Starvation } from '../../grader/sched.js';
import { expectReplay, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { responseJson } from '../../grader/http.js';
import { listOf, t } from '../../i18n/index.js';
import { sendForced } from '../../grader/race.js';
import { BOUND_MS as LOCKSTEP_BOUND_MS } from '../../grader/lockstep.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';

/** Where the advanced contract serves a payment's state now: `/payments/{id}` (docs/server-contract.md). */
export function paymentPath(id: number): string {
  return `/payments/${id}`;
}

/**
 * The characters RFC 3986 (§2 and appendix A) lets a URI reference hold, with
 * percent-encodings: a backslash, a space, a quote or any non-ASCII character is none of them.
 */
const URI_REFERENCE = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#[\]]|%[0-9A-Fa-f]{2})*$/;

/** The hosts an absolute link may name: the server's own, as it listens (127.0.0.1) and as `localhost`. */
const OWN_HOSTS: readonly string[] = ['127.0.0.1', 'localhost'];

/** Why a Location header leads nowhere useful: not a URI reference fit to be a payment's link, or another server's. */
export type LinkProblem = 'reference' | 'server';

/**
 * Where a client that follows a Location header ends up on this server: the header as
 * sent, resolved against the request's URI `http://127.0.0.1:{port}/pay` as a client
 * resolves it (RFC 3986 §5.2, with the WHATWG URL parser: `payments/7` is /payments/7,
 * `//localhost:{port}/payments/7` too), and what is wrong with it when it leads elsewhere.
 * Refused outright: anything but a URI reference (RFC 3986: a backslash, a space, a raw
 * non-ASCII character, which parsers read in different ways), any query or fragment, even
 * an empty `?` or `#` (the server serves a payment at its path alone); an absolute link
 * must name this server: scheme http, host 127.0.0.1 or localhost, the server's port.
 * @returns the request target a client sends (the path), or the problem
 */
export function linkTarget(location: string, port: number): { target: string } | { problem: LinkProblem } {
  const reference = location.trim();
  if (!URI_REFERENCE.test(reference) || /[?#]/.test(reference)) return { problem: 'reference' };
  let url: URL;
  try {
    url = new URL(reference, `http://127.0.0.1:${port}/pay`);
  } catch {
    return { problem: 'reference' };
  }
  if (url.protocol !== 'http:' || !OWN_HOSTS.includes(url.hostname) || (url.port || '80') !== String(port) || url.username !== '' || url.password !== '') {
    return { problem: 'server' };
  }
  return { target: url.pathname };
}

/**
 * The link a 201's Location header gives, required to lead to payment `id`'s state on
 * this server: `/payments/{id}` once resolved (linkTarget), given as a path, as a
 * reference relative to /pay (`payments/{id}`), or as an absolute URL of this server
 * (RFC 9110 §10.2.2 allows any URI reference). What it resolves to is what the check then
 * GETs and refunds: the link as a client follows it.
 * @returns the request target the link resolves to, `/payments/{id}`
 * @throws CheckFailed when the header is missing, is no fit URI reference, names another server or links elsewhere
 */
export function linkOf(exchange: Exchange, server: ServerInstance, id: number, what: string): string {
  const want = paymentPath(id);
  if (exchange.location === undefined || exchange.location.trim() === '') {
    throw new CheckFailed(t('step.14.noLocation', { what, path: want }), t('step.14.link.why'), { exchanges: [exchange] });
  }
  const link = linkTarget(exchange.location, server.port);
  if ('problem' in link) {
    const text = link.problem === 'server' ? 'step.14.otherServer' : 'step.14.badReference';
    throw new CheckFailed(t(text, { what, location: exchange.location, path: want, port: server.port }), t('step.14.link.why'), { exchanges: [exchange] });
  }
  if (link.target !== want) {
    throw new CheckFailed(t('step.14.wrongLocation', { what, location: exchange.location, id, path: want }), t('step.14.link.why'), { exchanges: [exchange] });
  }
  return link.target;
}

/**
 * A replay of the first payment: its first response unchanged (status and body: a field
 * added, changed or left out fails), with the Location of the first.
 * @throws CheckFailed naming what differs
 */
function replayWithLink(first: Exchange, replay: Exchange, server: ServerInstance, id: number, what: string): void {
  expectReplay(first, replay, t('step.14.then.why'));
  linkOf(replay, server, id, what);
}

/**
 * GET on the payment's link: 200 and the payment as it is now, the first response's
 * payment_id, user, amount and charged_at with `status` (and `refunded_at` once refunded).
 * @throws CheckFailed naming what the state got wrong
 */
export async function expectState(ctx: LiveContext, server: ServerInstance, link: string, payment: Record<string, unknown>, status: 'charged' | 'refunded'): Promise<Exchange> {
  const got = await ctx.request(server, 'GET', link);
  expectStatus(got, 200, t('step.14.stateStatus', { link }), t('step.14.now.why'));
  const state = responseJson(got) as Record<string, unknown> | undefined;
  const wrong = ['payment_id', 'user', 'amount', 'charged_at'].filter((field) => state?.[field] !== payment[field]);
  if (state?.status !== status || (status === 'refunded' && typeof state.refunded_at !== 'string')) wrong.push('status');
  if (wrong.length > 0) {
    throw new CheckFailed(t('step.14.state', { link, status, fields: listOf(wrong) }), t('step.14.now.why'), { exchanges: [got] });
  }
  return got;
}

/**
 * Writes one ledger row of an earlier deployment into the database of `server` (a payment
 * made two days ago under a key of its own, whose record has long expired): the ledger
 * holds it and no record does, as in any database that has run a while, so the next
 * payment's id is not the row number of its record in a table of the server's own (a link
 * built from that row number points at another payment). Nothing is written when the
 * ledger is not there yet or takes no such row (the contract's columns): the check goes on.
 */
export function seedOlderPayment(ctx: LiveContext, server: ServerInstance): void {
  const older = ctx.data.payment();
  ctx.seedLedgerRow(server, { key: ctx.freshKey(), user: older.user, amount: older.amount, createdAt: new Date(Date.now() - 2 * 86_400_000).toISOString() });
}

/**
 * Another user's payment under the first payment's key (docs/server-contract.md, step 10:
 * records are scoped per user, so it is a payment of its own, 201), and its replay: both
 * must link to its own payment_id. A link looked up by the bare key (the ledger's first row
 * under it) leads to the first user's payment: said as such.
 * @param first the first user's request and its payment_id
 * @throws CheckFailed when it is not 201 or a link leads anywhere but its own payment
 */
async function otherUserUnderKey(ctx: LiveContext, server: ServerInstance, first: { key: string; body: { user: string; amount: number }; id: number }): Promise<void> {
  let user = ctx.data.user();
  while (user === first.body.user) user = ctx.data.user();
  const sent = { key: first.key, body: { user, amount: first.body.amount } };
  const said = { user: JSON.stringify(user), key: JSON.stringify(first.key), first: JSON.stringify(first.body.user), firstId: first.id };
  const answer = await ctx.pay(server, sent);
  expectStatus(answer, 201, t('step.14.otherUser', { ...said, status: String(answer.status ?? answer.error) }), t('step.14.otherUser.why'));
  const own = paymentOf(answer).payment_id as number;
  const linked = (exchange: Exchange, what: string) => {
    const link = exchange.location === undefined ? undefined : linkTarget(exchange.location, server.port);
    if (own !== first.id && link !== undefined && 'target' in link && link.target === paymentPath(first.id)) {
      throw new CheckFailed(t('step.14.otherUserLink', { ...said, what, own, location: exchange.location!, path: paymentPath(own) }), t('step.14.otherUser.why'), { exchanges: [exchange] });
    }
    linkOf(exchange, server, own, what);
  };
  linked(answer, t('step.14.what.otherUser'));
  const replay = await ctx.pay(server, sent);
  expectReplay(answer, replay, t('step.14.then.why'));
  linked(replay, t('step.14.what.replay'));
}

/** How many payments with keys of their own the check sends at once to read their links. */
export const AT_ONCE = 4;

/**
 * The longest the round of payments at once holds their charges, in ms, waiting for all of
 * them to have moved the money: it never decides a verdict (a server that charges one at a
 * time gets them let go after it, and its links are judged as they come).
 */
export const AT_ONCE_BOUND_MS = 8000;

/**
 * AT_ONCE payments with keys of their own (each another user and amount), sent at once
 * to a server started with the database's gate (`dbGate`), and each 201's Location read:
 * it must lead to its own payment_id. The interleaving that a link read back after the
 * payment is recorded (`SELECT MAX(payment_id)`, the newest row) gets wrong is forced, not
 * waited for: every charge is held at the provider's gate once its money moved until all
 * AT_ONCE have (gate.ts, point `moved`), then let go in one instant, and the server's
 * statements run in lockstep (lockstep.ts): a wave goes only once none of the server's
 * threads can run, so every payment's ledger write (its BEGIN, or its autocommit INSERT)
 * runs in one wave and every read-back after it in the next. A server that does not speak
 * the gates is sent the same payments at once, unforced.
 * @throws CheckFailed when one is not 201, or its link leads to another payment (named when it is one of the round's);
 *   Starved when a wave was let go by the lockstep's bound on a starved machine (before
 *   judging the statuses when one is a 5xx or unanswered, as when the server's threads were
 *   kept off a CPU, under LOW_SHARE of one, a quarter of the time that answer took: the grader's hold may have caused it), or the
 *   charges' hold ran out starved
 */
async function paymentsAtOnce(ctx: LiveContext, server: ServerInstance): Promise<void> {
  const sent: Array<{ key: string; body: { user: string; amount: number } }> = [];
  while (sent.length < AT_ONCE) {
    const body = ctx.data.payment();
    if (!sent.some((s) => s.body.user === body.user && s.body.amount === body.amount)) sent.push({ key: ctx.freshKey(), body });
  }
  const ofSent = (c: { user: string; amount: number }) => sent.findIndex((s) => s.body.user === c.user && s.body.amount === c.amount);
  const gate = ctx.gate(server);
  const hold = gate.hold((c) => ofSent(c) >= 0, 'moved');
  // Whether every charge had moved the money within the bound (the interleaving was forced),
  // and how starved the server was meanwhile: a bound run out on a busy machine forced nothing.
  const meter = ctx.starveMeter([server]);
  // Whether the server's threads were kept off a CPU (under a tenth of one, turns long in coming): what excuses a
  // 5xx. A thread that got its share of a loaded machine (a busy wait of its own beside four
  // busy loops, say) was not kept off; the run-queue time the meter above counts would take
  // it for starved.
  const keptOff = ctx.starveMeter([server], { lowShare: LOW_SHARE });
  let allMoved = false;
  void gate.until((cs) => sent.every((_, i) => cs.some((c) => ofSent(c) === i && c.movedAt !== undefined)), AT_ONCE_BOUND_MS).then((held) => {
    allMoved = held;
    hold.release();
  });
  const { connectMs, answerMs } = ctx.timeouts();
  let forced: Awaited<ReturnType<typeof sendForced>>;
  let seen: Starvation;
  let seenKeptOff: Starvation;
  try {
    forced = await sendForced(ctx, [server], sent, { lockstep: true, holds: [hold], timeouts: { connectMs, answerMs: answerMs + AT_ONCE_BOUND_MS } });
  } finally {
    // Stopped on every path: a meter left running keeps sampling for the process's life.
    seen = meter.stop();
    seenKeptOff = keptOff.stop();
  }
  const { exchanges: answers, waves = [], starvedWaves = 0 } = forced;
  const wavesStarved = () => new Starved(t('check.race.wavesStarved', { name: t('step.14.atOnceName', { count: AT_ONCE }), count: starvedWaves, s: LOCKSTEP_BOUND_MS / 1000 }));
  // A payment answered 5xx or not at all, after a second or more, while a wave of its
  // statements was held past the lockstep's bound by a starved machine (or while the server
  // was starved): the grader's hold or the machine may have made it wait too long (a server
  // that answers 503 when its write takes over 2 s, ok-crash-503-when-slow). A 4xx is no
  // wait's doing (each payment has a key of its own), nor is a 500 at once.
  const broken = answers.filter((answer) => (answer.status === undefined || answer.status >= 500) && answer.ms >= STARVED_LAG_MS);
  if (broken.length > 0) {
    if (starvedWaves > 0) throw wavesStarved();
    // Or the server's threads were kept off a CPU for a quarter of the time that answer took:
    // a write thread starved before it reached a wave makes the same 503.
    if (starvedFor(seenKeptOff, Math.max(...broken.map((answer) => answer.ms)))) throw starvedError(seenKeptOff);
  }
  answers.forEach((answer, i) =>
    expectStatus(answer, 201, t('step.14.atOnce', { count: AT_ONCE, key: JSON.stringify(sent[i].key), user: JSON.stringify(sent[i].body.user), status: String(answer.status ?? answer.error) }), t('step.14.atOnce.why')),
  );
  const ids = answers.map((answer) => paymentOf(answer).payment_id as number);
  answers.forEach((answer, i) => {
    const said = { count: AT_ONCE, key: JSON.stringify(sent[i].key), user: JSON.stringify(sent[i].body.user), own: ids[i] };
    const link = answer.location === undefined ? undefined : linkTarget(answer.location, server.port);
    const other = link !== undefined && 'target' in link ? ids.findIndex((id, j) => j !== i && id !== ids[i] && link.target === paymentPath(id)) : -1;
    if (other >= 0) {
      throw new CheckFailed(
        t('step.14.atOnceLink', { ...said, location: answer.location!, otherKey: JSON.stringify(sent[other].key), otherUser: JSON.stringify(sent[other].body.user), path: paymentPath(ids[i]), waves: waves.length }),
        t('step.14.atOnce.why'),
        { exchanges: [answer, answers[other]] },
      );
    }
    linkOf(answer, server, ids[i], t('step.14.what.atOnce', said));
  });
  // Every link led to its own payment. That proves something only when the charges were held
  // until all had moved the money, or when they could not be because the server charges one
  // at a time (not starved: its own doing); a bound that ran out while the machine starved
  // the server forced no interleaving, and the round is graded again.
  if (!allMoved && starvedFor(seen, AT_ONCE_BOUND_MS)) {
    throw new Starved(t('step.14.atOnceStarved', { count: AT_ONCE, s: AT_ONCE_BOUND_MS / 1000, ...starvationFigures(seen) }));
  }
  // Nor when a wave of the ledger writes was let go by the lockstep's bound while starved.
  if (starvedWaves > 0) throw wavesStarved();
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
 * first, so a link to another payment (the newest, say) is caught. The link is read as a
 * client follows it (linkTarget): resolved against the request's URI, it must be
 * /payments/{id} on this very server (an absolute link naming 127.0.0.1 or localhost and
 * the server's port; a host written in, localhost:8000 say, leads elsewhere), with no
 * query or fragment, even an empty one, and no character RFC 3986 refuses (a backslash,
 * which WHATWG URL would quietly read as a slash); what it resolves to is what is then
 * GET and refunded. Then, on the same server, another user pays under the first payment's
 * key (a payment of its own: its 201 and its replay link to it, not to the first user's),
 * and AT_ONCE payments sent at once, every ledger write forced before any read-back (the
 * database's gate, paymentsAtOnce), each link to its own payment.
 */

export const step: Step = {
  id: '14',
  slug: 'state',
  get title() {
    return t('step.14.title');
  },
  cost: 2,
  async live(ctx: LiveContext) {
    // With the database's gate: the payments sent at once run in lockstep (paymentsAtOnce).
    const a = await ctx.startServer({ priority: 600, dbGate: true });
    seedOlderPayment(ctx, a);
    const key = ctx.freshKey();
    const body = ctx.data.payment();
    const first = await ctx.pay(a, { key, body });
    expectStatus(first, 201, t('check.first201'), t('step.14.first.why'));
    const payment = paymentOf(first);
    const id = payment.payment_id as number;
    const link = linkOf(first, a, id, t('step.14.what.first'));
    // A second payment, newer than the first: a replay must still link to its own.
    const second = await ctx.pay(a, { key: ctx.freshKey(), body: ctx.data.payment() });
    expectStatus(second, 201, t('check.first201'), t('step.14.first.why'));
    linkOf(second, a, paymentOf(second).payment_id as number, t('step.14.what.second'));

    await inPart(t('step.14.part.before'), async () => {
      await expectState(ctx, a, link, payment, 'charged');
      replayWithLink(first, await ctx.pay(a, { key, body }), a, id, t('step.14.what.replay'));
    });
    const refund = await ctx.request(a, 'POST', `${link}/refund`);
    expectStatus(refund, 200, t('step.14.refund', { link }), t('step.14.refund.why'));
    await inPart(t('step.14.part.after'), async () => {
      replayWithLink(first, await ctx.pay(a, { key, body }), a, id, t('step.14.what.replay'));
      await expectState(ctx, a, link, payment, 'refunded');
    });
    // Every payment links to its own: another user's under the same key, and payments made at once.
    await otherUserUnderKey(ctx, a, { key, body, id });
    await paymentsAtOnce(ctx, a);
    // The record and the refund live in the database: a restarted server still knows both.
    await ctx.stopServer(a);
    ctx.renewCopies();
    const b = await ctx.startServer({ priority: 200 });
    await inPart(t('step.14.part.restart'), async () => {
      replayWithLink(first, await ctx.pay(b, { key, body }), b, id, t('step.14.what.replay'));
      await expectState(ctx, b, link, payment, 'refunded');
    });
    return t('step.14.pass', { link });
  },
  get hints() {
    return [t('step.14.hint.1'), t('step.14.hint.2'), t('step.14.hint.3')];
  },
};
