/**
 * Seeded test data: the idempotency keys, users and amounts a live check sends. They vary
 * from run to run, so a server cannot recognise the grader by a fixed key or user, and
 * they are reproducible: the same seed and step send the same data again (CodeCrafters'
 * testers print their seed for the same reason).
 */
import crypto from 'node:crypto';

/** A run's seed: a whole number from 0 to 2^32 - 1. */
export type Seed = number;

/** A new random seed. */
export function randomSeed(): Seed {
  return crypto.randomBytes(4).readUInt32BE(0);
}

/**
 * Reads a seed given on the command line or in IDEM_LAB_SEED.
 * @throws Error when the text is not a whole number from 0 to 4294967295
 */
export function parseSeed(text: string): Seed {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value > 0xffffffff) {
    throw new Error(`a seed is a whole number from 0 to 4294967295, not "${text}"`);
  }
  return value;
}

/**
 * Time zones far east of UTC (5 h 30 min to 14 h ahead), one of which a run's servers are
 * started under (TZ): a server that mixes local and UTC times (a naive `datetime.now()`
 * against a stored UTC time) is off by hours under every one of them, as it would be on a
 * learner's machine or a CI runner outside UTC, and not only when the grader's own zone
 * happens to differ. East of UTC, such a server finds its fresh records hours old (or
 * hours in the future: never old), so its verdict does not depend on which zone is drawn.
 */
export const SERVER_TIME_ZONES: readonly string[] = ['Asia/Kolkata', 'Asia/Kathmandu', 'Asia/Tokyo', 'Australia/Sydney', 'Pacific/Auckland', 'Pacific/Chatham', 'Pacific/Kiritimati'];

/** The time zone a run's servers are started under (TZ), drawn from SERVER_TIME_ZONES by the seed. */
export function serverTimeZone(seed: Seed): string {
  const b = crypto.createHash('sha256').update(`${seed}\0tz`).digest();
  return SERVER_TIME_ZONES[b[0] % SERVER_TIME_ZONES.length];
}

/** Given names for users, so users look like a real shop's customers. */
const NAMES = ['mina', 'jun', 'li', 'wei', 'ana', 'omar', 'sora', 'yuna', 'lena', 'tomas', 'priya', 'kofi', 'haru', 'noa', 'ivan', 'zoe'];

/**
 * One step's stream of data from a seed: deterministic for (seed, scope), every value
 * distinct from the others the stream gave.
 */
export class TestData {
  private counter = 0;
  /** Every user and amount given so far: one drawn again is drawn anew (amounts repeat by chance about once in a hundred checks otherwise). */
  private readonly given = new Set<string>();

  /** @param seed the run's seed; @param scope what separates streams of one run, e.g. the step id */
  constructor(
    readonly seed: Seed,
    private readonly scope: string,
  ) {}

  /**
   * A stream of its own for one part of the step that runs beside others (e.g. `slow`),
   * deterministic for (seed, scope, part) whatever order the parts draw in; its values
   * are distinct among themselves, not from this stream's (give each part its own database).
   */
  fork(part: string): TestData {
    return new TestData(this.seed, `${this.scope}/${part}`);
  }

  /** 32 bytes, the next of the stream. */
  private next(): Buffer {
    return crypto.createHash('sha256').update(`${this.seed}\0${this.scope}\0${this.counter++}`).digest();
  }

  /** An idempotency key as a client would make one: a UUID (version 4 form), e.g. `3f0c9a2e-…`. */
  key(): string {
    const b = this.next();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const hex = b.subarray(0, 16).toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
  }

  /** A user id such as `mina_48213`, distinct from every other this stream gave. */
  user(): string {
    return this.fresh('user', () => {
      const b = this.next();
      return `${NAMES[b[0] % NAMES.length]}_${(b.readUInt32BE(1) % 90000) + 10000}`;
    });
  }

  /** An amount in minor units, from 100 to 99,999, distinct from every other this stream gave. */
  amount(): number {
    return this.fresh('amount', () => (this.next().readUInt32BE(0) % 99900) + 100);
  }

  /** The first value `draw` gives that this stream has not given as a `kind` before (after 1,000 tries, whatever it gives). */
  private fresh<T extends string | number>(kind: string, draw: () => T): T {
    let value = draw();
    for (let tries = 1; this.given.has(`${kind}:${value}`) && tries < 1000; tries++) value = draw();
    this.given.add(`${kind}:${value}`);
    return value;
  }

  /** A payment body no other request of the stream used: a fresh user and amount. */
  payment(): { user: string; amount: number } {
    return { user: this.user(), amount: this.amount() };
  }

  /** A word of `length` lowercase letters and digits, for building keys of a given shape. */
  word(length: number): string {
    let out = '';
    while (out.length < length) out += this.next().toString('base64url').replace(/[^a-z0-9]/g, '');
    return out.slice(0, length);
  }
}
