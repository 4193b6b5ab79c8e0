/**
 * `@tanstack/ai-effect/redis`: the effect store and the delivery log on
 * Redis, for many replicas
 * that share one Redis. It needs `effect/persistence`'s `Redis` service, for
 * example `NodeRedis.layer` from `@effect/platform-node`.
 *
 * @since 0.1.0
 */
export { layerRedis, makeRedisStore, RedisPersistenceError, type RedisStoreOptions } from "./RedisEffectStore.ts"
export { layerRedisStreamLog, makeRedisStreamLog, type RedisStreamLogOptions } from "./RedisStreamLog.ts"
export { layerRedisThreadStore, makeRedisThreadStore, type RedisThreadStoreOptions } from "./RedisThreadStore.ts"
