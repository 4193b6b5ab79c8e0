/**
 * `@tanstack/ai-effect/sql`: the effect store on an `effect/sql` client, for
 * PostgreSQL shared by many replicas (tested with `@effect/sql-pg`).
 *
 * @since 0.1.0
 */
export { layerSql, makeSqlStore, type SqlStoreOptions } from "./SqlEffectStore.ts"
