/**
 * What another process wrote to a delivery log in a SQLite file, heard as it
 * commits.
 *
 * SQLite has no `NOTIFY`: a commit only appends to the file's write-ahead
 * log. A process whose readers wait watches that file, and after each write
 * to it asks `PRAGMA data_version` whether another connection committed; if
 * one did, one statement reads what was written past the last rows it saw
 * (rowids grow as rows are inserted, and a closed run's row moves to the
 * end) and announces those runs' tails. Its cost follows the commits, not
 * how many readers wait; the look runs in the watch's callback, without a
 * fiber, since it is synchronous reads.
 *
 * A commit's pages reach the log before the log's index says they are
 * committed (the sync of the file comes between), so after any write it
 * hears, the process looks again 1, 3, 10, 30, 100, 300 and 1,000
 * milliseconds later; a look that finds no other connection committed is
 * one pragma. It looks again after its own writes too: the watch hears
 * writes, not whose they are, and another connection's commit heard in the
 * same event as this one's may not be visible yet. The poll stays behind
 * it: for a commit slower than that, and for a watch that fails.
 */
import { type Cause, Deferred, Effect, Exit, Latch, Schedule } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { SqliteDirect } from "./sqliteDirect.ts"
import { DirectStatementObserver } from "./sqliteDirect.ts"
import type { Announcements } from "./tailPoll.ts"

/**
 * A row of the statement that reads what was written past the marks: a run's
 * new tail (`kind` `"chunks"`, `n` its largest position written), a run
 * closed (`"closed"`), or the largest rowid of a table now (`"runs"`,
 * `"chunk rows"`, `n` null when the table is empty).
 */
export interface WrittenRow {
  readonly kind: "chunks" | "closed" | "runs" | "chunk rows"
  readonly run_id: string | null
  readonly n: number | null
}

/** How long after the last write it heard the watcher looks again, in milliseconds. */
const lookAgainAfter = [1, 3, 10, 30, 100, 300, 1000]

/**
 * The announcements of a log in a SQLite file, on a connection to a file:
 * `watchLog` is that connection's watch of the file's write-ahead log, and
 * `written` the statement that answers {@link WrittenRow}s past its two
 * parameters, the last rowid seen of the runs' table and of the chunks'
 * table, in that order.
 */
export const watchSqliteTails = (
  direct: SqliteDirect["Service"],
  watchLog: NonNullable<SqliteDirect["Service"]["watchLog"]>,
  written: string
): Announcements =>
(announced) =>
  Effect.gen(function*() {
    const observe = yield* DirectStatementObserver
    // Past any row at first, so that the first look finds the marks moved back, takes them, and asks for every tail.
    const marks = { runs: Number.MAX_SAFE_INTEGER, chunks: Number.MAX_SAFE_INTEGER }
    const everyTail = Latch.makeUnsafe(false)
    const failed = Deferred.makeUnsafe<never, SqlError>()
    let version: unknown

    /**
     * Announces what another connection committed past the marks, if one
     * committed since the last look. A connection that cannot read at once
     * leaves it to the next look or the poll.
     */
    const look = (): void => {
      const current = direct.readNow<{ readonly data_version: unknown }>("PRAGMA data_version", [], observe)
      if (current === undefined) return
      if (Exit.isFailure(current)) return fail(current.cause)
      const now = current.value[0]?.data_version
      if (now === version) return
      const rows = direct.readNow<WrittenRow>(written, [marks.runs, marks.chunks], observe)
      if (rows === undefined) return
      if (Exit.isFailure(rows)) return fail(rows.cause)
      version = now
      for (const row of rows.value) {
        if (row.kind === "chunks") announced.tail(row.run_id!, { seq: Number(row.n), complete: false })
        else if (row.kind === "closed") announced.tail(row.run_id!, { seq: 0, complete: true })
        else {
          const table = row.kind === "runs" ? "runs" : "chunks"
          const mark = Number(row.n ?? 0)
          // Rows were deleted (a sweep), and rows inserted since may have taken rowids at or below the mark.
          if (mark < marks[table]) everyTail.openUnsafe()
          marks[table] = mark
        }
      }
    }
    const fail = (cause: Cause.Cause<SqlError>) => {
      Deferred.doneUnsafe(failed, Exit.failCause(cause))
    }

    let timer: ReturnType<typeof setTimeout> | undefined
    const lookAgain = (step: number) => {
      timer = setTimeout(() => {
        look()
        if (step + 1 < lookAgainAfter.length) lookAgain(step + 1)
      }, lookAgainAfter[step])
    }
    const heard = () => {
      look()
      clearTimeout(timer)
      lookAgain(0)
    }

    yield* Effect.forkScoped(Effect.forever(Effect.andThen(
      everyTail.await,
      Effect.andThen(Effect.sync(() => everyTail.closeUnsafe()), announced.listening)
    )))
    return yield* Effect.raceFirst(watchLog(heard), Deferred.await(failed)).pipe(
      Effect.ensuring(Effect.sync(() => clearTimeout(timer)))
    )
  }).pipe(Effect.scoped, Effect.ensuring(announced.stopped), Effect.retry(Schedule.spaced("1 second")), Effect.ignore)
