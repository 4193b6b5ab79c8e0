/**
 * Statements on the embedded SQLite connection that skip `effect/sql`'s
 * statement path: reads answered at once, and writes that join the
 * connection's group commit.
 *
 * A statement through `effect/sql` compiles its template, opens a span and
 * borrows the connection behind a semaphore: about 10 µs, where the read
 * itself takes 3 µs on `node:sqlite`. A replay of a recorded key is that one
 * read, so the SQLite client offers its prepared statements directly for
 * reads. It is correct because `node:sqlite` runs a statement synchronously
 * (nothing interleaves with it) and a WAL read takes no lock a writer waits
 * on. A read that cannot answer at once (the connection is inside a
 * transaction, or the file is busy) is left to `effect/sql`, so that it
 * never joins someone else's transaction, and its wait gets a deadline.
 * A write on a hot path (a first application's claim and record) skips the
 * same path and joins the group commit as any write does: it waits for an
 * explicit transaction to end, and answers once its group is durable.
 *
 * Other processes that share the file say nothing of their commits, but
 * each one appends to the file's write-ahead log: a watch of that file is
 * how a process hears that something may have been written.
 */
import { Context, type Effect, type Exit } from "effect"
import type { SqlError } from "effect/sql/SqlError"

/**
 * Direct statements on one SQLite connection, prepared from `sql` (its
 * placeholders `?`) and run with `params`; `observe` sees the statement.
 * `readNow` answers the rows of a read, or `undefined` when it cannot answer
 * at once. `write` runs a write in the next group commit and answers its rows
 * (`RETURNING`) once that commit is durable. `watchLog`, absent for a
 * database in memory, watches the file's write-ahead log until the watch
 * fails or the effect is interrupted: it calls `wrote` once when it starts
 * watching, then after any connection, in any process, writes to the log
 * (this one's too).
 */
export class SqliteDirect extends Context.Service<SqliteDirect, {
  readonly readNow: <Row extends object>(
    sql: string,
    params: ReadonlyArray<string | number | null>,
    observe: ((sql: string) => void) | undefined
  ) => Exit.Exit<ReadonlyArray<Row>, SqlError> | undefined
  readonly write: <Row extends object>(
    sql: string,
    params: ReadonlyArray<string | number | null>,
    observe: ((sql: string) => void) | undefined
  ) => Effect.Effect<ReadonlyArray<Row>, SqlError>
  readonly watchLog: ((wrote: () => void) => Effect.Effect<never, unknown>) | undefined
}>()("@tanstack/ai-effect/internal/SqliteDirect") {}

/**
 * Sees each statement a SQLite connection runs outside `effect/sql`, which
 * `Statement.CurrentTransformer` cannot: the benchmark and the tests count
 * statements at the driver with it.
 */
export const DirectStatementObserver = Context.Reference<((sql: string) => void) | undefined>(
  "@tanstack/ai-effect/internal/DirectStatementObserver",
  { defaultValue: () => undefined }
)
