/**
 * Locks on real PostgreSQL and Redis servers: two holders with a connection
 * each, one at a time, as two processes would be.
 */
import { afterAll, beforeAll } from "@effect/vitest"
import { layerRedis } from "@tanstack/ai-effect/redis"
import { layerSql } from "@tanstack/ai-effect/sql"
import { Layer } from "effect"
import { pgClient, redisClient } from "../support/backends.ts"
import { describeLocks } from "../support/locks.ts"
import { missing, startPostgres, startRedis, type TestServer } from "../support/services.ts"

let postgres: TestServer | undefined
let redis: TestServer | undefined
beforeAll(async () => {
  if (missing("postgres") === undefined) postgres = await startPostgres()
  if (missing("redis") === undefined) redis = await startRedis()
}, 60_000)
afterAll(async () => {
  await postgres?.dispose()
  await redis?.dispose()
})

if (missing("postgres") === undefined) {
  describeLocks("PostgreSQL, two connections", () => [
    layerSql().pipe(Layer.provide(pgClient(postgres!.url))),
    layerSql().pipe(Layer.provide(pgClient(postgres!.url)))
  ])
}

if (missing("redis") === undefined) {
  describeLocks("Redis, two connections", () => [
    layerRedis().pipe(Layer.provide(redisClient(redis!.url))),
    layerRedis().pipe(Layer.provide(redisClient(redis!.url)))
  ])
}
