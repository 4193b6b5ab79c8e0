/**
 * Locks on real PostgreSQL and Redis servers: two holders with a connection
 * each, one at a time, as two processes would be.
 */
import { layerRedis } from "@tanstack/ai-effect/redis"
import { layerSql } from "@tanstack/ai-effect/sql"
import { Layer } from "effect"
import { pgClient, redisClient } from "../support/backends.ts"
import { describeLocks } from "../support/locks.ts"
import { useServers } from "../support/servers.ts"

const servers = useServers()

if (servers.postgres !== undefined) {
  describeLocks("PostgreSQL, two connections", () => [
    layerSql().pipe(Layer.provide(pgClient(servers.postgres!()))),
    layerSql().pipe(Layer.provide(pgClient(servers.postgres!())))
  ])
}

if (servers.redis !== undefined) {
  describeLocks("Redis, two connections", () => [
    layerRedis().pipe(Layer.provide(redisClient(servers.redis!()))),
    layerRedis().pipe(Layer.provide(redisClient(servers.redis!())))
  ])
}
