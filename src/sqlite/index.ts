/**
 * `@tanstack/ai-effect/sqlite`: the embedded durable effect store, delivery
 * log and thread store, one SQLite file on `node:sqlite` (built into Node
 * 22.5+ and 24), and the client they run on, for the stores of
 * `@tanstack/ai-effect/sql` to share one connection to a file.
 *
 * @since 0.1.0
 */
export { layerSqliteClient, type SqliteClientOptions } from "./SqliteClient.ts"
export { layerSqlite, type SqliteStoreOptions } from "./SqliteEffectStore.ts"
export { layerSqliteStreamLog, type SqliteStreamLogOptions } from "./SqliteStreamLog.ts"
export { layerSqliteThreadStore, type SqliteThreadStoreOptions } from "./SqliteThreadStore.ts"
