/**
 * `@tanstack/ai-effect/redis`: the effect store on Redis, for many replicas
 * that share one Redis. It needs `effect/persistence`'s `Redis` service, for
 * example `NodeRedis.layer` from `@effect/platform-node`.
 *
 * Each effect is one hash under the prefix. Claim, fenced put, release and
 * renew are Lua scripts, so each is atomic in Redis; a record's retention is
 * the key's own expiry, so Redis removes expired records itself.
 *
 * @since 0.1.0
 */
import { Clock, Duration, Effect, Layer, Option } from "effect"
import { Redis, script } from "effect/persistence/Redis"
import { Claim, ClaimLost, type EffectId, EffectStore, type Recorded, type StoreOptions } from "../EffectStore.ts"
import { readRecord, unavailable } from "../internal/durable.ts"
import { retentionOf } from "../internal/store.ts"

/**
 * Options of {@link layerRedis}.
 *
 * @since 0.1.0
 * @category models
 */
export interface RedisStoreOptions extends StoreOptions {
  /** The prefix of every key this store writes. Default `ai-effect:`. */
  readonly prefix?: string | undefined
}

// The hash of one effect: fence, owner and lease while claimed; record once
// recorded; expires, the epoch ms after which the entry is forgotten.
const claimScript = script(
  (key: string, owner: string, now: number, leaseExpiresAt: number, retention: number) => [key, owner, now, leaseExpiresAt, retention],
  {
    numberOfKeys: 1,
    lua: `
local fence, holder, lease, record, expires = unpack(redis.call('HMGET', KEYS[1], 'fence', 'owner', 'lease', 'record', 'expires'))
local now, leaseExpiresAt, retention = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
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
const held = `
local fence, holder, record = unpack(redis.call('HMGET', KEYS[1], 'fence', 'owner', 'record'))
if tonumber(fence) ~= tonumber(ARGV[1]) or not holder or record then return 0 end`

const putScript = script(
  (key: string, fence: number, record: string, expires: number, retention: number) => [key, fence, record, expires, retention],
  {
    numberOfKeys: 1,
    lua: `${held}
redis.call('HSET', KEYS[1], 'record', ARGV[2], 'expires', ARGV[3])
redis.call('HDEL', KEYS[1], 'owner', 'lease')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1`
  }
).withReturnType<number>()

const releaseScript = script(
  (key: string, fence: number, expires: number, retention: number) => [key, fence, expires, retention],
  {
    numberOfKeys: 1,
    lua: `${held}
redis.call('HDEL', KEYS[1], 'owner', 'lease')
redis.call('HSET', KEYS[1], 'expires', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`
  }
).withReturnType<number>()

const renewScript = script(
  (key: string, fence: number, leaseExpiresAt: number, expires: number, keepFor: number) => [key, fence, leaseExpiresAt, expires, keepFor],
  {
    numberOfKeys: 1,
    lua: `${held}
redis.call('HSET', KEYS[1], 'lease', ARGV[2], 'expires', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
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
export const layerRedis = (options?: RedisStoreOptions): Layer.Layer<EffectStore, never, Redis> =>
  Layer.effect(EffectStore, makeRedisStore(options))

/**
 * Makes the Redis store on the `Redis` service in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRedisStore = Effect.fnUntraced(function*(options?: RedisStoreOptions) {
  const redis = yield* Redis
  const prefix = options?.prefix ?? "ai-effect:"
  const retention = retentionOf(options)
  const keyOf = (id: EffectId) => `${prefix}${encodeURIComponent(id.tool)}:${id.key}`
  const claimLua = redis.eval(claimScript)
  const putLua = redis.eval(putScript)
  const releaseLua = redis.eval(releaseScript)
  const renewLua = redis.eval(renewScript)

  const get = (id: EffectId) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const [record, expires] = yield* redis.send<ReadonlyArray<string | null>>("HMGET", keyOf(id), "record", "expires").pipe(
        Effect.mapError(unavailable("get", id))
      )
      return record == null || Number(expires) <= now ? Option.none<Recorded>() : Option.some(yield* readRecord("get", id, record))
    })

  const claim = (id: EffectId, { owner, ttl }: { readonly owner: string; readonly ttl: Duration.Duration }) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const [answer, first, second] = yield* claimLua(keyOf(id), owner, now, now + Duration.toMillis(ttl), retention).pipe(
        Effect.mapError(unavailable("claim", id))
      )
      if (answer === "recorded") return Claim.Recorded({ recorded: yield* readRecord("claim", id, first!) })
      if (answer === "busy") return Claim.Busy({ owner: first!, expiresAt: Number(second) })
      return Claim.Claimed({ fence: Number(first), takenOver: second === "1" })
    })

  const put = (id: EffectId, recorded: Recorded, { fence }: { readonly fence: number }) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const done = yield* putLua(keyOf(id), fence, JSON.stringify(recorded), now + retention, retention).pipe(
        Effect.mapError(unavailable("put", id))
      )
      if (Number(done) !== 1) return yield* new ClaimLost({ ...id, fence })
    })

  const release = (id: EffectId, { fence }: { readonly fence: number }) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      releaseLua(keyOf(id), fence, now + retention, retention).pipe(Effect.mapError(unavailable("release", id)), Effect.asVoid))

  const renew = (id: EffectId, { fence, ttl }: { readonly fence: number; readonly ttl: Duration.Duration }) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const leaseExpiresAt = now + Duration.toMillis(ttl)
      const done = yield* renewLua(keyOf(id), fence, leaseExpiresAt, leaseExpiresAt + retention, Duration.toMillis(ttl) + retention).pipe(
        Effect.mapError(unavailable("renew", id))
      )
      if (Number(done) !== 1) return yield* new ClaimLost({ ...id, fence })
    })

  return yield* EffectStore.make({ get, claim, put, release, renew }, options)
})
