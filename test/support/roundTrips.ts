/**
 * Round trips to a store, counted at the driver: every SQL statement the
 * store executes (through `effect/sql`'s statement transformer, and the
 * SQLite reads that skip it), and every Redis command or script it sends.
 */
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence/Redis"
import * as Statement from "effect/sql/Statement"
import { DirectStatementObserver } from "../../src/internal/sqliteReads.ts"

export interface RoundTrips {
  /** How many requests the store has sent so far. */
  readonly count: () => number
}

/** The requests of `runs` runs, one at a time so that only their own count, per run. */
export const requestsPerRun = async (roundTrips: RoundTrips, run: () => Promise<unknown>, runs = 20): Promise<number> => {
  const before = roundTrips.count()
  for (let i = 0; i < runs; i++) await run()
  return (roundTrips.count() - before) / runs
}

/** A layer that counts every SQL statement run in its context. */
export const countStatements = (): RoundTrips & {
  readonly layer: Layer.Layer<never>
  /** Counts a statement run outside `effect/sql` (node:sqlite called directly). */
  readonly countRaw: () => void
} => {
  let count = 0
  return {
    count: () => count,
    countRaw: () => void count++,
    layer: Layer.mergeAll(
      Layer.succeed(Statement.CurrentTransformer, (statement) => {
        count++
        return Effect.succeed(statement)
      }),
      Layer.succeed(DirectStatementObserver, () => void count++)
    )
  }
}

/** Wraps the `Redis` service so that every command and script sent through it is counted. */
export const countRedisCommands = (): RoundTrips & { readonly layer: Layer.Layer<Redis, never, Redis> } => {
  let count = 0
  const counted = <A, E>(effect: Effect.Effect<A, E>) => Effect.andThen(Effect.sync(() => count++), effect)
  return {
    count: () => count,
    layer: Layer.effect(
      Redis,
      Effect.map(Effect.service(Redis), (redis) =>
        Redis.of({
          ...redis,
          send: (command, ...args) => counted(redis.send(command, ...args)),
          eval: (script) => {
            const run = redis.eval(script)
            return (...params) => counted(run(...params))
          }
        }))
    )
  }
}
