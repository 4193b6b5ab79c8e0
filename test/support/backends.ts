/**
 * The effect-store backends under test, each as a Layer factory, with a way
 * to make the store hang for the deadline tests.
 */
import { DatabaseSync } from "node:sqlite"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { toolDefinition } from "@tanstack/ai"
import { NodeRedis } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import * as AI from "@tanstack/ai-effect"
import { layerRedis } from "@tanstack/ai-effect/redis"
import { layerSql } from "@tanstack/ai-effect/sql"
import { layerSqlite } from "@tanstack/ai-effect/sqlite"
import { Effect, Latch, Layer, Redacted, Schema, type Scope } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import { countRedisCommands, countStatements, type RoundTrips } from "./roundTrips.ts"
import type { TestServer } from "./services.ts"

export interface Backend {
  readonly name: string
  readonly layer: (options?: AI.StoreOptions) => Layer.Layer<AI.EffectStore, unknown>
  /** Makes the store stop answering until the scope closes. */
  readonly hang: Effect.Effect<void, unknown, Scope.Scope>
  /** The store with its requests counted at the driver (none for the memory store, which sends none). */
  readonly counted?: () => RoundTrips & { readonly layer: Layer.Layer<AI.EffectStore, unknown> }
}

export const memoryBackend: Backend = {
  name: "memory",
  layer: (options) => AI.EffectStore.layerMemory(options),
  hang: Effect.die("a memory store cannot hang; its deadline is tested with a store that never answers")
}

export const sqliteBackend = (filename = join(mkdtempSync(join(tmpdir(), "ai-effect-sqlite-")), "effects.db")): Backend => ({
  name: "sqlite",
  layer: (options) => layerSqlite({ ...options, filename }),
  counted: () => {
    const statements = countStatements()
    return { count: statements.count, layer: Layer.merge(layerSqlite({ filename }), statements.layer) }
  },
  // Another connection holds the write lock: claims wait until the deadline.
  hang: Effect.acquireRelease(
    Effect.sync(() => {
      const db = new DatabaseSync(filename)
      db.exec("BEGIN EXCLUSIVE")
      return db
    }),
    (db) => Effect.sync(() => {
      db.exec("ROLLBACK")
      db.close()
    })
  )
})

export const pgClient = (url: string) => PgClient.layer({ url: Redacted.make(url), connectTimeout: "2 seconds" })

export const postgresBackend = (server: TestServer): Backend => ({
  name: "postgres",
  layer: (options) => layerSql(options).pipe(Layer.provide(pgClient(server.url))),
  counted: () => {
    const statements = countStatements()
    return { count: statements.count, layer: Layer.merge(layerSql().pipe(Layer.provide(pgClient(server.url))), statements.layer) }
  },
  // Another session locks the table inside an open transaction.
  hang: Effect.gen(function*() {
    const locked = yield* Latch.make()
    yield* Effect.forkScoped(
      Effect.gen(function*() {
        const sql = yield* SqlClient
        yield* sql.withTransaction(
          sql`LOCK TABLE ai_effects IN ACCESS EXCLUSIVE MODE`.pipe(Effect.andThen(locked.open), Effect.andThen(Effect.never))
        )
      }).pipe(Effect.provide(pgClient(server.url)))
    )
    yield* locked.await
  })
})

export const redisClient = (url: string) =>
  NodeRedis.layer({ url, socket: { connectTimeout: 2_000, reconnectStrategy: false } })

export const redisBackend = (server: TestServer): Backend => ({
  name: "redis",
  layer: (options) => layerRedis(options).pipe(Layer.provide(redisClient(server.url))),
  counted: () => {
    const commands = countRedisCommands()
    return { count: commands.count, layer: layerRedis().pipe(Layer.provide(commands.layer), Layer.provide(redisClient(server.url))) }
  },
  // Redis stops serving clients for a second, longer than the tests' deadline;
  // it resumes by itself, so that the clients can close afterwards.
  hang: Effect.flatMap(Effect.service(NodeRedis.NodeRedis), ({ client }) =>
    Effect.promise(() => client.sendCommand(["CLIENT", "PAUSE", "1000", "ALL"]))).pipe(Effect.provide(redisClient(server.url)), Effect.asVoid)
})

/** A remote in memory that counts the applications of each key. */
export const makeRemote = () => {
  const applied = new Map<string, number>()
  return {
    applied,
    total: () => [...applied.values()].reduce((sum, n) => sum + n, 0),
    apply: (key: string) =>
      Effect.sync(() => {
        const n = (applied.get(key) ?? 0) + 1
        applied.set(key, n)
        return { applied: n }
      })
  }
}

export const noteDef = toolDefinition({
  name: "note",
  description: "Writes a note",
  inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ applied: Schema.Int }))
})

/** Calls the core form of an effect tool once, as core chat() would. */
export const callTool = <Tool extends AI.ServerTool.Any>(
  tool: Tool,
  input: unknown,
  toolCallId = "call_1"
): Effect.Effect<unknown, AI.ToolCallError, Exclude<AI.ServerTool.Requirements<Tool>, AI.RunContext>> =>
  Effect.gen(function*() {
    const [core] = yield* AI.wrapToolsForRun([tool as AI.ServerTool.Any])
    return yield* Effect.tryPromise({
      try: () => Promise.resolve(core!.execute!(input, { toolCallId, emitCustomEvent: () => {} })),
      catch: (error) => error as AI.ToolCallError
    })
  }).pipe(
    Effect.scoped,
    Effect.provideService(AI.RunContext, { runId: "run-1", threadId: "thread-1", agent: "test", trigger: "test" })
  )
