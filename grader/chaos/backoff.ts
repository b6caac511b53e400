/**
 * Retrying with capped exponential backoff and full jitter, as in Marc Brooker's "Exponential
 * Backoff And Jitter" (AWS Architecture Blog, 2015): the wait before the n-th retry
 * (n counted from 0) is a uniform random time between 0 and min(cap, base * 2^n). The
 * randomness spreads the retries of clients that failed together, so they do not come back
 * together; the cap bounds a single wait.
 */
import { draw } from './draw.js';

/** How a client retries, times in ms. */
export interface BackoffPolicy {
  /** The ceiling of the first retry's wait, ms (AWS's `base`). */
  baseMs: number;
  /** No wait is longer than this, ms (AWS's `cap`). */
  capMs: number;
  /** Attempts per request, the first one included (so maxAttempts - 1 retries at most). */
  maxAttempts: number;
}

/** The chaos run's default: waits up to 100, 200, 400, 800, 1000 ms before retries 1 to 5. */
export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 100, capMs: 1000, maxAttempts: 6 };

/**
 * The longest wait before retry `retry` (0 for the first retry), in ms: min(cap, base * 2^retry).
 * @throws RangeError when retry is not a whole number from 0
 */
export function backoffCeilingMs(retry: number, policy: BackoffPolicy): number {
  if (!Number.isInteger(retry) || retry < 0) throw new RangeError(`retry must be a whole number from 0, not ${retry}`);
  return Math.min(policy.capMs, policy.baseMs * 2 ** retry);
}

/**
 * Full jitter: the wait before retry `retry`, in whole ms, for a uniform draw `u` in [0, 1):
 * floor(u * min(cap, base * 2^retry)), so from 0 up to (not including) the ceiling.
 * @throws RangeError when u is outside [0, 1) or retry is not a whole number from 0
 */
export function fullJitterMs(retry: number, u: number, policy: BackoffPolicy): number {
  if (!(u >= 0 && u < 1)) throw new RangeError(`a draw is in [0, 1), not ${u}`);
  return Math.floor(u * backoffCeilingMs(retry, policy));
}

/**
 * The wait before payment `payment`'s retry `retry` in a run of seed `seed`, in ms: full
 * jitter on a draw that depends on those three only (see draw.ts).
 */
export function retryWaitMs(seed: number, payment: number, retry: number, policy: BackoffPolicy): number {
  return fullJitterMs(retry, draw(seed, 'jitter', payment, retry), policy);
}

/**
 * Whether a client retries after an attempt that ended with `status` (undefined: no
 * response at all, i.e. a timeout, a refused or reset connection). No response, 408, 409
 * (the first request is still in flight), 425, 429 and 5xx but 501 are worth another
 * try; any other answer is final: a 2xx succeeded, and a 4xx says the request itself is
 * wrong and would fail the same way again (the lab's step 07; RFC 9110 section 15.5).
 */
export function shouldRetry(status: number | undefined): boolean {
  if (status === undefined) return true;
  if ([408, 409, 425, 429].includes(status)) return true;
  return status >= 500 && status <= 599 && status !== 501;
}
