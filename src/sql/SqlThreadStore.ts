/**
 * Threads on SQL: one row per thread, its transcript as JSON, its active run
 * in a column of its own so that the save at a run's end is one conditional
 * statement. PostgreSQL and SQLite run the same statements.
 *
 * @since 0.1.0
 */
import { Clock, Duration, Effect, Layer, Option, Schedule } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { type Thread, ThreadStore, ThreadStoreError, type ThreadStoreOptions } from "../ThreadStore.ts"

/**
 * Options of {@link layerSqlThreadStore}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlThreadStoreOptions extends ThreadStoreOptions {
  /** The table of threads, created when missing. Default `ai_threads`. */
  readonly table?: string | undefined
}

/**
 * Threads on the `SqlClient` in context (PostgreSQL, or SQLite through
 * `@tanstack/ai-effect/sqlite`). The layer creates its table when missing.
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { layerSqlThreadStore } from "@tanstack/ai-effect/sql"
 * import { Layer, Redacted } from "effect"
 *
 * export const ThreadsLive = layerSqlThreadStore().pipe(Layer.provide(PgClient.layer({ url: Redacted.make("postgres://localhost/app") })))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlThreadStore = (options?: SqlThreadStoreOptions): Layer.Layer<ThreadStore, SqlError, SqlClient> =>
  Layer.effect(ThreadStore, makeSqlThreadStore(options))

/**
 * Makes the SQL thread store on the `SqlClient` in context: creates the
 * table.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSqlThreadStore = Effect.fnUntraced(function*(options?: SqlThreadStoreOptions) {
  const sql = yield* SqlClient
  const table = sql(options?.table ?? "ai_threads")
  const retention = Duration.toMillis(Duration.fromInputUnsafe(options?.retention ?? "30 days"))
  yield* sql`CREATE TABLE IF NOT EXISTS ${table} (
    thread_id TEXT PRIMARY KEY,
    thread TEXT NOT NULL,
    active_run TEXT,
    expires_at BIGINT NOT NULL
  )`.pipe(Effect.retry({ times: 5, schedule: Schedule.spaced("50 millis") }))
  const failed = (operation: string, threadId: string) => (cause: unknown) => new ThreadStoreError({ operation, threadId, cause })
  return ThreadStore.of({
    load: (threadId) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const [row] = yield* sql<{ readonly thread: string }>`SELECT thread FROM ${table} WHERE thread_id = ${threadId} AND expires_at > ${now}`
        if (row === undefined) return Option.none<Thread>()
        // The table holds what save wrote: a thread, as JSON.
        return Option.some(yield* Effect.try(() => JSON.parse(row.thread) as Thread))
      }).pipe(Effect.mapError(failed("load", threadId))),
    save: (threadId, thread, options) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const text = JSON.stringify(thread)
        const active = thread.activeRun?.runId ?? null
        if (options?.whileRun === undefined) {
          yield* sql`INSERT INTO ${table} (thread_id, thread, active_run, expires_at) VALUES (${threadId}, ${text}, ${active}, ${now + retention})
            ON CONFLICT (thread_id) DO UPDATE SET thread = excluded.thread, active_run = excluded.active_run, expires_at = excluded.expires_at`
          return true
        }
        const rows = yield* sql`UPDATE ${table} SET thread = ${text}, active_run = ${active}, expires_at = ${now + retention}
          WHERE thread_id = ${threadId} AND active_run = ${options.whileRun} RETURNING thread_id`
        return rows.length === 1
      }).pipe(Effect.mapError(failed("save", threadId)))
  })
})
