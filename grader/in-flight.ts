import { CheckFailed } from './failure.js';
import { starvedExchange } from './expect-http.js';
import { Starved, STARVED_LAG_MS, startLagMonitor, type GateCharge, type GatePoint, type Hold } from './gate.js';
import { starvedError, starvedFor } from './sched.js';
import { t } from '../i18n/index.js';
import type { LiveContext } from './context.js';
import type { PayRequest, Timeouts } from './http.js';
import type { ServerInstance } from './server.js';
import type { Exchange } from './types.js';

/**
 * A request sent and not yet awaited, with the time it was sent and its answer came
 * (performance.now(), ms) once it has. `written` settles once the request's socket has
 * written bytes (http.ts sendSimultaneously's onWritten: polled every ms, so within a turn
 * of the loop of the write), or its connection failed, or its answer came, or at the latest
 * after the connect limit: a grader whose event loop lags writes late, and a hold meant to
 * give the server time with the request counts from then. Never rejects.
 */
export interface Pending {
  answer: Promise<Exchange>;
  written: Promise<void>;
  sentAt: number;
  doneAt?: number;
}

/**
 * Sends `req` to `server` without awaiting it (within `timeouts`, default
 * LiveContext.timeouts()), as LiveContext.paySimultaneously sends one request (recorded and
 * judged for starvation as LiveContext.pay's); the answer (or its failure, as an Exchange)
 * comes in `answer`, and `written` tells when it went.
 */
export function sendPending(ctx: LiveContext, server: ServerInstance, req: PayRequest, timeouts?: Timeouts): Pending {
  let told!: () => void;
  const written = new Promise<void>((resolve) => (told = resolve));
  const answer = ctx.paySimultaneously([server], [req], timeouts, told).then(([exchange]) => exchange);
  const pending: Pending = { answer, written, sentAt: performance.now() };
  // An answer (or a failure) comes only after the request was written, or without a connection.
  void answer.then(() => {
    pending.doneAt = performance.now();
    told();
  });
  return pending;
}

/** A request in flight whose charge is held at the provider's gate (chargeUnderWay): `chargedAt` is when the charge reached the gate, performance.now() ms. */
export type ChargeUnderWay = Pending & { hold: Hold; chargedAt: number };

/**
 * Sends `req` to `server` and holds its charge at the provider's gate at `point` (gate.ts):
 * before the money moves (`start`) or once it has moved (`moved`), until the hold is
 * released. Only the first charge of the request's body (user and amount) is held; a later
 * one of that body (a retry's) goes on. The charge is awaited at most the run's request
 * limit (LiveContext.limits.requestMs): a bound, not what decides.
 * @param noCharge the caller's failure for a request answered with no charge held (its answer)
 * @param timeouts the request's time limits (default LiveContext.timeouts()): a caller that
 *   holds the charge a while gives the request that much longer to be answered
 * @returns the request, in flight and held, and the hold
 * @throws what `noCharge` returns when it was answered with no charge held; Starved when the
 *   bound ran out unanswered while the grader's own event loop or the server was starved,
 *   or the request itself ran out of time starved
 */
export async function chargeUnderWay(
  ctx: LiveContext,
  server: ServerInstance,
  req: PayRequest & { body: { user: string; amount: number } },
  point: GatePoint,
  noCharge: (answer: Exchange) => CheckFailed,
  timeouts?: Timeouts,
): Promise<ChargeUnderWay> {
  const gate = ctx.gate(server);
  const boundMs = ctx.limits.requestMs;
  // Only this request's own charge, the first of its body to get there: a retry's charge goes on.
  let owned: GateCharge | undefined;
  const hold = gate.hold((c) => {
    if (c.user !== req.body.user || c.amount !== req.body.amount) return false;
    owned ??= c;
    return owned === c;
  }, point);
  const lag = startLagMonitor();
  // How long the server waited for a CPU meanwhile: a charge that had not come by the bound
  // while the server was kept off a CPU says nothing about the server.
  const meter = ctx.starveMeter([server]);
  const pending = sendPending(ctx, server, req, timeouts);
  try {
    const held = await Promise.race([gate.until(() => hold.held.length > 0, boundMs), pending.answer.then(() => hold.held.length > 0)]);
    // The same object (not a copy): its doneAt is set when the answer comes.
    if (held) return Object.assign(pending, { hold, chargedAt: hold.held[0].startedAt });
    hold.release();
    const seen = meter.stop();
    if (pending.doneAt === undefined && lag.worstMs() >= STARVED_LAG_MS) throw new Starved(t('check.starved', { ms: Math.round(lag.worstMs()) }));
    if (pending.doneAt === undefined && starvedFor(seen, boundMs)) throw starvedError(seen);
  } finally {
    meter.stop();
    lag.stop();
  }
  const answer = await pending.answer;
  // Answered without a charge only once its time had run out, starved: that says nothing either.
  if (answer.starved) throw starvedExchange(answer);
  throw noCharge(answer);
}
