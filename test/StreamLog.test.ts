/**
 * The delivery log: core's durability contract on the memory log and on
 * core's own memoryStream (the reference), and the log behind core's own
 * transport: a fresh response writes `id:` lines, and a resume from any of
 * them answers exactly the rest.
 */
import { memoryStream, resumeServerSentEventsResponse, type StreamChunk, toServerSentEventsResponse } from "@tanstack/ai"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { layerSqliteStreamLog } from "@tanstack/ai-effect/sqlite"
import { durabilityClaims, type DurabilityHarness } from "@tanstack/ai-effect/testing"
import { Deferred, Duration, Effect, Layer, ManagedRuntime } from "effect"
import { TestClock } from "effect/testing"
import { mkdtempSync } from "node:fs"
import { DatabaseSync } from "node:sqlite"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Announcements, pollTails } from "../src/internal/tailPoll.ts"
import { recordStatements } from "./support/roundTrips.ts"
import { cancelClaimName, checkCancel, checkClosed, checkFirstEpoch, checkHeard, checkSharedPoll, checkWoken, closedClaimName, firstEpochClaimName, heardClaimName, openLog, sharedPollClaimName, sqlTailLookup, tailDeltas, text, wokenClaimName } from "./support/streamLogs.ts"

/** Deletes a run's rows on a connection of its own, as the sweep of an expired log does. */
const deleteRun = (filename: string, runId: string) => {
  const db = new DatabaseSync(filename)
  try {
    db.prepare("DELETE FROM ai_stream_chunks WHERE run_id = ?").run(runId)
    db.prepare("DELETE FROM ai_stream_runs WHERE run_id = ?").run(runId)
  } finally {
    db.close()
  }
}

const harnessOf = (runtime: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>): DurabilityHarness => ({
  open: (runId, offset) => runtime.runPromise(Effect.flatMap(Effect.service(AI.StreamLog), (log) => log.durability({ runId, offset }))),
  fenced: true
})

describe("core's memoryStream, the reference", () => {
  for (const claim of durabilityClaims) {
    it(claim.name, () => claim.check({ open: (runId, offset) => memoryStream({ runId, offset: offset ?? null }), fenced: false }))
  }
})

describe("StreamLog.layerMemory", () => {
  const runtime = ManagedRuntime.make(AI.StreamLog.layerMemory())
  for (const claim of durabilityClaims) {
    it(claim.name, () => claim.check(harnessOf(runtime)))
  }

  it("an upsert at a position that is not stored and lies before the tail is InvalidOffset, and stores nothing", async () => {
    const adapter = await harnessOf(runtime).open("run-gap")
    const offsets = await adapter.append([text("a"), text("b")])
    await adapter.upsert([{ offset: AI.StreamLog.offsetOf("run-gap", 5), chunk: text("e") }])
    await expect(adapter.upsert([{ offset: offsets[0]!, chunk: text("A") }, { offset: AI.StreamLog.offsetOf("run-gap", 4), chunk: text("d") }]))
      .rejects.toMatchObject({ _tag: "InvalidOffset" })
    expect((await adapter.snapshot()).map(({ chunk }) => (chunk as { delta: string }).delta)).toEqual(["a", "b", "e"])
  })

  it(cancelClaimName, () => checkCancel(runtime))
  it(firstEpochClaimName, () => checkFirstEpoch(runtime))
  it(closedClaimName, () => checkClosed(runtime))

  it("a run id core would refuse (empty, or with a line break) is InvalidOffset before anything is stored", async () => {
    await expect(harnessOf(runtime).open("run\n2")).rejects.toMatchObject({ _tag: "InvalidOffset" })
  })

  it.effect("keeps at most `capacity` closed logs, dropping the one that closed first, each for its retention, and never drops an open log", () =>
    Effect.gen(function*() {
      const log = yield* AI.StreamLog
      const close = (runId: string) => Effect.flatMap(log.claim(runId), (epoch) => log.close(runId, epoch))
      const known = (...runIds: ReadonlyArray<string>) => Effect.forEach(runIds, (runId) => Effect.map(log.read(runId, 0, 1), (page) => page.known))
      yield* log.claim("open")
      // "first" is created first and closes second: the capacity drops by the order of closing.
      const first = yield* log.claim("first")
      yield* close("second")
      yield* log.close("first", first)
      yield* close("third")
      const next = yield* log.claim("next")
      expect(yield* known("open", "first", "second", "third")).toEqual([true, true, false, true])
      yield* TestClock.adjust("61 seconds")
      expect(yield* known("open", "first", "third", "next")).toEqual([true, false, false, true])
      // Logs that close after the expired ones went are held to the capacity too.
      yield* close("later")
      yield* log.close("next", next)
      yield* close("last")
      yield* log.claim("after")
      expect(yield* known("open", "later", "next", "last")).toEqual([true, false, true, true])
    }).pipe(Effect.provide(AI.StreamLog.layerMemory({ capacity: 2, retention: "1 minute" }))))
})

describe("the readers' shared poll", () => {
  it.effect("while a store's listener listens, the poll looks once per its own interval, and every poll interval again from when the listener stops", () =>
    Effect.scoped(Effect.gen(function*() {
      let looks = 0
      const stop = yield* Deferred.make<void>()
      const listener: Announcements = (announced) =>
        Effect.andThen(announced.listening, Effect.andThen(Deferred.await(stop), Effect.andThen(announced.stopped, Effect.never)))
      // Each look finds the run where the reader is, so that the reader goes on waiting.
      const tails = (runIds: ReadonlyArray<string>) =>
        Effect.sync(() => {
          looks++
          return new Map(runIds.map((runId) => [runId, { seq: 0, complete: false }]))
        })
      const awaitChange = yield* pollTails(Duration.millis(50), tails, listener, Duration.seconds(1))
      yield* Effect.forkScoped(awaitChange("run", 0))
      yield* TestClock.adjust(0)
      // The listener's first look, when it starts to listen.
      expect(looks).toBe(1)
      yield* TestClock.adjust("950 millis")
      expect(looks).toBe(1)
      yield* TestClock.adjust("50 millis")
      expect(looks).toBe(2)
      yield* Deferred.succeed(stop, undefined)
      yield* TestClock.adjust("50 millis")
      expect(looks).toBe(3)
      yield* TestClock.adjust("50 millis")
      expect(looks).toBe(4)
    })))
})

describe("layerSqliteStreamLog, one file", () => {
  const runtime = ManagedRuntime.make(layerSqliteStreamLog({ filename: join(mkdtempSync(join(tmpdir(), "ai-effect-log-")), "chat.db") }))
  for (const claim of durabilityClaims) {
    it(claim.name, () => claim.check(harnessOf(runtime)))
  }
  it(cancelClaimName, () => checkCancel(runtime))
  it(firstEpochClaimName, () => checkFirstEpoch(runtime))
  it(closedClaimName, () => checkClosed(runtime))

  it(wokenClaimName, async () => {
    const polled = ManagedRuntime.make(layerSqliteStreamLog({ filename: join(mkdtempSync(join(tmpdir(), "ai-effect-log-")), "chat.db"), pollInterval: "1 hour" }))
    try {
      await checkWoken(polled)
    } finally {
      await polled.dispose()
    }
  })

  it(sharedPollClaimName, async () => {
    const filename = join(mkdtempSync(join(tmpdir(), "ai-effect-log-")), "chat.db")
    const recorded = recordStatements()
    const writer = ManagedRuntime.make(layerSqliteStreamLog({ filename }))
    // The poll alone: a layer that watches the file polls once a second.
    const reader = ManagedRuntime.make(layerSqliteStreamLog({ filename, pollInterval: "10 millis", notify: false }).pipe(Layer.provide(recorded.layer)))
    try {
      await checkSharedPoll(writer, reader, recorded.sent, { lookup: sqlTailLookup, runsPerLookup: "all" })
    } finally {
      await reader.dispose()
      await writer.dispose()
    }
  })

  // Two layers on one file are two connections, as two processes would hold: the reader hears the writer's commits
  // through the file's write-ahead log (test/package/watchers.test.ts runs them as processes).
  it(`${heardClaimName} (the reader watches the file's write-ahead log)`, async () => {
    const filename = join(mkdtempSync(join(tmpdir(), "ai-effect-log-")), "chat.db")
    const writer = ManagedRuntime.make(layerSqliteStreamLog({ filename }))
    const reader = ManagedRuntime.make(layerSqliteStreamLog({ filename, pollInterval: "1 hour" }))
    try {
      await checkHeard(writer, reader)
    } finally {
      await reader.dispose()
      await writer.dispose()
    }
  })

  it("a reader watching the file still hears the next append after the newest rows were deleted (as a sweep does), from which rowids start again", async () => {
    const filename = join(mkdtempSync(join(tmpdir(), "ai-effect-log-")), "chat.db")
    const writer = ManagedRuntime.make(layerSqliteStreamLog({ filename }))
    const reader = ManagedRuntime.make(layerSqliteStreamLog({ filename, pollInterval: "1 hour" }))
    try {
      const runId = `run-after-sweep-${crypto.randomUUID()}`
      const producer = await openLog(writer, runId, null)
      await producer.append([text("a")])
      const { read, done } = tailDeltas(reader, runId)
      await expect.poll(() => read).toEqual(["a"])
      // Newer rows than the watched run's, which the reader hears written (it tails them to their close), then deleted.
      const expiring = `run-expiring-${crypto.randomUUID()}`
      const expiringProducer = await openLog(writer, expiring, null)
      const expiringTail = tailDeltas(reader, expiring)
      await expiringProducer.append(["x", "y", "z"].map(text))
      await expiringProducer.close()
      await expiringTail.done
      expect(expiringTail.read).toEqual(["x", "y", "z"])
      deleteRun(filename, expiring)
      await producer.append([text("b")])
      await expect.poll(() => read).toEqual(["a", "b"])
      await producer.close()
      await done
    } finally {
      await reader.dispose()
      await writer.dispose()
    }
  })
})


/** A run of core's shape: start, three deltas, a tool's progress, finish. */
const runChunks = (): Array<StreamChunk> => [
  { type: "RUN_STARTED", runId: "run-sse", threadId: "t", timestamp: 1 } as StreamChunk,
  text("Hel"),
  text("lo"),
  { type: "CUSTOM", name: AI.toolProgressEvent, value: { progress: 1 }, timestamp: 2 } as StreamChunk,
  text("!"),
  { type: "RUN_FINISHED", runId: "run-sse", threadId: "t", finishReason: "stop", timestamp: 3 } as StreamChunk
]

async function* from(chunks: ReadonlyArray<StreamChunk>) {
  yield* chunks
}

/** The SSE events of a body: their ids and data. */
const eventsOf = (body: string) =>
  body.split("\n\n").filter((event) => event !== "").map((event) => ({
    id: event.match(/^id: (.*)$/m)?.[1],
    data: JSON.parse(event.match(/^data: (.*)$/m)![1]!) as { readonly type: string; readonly delta?: string }
  }))

const transport = (name: string, make: () => Layer.Layer<AI.StreamLog, unknown>) =>
  describe(`the log behind core's transport, ${name}`, () => {
  it("toServerSentEventsResponse with StreamLog writes an id line per event, and a resume from each id answers exactly the events after it", async () => {
    const runtime = ManagedRuntime.make(make())
    const open = harnessOf(runtime).open
    const fresh = await toServerSentEventsResponse(from(runChunks()), { durability: { adapter: await open("run-sse") } }).text()
    const events = eventsOf(fresh)
    // Core's accepted marker first, then every chunk of the run, each with the offset the log minted.
    expect(events.map(({ data }) => data.type)).toEqual(["CUSTOM", "RUN_STARTED", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "CUSTOM", "TEXT_MESSAGE_CONTENT", "RUN_FINISHED"])
    expect(events.map(({ id }) => id)).toEqual(events.map((_, index) => AI.StreamLog.offsetOf("run-sse", index + 1)))
    for (const [index, { id }] of events.entries()) {
      const resumed = await resumeServerSentEventsResponse({ adapter: await open("run-sse", id) }).text()
      expect(resumed).toBe(fresh.split("\n\n").slice(index + 1).join("\n\n"))
    }
    await runtime.dispose()
  })

  it("a request's Last-Event-ID names the run and the offset, as core's adapters read it", async () => {
    const runtime = ManagedRuntime.make(make())
    const producer = await harnessOf(runtime).open("run-request")
    const [first] = await producer.append([text("a"), text("b")])
    await producer.close()
    const request = new Request("http://127.0.0.1/api/chat", { headers: { "Last-Event-ID": first! } })
    const adapter = await runtime.runPromise(Effect.flatMap(Effect.service(AI.StreamLog), (log) => log.durability(request)))
    expect(adapter.resumeFrom()).toBe(first)
    expect(eventsOf(await resumeServerSentEventsResponse({ adapter }).text()).map(({ data }) => data.delta)).toEqual(["b"])
    await runtime.dispose()
  })
})

transport("in memory", () => AI.StreamLog.layerMemory())
transport("on SQLite", () => layerSqliteStreamLog({ filename: join(mkdtempSync(join(tmpdir(), "ai-effect-log-")), "chat.db") }))
