/**
 * `@tanstack/ai-effect/sql`: the effect store and the delivery log on an
 * `effect/sql` client, for PostgreSQL shared by many replicas (tested with
 * `@effect/sql-pg`).
 *
 * @since 0.1.0
 */
export { layerSql, makeSqlStore, type SqlStoreOptions } from "./SqlEffectStore.ts"
export { layerSqlStreamLog, makeSqlStreamLog, type SqlStreamLogOptions } from "./SqlStreamLog.ts"
export { layerSqlThreadStore, makeSqlThreadStore, type SqlThreadStoreOptions } from "./SqlThreadStore.ts"
