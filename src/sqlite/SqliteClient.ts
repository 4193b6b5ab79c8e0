/**
 * A small `SqlClient` over `node:sqlite`, internal to the sqlite store: one
 * serialized connection, prepared statements cached by text, WAL mode, and
 * a short busy timeout, retried without blocking while another process
 * holds the write lock. Beside it, `SqliteReads` runs the same prepared
 * statements without `effect/sql`'s statement path, for the reads on a hot
 * path (a replay).
 *
 * The 4.x `@effect/sql-sqlite-*` packages on npm import modules that effect
 * 4.1 no longer has, so the store brings the driver it needs.
 *
 * @internal
 */
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import type { StatementSync } from "node:sqlite"
import { Context, Effect, Exit, Layer, Schedule, Semaphore, Stream } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql/SqlClient"
import * as Client from "effect/sql/SqlClient"
import type { Connection } from "effect/sql/SqlConnection"
import { classifySqliteError, SqlError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import { SqliteReads } from "../internal/sqliteReads.ts"

/** How long one statement waits for another process's write lock before it yields and tries again. */
const busyTimeoutMillis = 50

/** node:sqlite names the SQLite result code `errcode`; Effect's classifier reads `errno`. */
const classify = (cause: unknown, operation: string) =>
  classifySqliteError(
    typeof cause === "object" && cause !== null && "errcode" in cause ? Object.assign(cause, { errno: cause.errcode }) : cause,
    { message: "SQLite statement failed", operation }
  )

const isLocked = (error: SqlError) => error.reason._tag === "LockTimeoutError"

const makeConnection = (filename: string) =>
  Effect.gen(function*() {
    // Loaded when the layer is built, not when the module is imported: Node 22
    // warns that node:sqlite is experimental as soon as it loads.
    const { DatabaseSync } = yield* Effect.tryPromise({
      try: () => import("node:sqlite"),
      catch: (cause) => new SqlError({ reason: classify(cause, "open") })
    })
    const db = yield* Effect.acquireRelease(
      Effect.try({
        try: () => new DatabaseSync(filename, { timeout: busyTimeoutMillis }),
        catch: (cause) => new SqlError({ reason: classify(cause, "open") })
      }),
      (db) => Effect.sync(() => db.close())
    )
    // Several processes may share the file: readers do not wait for the writer.
    yield* Effect.try({
      try: () => db.exec("PRAGMA journal_mode = WAL"),
      catch: (cause) => new SqlError({ reason: classify(cause, "open") })
    }).pipe(Effect.retry({ while: isLocked, schedule: Schedule.spaced("10 millis") }), Effect.timeout("10 seconds"), Effect.orDie)
    const statements = new Map<string, StatementSync>()
    const prepared = (sql: string) => {
      let statement = statements.get(sql)
      if (statement === undefined) statements.set(sql, statement = db.prepare(sql))
      return statement
    }
    // Rows are objects or arrays as the caller asked; SqlConnection types them loosely.
    const run = (statement: () => StatementSync, params: ReadonlyArray<unknown>, arrays: boolean): Effect.Effect<ReadonlyArray<any>, SqlError> =>
      Effect.try({
        try: () => {
          const prepared = statement()
          prepared.setReturnArrays(arrays)
          // Parameters come from the statement compiler, which only emits SQLite values.
          const args = params as Array<any>
          if (prepared.columns().length > 0) return prepared.all(...args).map((row) => arrays ? row : { ...row })
          prepared.run(...args)
          return []
        },
        catch: (cause) => new SqlError({ reason: classify(cause, "execute") })
      }).pipe(
        // A busy database answers within the busy timeout; waiting between
        // attempts leaves the event loop to everyone else. The store's
        // deadline bounds the whole wait.
        Effect.retry({ while: isLocked, schedule: Schedule.jittered(Schedule.spaced("5 millis")) })
      )
    // Statements of direct reads apart, so that their row shape is set once.
    const readStatements = new Map<string, StatementSync>()
    const reads = SqliteReads.of({
      readNow: <Row extends object>(
        sql: string,
        params: ReadonlyArray<string | number | null>,
        observe: ((sql: string) => void) | undefined
      ): Exit.Exit<ReadonlyArray<Row>, SqlError> | undefined => {
        if (db.isTransaction) return undefined
        observe?.(sql)
        try {
          let statement = readStatements.get(sql)
          if (statement === undefined) readStatements.set(sql, statement = db.prepare(sql))
          // node:sqlite types rows loosely; the caller's statement names the columns of Row.
          return Exit.succeed(statement.all(...params) as Array<unknown> as Array<Row>)
        } catch (cause) {
          const error = new SqlError({ reason: classify(cause, "execute") })
          // A WAL reader waits only while a checkpoint resets the log: effect/sql's path waits it out.
          return isLocked(error) ? undefined : Exit.fail(error)
        }
      }
    })
    const connection: Connection = {
      execute: (sql, params, transformRows) =>
        Effect.map(run(() => prepared(sql), params, false), (rows) => transformRows ? transformRows(rows as Array<object>) : rows),
      executeRaw: (sql, params) => run(() => prepared(sql), params, false),
      executeValues: (sql, params) => run(() => prepared(sql), params, true),
      executeValuesUnprepared: (sql, params) => run(() => db.prepare(sql), params, true),
      executeUnprepared: (sql, params, transformRows) =>
        Effect.map(run(() => db.prepare(sql), params, false), (rows) => transformRows ? transformRows(rows as Array<object>) : rows),
      executeStream: (sql, params, transformRows) =>
        Stream.fromIterableEffect(
          Effect.map(run(() => prepared(sql), params, false), (rows) => transformRows ? transformRows(rows as Array<object>) : rows)
        )
    }
    return { connection, reads }
  })

/** A `SqlClient` on one SQLite file, its folder created when missing (`":memory:"` keeps it in memory). */
export const layerFile = (filename: string): Layer.Layer<SqlClient | SqliteReads, SqlError> =>
  Layer.unwrap(Effect.sync(() => {
    if (filename !== ":memory:") mkdirSync(dirname(filename), { recursive: true })
    return layer(filename)
  }))

/** A `SqlClient` on one SQLite file, and its direct reads, closed with the layer. */
export const layer = (filename: string): Layer.Layer<SqlClient | SqliteReads, SqlError> =>
  Layer.effectContext(
    Effect.gen(function*() {
      const { connection, reads } = yield* makeConnection(filename)
      const acquirers = Client.makeSqliteAcquirers({
        connection: Effect.succeed(connection),
        semaphore: yield* Semaphore.make(1)
      })
      const client = yield* Client.make({
        ...acquirers,
        compiler: Statement.makeCompilerSqlite(),
        driver: "node:sqlite",
        spanAttributes: [["db.system.name", "sqlite"]]
      })
      return Context.make(SqlClient, client).pipe(Context.add(SqliteReads, reads))
    })
  ).pipe(Layer.provide(Reactivity.layer))

