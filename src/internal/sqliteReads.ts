/**
 * Reads on the embedded SQLite connection that skip `effect/sql`'s
 * statement path, answered at once.
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
 */
import { Context, type Exit } from "effect"
import type { SqlError } from "effect/sql/SqlError"

/**
 * Direct reads on one SQLite connection: `readNow` runs the prepared
 * statement `sql` (its placeholders `?`) with `params` and answers its rows,
 * or `undefined` when it cannot answer at once. `observe` sees the statement.
 */
export class SqliteReads extends Context.Service<SqliteReads, {
  readonly readNow: <Row extends object>(
    sql: string,
    params: ReadonlyArray<string | number | null>,
    observe: ((sql: string) => void) | undefined
  ) => Exit.Exit<ReadonlyArray<Row>, SqlError> | undefined
}>()("@tanstack/ai-effect/internal/SqliteReads") {}

/**
 * Sees each statement a SQLite connection runs outside `effect/sql`, which
 * `Statement.CurrentTransformer` cannot: the benchmark and the tests count
 * statements at the driver with it.
 */
export const DirectStatementObserver = Context.Reference<((sql: string) => void) | undefined>(
  "@tanstack/ai-effect/internal/DirectStatementObserver",
  { defaultValue: () => undefined }
)
