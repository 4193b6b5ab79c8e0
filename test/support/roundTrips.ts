/**
 * Round trips to a store, counted at the driver: every SQL statement the
 * store executes (through `effect/sql`'s statement transformer, and the
 * SQLite reads that skip it), and every Redis command or script it sends.
 */
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence/Redis"
import * as Statement from "effect/sql/Statement"
import { DirectStatementObserver } from "../../src/internal/sqliteDirect.ts"

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

/** Wraps the `Redis` service so that every command sent through it (a store's script is an `EVALSHA`) is counted. */
export const countRedisCommands = (): RoundTrips & { readonly layer: Layer.Layer<Redis, never, Redis> } => {
  let count = 0
  return { count: () => count, layer: observeRedis(() => void count++) }
}

/** A request a store sent, as the driver saw it: a statement's text and parameters, or a Redis command (`EVALSHA` for a script) and its arguments. */
export interface SentRequest {
  readonly text: string
  readonly parameters: ReadonlyArray<unknown>
}

/** A layer that records every SQL statement run in its context. */
export const recordStatements = (): { readonly sent: ReadonlyArray<SentRequest>; readonly layer: Layer.Layer<never> } => {
  const sent: Array<SentRequest> = []
  return {
    sent,
    layer: Layer.succeed(Statement.CurrentTransformer, (statement) => {
      const [text, parameters] = statement.compile()
      sent.push({ text, parameters })
      return Effect.succeed(statement)
    })
  }
}

/** Wraps the `Redis` service so that every command sent through it (a store's script is an `EVALSHA`) is recorded. */
export const recordRedisCommands = (): { readonly sent: ReadonlyArray<SentRequest>; readonly layer: Layer.Layer<Redis, never, Redis> } => {
  const sent: Array<SentRequest> = []
  return { sent, layer: observeRedis((request) => void sent.push(request)) }
}

/** The `Redis` service in context, with `observe` called before each command is sent (the stores send a script as `EVALSHA`). */
const observeRedis = (observe: (request: SentRequest) => void): Layer.Layer<Redis, never, Redis> =>
  Layer.effect(
    Redis,
    Effect.map(Effect.service(Redis), (redis) =>
      Redis.of({
        ...redis,
        send: <A>(command: string, ...args: ReadonlyArray<string>) =>
          Effect.andThen(Effect.sync(() => observe({ text: command, parameters: args })), redis.send<A>(command, ...args))
      }))
  )
