/**
 * The embedded SQLite connection's group commit: the writes of one turn of
 * the event loop share one transaction and one sync of the WAL, and each
 * answers only once that commit is durable. Seen through the public
 * delivery log (a second connection reads the WAL and the rows), across
 * stores on one `layerSqliteClient`, and on that client alone for what the
 * stores never provoke: a statement that fails inside a group, an
 * interrupted write, an explicit transaction.
 */
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { layerSqlStreamLog, layerSqlThreadStore } from "@tanstack/ai-effect/sql"
import { layerSqliteClient, layerSqliteStreamLog } from "@tanstack/ai-effect/sqlite"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import { text } from "./support/streamLogs.ts"

const freshFile = () => join(mkdtempSync(join(tmpdir(), "ai-effect-sqlite-client-")), "chat.db")

/** Another connection to the file, as another process would open it. */
const otherConnection = (filename: string) => {
  const db = new DatabaseSync(filename)
  return {
    /** Moves the WAL into the database and empties it. */
    truncateWal: () => db.exec("PRAGMA wal_checkpoint(TRUNCATE)"),
    /** How many frames the WAL holds: a commit writes one frame per page it changed. */
    walFrames: () => Number((db.prepare("PRAGMA wal_checkpoint(PASSIVE)").get() as { log: number }).log),
    /** How many commits the WAL holds: a commit's last frame records the database's size, every other frame 0. */
    walCommits: () => {
      const wal = readFileSync(`${filename}-wal`)
      const pageSize = wal.readUInt32BE(8)
      const salt = wal.subarray(16, 24)
      let commits = 0
      // A frame is a 24-byte header and a page; frames left from before the last reset carry an older salt.
      for (let frame = 32; frame + 24 + pageSize <= wal.length && wal.subarray(frame + 8, frame + 16).equals(salt); frame += 24 + pageSize) {
        if (wal.readUInt32BE(frame + 4) !== 0) commits++
      }
      return commits
    },
    chunksOf: (runId: string) => (db.prepare("SELECT COUNT(*) AS n FROM ai_stream_chunks WHERE run_id = ?").get(runId) as { n: number }).n,
    close: () => db.close()
  }
}

describe("the SQLite group commit, seen through the delivery log", () => {
  it.live("appends of 50 concurrent runs share a commit: the WAL gains a few frames, not one commit per append", () => {
    const filename = freshFile()
    return Effect.gen(function*() {
      const log = yield* AI.StreamLog
      const runIds = Array.from({ length: 50 }, (_, index) => `run-${index}`)
      const adapters = yield* Effect.forEach(runIds, (runId) => log.durability({ runId, offset: null }))
      // Each producer claims its log at its first write: one append each, then the WAL is emptied.
      yield* Effect.promise(() => Promise.all(adapters.map((adapter) => adapter.append([text("first")]))))
      const other = otherConnection(filename)
      other.truncateWal()
      yield* Effect.promise(() => Promise.all(adapters.map((adapter) => adapter.append([text("second")]))))
      const frames = other.walFrames()
      const stored = runIds.map(other.chunksOf)
      other.close()
      expect(stored).toEqual(runIds.map(() => 2))
      // One commit per append would write at least 50 frames.
      expect(frames).toBeGreaterThan(0)
      expect(frames).toBeLessThanOrEqual(10)
    }).pipe(Effect.provide(layerSqliteStreamLog({ filename })))
  })

  it.live("an append answers once it is committed: another connection reads it as soon as it answers", () => {
    const filename = freshFile()
    return Effect.gen(function*() {
      const log = yield* AI.StreamLog
      const adapter = yield* log.durability({ runId: "run-durable", offset: null })
      const other = otherConnection(filename)
      const seen: Array<number> = []
      for (let index = 1; index <= 5; index++) {
        yield* Effect.promise(() => adapter.append([text(String(index))]))
        seen.push(other.chunksOf("run-durable"))
      }
      other.close()
      expect(seen).toEqual([1, 2, 3, 4, 5])
    }).pipe(Effect.provide(layerSqliteStreamLog({ filename })))
  })
})

describe("stores on one layerSqliteClient", () => {
  it.live("share its commits: a log append and a thread save made together commit once", () => {
    const filename = freshFile()
    return Effect.gen(function*() {
      const log = yield* AI.StreamLog
      const threads = yield* AI.ThreadStore
      const adapter = yield* log.durability({ runId: "run-shared", offset: null })
      // The producer claims its log at its first write; then the WAL is emptied.
      yield* Effect.promise(() => adapter.append([text("first")]))
      const other = otherConnection(filename)
      other.truncateWal()
      yield* Effect.all([
        Effect.promise(() => adapter.append([text("second")])),
        threads.save("thread-shared", { messages: [], activeRun: null, interrupts: null })
      ], { concurrency: "unbounded" })
      const commits = other.walCommits()
      const stored = other.chunksOf("run-shared")
      other.close()
      expect(stored).toBe(2)
      // A connection per store would commit each write on its own.
      expect(commits).toBe(1)
    }).pipe(Effect.provide(Layer.mergeAll(layerSqlStreamLog(), layerSqlThreadStore()).pipe(Layer.provide(layerSqliteClient({ filename })))))
  })
})

describe("the SQLite group commit, on layerSqliteClient", () => {
  const withTable = <A, E>(body: (sql: SqlClient) => Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient
      yield* sql`CREATE TABLE items (name TEXT PRIMARY KEY)`
      return yield* body(sql)
    }).pipe(Effect.provide(Layer.fresh(layerSqliteClient({ filename: freshFile() }))))

  const names = (sql: SqlClient) => Effect.map(sql<{ name: string }>`SELECT name FROM items ORDER BY name`, (rows) => rows.map((row) => row.name))

  it.live("a statement that fails inside a group is undone alone: the other writes of its turn commit", () =>
    withTable((sql) =>
      Effect.gen(function*() {
        yield* sql`INSERT INTO items (name) VALUES ('taken')`
        const [first, duplicate, last] = yield* Effect.all([
          Effect.exit(sql`INSERT INTO items (name) VALUES ('a')`),
          Effect.exit(sql`INSERT INTO items (name) VALUES ('taken')`),
          Effect.exit(sql`INSERT INTO items (name) VALUES ('b')`)
        ], { concurrency: "unbounded" })
        expect(first._tag).toBe("Success")
        expect(duplicate._tag).toBe("Failure")
        expect(last._tag).toBe("Success")
        expect(yield* names(sql)).toEqual(["a", "b", "taken"])
      })))

  it.live("a write interrupted before its group runs is not written, and the next write is", () =>
    withTable((sql) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.forkChild(sql`INSERT INTO items (name) VALUES ('interrupted')`)
        // The forked write is now waiting for its group, which runs on the next turn of the event loop.
        yield* Effect.yieldNow
        yield* Fiber.interrupt(fiber)
        yield* sql`INSERT INTO items (name) VALUES ('next')`
        expect(yield* names(sql)).toEqual(["next"])
      })))

  it.live("a transaction starts after the waiting writes commit, and a write outside it waits for its end", () =>
    withTable((sql) =>
      Effect.gen(function*() {
        const before = yield* Effect.forkChild(sql`INSERT INTO items (name) VALUES ('before')`)
        yield* Effect.yieldNow
        // A fiber outside the transaction, whose write comes while the transaction is open.
        const go = yield* Deferred.make<void>()
        const outside = yield* Effect.forkChild(Effect.andThen(Deferred.await(go), sql`INSERT INTO items (name) VALUES ('outside')`))
        const seen: Array<ReadonlyArray<string>> = []
        const rolledBack = yield* Effect.exit(sql.withTransaction(Effect.gen(function*() {
          seen.push(yield* names(sql))
          yield* Deferred.succeed(go, undefined)
          yield* sql`INSERT INTO items (name) VALUES ('inside')`
          yield* Effect.yieldNow
          seen.push(yield* names(sql))
          return yield* Effect.fail("roll back")
        })))
        yield* Fiber.join(before)
        yield* Fiber.join(outside)
        expect(rolledBack._tag).toBe("Failure")
        expect(seen).toEqual([["before"], ["before", "inside"]])
        // The outside write did not join the transaction, and so was not undone with it.
        expect(yield* names(sql)).toEqual(["before", "outside"])
      })))
})
