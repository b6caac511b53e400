/**
 * Matrix shards: a fixture matrix is split into `of` test files, each grading every
 * `of`-th row, so that `node --test --test-concurrency=2` grades two rows at once, as
 * `idem-lab grade --jobs 2` does for a cohort. Row i belongs to shard `i % of`.
 */

/** Which part of a matrix one test file grades: `index` in [0, of). */
export interface Shard {
  index: number;
  of: number;
}

/**
 * Whether the matrices grade a wrong fixture only on the steps it must fail
 * (IDEM_TEST_MATRIX=decisive, `npm run test:quick`): a quicker loop while working, about a
 * fifth of the matrices' time. A correct fixture (every cell a pass) is still graded on every
 * step. `npm test` (and CI) grade every fixture on every step: a wrong fixture must also pass
 * the steps it has nothing to do with, which only the whole row shows.
 */
export function decisiveOnly(): boolean {
  return process.env.IDEM_TEST_MATRIX === 'decisive';
}

/** The rows of `rows` that belong to `shard` (every `of`-th, starting at `index`). */
export function rowsOf<T>(rows: T[], shard: Shard): T[] {
  if (!Number.isInteger(shard.of) || shard.of < 1 || shard.index < 0 || shard.index >= shard.of) {
    throw new RangeError(`shard ${shard.index}/${shard.of} is not a shard`);
  }
  return rows.filter((_, i) => i % shard.of === shard.index);
}
