import { setTimeout as delay } from 'node:timers/promises';
import { CheckFailed, inPart } from '../../grader/failure.js';
import { describeCharge, describeRequest, expectCharges, expectReplay, expectRows, expectStatus, paymentOf } from '../../grader/expect-http.js';
import { limits } from '../../grader/limits.js';
import { t } from '../../i18n/index.js';
import type { CheckDatabase, LiveContext } from '../../grader/context.js';
import type { PayRequest } from '../../grader/http.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange } from '../../grader/types.js';
import type { Step } from '../../grader/track.js';

/** IDEM_LOCK_S of the crashed deployment (A, then B on its database), in s: a claim older than this is abandoned. */
export const CRASH_LOCK_S = 1;
/**
 * IDEM_PROVIDER_REPLY_MS of the crashed deployment, in ms: once the provider's statement
 * shows the charge, its answer takes this long to come back, and A is killed in between
 * (polled every POLL_MS, the kill lands in it with room to spare on a loaded machine). On
 * B, a charge of a new key outlasts IDEM_LOCK_S by this much less a second: the time in
 * which a retry takes its claim over while its owner still charges.
 */
export const CRASH_REPLY_MS = 3000;
/** How long, beyond IDEM_LOCK_S, the retries after the crash may take to get their 201, in ms: far less than the default IDEM_LOCK_S of 30 s. */
export const RECOVERY_BOUND_MS = 4000;
/** The retrying client's delay between two tries, in ms, and its most tries. */
export const RETRY_DELAY_MS = 100;
export const MAX_TRIES = 60;
/** How often the provider's statement is read while a charge is awaited, in ms. */
const POLL_MS = 5;
/**
 * The live charge's provider window (IDEM_PROVIDER_REPLY_MS), in ms, per attempt: another
 * server is started and the retries sent inside it. A second attempt, twice as long, is
 * made only when the machine was too slow for the first (the server came up after the
 * charge had ended); its verdict stands.
 */
export const LIVE_WINDOWS_MS = [2000, 4000] as const;
/** IDEM_LOCK_S of the live deployment exceeds its window by this much, in s: its claim stays young while it charges. */
export const LIVE_LOCK_MARGIN_S = 2;

/** A request sent and not yet awaited, with the time its answer came (performance.now(), ms) once it has. */
interface Pending {
  answer: Promise<Exchange>;
  sentAt: number;
  doneAt?: number;
}

function sendPending(ctx: LiveContext, server: ServerInstance, req: PayRequest): Pending {
  const pending: Pending = { answer: ctx.pay(server, req), sentAt: performance.now() };
  void pending.answer.then(() => (pending.doneAt = performance.now()));
  return pending;
}

/**
 * Sends `req` to `server` and waits until the provider's statement shows its charge (read
 * every POLL_MS, for at most the time a request may take): the money has moved and the
 * server is waiting for the provider's answer.
 * @returns the request, still in flight (or answered within the last POLL_MS)
 * @throws CheckFailed when it was answered, or timed out, with no charge on the statement
 */
async function chargeUnderWay(ctx: LiveContext, server: ServerInstance, req: PayRequest & { body: { user: string; amount: number } }): Promise<Pending> {
  const pending = sendPending(ctx, server, req);
  const deadline = performance.now() + limits().requestMs + 1000;
  const charged = () => (ctx.charges(server) ?? []).some((c) => c.user === req.body.user && c.amount === req.body.amount);
  while (pending.doneAt === undefined && performance.now() < deadline) {
    if (charged()) return pending;
    await delay(POLL_MS);
  }
  if (charged()) return pending;
  const answer = await pending.answer;
  throw new CheckFailed(
    t('step.12.noCharge', { request: describeRequest(answer), status: String(answer.status ?? t('check.audit.noAnswer')) }),
    t('step.12.noCharge.why'),
    { exchanges: [answer] },
  );
}

/** The charges of the statement (of `on`'s database) for a payment body. */
function chargesOf(ctx: LiveContext, body: { user: string; amount: number }, on: ServerInstance) {
  return (ctx.charges(on) ?? []).filter((c) => c.user === body.user && c.amount === body.amount);
}

/** The crashed deployment's settings (A, then B on its database). */
const CRASH_ENV = { IDEM_LOCK_S: String(CRASH_LOCK_S), IDEM_PROVIDER_REPLY_MS: String(CRASH_REPLY_MS) };

/** A payment of the crashed deployment: its key and body. */
type Payment = PayRequest & { key: string; body: { user: string; amount: number } };

/**
 * The crash: A pays and is killed (SIGKILL) once the provider's statement shows the charge,
 * before charge() returns; the killed request must get no answer. A's folder is put back as
 * the learner's files with only the database and the statement kept (a restarted pod keeps
 * its volume only), and B starts there with the same settings.
 * @returns B, the payment and the killed request's exchange
 * @throws CheckFailed when the charge never began or the request was answered anyway
 */
async function crashOnA(ctx: LiveContext, a: ServerInstance): Promise<{ b: ServerInstance; req: Payment; lost: Exchange }> {
  const data = ctx.data.fork('crash');
  const req = { key: data.key(), body: data.payment() };
  const inFlight = await chargeUnderWay(ctx, a, req);
  await a.kill();
  const lost = await inFlight.answer;
  if (lost.status !== undefined) {
    throw new CheckFailed(t('step.12.answeredEarly', { request: describeRequest(lost), status: lost.status, ms: CRASH_REPLY_MS }), t('step.12.answeredEarly.why'), {
      exchanges: [lost],
    });
  }
  ctx.renewCopies();
  const b = await ctx.startServer({ env: CRASH_ENV, label: 'B', priority: 1500 + CRASH_REPLY_MS });
  return { b, req, lost };
}

/**
 * A client's retries of `req` on `server` while its key is in flight: again every
 * RETRY_DELAY_MS after each 409, until another answer, MAX_TRIES tries or `deadline` (a
 * performance.now() time, in ms), each try's answer bounded by what is left.
 * @returns every try's exchange, in order
 */
async function retryWhileInFlight(ctx: LiveContext, server: ServerInstance, req: Payment, deadline: number): Promise<Exchange[]> {
  const tries: Exchange[] = [];
  while (tries.length < MAX_TRIES) {
    const left = Math.round(deadline - performance.now());
    if (left <= 0) break;
    const retry = await ctx.pay(server, req, { connectMs: 2000, answerMs: Math.min(limits().requestMs, left) });
    tries.push(retry);
    if (retry.status !== 409) break;
    await delay(RETRY_DELAY_MS);
  }
  return tries;
}

/**
 * The retries after the crash on B: a client retries on 409 every RETRY_DELAY_MS until a
 * 201, for at most IDEM_LOCK_S + RECOVERY_BOUND_MS; then one charge, one ledger row, and a
 * later retry replays that payment.
 * @throws CheckFailed naming what broke (money moved twice first)
 */
async function recover(ctx: LiveContext, b: ServerInstance, req: Payment, lost: Exchange): Promise<{ tries: number; ms: number }> {
  const started = performance.now();
  const deadline = started + CRASH_LOCK_S * 1000 + RECOVERY_BOUND_MS;
  const tries = await retryWhileInFlight(ctx, b, req, deadline);
  const ms = Math.round(performance.now() - started);
  const last = tries[tries.length - 1];
  // Money moved twice is said first: it is the bug, whatever the retries were answered.
  const charges = chargesOf(ctx, req.body, b);
  if (charges.length > 1) {
    throw new CheckFailed(
      t('step.12.twoCharges', { what: t('check.charges.userAmount', { user: JSON.stringify(req.body.user), amount: req.body.amount }), n: charges.length }),
      t('step.12.twoCharges.why'),
      { exchanges: [lost, ...tries.slice(-3)], details: charges.map((c) => describeCharge(c) + (c.key === undefined ? t('step.12.noKey') : t('step.12.withKey', { key: JSON.stringify(c.key) }))) },
    );
  }
  if (last === undefined || last.status === 409 || last.errorCode === 'timeout') {
    throw new CheckFailed(
      t('step.12.stuck', { tries: tries.length, seconds: (ms / 1000).toFixed(1), lock: CRASH_LOCK_S, last: last?.status === 409 ? '409' : t('check.audit.noAnswer') }),
      t('step.12.stuck.why'),
      { exchanges: [lost, ...tries.slice(-3)] },
    );
  }
  expectStatus(last, 201, t('step.12.retryStatus', { status: String(last.status) }), t('step.12.stuck.why'));
  paymentOf(last);
  const why = t('step.12.once.why');
  expectCharges(ctx, req.body, 1, [lost, last], why, b);
  expectRows(ctx, req.key, 1, [lost, last], why, b);
  const later = await ctx.pay(b, req);
  expectReplay(last, later, t('step.12.replay.why'));
  return { tries: tries.length, ms };
}

/**
 * A charge that outlasts IDEM_LOCK_S: on B, a new key's charge takes IDEM_PROVIDER_REPLY_MS
 * to come back, so once the statement shows it a client retries (on 409, every
 * RETRY_DELAY_MS) and takes the claim over once it is older than IDEM_LOCK_S, while its owner
 * is still charging. When the owner's charge returns, the claim is no longer its own: it
 * must not finish it. Its answer is 409 or the same payment as the retries'; one charge,
 * one ledger row, and a later retry replays.
 * @throws CheckFailed naming what broke
 */
async function slowOwner(ctx: LiveContext, b: ServerInstance): Promise<void> {
  const data = ctx.data.fork('slow-owner');
  const req = { key: data.key(), body: data.payment() };
  const owner = await chargeUnderWay(ctx, b, req);
  const deadline = performance.now() + CRASH_REPLY_MS + RECOVERY_BOUND_MS;
  const tries = await retryWhileInFlight(ctx, b, req, deadline);
  const answer = await owner.answer;
  const last = tries[tries.length - 1];
  const why = t('step.12.slow.why');
  const rows = ctx.ledger(b).filter((row) => row.idempotency_key === req.key);
  if (rows.length > 1) {
    throw new CheckFailed(t('step.12.slowTwice', { rows: rows.length, server: b.label, lock: CRASH_LOCK_S }), why, { exchanges: [answer, ...tries.slice(-3)], ledger: rows });
  }
  if (last === undefined || last.status === 409 || last.errorCode === 'timeout') {
    throw new CheckFailed(
      t('step.12.slowStuck', { tries: tries.length, seconds: ((CRASH_REPLY_MS + RECOVERY_BOUND_MS) / 1000).toFixed(1), lock: CRASH_LOCK_S, last: last?.status === 409 ? '409' : t('check.audit.noAnswer') }),
      t('step.12.stuck.why'),
      { exchanges: [answer, ...tries.slice(-3)] },
    );
  }
  expectStatus(last, 201, t('step.12.retryStatus', { status: String(last.status) }), why);
  paymentOf(last);
  if (answer.status !== 409) {
    expectStatus(answer, 201, t('step.12.slowOwner', { status: String(answer.status) }), why);
    expectReplay(last, answer, why);
  }
  expectCharges(ctx, req.body, 1, [answer, ...tries], why, b);
  expectRows(ctx, req.key, 1, [answer, ...tries], why, b);
  const later = await ctx.pay(b, req);
  expectReplay(last, later, t('step.12.replay.why'));
}

/** IDEM_LOCK_S of the live deployment of an attempt, in s. */
const liveLockS = (attempt: number) => LIVE_WINDOWS_MS[attempt] / 1000 + LIVE_LOCK_MARGIN_S;
/** The live deployment's settings of an attempt. */
const liveEnv = (attempt: number) => ({ IDEM_LOCK_S: String(liveLockS(attempt)), IDEM_PROVIDER_REPLY_MS: String(LIVE_WINDOWS_MS[attempt]) });

/**
 * A claim younger than IDEM_LOCK_S belongs to a live request. On a database of its own,
 * server C pays with a provider that answers `window` ms after the money moved; once the
 * statement shows that charge, server D starts on the same database (a pod restarted while
 * another one is charging: a server that clears every claim in flight at start-up clears
 * C's), and one retry goes to C and one to D at once. The first request must be answered
 * 201, each retry with that same payment or 409, with one charge and one ledger row, and a
 * later retry on D replays it.
 * @returns how the retries were answered ('409', '201', or both), or undefined when the
 *   set-up did not hold (D came up after C had answered, or C answered after its claim had
 *   aged past IDEM_LOCK_S) and `judge` is false: then nothing was judged
 * @throws CheckFailed naming what broke
 */
async function liveClaim(ctx: LiveContext, attempt: number, judge: boolean, started?: { c: ServerInstance; database: CheckDatabase }): Promise<string | undefined> {
  const window = LIVE_WINDOWS_MS[attempt];
  const lock = liveLockS(attempt);
  const env = liveEnv(attempt);
  const database = started?.database ?? ctx.newDatabase();
  const [first, second] = attempt === 0 ? ['C', 'D'] : ['E', 'F'];
  const c = started?.c ?? (await ctx.startServer({ database, env, label: first, priority: 3000 + window }));
  const data = ctx.data.fork(`live-${attempt}`);
  const req = { key: data.key(), body: data.payment() };
  const owner = await chargeUnderWay(ctx, c, req);
  const d = await ctx.startServer({ database, env, label: second, priority: 2000 + window });
  const retries = owner.doneAt === undefined ? [sendPending(ctx, c, req), sendPending(ctx, d, req)] : [];
  const answer = await owner.answer;
  const answers = await Promise.all(retries.map((r) => r.answer));
  const young = owner.doneAt !== undefined && owner.doneAt - owner.sentAt < lock * 1000;
  if (!judge && (retries.length === 0 || !young)) {
    await Promise.all([ctx.stopServer(c), ctx.stopServer(d)]);
    return undefined;
  }
  expectStatus(answer, 201, t('step.12.liveRobbed', { server: c.label, other: d.label, lock, status: String(answer.status) }), t('step.12.liveRobbed.why'));
  paymentOf(answer);
  for (const retry of answers) {
    if (retry.status === 409) continue;
    expectStatus(retry, 201, t('step.12.liveRetry', { status: String(retry.status) }), t('step.12.liveRobbed.why'));
    expectReplay(answer, retry, t('step.12.liveRobbed.why'));
  }
  const why = t('step.12.liveOnce.why');
  expectCharges(ctx, req.body, 1, [answer, ...answers], why, c);
  expectRows(ctx, req.key, 1, [answer, ...answers], why, c);
  const later = await ctx.pay(d, req);
  expectReplay(answer, later, t('step.12.replay.why'));
  const statuses = [...new Set(answers.map((r) => String(r.status)))].sort();
  return statuses.join('/');
}

/**
 * Step 12 (advanced track): a claim left in flight by a crash is recovered, a live one is
 * not. The essay's crash between the charge and the stored response: the server is killed
 * (SIGKILL) after the provider charged and before charge() returned, restarted on the same
 * database and statement, and a retry must be answered 201 within IDEM_LOCK_S and a bound
 * (a claim older than IDEM_LOCK_S is taken over), with one charge (charge() gets the
 * record's key, as Stripe's API takes an idempotency key, so the provider moves the money
 * once) and one ledger row; on the restarted server, a charge that outlasts IDEM_LOCK_S is
 * taken over by a retry and its owner, once its charge returns, must not finish the claim
 * (still one row). Beside it, on a database of its own, a retry while another
 * server is still charging, and a server started then, must not take that younger claim
 * over: the first request keeps its payment (docs/server-contract.md, "The advanced track").
 */
export const step: Step = {
  id: '12',
  slug: 'crash',
  get title() {
    return t('step.12.title');
  },
  cost: 3,
  async live(ctx: LiveContext) {
    // A and C first, outside the parts: a server that cannot start at all is said as such.
    // C's database is its own: the crash is on the check's database, the live claim beside it.
    const liveDatabase = ctx.newDatabase();
    const starts = await Promise.allSettled([
      ctx.startServer({ env: CRASH_ENV, label: 'A', priority: 2000 + CRASH_REPLY_MS }),
      ctx.startServer({ database: liveDatabase, env: liveEnv(0), label: 'C', priority: 3000 + LIVE_WINDOWS_MS[0] }),
    ]);
    for (const start of starts) if (start.status === 'rejected') throw start.reason;
    const [a, c] = starts.map((start) => (start as PromiseFulfilledResult<ServerInstance>).value);
    const crashName = t('step.12.part.crash');
    const settle = <T>(run: Promise<T>) => run.then((value) => ({ value }), (err: unknown) => ({ err }));
    const crash = settle(
      (async () => {
        const { b, req, lost } = await inPart(crashName, () => crashOnA(ctx, a));
        // Beside the retries, on B: a charge that outlasts IDEM_LOCK_S while its owner lives.
        const [recovered, slow] = await Promise.all([
          settle(inPart(crashName, () => recover(ctx, b, req, lost))),
          settle(inPart(t('step.12.part.slow', { lock: CRASH_LOCK_S }), () => slowOwner(ctx, b))),
        ]);
        if ('err' in recovered) throw recovered.err;
        if ('err' in slow) throw slow.err;
        return recovered.value;
      })(),
    );
    const live = settle(inPart(t('step.12.part.live'), async () => (await liveClaim(ctx, 0, false, { c, database: liveDatabase })) ?? (await liveClaim(ctx, 1, true))));
    const [crashed, lived] = await Promise.all([crash, live]);
    if ('err' in crashed) throw crashed.err;
    if ('err' in lived) throw lived.err;
    return t('step.12.pass', { tries: crashed.value.tries, seconds: (crashed.value.ms / 1000).toFixed(1), lock: CRASH_LOCK_S, how: lived.value ?? '' });
  },
  get hints() {
    return [t('step.12.hint.1'), t('step.12.hint.2'), t('step.12.hint.3')];
  },
};
