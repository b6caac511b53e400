/**
 * The chaos run's client: sends each payment through the lossy proxy and retries it with
 * capped exponential backoff and full jitter (backoff.ts), under the same Idempotency-Key
 * every time (or none), as a careful client does. Each attempt's fate and each wait are
 * drawn from (seed, payment, attempt) alone (faults.ts, backoff.ts), so the same seed
 * sends the same requests and waits the same times. Everything is bounded: a per-attempt
 * timeout, a number of attempts, and a deadline for the whole run after which every
 * connection still open is reset.
 */
import { runPool } from '../pool.js';
import { setTimeout as delay } from 'node:timers/promises';
import { openConnection, sendOn, type Target } from '../http.js';
import { retryWaitMs, shouldRetry, type BackoffPolicy } from './backoff.js';
import { fateOf, type Fate, type NetworkFaults } from './faults.js';
import { startLossyProxy, type ProxiedConnection } from './proxy.js';

/** One payment the client means to make once. */
export interface IntendedPayment {
  /** The Idempotency-Key sent with every attempt; undefined: no header at all. */
  key?: string;
  /** The JSON body, the same for every attempt. */
  body: { user: string; amount: number };
}

/** One attempt of a payment. */
export interface Attempt {
  /** 0 for the first. */
  attempt: number;
  /** What the network did to it. */
  fate: Fate;
  /** How long the client waited before it (the jittered backoff), ms; 0 for the first attempt. */
  waitedMs: number;
  /** The HTTP status that came back; undefined when none did. */
  status?: number;
  /** Whether the response carried Idempotency-Replayed: true. */
  replayed?: boolean;
  /** Why no answer came (a reset, a timeout), when none did. */
  error?: string;
  /** What the proxy saw: whether the request reached the server and the server began to answer; undefined when it never got the request's bytes. */
  proxied?: Pick<ProxiedConnection, 'reachedServer' | 'serverAnswered'>;
}

/** How one payment ended, from the client's side. */
export type PaymentOutcome =
  /** A 2xx came back. */
  | 'paid'
  /** A final non-2xx answer (a 4xx): not retried. */
  | 'refused'
  /** Every attempt failed in a way worth retrying, and none was left. */
  | 'attempts'
  /** The run's deadline came first. */
  | 'deadline';

/** One payment's story. */
export interface PaymentRun {
  /** Its index in the list of intended payments. */
  index: number;
  payment: IntendedPayment;
  attempts: Attempt[];
  outcome: PaymentOutcome;
}

/** Everything a chaos run's client needs. */
export interface ClientOptions {
  /** The server, as started (its port, or its relay's socket). */
  target: Target;
  /** The run's seed: it decides every fate and every wait. */
  seed: number;
  payments: IntendedPayment[];
  faults: NetworkFaults;
  backoff: BackoffPolicy;
  /** How long one attempt may take, from the connection to the whole response, ms. */
  attemptTimeoutMs: number;
  /** How long the whole run may take, ms: then no attempt starts, and those under way are reset. */
  deadlineMs: number;
  /** How many payments are under way at once (each one's attempts run one after another). */
  concurrency: number;
}

/**
 * Runs every payment through a lossy proxy in front of `target` and returns each one's
 * story, in the order given. The proxy is closed before this returns. Never throws for
 * what the server or the network does.
 */
export async function runPayments(options: ClientOptions): Promise<PaymentRun[]> {
  const fates = new Map<number, Fate>();
  const proxy = await startLossyProxy({ upstream: options.target, fateOf: (port) => fates.get(port) });
  const started = performance.now();
  const left = () => options.deadlineMs - (performance.now() - started);
  const expired = new AbortController();
  const deadline = setTimeout(() => {
    expired.abort();
    void proxy.close();
  }, options.deadlineMs);
  const runs: PaymentRun[] = options.payments.map((payment, index) => ({ index, payment, attempts: [], outcome: 'deadline' }));
  const through = { label: options.target.label, port: proxy.port };

  async function pay(run: PaymentRun): Promise<void> {
    for (let attempt = 0; attempt < options.backoff.maxAttempts; attempt++) {
      const waitedMs = attempt === 0 ? 0 : retryWaitMs(options.seed, run.index, attempt - 1, options.backoff);
      // A wait that would end after the deadline is not begun: the client gives up now.
      if (waitedMs >= left()) return;
      if (waitedMs > 0) await delay(waitedMs, undefined, { signal: expired.signal }).catch(() => undefined);
      if (expired.signal.aborted) return;
      const fate = fateOf(options.seed, run.index, attempt, options.faults);
      const record: Attempt = { attempt, fate, waitedMs };
      run.attempts.push(record);
      const timeoutMs = Math.max(1, Math.min(options.attemptTimeoutMs, left()));
      let status: number | undefined;
      try {
        const socket = await openConnection(through, timeoutMs);
        const port = socket.localPort ?? 0;
        fates.set(port, fate);
        const exchange = await sendOn(socket, through, 'POST', '/pay', { key: run.payment.key, body: run.payment.body }, { connectMs: timeoutMs, answerMs: timeoutMs });
        fates.delete(port);
        const seen = proxy.connections.find((c) => c.clientPort === port && c.fate === fate);
        if (seen) record.proxied = { reachedServer: seen.reachedServer, serverAnswered: seen.serverAnswered };
        status = exchange.status;
        if (status !== undefined) record.status = status;
        if (exchange.replayed?.trim().toLowerCase() === 'true') record.replayed = true;
        if (exchange.error !== undefined) record.error = exchange.error;
      } catch (err) {
        record.error = (err as Error).message;
      }
      if (expired.signal.aborted && status === undefined) return;
      if (!shouldRetry(status)) {
        run.outcome = status !== undefined && status >= 200 && status < 300 ? 'paid' : 'refused';
        return;
      }
    }
    run.outcome = 'attempts';
  }

  try {
    await runPool(runs.length, options.concurrency, (i) => pay(runs[i]), { stop: () => expired.signal.aborted });
  } finally {
    clearTimeout(deadline);
    await proxy.close();
  }
  return runs;
}
