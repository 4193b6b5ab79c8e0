/**
 * Order statistics of the bench's samples: each case reports medians and
 * tail percentiles of its rounds rather than means, which one slow round
 * on a shared machine would move.
 */

/** The value at fraction `p` of `values` in order (0.5 the median). */
export const percentile = (values: ReadonlyArray<number>, p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!

/** The median of `values` (the upper one of an even count). */
export const median = (values: ReadonlyArray<number>) => percentile(values, 0.5)
