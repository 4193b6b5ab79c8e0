/**
 * Clients watching runs that another process writes, from the installed
 * package: a writer process and a reader process on one store, as a node
 * that runs the answers and a node that serves their watchers. The reader
 * hears the writes as they commit (PostgreSQL's and Redis's writes announce
 * themselves, and a SQLite reader watches the file's write-ahead log), with
 * its poll an hour away; on SQLite without that, while the reader's tails
 * wait, its process asks the file about their runs only for their tails, in
 * one statement per poll. Then every run gets its next chunk and closes,
 * and each reader got every chunk once, in order.
 */
import { spawn } from "node:child_process"
import { once } from "node:events"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { expect, it } from "vitest"
import { missing, startPostgres, startRedis } from "../support/services.ts"
import { consumer, nodes } from "./consumer.ts"

const runs = 50

const program = `
import * as AI from "@tanstack/ai-effect"
import { layerRedisStreamLog } from "@tanstack/ai-effect/redis"
import { layerSqlStreamLog } from "@tanstack/ai-effect/sql"
import { layerSqliteStreamLog } from "@tanstack/ai-effect/sqlite"
import { NodeRedis } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import * as Statement from "effect/sql/Statement"
import { once } from "node:events"
import { createInterface } from "node:readline"

const [mode, runs, store, url] = process.argv.slice(2)
// The reader polls once an hour where it hears the writes: only they can reach it in time.
const readerOptions = store === "sqlite-polled" ? { pollInterval: "20 millis", notify: false } : { pollInterval: "1 hour" }
const logLayer = (reader) => {
  const options = reader ? readerOptions : {}
  return store === "postgres"
    ? layerSqlStreamLog(options).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url) })))
    : store === "redis"
    ? layerRedisStreamLog(options).pipe(Layer.provide(NodeRedis.layer({ url })))
    : layerSqliteStreamLog({ filename: "chat.db", ...options })
}
const runIds = Array.from({ length: Number(runs) }, (_, index) => "watched-" + index)
const text = (delta) => ({ type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta, timestamp: 0 })
const open = (runtime, runId, offset) => runtime.runPromise(Effect.flatMap(Effect.service(AI.StreamLog), (log) => log.durability({ runId, offset })))

if (mode === "write") {
  const runtime = ManagedRuntime.make(logLayer(false))
  const producers = await Promise.all(runIds.map((runId) => open(runtime, runId, null)))
  await Promise.all(producers.map((producer) => producer.append([text("a")])))
  console.log("written")
  await once(createInterface({ input: process.stdin }), "line")
  await Promise.all(producers.map(async (producer) => {
    await producer.append([text("b")])
    await producer.close()
  }))
  await runtime.dispose()
} else {
  // Every statement this process sends: whether it is a poll's look at the tails, and the runs it names.
  const sent = []
  const recorder = Layer.succeed(Statement.CurrentTransformer, (statement) => {
    const [sql, parameters] = statement.compile()
    sent.push({ tails: sql.includes("MAX(c.seq)"), runs: parameters.filter((parameter) => runIds.includes(parameter)).length })
    return Effect.succeed(statement)
  })
  const runtime = ManagedRuntime.make(logLayer(true).pipe(Layer.provide(recorder)))
  const read = runIds.map(() => [])
  let waiting = 0
  const allWaiting = Promise.withResolvers()
  const done = Promise.all(runIds.map(async (runId, index) => {
    const adapter = await open(runtime, runId, "-1")
    for await (const { chunk } of adapter.read("-1")) {
      read[index].push(chunk.delta)
      if (read[index].length === 1 && ++waiting === runIds.length) allWaiting.resolve()
    }
  }))
  await allWaiting.promise
  const from = sent.length
  // Three polls, or what came instead within 5 seconds (where the writes are heard, no poll comes).
  const until = Date.now() + (store === "sqlite-polled" ? 5000 : 0)
  while (sent.slice(from).filter((request) => request.tails).length < 3 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
  console.log("waited " + JSON.stringify(sent.slice(from)))
  await done
  console.log("read " + JSON.stringify(read))
  await runtime.dispose()
}
process.exit(0)
`

/** A process's output, line by line: \`line(prefix)\` answers the first line that starts with \`prefix\`, without it. */
type Store = "sqlite" | "sqlite-polled" | "postgres" | "redis"

const started = (dir: string, mode: string, store: Store, url = "") => {
  const child = spawn(nodes().current, ["watch.mjs", mode, String(runs), store, url], { cwd: dir })
  const printed: Array<string> = []
  let errors = ""
  const waiters = new Set<() => void>()
  createInterface({ input: child.stdout }).on("line", (line) => {
    printed.push(line)
    for (const wake of waiters) wake()
  })
  child.stderr.on("data", (part: Buffer) => (errors += part.toString()))
  const exited = once(child, "exit") as Promise<[number | null]>
  const line = (prefix: string) =>
    new Promise<string>((resolve, reject) => {
      const look = () => {
        const found = printed.find((line) => line.startsWith(prefix))
        if (found === undefined) return
        waiters.delete(look)
        resolve(found.slice(prefix.length))
      }
      waiters.add(look)
      look()
      void exited.then(([code]) => reject(new Error(`exited with ${code} before printing "${prefix}": ${errors}`)))
    })
  return { child, line, exited, errors: () => errors }
}

/** What the reader's process sent while every watcher waited: whether each statement was a poll's, and how many watched runs it named. */
type Waited = ReadonlyArray<{ readonly tails: boolean; readonly runs: number }>

/**
 * Starts the writer, then the reader once the writer wrote every run's first
 * chunk; `whileWaiting` checks what the reader sent while its watchers
 * waited. Then every run gets its next chunk and closes: each watcher must
 * have read both chunks, once and in order.
 */
const watchRuns = async (store: Store, url: string, whileWaiting: (waited: Waited) => void) => {
  const dir = join(consumer().dir, `watchers-${store}`)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "watch.mjs"), program)
  const writer = started(dir, "write", store, url)
  const reader = { process: undefined as ReturnType<typeof started> | undefined }
  try {
    await writer.line("written")
    const watching = reader.process = started(dir, "read", store, url)
    whileWaiting(JSON.parse(await watching.line("waited ")) as Waited)
    writer.child.stdin.write("go\n")
    expect(JSON.parse(await watching.line("read "))).toEqual(Array.from({ length: runs }, () => ["a", "b"]))
    const [code] = await watching.exited
    expect(code, watching.errors()).toBe(0)
  } finally {
    writer.child.kill()
    reader.process?.child.kill()
  }
}

it("a process serving 50 watchers of runs another process writes hears each commit to the SQLite file through its write-ahead log, with its poll an hour away, and each watcher gets every chunk once, in order", () =>
  watchRuns("sqlite", "", () => {}))

it("with notify: false, a process serving 50 watchers of runs another process writes asks SQLite for their tails in one statement per poll, and each watcher gets every chunk once, in order", () =>
  watchRuns("sqlite-polled", "", (waited) => {
    // While every watcher waited, each statement about their runs was a poll's look at all 50 tails: no read per
    // watcher. The file's housekeeping (the sweep of expired logs) names no run.
    const polls = waited.filter((statement) => statement.tails)
    expect(polls.length).toBeGreaterThanOrEqual(3)
    expect(polls).toEqual(polls.map(() => ({ tails: true, runs })))
    expect(waited.filter((statement) => !statement.tails && statement.runs > 0)).toEqual([])
  }))

it.skipIf(missing("postgres") !== undefined)("a process serving 50 watchers of runs another process writes on PostgreSQL hears each write as it commits, with its poll an hour away, and each watcher gets every chunk once, in order", async () => {
  const postgres = await startPostgres()
  try {
    // No poll comes within the test: only the writes' announcements reach the watchers.
    await watchRuns("postgres", postgres.url, (waited) => expect(waited.filter((statement) => statement.tails)).toEqual([]))
  } finally {
    await postgres.dispose()
  }
})

it.skipIf(missing("redis") !== undefined)("a process serving 50 watchers of runs another process writes on Redis hears each write as it is published, with its poll an hour away, and each watcher gets every chunk once, in order", async () => {
  const redis = await startRedis()
  try {
    await watchRuns("redis", redis.url, () => {})
  } finally {
    await redis.dispose()
  }
})
