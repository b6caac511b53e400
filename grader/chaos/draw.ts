/**
 * The chaos run's randomness as pure functions: every draw is a number in [0, 1) made
 * from the run's seed and the draw's coordinates (what it is for, which payment, which
 * attempt), never from a generator's state or the clock. So the same seed loses, delays
 * and jitters the same attempts whatever order concurrent payments run in, and a run can
 * be repeated exactly from the seed it prints.
 */
import crypto from 'node:crypto';

/** 2^48: a draw keeps 48 bits of the hash, exactly representable in a double. */
const SCALE = 2 ** 48;

/**
 * A uniform number in [0, 1) for (seed, ...coordinates): the first 48 bits of
 * SHA-256(`seed\0c1\0c2...`), divided by 2^48. The same arguments give the same number;
 * any other coordinate gives an independent one.
 * @param seed the run's seed, a whole number from 0 to 2^32 - 1
 * @param coordinates what the draw is for, e.g. `'fate', 3, 0` (payment 3, first attempt)
 */
export function draw(seed: number, ...coordinates: Array<string | number>): number {
  const hash = crypto.createHash('sha256').update([seed, ...coordinates].join('\0')).digest();
  return hash.readUIntBE(0, 6) / SCALE;
}
