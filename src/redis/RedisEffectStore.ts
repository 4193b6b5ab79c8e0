/**
 * The effect store on Redis, for many replicas
 * that share one Redis. It needs `effect/persistence`'s `Redis` service, for
 * example `NodeRedis.layer` from `@effect/platform-node`.
 *
 * Each effect is one hash under the prefix. Claim, fenced put, release and
 * renew are Lua scripts, so each is atomic in Redis; a record's retention is
 * the key's own expiry, so Redis removes expired records itself.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Layer, Option, Schema } from "effect"
import { Redis, script } from "effect/persistence/Redis"
import { Claim, ClaimLost, type EffectId, EffectStore, EffectStoreError, type Recorded, type StoreOptions } from "../EffectStore.ts"
import { retentionOf } from "../internal/store.ts"
import { evalSha } from "../internal/redisScripts.ts"

/**
 * Options of {@link layerRedis}.
 *
 * @since 0.1.0
 * @category models
 */
export interface RedisStoreOptions extends StoreOptions {
  /** The prefix of every key this store writes. Default `ai-effect:`. */
  readonly prefix?: string | undefined
  /**
   * Whether the layer checks at start that Redis persists what it is told
   * (`CONFIG GET appendonly` and `save`). `"required"` (the default) fails
   * with `RedisPersistenceError` when it persists nothing, since a restart
   * would then forget every record and apply those effects again; where
   * `CONFIG` is not allowed (managed Redis) it logs a warning and goes on.
   * `"unchecked"` skips the check, for a Redis whose persistence you vouch
   * for another way.
   */
  readonly persistence?: "required" | "unchecked" | undefined
}

/**
 * The Redis behind `layerRedis` persists nothing: neither an append-only
 * file nor snapshots. A restart would forget every record and claim, and
 * effects already applied would be applied again.
 *
 * @example
 * ```ts
 * import { RedisPersistenceError } from "@tanstack/ai-effect/redis"
 *
 * const error = new RedisPersistenceError({ appendonly: "no", save: "" })
 * error.message // starts with "Redis persists nothing"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class RedisPersistenceError extends Schema.TaggedError<RedisPersistenceError>()("RedisPersistenceError", {
  appendonly: Schema.String,
  save: Schema.String
}) {
  override get message(): string {
    return `Redis persists nothing (appendonly ${this.appendonly}, save "${this.save}"): a restart would forget every ` +
      `record, and effects would be applied again. Turn on the append-only file (appendonly yes, appendfsync always), ` +
      `or pass persistence: "unchecked" to layerRedis if Redis persists another way`
  }
}

// The hash of one effect: fence, owner and lease while claimed; record once
// recorded; expires, the epoch ms after which the entry is forgotten. Every
// time is Redis's own (TIME inside the script), so that a caller whose clock
// is skewed can neither take a live claim nor keep an expired one.
const serverNow = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)`

const claimScript = script(
  (key: string, owner: string, ttl: number, retention: number) => [key, owner, ttl, retention],
  {
    numberOfKeys: 1,
    lua: `${serverNow}
local fence, holder, lease, record, expires = unpack(redis.call('HMGET', KEYS[1], 'fence', 'owner', 'lease', 'record', 'expires'))
local leaseExpiresAt, retention = now + tonumber(ARGV[2]), tonumber(ARGV[3])
if fence and tonumber(expires) > now then
  if record then return {'recorded', record} end
  if holder and tonumber(lease) > now then return {'busy', holder, lease} end
end
local takenOver = (fence and not record and holder) and 1 or 0
local next = (tonumber(fence) or 0) + 1
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fence', next, 'owner', ARGV[1], 'lease', leaseExpiresAt, 'expires', leaseExpiresAt + retention)
redis.call('PEXPIRE', KEYS[1], leaseExpiresAt - now + retention)
return {'claimed', tostring(next), tostring(takenOver)}`
  }
).withReturnType<ReadonlyArray<string>>()

/** The Lua test that the caller still holds the claim with the fence in ARGV[1]. */
const held = `${serverNow}
local fence, holder, record = unpack(redis.call('HMGET', KEYS[1], 'fence', 'owner', 'record'))
if tonumber(fence) ~= tonumber(ARGV[1]) or not holder or record then return 0 end`

const putScript = script(
  (key: string, fence: number, record: string, retention: number) => [key, fence, record, retention],
  {
    numberOfKeys: 1,
    lua: `${held}
redis.call('HSET', KEYS[1], 'record', ARGV[2], 'expires', now + tonumber(ARGV[3]))
redis.call('HDEL', KEYS[1], 'owner', 'lease')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`
  }
).withReturnType<number>()

const releaseScript = script(
  (key: string, fence: number, retention: number) => [key, fence, retention],
  {
    numberOfKeys: 1,
    lua: `${held}
redis.call('HDEL', KEYS[1], 'owner', 'lease')
redis.call('HSET', KEYS[1], 'expires', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`
  }
).withReturnType<number>()

const renewScript = script(
  (key: string, fence: number, ttl: number, retention: number) => [key, fence, ttl, retention],
  {
    numberOfKeys: 1,
    lua: `${held}
local leaseExpiresAt = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease', leaseExpiresAt, 'expires', leaseExpiresAt + tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return 1`
  }
).withReturnType<number>()

/**
 * The effect store on the `Redis` service in context.
 *
 * @example
 * ```ts
 * import { NodeRedis } from "@effect/platform-node"
 * import { layerRedis } from "@tanstack/ai-effect/redis"
 * import { Layer } from "effect"
 *
 * export const EffectStoreLive = layerRedis({ prefix: "app:effects:" }).pipe(
 *   Layer.provide(NodeRedis.layer({ url: "redis://127.0.0.1:6379" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRedis = (options?: RedisStoreOptions): Layer.Layer<EffectStore, RedisPersistenceError, Redis> =>
  Layer.effect(EffectStore, makeRedisStore(options))

/**
 * Makes the Redis store on the `Redis` service in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRedisStore = Effect.fnUntraced(function*(options?: RedisStoreOptions) {
  const redis = yield* Redis
  if (options?.persistence !== "unchecked") yield* checkPersistence(redis)
  const prefix = options?.prefix ?? "ai-effect:"
  const retention = retentionOf(options)
  const keyOf = (id: EffectId) => `${prefix}${encodeURIComponent(id.tool)}:${id.key}`
  const claimLua = evalSha(redis, claimScript)
  const putLua = evalSha(redis, putScript)
  const releaseLua = evalSha(redis, releaseScript)
  const renewLua = evalSha(redis, renewScript)

  // A record lives as long as its key: Redis expires it on its own clock.
  // Plain combinators, not generators: on Node 24 a generator function made
  // per call costs about 1.5 µs, as much as decoding the record (a scratch run).
  const get = (id: EffectId) =>
    Effect.flatMap(
      Effect.mapError(redis.send<string | null>("HGET", keyOf(id), "record"), EffectStoreError.unavailable("get", id)),
      (record) => record == null ? Effect.succeedNone : Effect.map(EffectStoreError.readRecord("get", id, record), Option.some<Recorded>)
    )

  const claim = (id: EffectId, { owner, ttl }: { readonly owner: string; readonly ttl: Duration.Duration }) =>
    Effect.flatMap(
      Effect.mapError(claimLua(keyOf(id), owner, Duration.toMillis(ttl), retention), EffectStoreError.unavailable("claim", id)),
      ([answer, first, second]): Effect.Effect<Claim, EffectStoreError> => {
        if (answer === "recorded") return Effect.map(EffectStoreError.readRecord("claim", id, first!), (recorded) => Claim.Recorded({ recorded }))
        if (answer === "busy") return Effect.succeed(Claim.Busy({ owner: first!, expiresAt: Number(second) }))
        return Effect.succeed(Claim.Claimed({ fence: Number(first), takenOver: second === "1" }))
      }
    )

  /** Fails with `ClaimLost` when a fenced script answered that the caller no longer holds the claim. */
  const heldBy = (id: EffectId, fence: number) => (done: number): Effect.Effect<void, ClaimLost> =>
    Number(done) === 1 ? Effect.void : Effect.fail(new ClaimLost({ ...id, fence }))

  const put = (id: EffectId, recorded: Recorded, { fence }: { readonly fence: number }) =>
    Effect.flatMap(
      Effect.mapError(putLua(keyOf(id), fence, JSON.stringify(recorded), retention), EffectStoreError.unavailable("put", id)),
      heldBy(id, fence)
    )

  const release = (id: EffectId, { fence }: { readonly fence: number }) =>
    releaseLua(keyOf(id), fence, retention).pipe(Effect.mapError(EffectStoreError.unavailable("release", id)), Effect.asVoid)

  const renew = (id: EffectId, { fence, ttl }: { readonly fence: number; readonly ttl: Duration.Duration }) =>
    Effect.flatMap(
      Effect.mapError(renewLua(keyOf(id), fence, Duration.toMillis(ttl), retention), EffectStoreError.unavailable("renew", id)),
      heldBy(id, fence)
    )

  return yield* EffectStore.make({ get, claim, put, release, renew }, options)
})

/** One setting of `CONFIG GET`, whichever shape the client answers in (RESP2 pairs or a RESP3 map). */
const configValue = (redis: Redis["Service"], name: string) =>
  Effect.map(redis.send<ReadonlyArray<string> | Record<string, string>>("CONFIG", "GET", name), (answer) =>
    Array.isArray(answer) ? String(answer[1] ?? "") : String((answer as Record<string, string>)[name] ?? ""))

/**
 * Fails when Redis persists nothing; warns when it cannot tell (`CONFIG` is
 * refused, as managed services do) or when a crash can still lose the last
 * writes (snapshots only, or `appendfsync` other than `always`).
 */
const checkPersistence = (redis: Redis["Service"]): Effect.Effect<void, RedisPersistenceError> =>
  Effect.all([configValue(redis, "appendonly"), configValue(redis, "save"), configValue(redis, "appendfsync")]).pipe(
    Effect.matchEffect({
      onFailure: (error) =>
        Effect.logWarning(
          `layerRedis could not read Redis's persistence settings (${error.message}); make sure it persists ` +
            "(appendonly yes, appendfsync always), or a restart forgets the records"
        ),
      onSuccess: ([appendonly, save, appendfsync]) => {
        if (appendonly !== "yes" && save.trim() === "") return Effect.fail(new RedisPersistenceError({ appendonly, save }))
        if (appendonly === "yes" && appendfsync === "always") return Effect.void
        return Effect.logWarning(
          `Redis persists with ${appendonly === "yes" ? `appendfsync ${appendfsync}` : "snapshots only"}: a crash loses ` +
            "the records of its last writes, whose effects could then be applied again; appendfsync always closes that gap"
        )
      }
    })
  )
