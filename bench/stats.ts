/**
 * How the bench times and summarizes its samples: the mean time of an
 * operation over a round of calls, the order in which a round takes the
 * paths it compares, and the medians and tail percentiles of the rounds
 * rather than their means, which one slow round on a shared machine would
 * move.
 */

/** The mean µs of `operation` over `count` calls made one after another (`i` from 0). */
export const microsPerCall = async (count: number, operation: (i: number) => Promise<unknown>) => {
  const start = performance.now()
  for (let i = 0; i < count; i++) await operation(i)
  return ((performance.now() - start) * 1000) / count
}

/** `items` in the order round `round` takes them: as given in even rounds, reversed in odd ones, so that none always runs first. */
export const inRoundOrder = <A>(round: number, items: ReadonlyArray<A>): ReadonlyArray<A> => round % 2 === 0 ? items : items.toReversed()

/** The value at fraction `p` of `values` in order (0.5 the median). */
export const percentile = (values: ReadonlyArray<number>, p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!

/** The median of `values` (the upper one of an even count). */
export const median = (values: ReadonlyArray<number>) => percentile(values, 0.5)
