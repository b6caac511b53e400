/**
 * What the lossy network does to each attempt of a chaos run: a pure function of the
 * run's seed, the payment and the attempt (see draw.ts), decided before the attempt is
 * sent, so a run's losses and delays depend on its seed alone.
 */
import { draw } from './draw.js';

/**
 * The fate of one attempt on the lossy proxy (proxy.ts):
 * - `none`: the request and its response pass;
 * - `request`: the request is lost before it reaches the server (the connection is reset);
 * - `response`: the request reaches the server, which does the work and answers, and the
 *   response is lost on its way back (the connection is reset): the case that makes a
 *   client retry a payment that was made.
 * `delayMs` holds the request back that long before it is passed on (0: not delayed).
 */
export interface Fate {
  loss: 'none' | 'request' | 'response';
  delayMs: number;
}

/** How lossy the network is. */
export interface NetworkFaults {
  /** The share of attempts lost, from 0 to below 1: half of them requests, half responses. */
  loss: number;
  /** The share of attempts that are not lost but delayed, from 0 to 1. */
  delayRate: number;
  /** The longest delay, ms: a delay is uniform in [0, maxDelayMs). Keep it well under the client's per-attempt timeout. */
  maxDelayMs: number;
}

/** The chaos run's default: 30 % of attempts lost, a quarter of the others delayed by up to 200 ms. */
export const DEFAULT_FAULTS: NetworkFaults = { loss: 0.3, delayRate: 0.25, maxDelayMs: 200 };

/**
 * The fate of attempt `attempt` (0 for the first) of payment `payment` in a run of seed
 * `seed`: lost with probability `loss` (a lost request below loss / 2, a lost response
 * from there to loss), else delayed with probability `delayRate`.
 */
export function fateOf(seed: number, payment: number, attempt: number, faults: NetworkFaults): Fate {
  const u = draw(seed, 'loss', payment, attempt);
  if (u < faults.loss / 2) return { loss: 'request', delayMs: 0 };
  const delayed = draw(seed, 'delay', payment, attempt) < faults.delayRate;
  const delayMs = delayed ? Math.floor(draw(seed, 'delay-ms', payment, attempt) * faults.maxDelayMs) : 0;
  return { loss: u < faults.loss ? 'response' : 'none', delayMs };
}
