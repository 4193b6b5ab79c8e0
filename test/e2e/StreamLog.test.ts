/**
 * The delivery log on real PostgreSQL and Redis servers: core's durability
 * contract and fenced producers, the log behind core's transport, and an
 * appended batch that costs one round trip, counted at the driver.
 */
import { resumeServerSentEventsResponse, type StreamChunk, toServerSentEventsResponse } from "@tanstack/ai"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { layerRedisStreamLog } from "@tanstack/ai-effect/redis"
import { layerSqlStreamLog } from "@tanstack/ai-effect/sql"
import { durabilityClaims, type DurabilityHarness } from "@tanstack/ai-effect/testing"
import { type Duration, Effect, Layer, ManagedRuntime } from "effect"
import { Redis } from "effect/persistence/Redis"
import { pgClient, redisClient } from "../support/backends.ts"
import { countRedisCommands, countStatements, recordRedisCommands, recordStatements, type RoundTrips, type SentRequest } from "../support/roundTrips.ts"
import { cancelClaimName, checkCancel, checkClosed, checkFirstEpoch, checkHeard, checkSharedPoll, checkWoken, closedClaimName, firstEpochClaimName, heardClaimName, openLog, sharedPollClaimName, sqlTailLookup, tailDeltas, text, wokenClaimName } from "../support/streamLogs.ts"
import { missing, startPostgres, startRedis, type TestServer } from "../support/services.ts"

interface LogBackend {
  readonly name: string
  readonly server: "postgres" | "redis"
  readonly start: () => Promise<TestServer>
  readonly layer: (server: TestServer, options?: LogOptions) => {
    readonly counted: RoundTrips
    readonly layer: Layer.Layer<AI.StreamLog, unknown>
  }
  /** The log with every request it sends recorded, and how a poll's requests look. */
  readonly recorded: (server: TestServer, options: LogOptions) => {
    readonly sent: ReadonlyArray<SentRequest>
    readonly layer: Layer.Layer<AI.StreamLog, unknown>
  }
  readonly lookup: (request: SentRequest) => ReadonlyArray<string> | undefined
  readonly runsPerLookup: "all" | 1
  /** The channel the log's writes announce on, by default. */
  readonly channel: string
}

interface LogOptions {
  readonly pollInterval?: Duration.Input
  readonly notify?: boolean
}

const backends: ReadonlyArray<LogBackend> = [
  {
    name: "layerSqlStreamLog on PostgreSQL",
    server: "postgres",
    start: startPostgres,
    layer: (server, options) => {
      const counted = countStatements()
      return { counted, layer: layerSqlStreamLog(options).pipe(Layer.provide(counted.layer), Layer.provide(pgClient(server.url))) }
    },
    recorded: (server, options) => {
      const recorded = recordStatements()
      return { sent: recorded.sent, layer: layerSqlStreamLog(options).pipe(Layer.provide(recorded.layer), Layer.provide(pgClient(server.url))) }
    },
    lookup: sqlTailLookup,
    runsPerLookup: "all",
    channel: "ai_stream_tails"
  },
  {
    name: "layerRedisStreamLog on Redis",
    server: "redis",
    start: () => startRedis(),
    layer: (server, options) => {
      const counted = countRedisCommands()
      return { counted, layer: layerRedisStreamLog(options).pipe(Layer.provide(counted.layer), Layer.provide(redisClient(server.url))) }
    },
    recorded: (server, options) => {
      const recorded = recordRedisCommands()
      return { sent: recorded.sent, layer: layerRedisStreamLog(options).pipe(Layer.provide(recorded.layer), Layer.provide(redisClient(server.url))) }
    },
    // A run's keys have a slot each, so a poll sends one HMGET of its meta hash per run.
    lookup: (request) =>
      request.text === "HMGET" ? [decodeURIComponent(String(request.parameters[0]).match(/\{(.*)\}:meta$/)![1]!)] : undefined,
    runsPerLookup: 1,
    channel: "ai-effect:log:tails"
  }
]

for (const backend of backends) describe.skipIf(missing(backend.server) !== undefined)(backend.name, () => {
  let server: TestServer
  let runtime: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>
  let statements: RoundTrips
  beforeAll(async () => {
    server = await backend.start()
    const { counted, layer } = backend.layer(server)
    statements = counted
    runtime = ManagedRuntime.make(layer)
  }, 60_000)
  afterAll(async () => {
    await runtime?.dispose()
    await server?.dispose()
  })

  const harness: DurabilityHarness = {
    open: (runId, offset) => runtime.runPromise(Effect.flatMap(Effect.service(AI.StreamLog), (log) => log.durability({ runId, offset }))),
    fenced: true
  }

  for (const claim of durabilityClaims) {
    it(claim.name, () => claim.check(harness))
  }

  it(cancelClaimName, () => checkCancel(runtime))
  it(firstEpochClaimName, () => checkFirstEpoch(runtime))
  it(closedClaimName, () => checkClosed(runtime))
  it(wokenClaimName, async () => {
    const polled = ManagedRuntime.make(backend.layer(server, { pollInterval: "1 hour" }).layer)
    try {
      await checkWoken(polled)
    } finally {
      await polled.dispose()
    }
  })

  it(sharedPollClaimName, async () => {
    // The poll alone: a layer that hears the writes polls once a second.
    const reader = backend.recorded(server, { pollInterval: "10 millis", notify: false })
    const readerRuntime = ManagedRuntime.make(reader.layer)
    try {
      await checkSharedPoll(runtime, readerRuntime, reader.sent, backend)
    } finally {
      await readerRuntime.dispose()
    }
  })

  it("a reader waiting for a run another process writes fails with StreamLogError once the store stops answering, instead of waiting for a poll that cannot come", async () => {
    const own = await backend.start()
    const writer = ManagedRuntime.make(backend.layer(own).layer)
    const reader = ManagedRuntime.make(backend.layer(own, { pollInterval: "10 millis" }).layer)
    try {
      const producer = await openLog(writer, "run-store-gone", null)
      await producer.append([text("a")])
      const read: Array<string> = []
      const { promise: first, resolve: readFirst } = Promise.withResolvers<void>()
      // How the tail ended, taken as it ends: it fails while the crash is still being awaited.
      const ended = (async () => {
        for await (const { chunk } of (await openLog(reader, "run-store-gone", "-1")).read("-1")) {
          read.push((chunk as { delta: string }).delta)
          readFirst()
        }
      })().then(() => "ended without an error", (error: unknown) => error)
      await first
      await own.crash()
      expect(await ended).toMatchObject({ _tag: "StreamLogError" })
      expect(read).toEqual(["a"])
    } finally {
      await reader.dispose()
      await writer.dispose()
      await own.dispose()
    }
  }, 60_000)

  it(`${heardClaimName} (the writes announce the run's tail)`, async () => {
    const reader = ManagedRuntime.make(backend.layer(server, { pollInterval: "1 hour" }).layer)
    try {
      await checkHeard(runtime, reader)
    } finally {
      await reader.dispose()
    }
  })

  // Redis's own: a subscriber of its own connection, which the server can cut off.
  if (backend.server === "redis") it("a chunk published while the reader's subscriber is cut off still reaches the reader", async () => {
    const reader = ManagedRuntime.make(backend.layer(server, { pollInterval: "10 millis" }).layer)
    const admin = ManagedRuntime.make(redisClient(server.url))
    const send = (...args: ReadonlyArray<string>) => admin.runPromise(Effect.flatMap(Redis, (redis) => redis.send<string | number>(args[0]!, ...args.slice(1))))
    try {
      const runId = `run-cut-off-${crypto.randomUUID()}`
      const producer = await openLog(runtime, runId, null)
      await producer.append([text("a")])
      const { read, done } = tailDeltas(reader, runId)
      await expect.poll(() => read).toEqual(["a"])
      await expect.poll(() => send("CLIENT", "LIST", "TYPE", "pubsub")).toContain("cmd=")
      // The server closes the subscriber's connection before it answers: what is published next is not delivered to it.
      expect(await send("CLIENT", "KILL", "TYPE", "pubsub")).toBeGreaterThan(0)
      await producer.append([text("b")])
      await expect.poll(() => read, { timeout: 5_000 }).toEqual(["a", "b"])
      await producer.close()
      await done
    } finally {
      await admin.dispose()
      await reader.dispose()
    }
  })

  it("with notify: false, no write names the announcement channel", async () => {
    const writes = async (notify: boolean) => {
      const recorded = backend.recorded(server, { notify })
      const log = ManagedRuntime.make(recorded.layer)
      try {
        const producer = await openLog(log, `run-quiet-${crypto.randomUUID()}`, null)
        await producer.append([text("a")])
        await producer.close()
        return recorded.sent.filter((request) =>
          /pg_notify/i.test(request.text) || request.parameters.some((parameter) => String(parameter) === backend.channel)
        ).length
      } finally {
        await log.dispose()
      }
    }
    expect(await writes(true)).toBeGreaterThan(0)
    expect(await writes(false)).toBe(0)
  })

  it("one appended batch costs one round trip: 32 chunks after the producer's claim", async () => {
    const producer = await harness.open("run-round-trips")
    await producer.append([text("claim")])
    const before = statements.count()
    const offsets = await producer.append(Array.from({ length: 32 }, (_, index) => text(String(index))))
    expect(statements.count() - before).toBe(1)
    expect(offsets).toEqual(Array.from({ length: 32 }, (_, index) => AI.StreamLog.offsetOf("run-round-trips", index + 2)))
  })

  it("toServerSentEventsResponse writes the log, and a resume from a middle id answers exactly the rest", async () => {
    async function* run() {
      yield { type: "RUN_STARTED", runId: "run-pg-sse", threadId: "t", timestamp: 1 } as StreamChunk
      for (const delta of ["a", "b", "c"]) yield text(delta)
      yield { type: "RUN_FINISHED", runId: "run-pg-sse", threadId: "t", finishReason: "stop", timestamp: 2 } as StreamChunk
    }
    const fresh = await toServerSentEventsResponse(run(), { durability: { adapter: await harness.open("run-pg-sse") } }).text()
    const events = fresh.split("\n\n").filter((event) => event !== "")
    const middle = events[2]!.match(/^id: (.*)$/m)![1]!
    const resumed = await resumeServerSentEventsResponse({ adapter: await harness.open("run-pg-sse", middle) }).text()
    expect(resumed).toBe(events.slice(3).map((event) => `${event}\n\n`).join(""))
  })
})

