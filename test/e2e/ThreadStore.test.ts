/**
 * Threads on real PostgreSQL and Redis servers.
 */
import { layerRedisThreadStore } from "@tanstack/ai-effect/redis"
import { layerSqlThreadStore } from "@tanstack/ai-effect/sql"
import { Layer } from "effect"
import { pgClient, redisClient } from "../support/backends.ts"
import { useServers } from "../support/servers.ts"
import { describeThreadRetention, describeThreadStore } from "../support/threads.ts"

const servers = useServers()

if (servers.postgres !== undefined) {
  const layer = () => layerSqlThreadStore().pipe(Layer.provide(pgClient(servers.postgres!())))
  describeThreadStore("PostgreSQL", layer)
  describeThreadRetention("PostgreSQL", layer)
}
if (servers.redis !== undefined) describeThreadStore("Redis", () => layerRedisThreadStore().pipe(Layer.provide(redisClient(servers.redis!()))))
