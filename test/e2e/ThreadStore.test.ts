/**
 * Threads on real PostgreSQL and Redis servers.
 */
import { layerRedisThreadStore } from "@tanstack/ai-effect/redis"
import { layerSqlThreadStore } from "@tanstack/ai-effect/sql"
import { Layer } from "effect"
import { pgClient, redisClient } from "../support/backends.ts"
import { useServers } from "../support/servers.ts"
import { describeThreadStore } from "../support/threads.ts"

const servers = useServers()

if (servers.postgres !== undefined) describeThreadStore("PostgreSQL", () => layerSqlThreadStore().pipe(Layer.provide(pgClient(servers.postgres!()))))
if (servers.redis !== undefined) describeThreadStore("Redis", () => layerRedisThreadStore().pipe(Layer.provide(redisClient(servers.redis!()))))
