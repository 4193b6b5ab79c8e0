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
import type * as Statement from "effect/sql/Statement"
import {
  Claim,
  ClaimLost,
  type EffectId,
  EffectStore,
  EffectStoreError,
  makeWithOwnDeadlines,
  type Recorded,
  type StoreOptions
} from "../EffectStore.ts"
import { DirectStatementObserver, SqliteDirect } from "../internal/sqliteDirect.ts"
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
 * A statement compiled once, and the order of its parameters: `build` gets
 * one distinct sentinel per argument, and each parameter of the compiled
 * text is traced back to the argument it came from, so that a call only
 * puts its arguments in that order.
 */
const compileOnce = <Args extends ReadonlyArray<string | number>>(
  sentinels: NoInfer<Args>,
  build: (...args: Args) => Statement.Statement<object>
) => {
  const [text, params] = build(...sentinels).compile()
  const order = params.map((param) => sentinels.findIndex((sentinel) => sentinel === param))
  if (order.includes(-1) || new Set(sentinels).size !== sentinels.length) {
    throw new Error(`a statement compiled once has a parameter that is not one of its arguments: ${text}`)
  }
  return { text, params: (...args: Args): Array<Args[number]> => order.map((index) => args[index]!) }
}

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
  const serverTime = sql.literal("(floor(extract(epoch from clock_timestamp()) * 1000))::bigint")
  const currentTime = sql.onDialectOrElse({
    pg: () => Effect.succeed(serverTime),
    orElse: () => Effect.map(Clock.currentTimeMillis, (now) => sql`${now}`)
  })

  const recordRow = (id: EffectId, now: Statement.Fragment) =>
    sql<{ readonly record: string }>`SELECT record FROM ${table}
      WHERE tool = ${id.tool} AND effect_key = ${id.key} AND record IS NOT NULL AND expires_at > ${now}`

  // What holds a key: its record, or a live claim.
  const heldRow = (id: EffectId, now: Statement.Fragment) =>
    sql<ClaimRow>`SELECT NULL AS fence, NULL AS taken_over, owner, lease_expires_at, record FROM ${table}
      WHERE tool = ${id.tool} AND effect_key = ${id.key} AND expires_at > ${now}
        AND (record IS NOT NULL OR (owner IS NOT NULL AND lease_expires_at > ${now}))`

  /** The record a `get` read, if any. */
  const recordIn = (id: EffectId, [row]: ReadonlyArray<{ readonly record: string }>) =>
    row === undefined ? Effect.succeedNone : Effect.map(EffectStoreError.readRecord("get", id, row.record), Option.some)

  const get = (id: EffectId) =>
    Effect.flatMap(
      Effect.mapError(Effect.flatMap(currentTime, (now) => recordRow(id, now)), EffectStoreError.unavailable("get", id)),
      (rows) => recordIn(id, rows)
    )

  /**
   * The row of a key as a claim sees it: `fence` when this call claimed it;
   * otherwise what holds it, a record or a live owner, or neither when the
   * row changed under the statement (the claim is then tried again).
   */
  type ClaimRow = {
    readonly fence: unknown
    readonly taken_over: unknown
    readonly owner: string | null
    readonly lease_expires_at: unknown
    readonly record: string | null
  }

  /**
   * Inserts the claim of a new key from `source` (a VALUES or a SELECT); an
   * existing row is taken only when its record expired, or its claim was
   * released or lapsed.
   */
  const upsertClaim = (source: Statement.Fragment, now: Statement.Fragment) =>
    sql`INSERT INTO ${table} (tool, effect_key, fence, owner, lease_expires_at, taken_over, record, expires_at)
      ${source}
      ON CONFLICT (tool, effect_key) DO UPDATE SET
        fence = ${table}.fence + 1,
        owner = excluded.owner,
        lease_expires_at = excluded.lease_expires_at,
        taken_over = CASE WHEN ${table}.record IS NULL AND ${table}.owner IS NOT NULL THEN 1 ELSE 0 END,
        record = NULL,
        expires_at = excluded.expires_at
      WHERE (${table}.record IS NULL AND (${table}.owner IS NULL OR ${table}.lease_expires_at <= ${now}))
         OR ${table}.expires_at <= ${now}
      RETURNING fence, taken_over`

  // One round trip on PostgreSQL, recorded key or new: a data-modifying CTE
  // reads the row, inserts the claim only when nothing live holds the key (so
  // that a replay takes no row lock), and answers the row it did not claim.
  // It is compiled once: effect/sql compiles a template on every call, up
  // to 9% of a replay (four scratch runs against PostgreSQL on this machine).
  // SQLite has no such statement: it reads what holds the key (a replay is
  // that read, with no write lock on the file), and claims when nothing
  // does, then reads what it could not claim (no network either way).
  const claimRows: (id: EffectId, owner: string, ttlMillis: number) => Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =
    sql.onDialectOrElse({
      pg: () => {
        const statement = compileOnce(
          ["\u0000tool", "\u0000key", "\u0000owner", -1, -2],
          (tool: string, key: string, owner: string, ttlMillis: number, keepMillis: number) =>
            sql`WITH current AS (
                SELECT owner, lease_expires_at, record FROM ${table}
                WHERE tool = ${tool} AND effect_key = ${key} AND expires_at > ${serverTime}
              ), claimed AS (${
              upsertClaim(
                sql`SELECT ${tool}, ${key}, 1, ${owner}, ${serverTime} + ${ttlMillis}, 0, NULL, ${serverTime} + ${keepMillis}
                  WHERE NOT EXISTS (SELECT 1 FROM current WHERE record IS NOT NULL OR (owner IS NOT NULL AND lease_expires_at > ${serverTime}))`,
                serverTime
              )
            })
              SELECT fence, taken_over, NULL::text AS owner, NULL::bigint AS lease_expires_at, NULL::text AS record FROM claimed
              UNION ALL
              SELECT NULL, NULL, owner, lease_expires_at, record FROM current WHERE NOT EXISTS (SELECT 1 FROM claimed)`
        )
        return (id, owner, ttlMillis) =>
          sql.unsafe<ClaimRow>(statement.text, statement.params(id.tool, id.key, owner, ttlMillis, ttlMillis + retention))
      },
      orElse: () => (id, owner, ttlMillis) =>
        Effect.flatMap(currentTime, (now) =>
          Effect.flatMap(heldRow(id, now), (held) =>
            held.length > 0
              ? Effect.succeed(held)
              : claimOrRead(id, sql<ClaimedRow>`${claimNew(id, owner, ttlMillis, ttlMillis + retention, now)}`)))
    })

  /** What the upsert of a claim answers when it claimed. */
  type ClaimedRow = { readonly fence: unknown; readonly taken_over: unknown }

  /** SQLite's upsert of the claim of a key nothing held when it looked, kept `keepMillis` in all. */
  const claimNew = (id: EffectId, owner: string, ttlMillis: number, keepMillis: number, now: Statement.Fragment) =>
    upsertClaim(sql`VALUES (${id.tool}, ${id.key}, 1, ${owner}, ${now} + ${ttlMillis}, 0, NULL, ${now} + ${keepMillis})`, now)

  /** SQLite's claim of a key nothing held when it looked: the upsert's rows, then the row if it could not claim it. */
  const claimOrRead = (id: EffectId, upserted: Effect.Effect<ReadonlyArray<ClaimedRow>, SqlError>) =>
    Effect.flatMap(
      upserted,
      (claimed): Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =>
        claimed.length > 0
          ? Effect.succeed(claimed.map((row) => ({ ...row, owner: null, lease_expires_at: null, record: null })))
          : sql<ClaimRow>`SELECT NULL AS fence, NULL AS taken_over, owner, lease_expires_at, record FROM ${table}
              WHERE tool = ${id.tool} AND effect_key = ${id.key}`
    )

  /** What a claim answers for `row`, or `undefined` when the row changed under the statement (released, expired, or claimed and recorded since). */
  const claimOf = (id: EffectId, row: ClaimRow | undefined): Effect.Effect<Claim, EffectStoreError> | undefined => {
    if (row?.fence != null) return Effect.succeed(Claim.Claimed({ fence: Number(row.fence), takenOver: Number(row.taken_over) === 1 }))
    if (row?.record != null) return Effect.map(EffectStoreError.readRecord("claim", id, row.record), (recorded) => Claim.Recorded({ recorded }))
    if (row?.owner != null) return Effect.succeed(Claim.Busy({ owner: row.owner, expiresAt: Number(row.lease_expires_at) }))
    return undefined
  }

  /** A claim from the rows `first` answers; a row that changed under it is claimed again from the start. */
  const claimFrom = (
    id: EffectId,
    options: { readonly owner: string; readonly ttl: Duration.Duration },
    first: (id: EffectId, owner: string, ttlMillis: number) => Effect.Effect<ReadonlyArray<ClaimRow>, SqlError>
  ): Effect.Effect<Claim, EffectStoreError> =>
    Effect.flatMap(
      Effect.mapError(first(id, options.owner, Duration.toMillis(options.ttl)), EffectStoreError.unavailable("claim", id)),
      ([row]) => claimOf(id, row) ?? claimFrom(id, options, claimRows)
    )

  const claim = (id: EffectId, options: { readonly owner: string; readonly ttl: Duration.Duration }) => claimFrom(id, options, claimRows)

  /** A fenced update: it changes the row only while `fence` still holds the claim. */
  const whileHeld = (id: EffectId, fence: number) =>
    sql`tool = ${id.tool} AND effect_key = ${id.key} AND fence = ${fence} AND owner IS NOT NULL AND record IS NULL`

  /** Fails with `ClaimLost` when a fenced update changed no row: the caller no longer holds the claim. */
  const heldBy = (id: EffectId, fence: number) => (rows: ReadonlyArray<unknown>): Effect.Effect<void, ClaimLost> =>
    rows.length > 0 ? Effect.void : Effect.fail(new ClaimLost({ ...id, fence }))

  /** The fenced write of a record, kept `retentionMillis` from `now`. */
  const recordHeld = (id: EffectId, fence: number, record: string, now: Statement.Fragment, retentionMillis: number) =>
    sql`UPDATE ${table} SET record = ${record}, owner = NULL, lease_expires_at = 0, expires_at = ${now} + ${retentionMillis}
      WHERE ${whileHeld(id, fence)} RETURNING fence`

  /** What a put answers from the rows its fenced write changed, whichever path sent it. */
  const putFrom = (id: EffectId, fence: number, written: Effect.Effect<ReadonlyArray<unknown>, SqlError>) =>
    Effect.flatMap(Effect.mapError(written, EffectStoreError.unavailable("put", id)), heldBy(id, fence))

  /** The fenced write of a record; on PostgreSQL compiled once, as its claim is. */
  const writeRecord: (id: EffectId, fence: number, record: string) => Effect.Effect<ReadonlyArray<unknown>, SqlError> = sql
    .onDialectOrElse({
      pg: () => {
        const statement = compileOnce(
          ["\u0000tool", "\u0000key", -1, "\u0000record", -2],
          (tool: string, key: string, fence: number, record: string, retentionMillis: number) =>
            recordHeld({ tool, key }, fence, record, serverTime, retentionMillis)
        )
        return (id, fence, record) => sql.unsafe(statement.text, statement.params(id.tool, id.key, fence, record, retention))
      },
      orElse: () => (id, fence, record) => Effect.flatMap(currentTime, (now) => recordHeld(id, fence, record, now, retention))
    })

  // Plain combinators, not generators: on Node 24 a generator function made
  // per call costs about 1.5 µs (a scratch run).
  const put = (id: EffectId, recorded: Recorded, { fence }: { readonly fence: number }) =>
    putFrom(id, fence, writeRecord(id, fence, JSON.stringify(recorded)))

  const release = (id: EffectId, { fence }: { readonly fence: number }) =>
    Effect.mapError(
      Effect.flatMap(currentTime, (now) =>
        sql`UPDATE ${table} SET owner = NULL, lease_expires_at = 0, expires_at = ${now} + ${retention}
          WHERE ${whileHeld(id, fence)}`),
      EffectStoreError.unavailable("release", id)
    ).pipe(Effect.asVoid)

  const renew = (id: EffectId, { fence, ttl }: { readonly fence: number; readonly ttl: Duration.Duration }) => {
    const ttlMillis = Duration.toMillis(ttl)
    return Effect.flatMap(
      Effect.mapError(
        Effect.flatMap(currentTime, (now) =>
          sql`UPDATE ${table} SET lease_expires_at = ${now} + ${ttlMillis}, expires_at = ${now} + ${ttlMillis + retention}
            WHERE ${whileHeld(id, fence)} RETURNING fence`),
        EffectStoreError.unavailable("renew", id)
      ),
      heldBy(id, fence)
    )
  }

  // Expired records and claims whose history outlived the retention; on
  // access they are already ignored, so the sweep only keeps the table small.
  const sweep = Effect.flatMap(currentTime, (now) => sql`DELETE FROM ${table} WHERE expires_at <= ${now}`).pipe(
    Effect.catch((error) => Effect.logWarning(`The effect store could not delete expired records (${error.message})`))
  )
  yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(options?.sweepEvery ?? Duration.minutes(1))))

  const sqliteDirect = yield* Effect.serviceOption(SqliteDirect)
  if (Option.isNone(sqliteDirect)) return yield* EffectStore.make({ get, claim, put, release, renew }, options)

  // On the embedded SQLite file, the statements of a replay and of a first
  // application skip effect/sql's statement path (its compile, span and
  // connection lock cost three times a read): a replay is one read that
  // answers at once, without a deadline to race (which cost a third of it);
  // a claim and a record join the group commit directly, under the
  // deadline. A read that cannot answer at once goes through effect/sql.
  // The statements are the ones above, compiled once.
  const direct = sqliteDirect.value
  const recordRead = compileOnce(
    ["\u0000tool", "\u0000key", -1],
    (tool: string, key: string, now: number) => recordRow({ tool, key }, sql`${now}`)
  )
  const heldRead = compileOnce(
    ["\u0000tool", "\u0000key", -1],
    (tool: string, key: string, now: number) => heldRow({ tool, key }, sql`${now}`)
  )
  const claimWrite = compileOnce(
    ["\u0000tool", "\u0000key", "\u0000owner", -1, -2, -3],
    (tool: string, key: string, owner: string, now: number, ttlMillis: number, keepMillis: number) =>
      sql`${claimNew({ tool, key }, owner, ttlMillis, keepMillis, sql`${now}`)}`
  )
  const putWrite = compileOnce(
    ["\u0000tool", "\u0000key", -1, "\u0000record", -2, -3],
    (tool: string, key: string, fence: number, record: string, now: number, retentionMillis: number) =>
      recordHeld({ tool, key }, fence, record, sql`${now}`, retentionMillis)
  )
  return makeWithOwnDeadlines((deadline) => ({
    get: (id) =>
      Effect.withFiber((fiber) => {
        const now = fiber.getRef(Clock.Clock).currentTimeMillisUnsafe()
        const rows = direct.readNow<{ readonly record: string }>(
          recordRead.text,
          recordRead.params(id.tool, id.key, now),
          fiber.getRef(DirectStatementObserver)
        )
        if (rows === undefined) return deadline("get", id, get(id))
        return Effect.flatMap(Effect.mapError(rows, EffectStoreError.unavailable("get", id)), (rows) => recordIn(id, rows))
      }),
    claim: (id, options) =>
      Effect.withFiber((fiber) => {
        const observe = fiber.getRef(DirectStatementObserver)
        const now = fiber.getRef(Clock.Clock).currentTimeMillisUnsafe()
        const held = direct.readNow<ClaimRow>(heldRead.text, heldRead.params(id.tool, id.key, now), observe)
        if (held === undefined) return deadline("claim", id, claim(id, options))
        return Effect.flatMap(Effect.mapError(held, EffectStoreError.unavailable("claim", id)), ([row]) =>
          // Nothing held the key: claim it, without reading it again.
          claimOf(id, row) ?? deadline(
            "claim",
            id,
            claimFrom(id, options, (id, owner, ttlMillis) =>
              claimOrRead(
                id,
                direct.write<ClaimedRow>(
                  claimWrite.text,
                  claimWrite.params(id.tool, id.key, owner, now, ttlMillis, ttlMillis + retention),
                  observe
                )
              ))
          ))
      }),
    put: (id, recorded, held) =>
      Effect.withFiber((fiber) => {
        const now = fiber.getRef(Clock.Clock).currentTimeMillisUnsafe()
        const written = direct.write(
          putWrite.text,
          putWrite.params(id.tool, id.key, held.fence, JSON.stringify(recorded), now, retention),
          fiber.getRef(DirectStatementObserver)
        )
        return deadline("put", id, putFrom(id, held.fence, written))
      }),
    release: (id, held) => deadline("release", id, release(id, held)),
    renew: (id, held) => deadline("renew", id, renew(id, held))
  }), options)
})
