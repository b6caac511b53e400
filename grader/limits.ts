/**
 * Time limits of a grading run, in ms. Defaults suit a 50 ms charge on a loaded machine;
 * an instructor (or a test) may tighten or loosen them through the environment:
 *   IDEM_LAB_START_TIMEOUT_MS    how long a server may take to answer GET /health (default 10000)
 *   IDEM_LAB_REQUEST_TIMEOUT_MS  how long one request may take to be answered (default 8000)
 */
import { t } from '../i18n/index.js';
export interface Limits {
  startMs: number;
  requestMs: number;
}

function fromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(t('cli.config.limit', { name, value: raw }));
  return value;
}

/**
 * The limits in force, read from the environment at each call.
 * @throws Error when a variable is set to something other than a positive whole number
 */
export function limits(): Limits {
  chargeMs();
  return {
    startMs: fromEnv('IDEM_LAB_START_TIMEOUT_MS', 10_000),
    requestMs: fromEnv('IDEM_LAB_REQUEST_TIMEOUT_MS', 8_000),
  };
}

/**
 * The simulated payment-provider latency the servers get (IDEM_CHARGE_MS), in ms: the
 * caller's IDEM_CHARGE_MS when set, else the server contract's default of 50. Honoured for
 * every server of the run, but where a round asks for a slow provider (more) or a step times
 * a record's age (steps 11 and 15: 0).
 * @throws Error when IDEM_CHARGE_MS is set to something other than a whole number from 0 to 60000
 */
export function chargeMs(): number {
  const raw = process.env.IDEM_CHARGE_MS;
  if (raw === undefined || raw === '') return 50;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || value > 60_000) throw new Error(`IDEM_CHARGE_MS must be a whole number of milliseconds from 0 to 60000, not "${raw}"`);
  return value;
}
