/**
 * Clients watching runs that another process writes, from the installed
 * package: a writer process and a reader process on one SQLite file, as a
 * node that runs the answers and a node that serves their watchers. While
 * the reader's tails wait, its process asks the file about their runs only
 * for their tails, in one statement per poll; then every run gets its next
 * chunk and closes, and each reader got every chunk once, in order.
 */
import { spawn } from "node:child_process"
import { once } from "node:events"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { expect, it } from "vitest"
import { consumer, nodes } from "./consumer.ts"

const runs = 50

const program = `
import * as AI from "@tanstack/ai-effect"
import { layerSqliteStreamLog } from "@tanstack/ai-effect/sqlite"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as Statement from "effect/sql/Statement"
import { once } from "node:events"
import { createInterface } from "node:readline"

const [mode, runs] = process.argv.slice(2)
const runIds = Array.from({ length: Number(runs) }, (_, index) => "watched-" + index)
const text = (delta) => ({ type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta, timestamp: 0 })
const open = (runtime, runId, offset) => runtime.runPromise(Effect.flatMap(Effect.service(AI.StreamLog), (log) => log.durability({ runId, offset })))

if (mode === "write") {
  const runtime = ManagedRuntime.make(layerSqliteStreamLog({ filename: "chat.db" }))
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
  const runtime = ManagedRuntime.make(layerSqliteStreamLog({ filename: "chat.db", pollInterval: "20 millis" }).pipe(Layer.provide(recorder)))
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
  // Three polls, or what came instead within 5 seconds.
  const until = Date.now() + 5000
  while (sent.slice(from).filter((request) => request.tails).length < 3 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
  console.log("waited " + JSON.stringify(sent.slice(from)))
  await done
  console.log("read " + JSON.stringify(read))
  await runtime.dispose()
}
process.exit(0)
`

/** A process's output, line by line: \`line(prefix)\` answers the first line that starts with \`prefix\`, without it. */
const started = (dir: string, mode: string) => {
  const child = spawn(nodes().current, ["watch.mjs", mode, String(runs)], { cwd: dir })
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

it("a process serving 50 watchers of runs another process writes asks SQLite for their tails in one statement per poll, and each watcher gets every chunk once, in order", async () => {
  const dir = join(consumer().dir, "watchers")
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "watch.mjs"), program)
  const writer = started(dir, "write")
  const reader = { process: undefined as ReturnType<typeof started> | undefined }
  try {
    await writer.line("written")
    const watching = reader.process = started(dir, "read")
    const waited = JSON.parse(await watching.line("waited ")) as ReadonlyArray<{ readonly tails: boolean; readonly runs: number }>
    // While every watcher waited, each statement about their runs was a poll's look at all 50 tails: no read per
    // watcher. The file's housekeeping (the sweep of expired logs) names no run.
    const polls = waited.filter((statement) => statement.tails)
    expect(polls.length).toBeGreaterThanOrEqual(3)
    expect(polls).toEqual(polls.map(() => ({ tails: true, runs })))
    expect(waited.filter((statement) => !statement.tails && statement.runs > 0)).toEqual([])
    writer.child.stdin.write("go\n")
    expect(JSON.parse(await watching.line("read "))).toEqual(Array.from({ length: runs }, () => ["a", "b"]))
    const [code] = await watching.exited
    expect(code, watching.errors()).toBe(0)
  } finally {
    writer.child.kill()
    reader.process?.child.kill()
  }
})
