/**
 * The delivery log on SQL: a row per run (its producer's epoch, whether it
 * closed, when it expires) and a row per chunk. An append is one statement
 * that inserts the batch after the tail only while the producer's epoch is
 * current, so that a superseded producer stores nothing; PostgreSQL and
 * SQLite run the same statements (PostgreSQL's writes wrapped to announce).
 *
 * On PostgreSQL a write also announces the run's new tail (`NOTIFY` in the
 * writing statement, delivered when it commits), and the readers of every
 * process that listens wake at once. In a SQLite file a process whose
 * readers wait watches the file's write-ahead log and reads what another
 * process committed past the rows it saw. Elsewhere, and for what either
 * misses (a listener that reconnects, a commit slower than the watch), the
 * readers' shared poll finds it.
 *
 * @since 0.1.0
 */
import type { StreamChunk } from "@tanstack/ai"
import { Clock, Duration, Effect, Layer, Option, Predicate, type Queue, Schedule, type Scope } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Statement } from "effect/sql/Statement"
import { planUpsert } from "../internal/streamLog.ts"
import { SqliteDirect } from "../internal/sqliteDirect.ts"
import { watchSqliteTails } from "../internal/sqliteTails.ts"
import { listenForTails, pollTails, type Tail } from "../internal/tailPoll.ts"
import { type Entry, InvalidOffset, type Page, ProducerFenced, StreamLog, StreamLogError, type StreamLogOptions } from "../StreamLog.ts"

/**
 * Options of {@link layerSqlStreamLog}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlStreamLogOptions extends StreamLogOptions {
  /** The prefix of its two tables, created when missing: `<prefix>_runs` and `<prefix>_chunks`. Default `ai_stream`. */
  readonly tablePrefix?: string | undefined
  /**
   * How often a reader that caught up looks for what another process
   * stored; a write of the reader's own log layer wakes it at once. The
   * readers waiting in one layer share each look: one statement asks for
   * the tails of all their runs. Default 50 milliseconds.
   */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * Readers hear another process's writes as they commit, not at the next
   * poll. PostgreSQL: each write announces the run's new tail with
   * `NOTIFY`, and a layer whose readers wait holds one connection that
   * `LISTEN`s; every listening process hears every run's writes, and
   * PostgreSQL wakes each of them at every commit that announces. Turn it
   * off behind a pooler in transaction mode, which does not keep a
   * `LISTEN`, and on a client of one connection, which the listener would
   * hold. SQLite (`@tanstack/ai-effect/sqlite`): a layer whose readers wait
   * watches the file's write-ahead log, and after another connection's
   * commit reads the runs written since its last look, in one statement.
   * Off, the poll finds every write. Default `true`.
   */
  readonly notify?: boolean | undefined
  /**
   * How often the readers' poll looks while the layer hears the writes
   * (from the moment its listener or its watch fails, it looks every
   * `pollInterval` again): it then only finds what the listener may miss,
   * such as a notification lost with its connection, or a SQLite commit
   * that took longer than the watch's last look. A look at 1,000 waiting
   * runs is two statements; on SQLite, polled every 50 milliseconds, they
   * cost the readers' process 75–97 ms of CPU a second. Never less often
   * than `pollInterval`. Default 1 second.
   */
  readonly listeningPollInterval?: Duration.Input | undefined
  /** How often expired logs are deleted. Default 1 minute. */
  readonly sweepEvery?: Duration.Input | undefined
}

/**
 * The delivery log on the `SqlClient` in context: PostgreSQL through
 * `@effect/sql-pg`, or SQLite (see `@tanstack/ai-effect/sqlite`). The layer
 * creates its tables when missing and deletes expired logs in a background
 * fiber that lives as long as the layer.
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { layerSqlStreamLog } from "@tanstack/ai-effect/sql"
 * import { Layer, Redacted } from "effect"
 *
 * export const StreamLogLive = layerSqlStreamLog({ retention: "1 day" }).pipe(
 *   Layer.provide(PgClient.layer({ url: Redacted.make("postgres://localhost:5432/app") }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlStreamLog = (options?: SqlStreamLogOptions): Layer.Layer<StreamLog, SqlError, SqlClient> =>
  Layer.effect(StreamLog, makeSqlStreamLog(options))

/**
 * Makes the SQL delivery log on the `SqlClient` in context, in the current
 * scope: creates the tables and starts the sweep.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSqlStreamLog = Effect.fnUntraced(function*(options?: SqlStreamLogOptions) {
  const sql = yield* SqlClient
  const prefix = options?.tablePrefix ?? "ai_stream"
  const runs = sql(`${prefix}_runs`)
  const chunks = sql(`${prefix}_chunks`)
  const retention = Duration.toMillis(Duration.fromInputUnsafe(options?.retention ?? "24 hours"))
  const pollInterval = Duration.fromInputUnsafe(options?.pollInterval ?? "50 millis")
  yield* sql`CREATE TABLE IF NOT EXISTS ${runs} (
    run_id TEXT PRIMARY KEY,
    epoch BIGINT NOT NULL,
    complete INTEGER NOT NULL,
    expires_at BIGINT NOT NULL
  )`.pipe(
    Effect.andThen(sql`CREATE TABLE IF NOT EXISTS ${chunks} (
      run_id TEXT NOT NULL,
      seq BIGINT NOT NULL,
      chunk TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    )`),
    Effect.andThen(sql`CREATE INDEX IF NOT EXISTS ${sql(`${prefix}_runs_expires_at`)} ON ${runs} (expires_at)`),
    // Processes starting together race on IF NOT EXISTS (PostgreSQL's catalog
    // may refuse the second creation); one more attempt finds the tables there.
    Effect.retry({ times: 5, schedule: Schedule.spaced("50 millis") })
  )

  const failed = (operation: string, runId: string) => (cause: unknown) =>
    new StreamLogError({ operation, runId, reason: "unavailable", cause })
  const decode = (runId: string, text: string): Effect.Effect<StreamChunk, StreamLogError> =>
    Effect.try({
      // The log stores what core handed it: a chunk, as JSON.
      try: () => JSON.parse(text) as StreamChunk,
      catch: (cause) => new StreamLogError({ operation: "read", runId, reason: "corrupt", cause })
    })
  /** The chunks as rows to insert: `SELECT <i>, <json> UNION ALL ...`, a form both dialects read. */
  const rowsOf = (entries: ReadonlyArray<{ readonly position: number; readonly chunk: StreamChunk }>) =>
    entries
      .map(({ chunk, position }) => sql`SELECT CAST(${position} AS BIGINT) AS position, CAST(${JSON.stringify(chunk)} AS TEXT) AS chunk`)
      .reduce((all, row) => sql`${all} UNION ALL ${row}`)
  const current = (runId: string, epoch: number) =>
    sql`EXISTS (SELECT 1 FROM ${runs} WHERE run_id = ${runId} AND epoch = ${epoch} AND complete = 0)`

  const notify = options?.notify ?? true
  const channel = `${prefix}_tails`
  const announces = notify && sql.onDialectOrElse({ pg: () => true, orElse: () => false }) &&
    new TextEncoder().encode(channel).length <= maxChannelBytes
  /**
   * The write, and on PostgreSQL the run's new tail announced in the same
   * statement: `<tail> <0|1 complete> <run id>`, one notification however
   * many rows it writes (PostgreSQL folds identical ones).
   */
  const announcing = <Row extends object>(runId: string, complete: boolean, write: Statement<Row>): Statement<Row> => {
    if (!announces || runId.length > maxAnnouncedRunId) return write
    const tail = complete ? sql`'0'` : sql`CAST((SELECT MAX(seq) FROM written) AS TEXT)`
    return sql<Row>`WITH written AS (${write})
      SELECT *, pg_notify(${channel}, ${tail} || CAST(${` ${complete ? 1 : 0} ${runId}`} AS TEXT)) AS announced FROM written`
  }

  // In a SQLite file a closed run's row takes the next rowid, so that a process that watches the file finds the
  // close past the last row it saw, as it finds appends.
  const movedToTheEnd = sql.onDialectOrElse({
    sqlite: () => sql`, rowid = (SELECT MAX(rowid) FROM ${runs}) + 1`,
    orElse: () => sql.literal("")
  })
  // On this package's SQLite client: its connection, whose file a layer whose readers wait watches.
  const sqliteDirect = Option.getOrUndefined(yield* Effect.serviceOption(SqliteDirect))
  /** What another process wrote: the closed runs and the tails of the runs written, past the last rowids seen. */
  const written = () =>
    sql`SELECT 'closed' AS kind, run_id, NULL AS n FROM ${runs} NOT INDEXED WHERE rowid > ${0} AND complete = 1
      UNION ALL SELECT 'chunks', run_id, MAX(seq) FROM ${chunks} NOT INDEXED WHERE rowid > ${0} GROUP BY run_id
      UNION ALL SELECT 'runs', NULL, (SELECT MAX(rowid) FROM ${runs})
      UNION ALL SELECT 'chunk rows', NULL, (SELECT MAX(rowid) FROM ${chunks})`.compile()[0]

  const backend = {
    claim: (runId: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* sql<{ readonly epoch: unknown; readonly complete: unknown }>`INSERT INTO ${runs}
          (run_id, epoch, complete, expires_at) VALUES (${runId}, 1, 0, ${now + retention})
          ON CONFLICT (run_id) DO UPDATE SET
            epoch = CASE WHEN ${runs}.complete = 0 THEN ${runs}.epoch + 1 ELSE ${runs}.epoch END,
            expires_at = CASE WHEN ${runs}.complete = 0 THEN excluded.expires_at ELSE ${runs}.expires_at END
          RETURNING epoch, complete`.pipe(Effect.mapError(failed("claim", runId)))
        const row = rows[0]!
        // A closed log is the run's last word: no producer writes to it again.
        if (Number(row.complete) === 1) return yield* new ProducerFenced({ runId, epoch: Number(row.epoch) })
        return Number(row.epoch)
      }),
    append: (runId: string, epoch: number, batch: ReadonlyArray<StreamChunk>) =>
      Effect.gen(function*() {
        if (batch.length === 0) {
          const [known] = yield* sql`SELECT 1 AS owned WHERE ${current(runId, epoch)}`.pipe(Effect.mapError(failed("append", runId)))
          return known === undefined ? yield* new ProducerFenced({ runId, epoch }) : []
        }
        // One statement: the batch goes after the tail while this producer's epoch is current.
        const rows = yield* announcing(
          runId,
          false,
          sql<{ readonly seq: unknown }>`INSERT INTO ${chunks} (run_id, seq, chunk)
          SELECT ${runId}, (SELECT COALESCE(MAX(seq), 0) FROM ${chunks} WHERE run_id = ${runId}) + batch.position, batch.chunk
          FROM (${rowsOf(batch.map((chunk, index) => ({ position: index + 1, chunk })))}) AS batch
          WHERE ${current(runId, epoch)}
          RETURNING seq`
        ).pipe(Effect.mapError(failed("append", runId)))
        if (rows.length === 0) return yield* new ProducerFenced({ runId, epoch })
        return rows.map((row) => Number(row.seq)).sort((a, b) => a - b)
      }),
    upsert: (runId: string, epoch: number, entries: ReadonlyArray<Entry>) =>
      Effect.gen(function*() {
        const [state] = yield* sql<{ readonly tail: unknown }>`SELECT (SELECT COALESCE(MAX(seq), 0) FROM ${chunks} WHERE run_id = ${runId}) AS tail
          WHERE ${current(runId, epoch)}`.pipe(Effect.mapError(failed("upsert", runId)))
        if (state === undefined) return yield* new ProducerFenced({ runId, epoch })
        if (entries.length === 0) return
        const stored = new Set(
          (yield* sql<{ readonly seq: unknown }>`SELECT seq FROM ${chunks} WHERE run_id = ${runId} AND seq IN ${sql.in(entries.map((entry) => entry.seq))}`.pipe(
            Effect.mapError(failed("upsert", runId))
          )).map((row) => Number(row.seq))
        )
        const plan = planUpsert(entries.map((entry) => entry.seq), { tail: Number(state.tail), has: (seq) => stored.has(seq) })
        if (plan._tag === "Refused") return yield* new InvalidOffset({ offset: StreamLog.offsetOf(runId, plan.seq), reason: plan.reason })
        // Validated whole above; one statement writes the batch, while the epoch is still current.
        const written = yield* announcing(
          runId,
          false,
          sql<{ readonly seq: unknown }>`INSERT INTO ${chunks} (run_id, seq, chunk)
          SELECT ${runId}, batch.position, batch.chunk
          FROM (${rowsOf(entries.map((entry) => ({ position: entry.seq, chunk: entry.chunk })))}) AS batch
          WHERE ${current(runId, epoch)}
          ON CONFLICT (run_id, seq) DO UPDATE SET chunk = excluded.chunk
          RETURNING seq`
        ).pipe(Effect.mapError(failed("upsert", runId)))
        if (written.length === 0) return yield* new ProducerFenced({ runId, epoch })
      }),
    close: (runId: string, epoch: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* announcing(
          runId,
          true,
          sql`UPDATE ${runs} SET complete = 1, expires_at = ${now + retention}${movedToTheEnd}
          WHERE run_id = ${runId} AND epoch = ${epoch} AND complete = 0 RETURNING run_id`
        ).pipe(Effect.mapError(failed("close", runId)))
        if (rows.length === 0) return yield* new ProducerFenced({ runId, epoch })
      }),
    read: (runId: string, after: number, limit: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* sql<{ readonly complete: unknown; readonly seq: unknown; readonly chunk: string | null }>`SELECT
            r.complete AS complete, c.seq AS seq, c.chunk AS chunk
          FROM ${runs} r LEFT JOIN ${chunks} c ON c.run_id = r.run_id AND c.seq > ${after}
          WHERE r.run_id = ${runId} AND r.expires_at > ${now}
          ORDER BY c.seq LIMIT ${limit}`.pipe(Effect.mapError(failed("read", runId)))
        if (rows.length === 0) return { entries: [], complete: false, known: false } satisfies Page
        const entries = yield* Effect.forEach(
          rows.filter((row) => row.chunk !== null),
          (row) => Effect.map(decode(runId, row.chunk!), (chunk): Entry => ({ seq: Number(row.seq), chunk }))
        )
        return { entries, complete: Number(rows[0]!.complete) === 1, known: true } satisfies Page
      }),
    // Another process's write is seen at the next poll, one for every waiting reader, or at once when heard (the poll
    // then looks once a second, for what the listener missed).
    awaitChange: yield* pollTails(pollInterval, (runIds) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* sql<{ readonly run_id: string; readonly complete: unknown; readonly tail: unknown }>`SELECT
            r.run_id AS run_id, r.complete AS complete, (SELECT MAX(c.seq) FROM ${chunks} c WHERE c.run_id = r.run_id) AS tail
          FROM ${runs} r WHERE r.run_id IN ${sql.in(runIds)} AND r.expires_at > ${now}`
        return new Map(rows.map((row): [string, Tail] => [row.run_id, { seq: Number(row.tail ?? 0), complete: Number(row.complete) === 1 }]))
      }), announces && isListening(sql)
        ? listenForTails(sql.listen(channel), (notification) => notification.payload)
        : notify && sqliteDirect?.watchLog !== undefined
        ? watchSqliteTails(sqliteDirect, sqliteDirect.watchLog, written())
        : undefined, options?.listeningPollInterval)
  }

  const sweep = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    yield* sql`DELETE FROM ${chunks} WHERE run_id IN (SELECT run_id FROM ${runs} WHERE expires_at <= ${now})`
    yield* sql`DELETE FROM ${runs} WHERE expires_at <= ${now}`
  }).pipe(Effect.ignore)
  yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(Duration.fromInputUnsafe(options?.sweepEvery ?? "1 minute"))))

  return yield* StreamLog.make(backend, options)
})

/** PostgreSQL's longest channel name. */
const maxChannelBytes = 63

/**
 * The longest run id a write announces: a notification's payload is under
 * 8,000 bytes, and a character is at most 3 of them. A longer id is found
 * by the poll.
 */
const maxAnnouncedRunId = 2_600

/** The part of `@effect/sql-pg`'s `PgClient` that listens, read off the client so that the package stays an optional peer. */
interface Listening {
  readonly listen: (channel: string) => Effect.Effect<Queue.Dequeue<{ readonly payload: string }, unknown>, unknown, Scope.Scope>
}

const isListening = (client: object): client is Listening => Predicate.hasProperty(client, "listen") && Predicate.isFunction(client.listen)
