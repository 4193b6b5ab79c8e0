/**
 * The SQLite client that every store of `@tanstack/ai-effect/sqlite` runs
 * on: an `effect/sql` `SqlClient` over `node:sqlite`, one connection to one
 * file, prepared statements cached by text, WAL mode, a group commit for the
 * writes of concurrent fibers, and a short busy timeout, retried without
 * blocking while another process holds the write lock. The statements on a
 * hot path (a replay's read, a first application's claim and record) run
 * its prepared statements directly, without `effect/sql`'s statement path.
 *
 * Each `layerSqlite*` layer opens a connection of its own. Stores that share
 * a file share one connection when they run on {@link layerSqliteClient}
 * (the layers of `@tanstack/ai-effect/sql`), and then one group commit.
 *
 * The 4.x `@effect/sql-sqlite-*` packages on npm import modules that effect
 * 4.1 no longer has, so the store brings the driver it needs.
 *
 * @since 0.1.0
 */
import { mkdirSync, watch } from "node:fs"
import { dirname } from "node:path"
import type { StatementSync } from "node:sqlite"
import { Context, Deferred, Effect, Exit, Layer, Schedule, Semaphore, Stream } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql/SqlClient"
import * as Client from "effect/sql/SqlClient"
import type { Connection } from "effect/sql/SqlConnection"
import { classifySqliteError, SqlError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import { retryOnFailure } from "../internal/retry.ts"
import { SqliteDirect } from "../internal/sqliteDirect.ts"

/** How long one statement waits for another process's write lock before it yields and tries again. */
const busyTimeoutMillis = 50

/** node:sqlite names the SQLite result code `errcode`; Effect's classifier reads `errno`. */
const classify = (cause: unknown, operation: string) =>
  classifySqliteError(
    typeof cause === "object" && cause !== null && "errcode" in cause ? Object.assign(cause, { errno: cause.errcode }) : cause,
    { message: "SQLite statement failed", operation }
  )

const isLocked = (error: SqlError) => error.reason._tag === "LockTimeoutError"

/**
 * A busy database answers within the busy timeout; waiting between attempts
 * leaves the event loop to everyone else. The store's deadline bounds the
 * whole wait.
 */
const whileLocked = { while: isLocked, schedule: Schedule.jittered(Schedule.spaced("5 millis")) }

/** A statement that writes, and so may share a group commit. Anything else (a read, DDL, a PRAGMA) runs alone. */
const isWrite = (sql: string) => /^\s*(?:INSERT|UPDATE|DELETE|REPLACE)\b/i.test(sql)

/**
 * Rows are objects or arrays as the caller asked; SqlConnection types them
 * loosely. `all` runs a statement without rows too (it answers none), where
 * asking the statement for its columns first costs about as much as a read.
 */
const rowsOf = (statement: StatementSync, params: ReadonlyArray<unknown>, arrays: boolean): ReadonlyArray<any> => {
  statement.setReturnArrays(arrays)
  // Parameters come from the statement compiler, which only emits SQLite values.
  const rows = statement.all(...(params as Array<any>))
  return arrays ? rows : rows.map((row) => ({ ...row }))
}

/** A write waiting for its group commit. */
interface PendingWrite {
  readonly statement: () => StatementSync
  readonly params: ReadonlyArray<unknown>
  readonly arrays: boolean
  readonly done: Deferred.Deferred<ReadonlyArray<any>, SqlError>
}

/**
 * One connection, and the two ways `effect/sql` uses it:
 *
 * - `outside`: a statement outside a transaction. A write joins the group
 *   commit: the writes of one turn of the event loop (any fiber's) wait,
 *   then run in one transaction on the next turn, and each answers once
 *   that commit is durable. Concurrent runs then share one sync of the WAL
 *   instead of paying one each, and the write lock is held only while the
 *   group runs, synchronously, so that other connections to the file never
 *   wait for it across turns. A statement that fails inside the group is
 *   undone alone (SQLite's statement rollback), and the others still commit.
 *   A read runs at once: a write that has not answered may or may not be in
 *   it, as with any concurrent write.
 * - `transaction`: an explicit transaction's statements. It starts once the
 *   open group has committed, and statements outside it wait for its end.
 */
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
    const retryWhileLocked = <A>(effect: Effect.Effect<A, SqlError>) => retryOnFailure(effect, whileLocked)

    /** Writes waiting for the group commit, in the order they came. */
    let pending: Array<PendingWrite> = []
    /** The end of the explicit transaction in progress. */
    let transactionEnd: Deferred.Deferred<void> | undefined

    // All pending writes in one transaction, each answered once it commits.
    const commitPending = () => {
      const writes = pending
      if (writes.length === 0) return
      pending = []
      const failAll = (cause: unknown) => {
        const error = new SqlError({ reason: classify(cause, "commit") })
        for (const write of writes) Deferred.doneUnsafe(write.done, Exit.fail(error))
      }
      try {
        db.exec("BEGIN IMMEDIATE")
      } catch (cause) {
        return failAll(cause)
      }
      const answers: Array<Exit.Exit<ReadonlyArray<any>, SqlError>> = []
      for (const write of writes) {
        try {
          answers.push(Exit.succeed(rowsOf(write.statement(), write.params, write.arrays)))
        } catch (cause) {
          // A failed statement is undone alone; one that ends the transaction (a full disk, say) undoes them all.
          if (!db.isTransaction) return failAll(cause)
          answers.push(Exit.fail(new SqlError({ reason: classify(cause, "execute") })))
        }
      }
      try {
        db.exec("COMMIT")
      } catch (cause) {
        try {
          if (db.isTransaction) db.exec("ROLLBACK")
        } catch {
          // The next group's BEGIN then fails, and its writes with it: the connection fails closed.
        }
        return failAll(cause)
      }
      writes.forEach((write, index) => Deferred.doneUnsafe(write.done, answers[index]!))
    }
    // Writes of a closing layer still commit.
    yield* Effect.addFinalizer(() => Effect.sync(commitPending))

    const runOutside = (
      sql: string,
      statement: () => StatementSync,
      params: ReadonlyArray<unknown>,
      arrays: boolean
    ): Effect.Effect<ReadonlyArray<any>, SqlError> =>
      Effect.suspend(() => {
        if (transactionEnd !== undefined) return Effect.andThen(Deferred.await(transactionEnd), runOutside(sql, statement, params, arrays))
        if (!isWrite(sql)) return runNow(statement, params, arrays)
        const write: PendingWrite = { statement, params, arrays, done: Deferred.makeUnsafe() }
        if (pending.push(write) === 1) setImmediate(commitPending)
        // A write interrupted before its group runs is not written.
        return Effect.onInterrupt(Deferred.await(write.done), () =>
          Effect.sync(() => {
            const index = pending.indexOf(write)
            if (index >= 0) pending.splice(index, 1)
          }))
      }).pipe(retryWhileLocked)

    const runNow = (statement: () => StatementSync, params: ReadonlyArray<unknown>, arrays: boolean) =>
      Effect.try({
        try: () => rowsOf(statement(), params, arrays),
        catch: (cause) => new SqlError({ reason: classify(cause, "execute") })
      })

    const connectionOf = (
      run: (sql: string, statement: () => StatementSync, params: ReadonlyArray<unknown>, arrays: boolean) => Effect.Effect<ReadonlyArray<any>, SqlError>
    ): Connection => {
      const rows = (
        sql: string,
        statement: () => StatementSync,
        params: ReadonlyArray<unknown>,
        transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
      ) => Effect.map(run(sql, statement, params, false), (rows) => transformRows ? transformRows(rows as Array<object>) : rows)
      return {
        execute: (sql, params, transformRows) => rows(sql, () => prepared(sql), params, transformRows),
        executeRaw: (sql, params) => run(sql, () => prepared(sql), params, false),
        executeValues: (sql, params) => run(sql, () => prepared(sql), params, true),
        executeValuesUnprepared: (sql, params) => run(sql, () => db.prepare(sql), params, true),
        executeUnprepared: (sql, params, transformRows) => rows(sql, () => db.prepare(sql), params, transformRows),
        executeStream: (sql, params, transformRows) => Stream.fromIterableEffect(rows(sql, () => prepared(sql), params, transformRows))
      }
    }
    const outside = connectionOf(runOutside)
    const inTransaction = connectionOf((_sql, statement, params, arrays) => retryWhileLocked(runNow(statement, params, arrays)))

    // One explicit transaction at a time; it starts after the open group's commit.
    const semaphore = yield* Semaphore.make(1)
    const transactionAcquirer = Effect.uninterruptibleMask((restore) =>
      Effect.andThen(
        restore(semaphore.takeScoped(1)),
        Effect.acquireRelease(
          Effect.sync(() => {
            commitPending()
            transactionEnd = Deferred.makeUnsafe<void>()
            return inTransaction
          }),
          () =>
            Effect.sync(() => {
              const ended = transactionEnd
              transactionEnd = undefined
              if (ended !== undefined) Deferred.doneUnsafe(ended, Exit.void)
            })
        )
      )
    )
    const rollback = Effect.sync(() => {
      if (db.isTransaction) db.exec("ROLLBACK")
    })

    // Statements of direct reads apart, so that their row shape is set once.
    const readStatements = new Map<string, StatementSync>()
    const direct = SqliteDirect.of({
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
      },
      write: <Row extends object>(sql: string, params: ReadonlyArray<string | number | null>, observe: ((sql: string) => void) | undefined) =>
        Effect.suspend(() => {
          observe?.(sql)
          // The caller's statement names the columns of Row.
          return runOutside(sql, () => prepared(sql), params, false) as Effect.Effect<ReadonlyArray<Row>, SqlError>
        }),
      // A commit appends its pages to the write-ahead log, which lives beside the file while a connection is open
      // (this one).
      watchLog: filename === ":memory:" ? undefined : (wrote) =>
        Effect.acquireUseRelease(
          Effect.try(() => watch(`${filename}-wal`, { persistent: false }, () => wrote())),
          (watcher) =>
            Effect.callback<never, unknown>((resume) => {
              watcher.once("error", (cause) => resume(Effect.fail(cause)))
              wrote()
            }),
          (watcher) => Effect.sync(() => watcher.close())
        )
    })
    return { outside, transactionAcquirer, rollback, isTransaction: () => db.isTransaction, direct }
  })

/**
 * Options of {@link layerSqliteClient}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteClientOptions {
  /** The database file; its folder is created when missing. `":memory:"` keeps it in memory. */
  readonly filename: string
}

/**
 * One connection to a SQLite file, as an `effect/sql` `SqlClient`: the
 * stores of `@tanstack/ai-effect/sql` (the effect store, the delivery log,
 * the thread store) run on it. Stores on one connection share its group
 * commit: the writes of a run's log, its thread and its tools' claims that
 * come in one turn of the event loop pay one sync of the WAL together,
 * where each `layerSqlite*` layer would open a connection, and commit, of
 * its own. The layer opens the file (creating it and its folder) and closes
 * it when its scope ends, once the writes it waits on have committed.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { layerSql, layerSqlStreamLog, layerSqlThreadStore } from "@tanstack/ai-effect/sql"
 * import { layerSqliteClient } from "@tanstack/ai-effect/sqlite"
 * import { Layer } from "effect"
 *
 * // The effect store, the locks on it, the delivery log and the threads, on one connection to one file.
 * const effects = layerSql({ retention: "7 days" })
 * export const StoresLive = Layer.mergeAll(
 *   effects,
 *   AI.Locks.layer({ lease: "10 seconds" }).pipe(Layer.provide(effects)),
 *   layerSqlStreamLog(),
 *   layerSqlThreadStore()
 * ).pipe(Layer.provide(layerSqliteClient({ filename: ".data/app.db" })))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqliteClient = (options: SqliteClientOptions): Layer.Layer<SqlClient, SqlError> =>
  Layer.unwrap(Effect.sync(() => {
    if (options.filename !== ":memory:") mkdirSync(dirname(options.filename), { recursive: true })
    // The context also holds SqliteDirect, which the SQL stores look for: it stays out of the public type.
    return layer(options.filename)
  }))

/** A `SqlClient` on one SQLite file, and its direct statements, closed with the layer. */
const layer = (filename: string): Layer.Layer<SqlClient | SqliteDirect, SqlError> =>
  Layer.effectContext(
    Effect.gen(function*() {
      const { outside, transactionAcquirer, rollback, isTransaction, direct } = yield* makeConnection(filename)
      const client = yield* Client.make({
        acquirer: Effect.succeed(outside),
        borrower: (f) => f(outside),
        transactionAcquirer,
        isTransaction,
        // SQLite prepares transaction control like any statement; kept prepared, a transaction saves about 10 µs.
        prepareTransactionControls: true,
        onCommitFailure: () => rollback,
        compiler: Statement.makeCompilerSqlite(),
        driver: "node:sqlite",
        spanAttributes: [["db.system.name", "sqlite"]]
      })
      return Context.make(SqlClient, client).pipe(Context.add(SqliteDirect, direct))
    })
  ).pipe(Layer.provide(Reactivity.layer))

