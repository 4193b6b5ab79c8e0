/**
 * The effect store on SQL: one table, and the claim protocol as single
 * statements that PostgreSQL and SQLite both run (an upsert whose update is
 * conditional, and `UPDATE ... RETURNING` for the fenced writes).
 *
 * @since 0.1.0
 */
import { Clock, Duration, Effect, Layer, Option, Schedule } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { Claim, ClaimLost, type EffectId, EffectStore, type Recorded, type StoreOptions } from "../EffectStore.ts"
import { readRecord, unavailable } from "../internal/durable.ts"
import { retentionOf } from "../internal/store.ts"

/**
 * Options of {@link layerSql}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlStoreOptions extends StoreOptions {
  /** The table of records and claims, created when missing. Default `ai_effects`. */
  readonly table?: string | undefined
  /** How often expired records and stale claims are deleted. Default 1 minute. */
  readonly sweepEvery?: Duration.Input | undefined
}

/**
 * An `EffectStore` on the `SqlClient` in context: PostgreSQL through
 * `@effect/sql-pg`, or any client whose dialect supports
 * `INSERT ... ON CONFLICT ... DO UPDATE ... WHERE ... RETURNING`. The layer
 * creates its table when missing, uses parameterized statements only, claims
 * with one statement, and deletes expired records in a background fiber that
 * lives as long as the layer.
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { layerSql } from "@tanstack/ai-effect/sql"
 * import { Layer, Redacted } from "effect"
 *
 * export const EffectStoreLive = layerSql({ retention: "7 days" }).pipe(
 *   Layer.provide(PgClient.layer({ url: Redacted.make("postgres://localhost:5432/app") }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSql = (options?: SqlStoreOptions): Layer.Layer<EffectStore, SqlError, SqlClient> =>
  Layer.effect(EffectStore, makeSqlStore(options))

/**
 * Makes the SQL store on the `SqlClient` in context, in the current scope:
 * creates the table and starts the sweep.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSqlStore = Effect.fnUntraced(function*(options?: SqlStoreOptions) {
  const sql = yield* SqlClient
  const table = sql(options?.table ?? "ai_effects")
  const retention = retentionOf(options)
  const createTable = sql`CREATE TABLE IF NOT EXISTS ${table} (
    tool TEXT NOT NULL,
    effect_key TEXT NOT NULL,
    fence BIGINT NOT NULL,
    owner TEXT,
    lease_expires_at BIGINT NOT NULL,
    taken_over INTEGER NOT NULL,
    record TEXT,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (tool, effect_key)
  )`.pipe(
    Effect.andThen(sql`CREATE INDEX IF NOT EXISTS ${sql(`${options?.table ?? "ai_effects"}_expires_at`)} ON ${table} (expires_at)`),
    // Processes starting together race on IF NOT EXISTS (PostgreSQL's catalog
    // may refuse the second creation); one more attempt finds the table there.
    Effect.retry({ times: 5, schedule: Schedule.spaced("50 millis") })
  )
  yield* createTable

  // The clock that decides leases and retention. PostgreSQL's own, so that
  // a caller whose clock is skewed can neither take a live claim nor keep an
  // expired one; SQLite is a file on its callers' machine, whose clock it
  // shares (and tests drive through Clock).
  const currentTime = sql.onDialectOrElse({
    pg: () => Effect.succeed(sql.literal("(floor(extract(epoch from clock_timestamp()) * 1000))::bigint")),
    orElse: () => Effect.map(Clock.currentTimeMillis, (now) => sql`${now}`)
  })

  const get = (id: EffectId) =>
    Effect.gen(function*() {
      const now = yield* currentTime
      const rows = yield* sql<{ readonly record: string }>`SELECT record FROM ${table}
        WHERE tool = ${id.tool} AND effect_key = ${id.key} AND record IS NOT NULL AND expires_at > ${now}`.pipe(
        Effect.mapError(unavailable("get", id))
      )
      const [row] = rows
      return row === undefined ? Option.none<Recorded>() : Option.some(yield* readRecord("get", id, row.record))
    })

  const claim = (id: EffectId, { owner, ttl }: { readonly owner: string; readonly ttl: Duration.Duration }) =>
    Effect.gen(function*() {
      const ttlMillis = Duration.toMillis(ttl)
      for (;;) {
        const now = yield* currentTime
        // One statement: a new key is inserted; an existing row is taken
        // only when its record expired, or its claim was released or lapsed.
        const claimed = yield* sql<{ readonly fence: unknown; readonly taken_over: unknown }>`
          INSERT INTO ${table} (tool, effect_key, fence, owner, lease_expires_at, taken_over, record, expires_at)
          VALUES (${id.tool}, ${id.key}, 1, ${owner}, ${now} + ${ttlMillis}, 0, NULL, ${now} + ${ttlMillis + retention})
          ON CONFLICT (tool, effect_key) DO UPDATE SET
            fence = ${table}.fence + 1,
            owner = excluded.owner,
            lease_expires_at = excluded.lease_expires_at,
            taken_over = CASE WHEN ${table}.record IS NULL AND ${table}.owner IS NOT NULL THEN 1 ELSE 0 END,
            record = NULL,
            expires_at = excluded.expires_at
          WHERE (${table}.record IS NULL AND (${table}.owner IS NULL OR ${table}.lease_expires_at <= ${now}))
             OR ${table}.expires_at <= ${now}
          RETURNING fence, taken_over`.pipe(Effect.mapError(unavailable("claim", id)))
        const [won] = claimed
        if (won !== undefined) return Claim.Claimed({ fence: Number(won.fence), takenOver: Number(won.taken_over) === 1 })
        const [held] = yield* sql<{ readonly owner: string | null; readonly lease_expires_at: unknown; readonly record: string | null }>`
          SELECT owner, lease_expires_at, record FROM ${table} WHERE tool = ${id.tool} AND effect_key = ${id.key}`.pipe(
          Effect.mapError(unavailable("claim", id))
        )
        if (held?.record != null) return Claim.Recorded({ recorded: yield* readRecord("claim", id, held.record) })
        if (held?.owner != null) return Claim.Busy({ owner: held.owner, expiresAt: Number(held.lease_expires_at) })
        // The row changed between the two statements (released or expired): claim again.
      }
    })

  /** A fenced update: it changes the row only while `fence` still holds the claim. */
  const whileHeld = (id: EffectId, fence: number) =>
    sql`tool = ${id.tool} AND effect_key = ${id.key} AND fence = ${fence} AND owner IS NOT NULL AND record IS NULL`

  const put = (id: EffectId, recorded: Recorded, { fence }: { readonly fence: number }) =>
    Effect.gen(function*() {
      const now = yield* currentTime
      const rows = yield* sql`UPDATE ${table}
        SET record = ${JSON.stringify(recorded)}, owner = NULL, lease_expires_at = 0, expires_at = ${now} + ${retention}
        WHERE ${whileHeld(id, fence)} RETURNING fence`.pipe(Effect.mapError(unavailable("put", id)))
      if (rows.length === 0) return yield* new ClaimLost({ ...id, fence })
    })

  const release = (id: EffectId, { fence }: { readonly fence: number }) =>
    Effect.gen(function*() {
      const now = yield* currentTime
      yield* sql`UPDATE ${table} SET owner = NULL, lease_expires_at = 0, expires_at = ${now} + ${retention}
        WHERE ${whileHeld(id, fence)}`.pipe(Effect.mapError(unavailable("release", id)))
    })

  const renew = (id: EffectId, { fence, ttl }: { readonly fence: number; readonly ttl: Duration.Duration }) =>
    Effect.gen(function*() {
      const now = yield* currentTime
      const ttlMillis = Duration.toMillis(ttl)
      const rows = yield* sql`UPDATE ${table} SET lease_expires_at = ${now} + ${ttlMillis}, expires_at = ${now} + ${ttlMillis + retention}
        WHERE ${whileHeld(id, fence)} RETURNING fence`.pipe(Effect.mapError(unavailable("renew", id)))
      if (rows.length === 0) return yield* new ClaimLost({ ...id, fence })
    })

  // Expired records and claims whose history outlived the retention; on
  // access they are already ignored, so the sweep only keeps the table small.
  const sweep = Effect.flatMap(currentTime, (now) => sql`DELETE FROM ${table} WHERE expires_at <= ${now}`).pipe(
    Effect.catch((error) => Effect.logWarning(`The effect store could not delete expired records (${error.message})`))
  )
  yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(options?.sweepEvery ?? Duration.minutes(1))))

  return yield* EffectStore.make({ get, claim, put, release, renew }, options)
})
