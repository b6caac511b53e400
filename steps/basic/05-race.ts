import { setTimeout as delay } from 'node:timers/promises';
import { expect } from '../../grader/failure.js';
import { commandKey, describeResponse, headerKey, parsePaste } from '../../grader/paste.js';
import { t } from '../../i18n/index.js';
import { CheckFailed } from '../../grader/failure.js';
import { RACE_SIZE, raceRound, where } from '../../grader/race.js';
import { checkTimeouts, slowDatabaseTimeouts } from '../../grader/http.js';
import { chargeMs } from '../../grader/limits.js';
import { expectStatus, paymentOf } from '../../grader/expect-http.js';
import type { LiveContext } from '../../grader/context.js';
import type { ServerInstance } from '../../grader/server.js';
import type { Exchange, LedgerRow } from '../../grader/types.js';
import type { TestData } from '../../grader/seed.js';
import type { Step } from '../../grader/track.js';

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

/** The provider's latency below which the fast rounds' charges are too short to time, in ms: the check of their overlap is left to the slow round then. */
export const TIMED_CHARGE_MS = 30;

/**
 * Payments with keys of their own, sent with others at once: each must succeed (201),
 * each with its own payment_id.
 * @throws CheckFailed naming the first that did not
 */
function expectOthers(extra: Exchange[]): void {
  const failed = extra.find((e) => e.status !== 201);
  if (failed) {
    throw new CheckFailed(
      t('step.05.othersFailed', { count: extra.length, status: String(failed.status ?? failed.error), ms: failed.ms }),
      t('step.05.othersFailed.why'),
      { exchanges: extra },
    );
  }
  const ids = new Set(extra.map((e) => paymentOf(e).payment_id));
  if (ids.size !== extra.length) {
    throw new CheckFailed(t('step.05.othersSame', { count: extra.length }), t('step.05.othersFailed.why'), { exchanges: extra });
  }
}

/**
 * Sends one race round together with OTHER_KEYS payments with keys of their own, all at
 * once, and checks that those all succeed, each with its own payment_id.
 * @returns `gap`: the shortest time between two of the charges' ends, the raced
 *   payment's and the others' (smallestGap), in ms; `extra`: the other payments' exchanges
 * @throws CheckFailed naming what went wrong
 */
async function roundWithOthers(
  ctx: LiveContext,
  server: ServerInstance,
  round: number | string,
): Promise<{ gap: number; extra: Exchange[] }> {
  const others = Array.from({ length: OTHER_KEYS }, () => ({ key: ctx.freshKey(), body: ctx.data.payment() }));
  const { body, extra } = await raceRound(ctx, [server], round, {}, others);
  const ends = endTimes(ctx, server, [body, ...others.map((o) => o.body)]);
  expectOthers(extra);
  return { gap: smallestGap(ends), extra };
}

/**
 * When the charges of `bodies` ended, by the provider's statement of the server's
 * database: ms since the epoch, in order.
 */
function endTimes(ctx: LiveContext, server: ServerInstance, bodies: Array<{ user: string; amount: number }>): number[] {
  return (ctx.charges(server) ?? [])
    .filter((c) => bodies.some((b) => b.user === c.user && b.amount === c.amount))
    .map((c) => Date.parse(c.at))
    .filter((ms) => Number.isFinite(ms))
    .sort((a, b) => a - b);
}

/**
 * The shortest time between two consecutive end times, in ms (Infinity for fewer than
 * two). Charges made one after another (a lock or a transaction held across charge())
 * end at least a whole charge time after each other, whatever the load: the next one
 * starts only once the last has ended. Charges that overlap end closer together.
 */
function smallestGap(ends: number[]): number {
  let gap = Infinity;
  for (let i = 1; i < ends.length; i++) gap = Math.min(gap, ends[i] - ends[i - 1]);
  return gap;
}

/**
 * OTHER_KEYS + 1 payments with keys of their own, all at once and nothing else: each must
 * succeed with its own payment_id.
 * `data`: the probes' own stream (a run needs them or not by chance; the rest of the step's data stays the seed's).
 * @returns the shortest gap between their charges' end times (see smallestGap), in ms
 * @throws CheckFailed when one does not succeed, or two share a payment_id
 */
async function overlapProbe(ctx: LiveContext, server: ServerInstance, data: TestData): Promise<number> {
  const payments = Array.from({ length: OTHER_KEYS + 1 }, () => ({ key: data.key(), body: data.payment() }));
  const exchanges = await ctx.paySimultaneously([server], payments);
  expectOthers(exchanges);
  return smallestGap(endTimes(ctx, server, payments.map((p) => p.body)));
}

/** How long after the slow round's duplicates its payments with keys of their own are sent, in ms: by then a retry that waits for the raced payment is waiting. */
export const OTHERS_AFTER_MS = 100;

/** How long after the slow round's payments of their own a request with the first one's key and another body is sent, in ms: half the charge, so that on a busy machine (a cohort graded two at a time) that payment has surely claimed its key, and surely not finished. */
export const CONFLICT_AFTER_MS = 600;

/**
 * How far apart, in charge times, the slow round's charges may end: the raced payment's
 * and those of the payments with keys of their own sent OTHERS_AFTER_MS later. Charged at
 * once, they end about OTHERS_AFTER_MS apart; a payment that had to wait for another's
 * charge (a lock or a transaction held across charge(), a limit of fewer than four at a
 * time, a retry that waits for its first request inside a lock that new payments need)
 * ends a whole charge time or more after it, every time: its own charge takes that long.
 */
export const SLOW_SPREAD_LIMIT = 0.9;

/**
 * How far apart, in charge times, the slow round's payments with keys of their own may be
 * answered among themselves by the grader's clock: sent together to a provider that
 * charges them at once, they are answered together; lined up behind one lock, the three
 * are answered two charge times apart.
 */
export const OTHERS_APART_LIMIT = 1.5;

/**
 * The slow round, on a server whose provider takes slowChargeMs(): RACE_SIZE duplicates
 * of one payment at once (the raced payment); OTHERS_AFTER_MS later, while the raced
 * payment is charged and its retries wait for it, OTHER_KEYS payments with keys of their
 * own at once; CONFLICT_AFTER_MS after those, while they are in flight, one request with
 * the first one's key and another amount. One of the others is the raced payment's
 * user's (a lock per user across charge() holds it back). Every duplicate gets the
 * stored 201 or a 409 however long the first takes; no payment waits for another's
 * charge: by the provider's statement, the raced charge and the others' end less than
 * SLOW_SPREAD_LIMIT charge times apart, and by the grader's own clock the others are
 * answered less than that after the round's last answer (the statement's times are the
 * server's word); both judged before the answers, since a server whose payments wait for
 * each other may also answer one of them wrongly, and the waiting is its bug. Then the
 * others all succeed, each with its own payment_id; all four charges are on the
 * statement with a time; the request with the other body is refused (422) or told to
 * wait (409), never paid or answered with the first payment.
 * @throws CheckFailed naming what went wrong
 */
async function slowRound(ctx: LiveContext, server: ServerInstance): Promise<void> {
  // This round runs beside the others of the step: a stream of its own keeps a seed's replay the same.
  const data = ctx.data.fork('slow');
  const slow = slowChargeMs();
  const timeouts = { connectMs: checkTimeouts().connectMs, answerMs: checkTimeouts().answerMs + slow * (OTHER_KEYS + 2) };
  const raced = { key: data.key(), body: data.payment() };
  const others = Array.from({ length: OTHER_KEYS }, () => ({ key: data.key(), body: data.payment() }));
  // One of them is the raced payment's user's own second payment: a lock per user held across charge() holds it back.
  others[1].body.user = raced.body.user;
  // When the round's answers and the others' came, by the grader's own clock (ms): the statement's times are the server's word.
  let roundAnswered = 0;
  let othersAnswered = 0;
  const round = raceRound(ctx, [server], 'slow', { name: t('step.05.slowRound', { ms: slow }), timeouts, payment: raced }).then((r) => {
    roundAnswered = performance.now();
    return r;
  });
  const sent = delay(OTHERS_AFTER_MS)
    .then(() => ctx.paySimultaneously([server], others, timeouts))
    .then((answers) => {
      othersAnswered = performance.now();
      return answers;
    });
  // The key of the first other payment, which only that payment raced for, with another amount.
  const conflictAmount = data.amount();
  const conflict = delay(OTHERS_AFTER_MS + CONFLICT_AFTER_MS).then(() =>
    ctx.pay(server, { key: others[0].key, body: { user: others[0].body.user, amount: conflictAmount } }),
  );
  const [, extra, refused] = await Promise.all([round, sent, conflict]);
  const limit = Math.round(SLOW_SPREAD_LIMIT * slow);
  const ends = endTimes(ctx, server, [raced.body, ...others.map((o) => o.body)]);
  const spread = ends.length > 1 ? ends[ends.length - 1] - ends[0] : 0;
  const said = { count: OTHER_KEYS, slow, after: OTHERS_AFTER_MS, limit };
  if (spread >= limit) {
    throw new CheckFailed(t('step.05.serialised', { ...said, ms: spread, times: (spread / slow).toFixed(1) }), t('step.05.serialised.why'), { exchanges: extra });
  }
  // The same by the grader's clock: the others answered long after the round's last answer.
  const waited = Math.round(othersAnswered - roundAnswered);
  if (waited >= limit) {
    throw new CheckFailed(t('step.05.serialisedAnswers', { ...said, ms: waited, times: (waited / slow).toFixed(1) }), t('step.05.serialised.why'), { exchanges: extra });
  }
  // And among themselves: sent together, three lined up behind one lock are answered two
  // charge times apart (OTHERS_APART_LIMIT leaves room for a starved machine).
  const apart = Math.round(Math.max(...extra.map((e) => e.ms)) - Math.min(...extra.map((e) => e.ms)));
  if (apart >= Math.round(OTHERS_APART_LIMIT * slow)) {
    throw new CheckFailed(t('step.05.othersApart', { ...said, limit: Math.round(OTHERS_APART_LIMIT * slow), ms: apart, times: (apart / slow).toFixed(1) }), t('step.05.serialised.why'), { exchanges: extra });
  }
  expectOthers(extra);
  // Every one of the four charges must be on the statement with a time: one without could not be timed.
  if (ends.length !== OTHER_KEYS + 1) {
    throw new CheckFailed(t('step.05.slowUntimed', { found: ends.length, count: OTHER_KEYS + 1 }), t('step.05.slowUntimed.why'), { exchanges: extra });
  }
  if (refused.status !== 422 && refused.status !== 409) {
    throw new CheckFailed(t('step.05.conflictInFlight', { ms: CONFLICT_AFTER_MS, status: String(refused.status ?? refused.error) }), t('step.05.conflictInFlight.why'), {
      exchanges: [refused],
    });
  }
}

/** How many more tries of OVERLAP_PROBE payments the plain rounds make before saying that charges never overlap. */
export const OVERLAP_TRIES = 3;

/**
 * The plain rounds 2 to RACE_ROUNDS on `server`, each with OTHER_KEYS payments of their
 * own beside the duplicates, at the run's own provider latency: a server that holds a
 * lock across charge() only when the provider is fast fails here. Charges made one after
 * another each end a whole charge time or more after the one before (smallestGap),
 * whatever the load; charges that overlap end closer together, but on a busy machine
 * (or behind a database's busy wait) they may now and then not. So when neither round
 * shows two charges ending less than 80 % of a charge time apart, up to OVERLAP_TRIES
 * more tries of payments with keys of their own, alone, must show it once; a server
 * whose charges never overlap fails every time. Not timed when the run's charge takes
 * less than TIMED_CHARGE_MS (the slow round still is). Judged by expectOverlap once every
 * round has passed: a race that charged twice is said first.
 * @returns the gaps and exchanges expectOverlap judges
 * @throws CheckFailed naming what went wrong in a round
 */
async function plainRounds(ctx: LiveContext, server: ServerInstance): Promise<Overlap> {
  const overlap: Overlap = { gaps: [], extra: [] };
  for (let round = 2; round <= RACE_ROUNDS; round++) {
    const r = await roundWithOthers(ctx, server, round);
    overlap.gaps.push(r.gap);
    overlap.extra.push(...r.extra);
  }
  return overlap;
}

/** What the plain rounds saw of their payments with keys of their own: the shortest gap of each round (ms) and their exchanges. */
interface Overlap {
  gaps: number[];
  extra: Exchange[];
}

/**
 * Judges the plain rounds' overlap (see plainRounds), trying again on `server` when
 * neither round showed one.
 * @throws CheckFailed when no try shows two charges ending less than 80 % of a charge time apart
 */
async function expectOverlap(ctx: LiveContext, server: ServerInstance, { gaps, extra }: Overlap): Promise<void> {
  const charge = chargeMs();
  if (charge < TIMED_CHARGE_MS) return;
  const overlapped = (gap: number) => gap < 0.8 * charge;
  const probes = ctx.data.fork('probe');
  for (let tries = 0; !gaps.some(overlapped) && tries < OVERLAP_TRIES; tries++) gaps.push(await overlapProbe(ctx, server, probes));
  if (gaps.some(overlapped)) return;
  const shortest = Math.min(...gaps);
  throw new CheckFailed(
    t('step.05.neverOverlapped', { count: OTHER_KEYS + 1, charge, tries: gaps.length, gap: Number.isFinite(shortest) ? shortest : 0 }),
    t('step.05.serialised.why'),
    { exchanges: extra },
  );
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
        const several = repeated.map(([k, n]) => t('step.05.file.several', { key: JSON.stringify(k), n })).join(t('list.separator'));
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
    // Three servers, each on a database of its own, so that each round is timed and judged
    // alone: A the rounds at the run's own provider latency, B a slow provider, C a slow
    // database round trip. The slow rounds start as soon as their servers are up.
    const settled = (run: Promise<unknown>): Promise<unknown> =>
      run.then(
        () => undefined,
        (err: unknown) => err,
      );
    // All three at once: the queue of starts orders them with every other step's by the
    // work that waits for each once it is up (the slow round's 1.2 s, the rounds' 0.8 s,
    // the slow database's three statements).
    const slow = ctx.startServer({ chargeMs: slowChargeMs(), ownDatabase: true, priority: slowChargeMs() });
    const slowDone = settled(slow.then((server) => slowRound(ctx, server)));
    // Its rounds take about 0.8 s.
    const main = ctx.startServer({ priority: 800 });
    // The look-up of a check-then-insert behind another write (an expiry DELETE, an audit
    // row) is not held by a lock; a database round trip widens its window.
    const latencyDone = settled(
      ctx
        .startServer({ dbMs: DB_LATENCY_MS, ownDatabase: true, priority: 3 * DB_LATENCY_MS })
        .then((latent) => raceRound(ctx, [latent], 'latency', {
          name: t('step.05.latencyRound', { ms: DB_LATENCY_MS }),
          data: ctx.data.fork('latency'),
          // A server right for one instance that lines the ten up behind a lock (a file or a
          // thread lock around look-up and claim) answers the last after about 7.5 s.
          timeouts: slowDatabaseTimeouts(),
        })),
    );
    const failures: unknown[] = [];
    let server: ServerInstance | undefined;
    let overlap: Overlap | undefined;
    try {
      server = await main;
      // One payment first, so a server that sets the database up on its first request has done so.
      const warmUp = await ctx.pay(server, { key: ctx.freshKey(), body: ctx.data.payment() });
      expectStatus(warmUp, 201, t('step.05.warmUp'), t('step.05.warmUp.why'));
      await raceRound(ctx, [server], 1, { lockDatabase: true });
      overlap = await plainRounds(ctx, server);
    } catch (err) {
      failures.push(err);
    }
    failures.push(await latencyDone, await slowDone);
    const failure = failures.find((f) => f !== undefined);
    if (failure !== undefined) throw failure;
    await expectOverlap(ctx, server!, overlap!);
    return t('step.05.pass', { rounds: RACE_ROUNDS + 2, size: RACE_SIZE, where: where([server!]) });
  },
  get hints() {
    return [t('step.05.hint.1'), t('step.05.hint.2'), t('step.05.hint.3')];
  },
};
