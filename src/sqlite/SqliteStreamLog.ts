/**
 * The delivery log in a SQLite file, on `node:sqlite`: the SQL log's
 * statements on the embedded default. Several processes on one machine may
 * share the file; an append is one statement, so a superseded producer
 * stores nothing, and a process whose readers wait hears the others'
 * commits through the file's write-ahead log.
 *
 * @since 0.1.0
 */
import { Layer } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { makeSqlStreamLog, type SqlStreamLogOptions } from "../sql/SqlStreamLog.ts"
import { StreamLog } from "../StreamLog.ts"
import * as SqliteClient from "./SqliteClient.ts"

/**
 * Options of {@link layerSqliteStreamLog}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteStreamLogOptions extends SqlStreamLogOptions {
  /** The database file; its folder is created when missing. `":memory:"` keeps it in memory. */
  readonly filename: string
}

/**
 * The delivery log in a SQLite file. The layer opens the file (creating it
 * and its folder), creates the tables, sweeps expired logs in the
 * background, and closes the file when the layer's scope ends.
 *
 * @example
 * ```ts
 * import { layerSqliteStreamLog } from "@tanstack/ai-effect/sqlite"
 *
 * export const StreamLogLive = layerSqliteStreamLog({ filename: ".data/chat.db", retention: "1 day" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqliteStreamLog = (options: SqliteStreamLogOptions): Layer.Layer<StreamLog, SqlError> =>
  Layer.effect(StreamLog, makeSqlStreamLog(options)).pipe(Layer.provide(SqliteClient.layerSqliteClient({ filename: options.filename })))
