/**
 * Threads on Redis: a hash per thread (its transcript as JSON and its active
 * run), saved by one Lua script, so that the save at a run's end is an
 * atomic compare-and-set on the active run. A thread expires on Redis's own
 * clock, `retention` after its last save.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Layer, Option } from "effect"
import { Redis, script } from "effect/persistence/Redis"
import { type Thread, ThreadStore, ThreadStoreError, type ThreadStoreOptions } from "../ThreadStore.ts"
import { evalSha } from "../internal/redisScripts.ts"

/**
 * Options of {@link layerRedisThreadStore}.
 *
 * @since 0.1.0
 * @category models
 */
export interface RedisThreadStoreOptions extends ThreadStoreOptions {
  /** The prefix of every key this store writes. Default `ai-effect:thread:`. */
  readonly prefix?: string | undefined
}

// ARGV: the thread's JSON, its active run ('' for none), the retention, and the run the save is conditional on ('' for none).
const saveScript = script(
  (key: string, thread: string, active: string, retention: number, whileRun: string) => [key, thread, active, retention, whileRun],
  {
    numberOfKeys: 1,
    lua: `
if ARGV[4] ~= '' and redis.call('HGET', KEYS[1], 'active') ~= ARGV[4] then return 0 end
redis.call('HSET', KEYS[1], 'thread', ARGV[1], 'active', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`
  }
).withReturnType<number>()

/**
 * Threads on the `Redis` service in context.
 *
 * @example
 * ```ts
 * import { NodeRedis } from "@effect/platform-node"
 * import { layerRedisThreadStore } from "@tanstack/ai-effect/redis"
 * import { Layer } from "effect"
 *
 * export const ThreadsLive = layerRedisThreadStore().pipe(Layer.provide(NodeRedis.layer({ url: "redis://127.0.0.1:6379" })))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRedisThreadStore = (options?: RedisThreadStoreOptions): Layer.Layer<ThreadStore, never, Redis> =>
  Layer.effect(ThreadStore, makeRedisThreadStore(options))

/**
 * Makes the Redis thread store on the `Redis` service in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRedisThreadStore = Effect.fnUntraced(function*(options?: RedisThreadStoreOptions) {
  const redis = yield* Redis
  const prefix = options?.prefix ?? "ai-effect:thread:"
  const retention = Duration.toMillis(Duration.fromInputUnsafe(options?.retention ?? "30 days"))
  const save = evalSha(redis, saveScript)
  const failed = (operation: string, threadId: string) => (cause: unknown) => new ThreadStoreError({ operation, threadId, cause })
  return ThreadStore.of({
    load: (threadId) =>
      Effect.flatMap(redis.send<string | null>("HGET", `${prefix}${threadId}`, "thread"), (text) =>
        text === null || text === undefined
          ? Effect.succeed(Option.none<Thread>())
          // The hash holds what save wrote: a thread, as JSON.
          : Effect.map(Effect.try(() => JSON.parse(text) as Thread), Option.some)).pipe(Effect.mapError(failed("load", threadId))),
    save: (threadId, thread, saveOptions) =>
      save(`${prefix}${threadId}`, JSON.stringify(thread), thread.activeRun?.runId ?? "", retention, saveOptions?.whileRun ?? "").pipe(
        Effect.map((saved) => Number(saved) === 1),
        Effect.mapError(failed("save", threadId))
      )
  })
})
