/**
 * The durable run store's steps in memory and on SQLite (two connections to
 * one file, as two processes would have); PostgreSQL's are
 * test/e2e/DurableRunStore.test.ts's.
 */
import { DurableRunStore } from "@tanstack/ai-effect/durable"
import { layerSqliteClient } from "@tanstack/ai-effect/sqlite"
import { Effect, Layer } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { buildRunStore, describeRunSteps } from "./support/runStores.ts"

describeRunSteps("memory, one store for both", () => Effect.map(buildRunStore(DurableRunStore.DurableRunStore.layerMemory), (store) => [store, store] as const))

describeRunSteps("SQLite, two connections to one file", () => {
  const filename = join(mkdtempSync(join(tmpdir(), "ai-effect-run-store-")), "runs.db")
  const connection = () => DurableRunStore.DurableRunStore.layerSql.pipe(Layer.provide(layerSqliteClient({ filename })))
  return Effect.all([buildRunStore(connection()), buildRunStore(connection())])
})
