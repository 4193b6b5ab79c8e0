/**
 * The durable run store's steps on a real PostgreSQL server, two
 * connections as two runners would have.
 */
import { DurableRunStore } from "@tanstack/ai-effect/durable"
import { Effect, Layer } from "effect"
import { pgClient } from "../support/backends.ts"
import { buildRunStore, describeRunSteps } from "../support/runStores.ts"
import { useServers } from "../support/servers.ts"

const servers = useServers()

if (servers.postgres !== undefined) {
  const connection = () => DurableRunStore.DurableRunStore.layerSql.pipe(Layer.provide(pgClient(servers.postgres!())))
  describeRunSteps("PostgreSQL, two connections", () => Effect.all([buildRunStore(connection()), buildRunStore(connection())]))
}
