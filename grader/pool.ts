/**
 * The engine's one worker pool: a run's steps (engine.ts), a cohort's workspaces
 * (cohort.ts), chaos's payments (chaos/client.ts) and the soak's runs are each handed out
 * to at most N workers at once, each item once, in a given order.
 */

/** How a pool hands out its items. */
export interface PoolOptions {
  /** The order in which the indexes are handed out (a permutation of 0..count-1); default ascending. */
  order?: readonly number[];
  /** Asked before each item is taken: true stops the pool taking more (those taken run to their end). */
  stop?: () => boolean;
}

/**
 * Runs `task(i)` for every index i from 0 to count-1, at most `concurrency` at once (at
 * least 1, at most count), each index once, taken in `options.order`. A worker takes the
 * next index as soon as its task settles.
 * @returns once every task taken has settled
 * @throws the first error a task throws (its worker takes no more; the other workers go on
 *   to the end, as with Promise.all over the workers)
 */
export async function runPool(count: number, concurrency: number, task: (index: number) => Promise<void>, options: PoolOptions = {}): Promise<void> {
  const order = options.order ?? Array.from({ length: count }, (_, i) => i);
  let next = 0;
  const worker = async () => {
    while (next < order.length && !options.stop?.()) await task(order[next++]);
  };
  const workers = Math.max(1, Math.min(Math.floor(concurrency) || 1, order.length));
  await Promise.all(Array.from({ length: order.length === 0 ? 0 : workers }, worker));
}
