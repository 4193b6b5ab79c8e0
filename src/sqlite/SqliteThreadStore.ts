/**
 * Threads in a SQLite file, on `node:sqlite`: the SQL thread store on the
 * embedded default.
 *
 * @since 0.1.0
 */
import { Layer } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { makeSqlThreadStore, type SqlThreadStoreOptions } from "../sql/SqlThreadStore.ts"
import { ThreadStore } from "../ThreadStore.ts"
import * as SqliteClient from "./SqliteClient.ts"

/**
 * Options of {@link layerSqliteThreadStore}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteThreadStoreOptions extends SqlThreadStoreOptions {
  /** The database file; its folder is created when missing. `":memory:"` keeps it in memory. */
  readonly filename: string
}

/**
 * Threads in a SQLite file. The layer opens the file (creating it and its
 * folder), creates the table, and closes the file with its scope.
 *
 * @example
 * ```ts
 * import { layerSqliteThreadStore } from "@tanstack/ai-effect/sqlite"
 *
 * export const ThreadsLive = layerSqliteThreadStore({ filename: ".data/chat.db" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqliteThreadStore = (options: SqliteThreadStoreOptions): Layer.Layer<ThreadStore, SqlError> =>
  Layer.effect(ThreadStore, makeSqlThreadStore(options)).pipe(Layer.provide(SqliteClient.layerSqliteClient({ filename: options.filename })))
