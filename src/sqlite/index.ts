/**
 * `@tanstack/ai-effect/sqlite`: the embedded durable effect store and
 * delivery log, one SQLite file on `node:sqlite` (built into Node 22.5+ and
 * 24).
 *
 * @since 0.1.0
 */
export { layerSqlite, type SqliteStoreOptions } from "./SqliteEffectStore.ts"
export { layerSqliteStreamLog, type SqliteStreamLogOptions } from "./SqliteStreamLog.ts"
export { layerSqliteThreadStore, type SqliteThreadStoreOptions } from "./SqliteThreadStore.ts"
