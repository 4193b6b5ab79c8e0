/**
 * The embedded durable effect store: one
 * SQLite file on `node:sqlite` (built into Node 22.5+ and 24).
 *
 * The file survives restarts, and several processes on one machine may share
 * it: WAL mode lets readers go on while one process writes, and a claim is
 * one statement, so two processes never both hold a key.
 *
 * @since 0.1.0
 */
import { Layer } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { EffectStore } from "../EffectStore.ts"
import { makeSqlStore, type SqlStoreOptions } from "../sql/SqlEffectStore.ts"
import * as SqliteClient from "./SqliteClient.ts"

/**
 * Options of {@link layerSqlite}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteStoreOptions extends Omit<SqlStoreOptions, "table"> {
  /** The database file; its folder is created when missing. `":memory:"` keeps it in memory. */
  readonly filename: string
}

/**
 * The effect store in a SQLite file. The layer opens the file (creating it
 * and its folder), creates the table, sweeps expired records in the
 * background, and closes the file when the layer's scope ends.
 *
 * @example
 * ```ts
 * import { layerSqlite } from "@tanstack/ai-effect/sqlite"
 *
 * export const EffectStoreLive = layerSqlite({ filename: ".data/effects.db", retention: "7 days" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = (options: SqliteStoreOptions): Layer.Layer<EffectStore, SqlError> =>
  Layer.effect(EffectStore, makeSqlStore(options)).pipe(Layer.provide(SqliteClient.layerSqliteClient({ filename: options.filename })))
