/**
 * Claims every `AI.StreamLog` backend keeps beside core's contract: a
 * cancel from any process takes the log over, so that the run's producer
 * stores nothing more and every reader ends on the cancel; and a run's
 * first producer holds epoch 1, which tells it the log is empty without a
 * read (a durable run's first execution relies on it); and a closed log
 * takes no producer, so that a durable run's end, replayed, writes nothing.
 */
import type { StreamChunk } from "@tanstack/ai"
import { expect } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { Effect, type ManagedRuntime } from "effect"
import type { SentRequest } from "./roundTrips.ts"

/** Runs `f` with the runtime's log, to a Promise. */
const withLog = (runtime: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>) =>
<A>(f: (log: AI.StreamLog["Service"]) => Effect.Effect<A, unknown>) => runtime.runPromise(Effect.flatMap(Effect.service(AI.StreamLog), f))

/** Core's durability adapter of `runId` on the runtime's log: a producer's (`offset` null) or a reader's from `offset`. */
export const openLog = (runtime: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>, runId: string, offset: string | null) =>
  withLog(runtime)((log) => log.durability({ runId, offset }))

export const cancelClaimName =
  "a cancel takes the log over: the producer's next write is fenced, a reader from the start ends on the cancel's RUN_ERROR, a second cancel answers false, an unknown run fails"

export const checkCancel = async (runtime: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>) => {
  const runId = `run-cancel-${crypto.randomUUID()}`
  const log = withLog(runtime)
  const producer = await log((log) => log.durability({ runId, offset: null }))
  await producer.append([text("before")])
  expect(await log((log) => log.cancel(runId))).toBe(true)
  await expect(producer.append([text("after")])).rejects.toMatchObject({ _tag: "ProducerFenced" })
  // The run's process sees the log ended.
  await log((log) => log.ended(runId))
  const reader = await log((log) => log.durability({ runId, offset: "-1" }))
  const read: Array<StreamChunk> = []
  for await (const { chunk } of reader.read("-1")) read.push(chunk)
  expect(read.map((chunk) => chunk.type)).toEqual(["TEXT_MESSAGE_CONTENT", "RUN_ERROR"])
  expect(read[1]).toMatchObject({ code: "cancelled", message: "The run was cancelled" })
  expect(await log((log) => log.cancel(runId))).toBe(false)
  await expect(log((log) => log.cancel(`run-nowhere-${crypto.randomUUID()}`))).rejects.toMatchObject({ _tag: "UnknownRun" })
}

export const firstEpochClaimName =
  "a run's first claim holds epoch 1 and each later claim the next, so that a first producer knows the log is empty without reading it"

export const checkFirstEpoch = async (runtime: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>) => {
  const runId = `run-epochs-${crypto.randomUUID()}`
  const claim = () => runtime.runPromise(Effect.flatMap(Effect.service(AI.StreamLog), (log) => log.claim(runId)))
  expect([await claim(), await claim(), await claim()]).toEqual([1, 2, 3])
}

export const closedClaimName =
  "a closed log takes no producer: a claim after the close is ProducerFenced, the closing producer's writes are too, and the log keeps what it held"

export const checkClosed = async (runtime: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>) => {
  const runId = `run-closed-${crypto.randomUUID()}`
  const log = withLog(runtime)
  const epoch = await log((log) => log.claim(runId))
  await log((log) => log.append(runId, epoch, [text("answer")]))
  await log((log) => log.close(runId, epoch))
  await expect(log((log) => log.claim(runId))).rejects.toMatchObject({ _tag: "ProducerFenced" })
  await expect(log((log) => log.append(runId, epoch, [text("again")]))).rejects.toMatchObject({ _tag: "ProducerFenced" })
  await expect(log((log) => log.close(runId, epoch))).rejects.toMatchObject({ _tag: "ProducerFenced" })
  const page = await log((log) => log.read(runId, 0, 10))
  expect(page).toMatchObject({ known: true, complete: true })
  expect(page.entries.map((entry) => (entry.chunk as { delta: string }).delta)).toEqual(["answer"])
}

export const wokenClaimName =
  "a reader in the producer's process is woken by each append and by the close, without waiting for a poll"

/** Checks {@link wokenClaimName} on a log whose poll interval outlasts the test: only the process's own signal can deliver. */
export const checkWoken = async (runtime: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>) => {
  const runId = `run-woken-${crypto.randomUUID()}`
  const open = (offset: string | null) => openLog(runtime, runId, offset)
  const producer = await open(null)
  await producer.append([text("a")])
  const reader = await open("-1")
  const read: Array<string> = []
  const done = (async () => {
    for await (const { chunk } of reader.read("-1")) read.push((chunk as { delta: string }).delta)
  })()
  await expect.poll(() => read).toEqual(["a"])
  await producer.append([text("b")])
  await expect.poll(() => read).toEqual(["a", "b"])
  await producer.close()
  await done
  expect(read).toEqual(["a", "b"])
}

export const sharedPollClaimName =
  "readers that wait in one process for runs another process writes share one poll: while they wait, the store is asked for their runs' tails and never read per reader, and each reader gets every chunk once, in order"

/**
 * Checks {@link sharedPollClaimName} with `writer` and `reader`, two layers
 * on one store as two processes would be. `sent` records the reader's
 * requests; `lookup` names the runs a request of a poll asks about (and is
 * `undefined` for any other request), and `runsPerLookup` how many runs
 * one such request asks about: all of them, or one (a pipelined command per run).
 */
export const checkSharedPoll = async (
  writer: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>,
  reader: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>,
  sent: ReadonlyArray<SentRequest>,
  options: { readonly lookup: (request: SentRequest) => ReadonlyArray<string> | undefined; readonly runsPerLookup: "all" | 1 }
) => {
  const runIds = Array.from({ length: 50 }, (_, index) => `run-shared-${crypto.randomUUID()}-${index}`)
  const producers = await Promise.all(runIds.map((runId) => openLog(writer, runId, null)))
  await Promise.all(producers.map((producer) => producer.append([text("a")])))
  const read = runIds.map((): Array<string> => [])
  const done = Promise.all(runIds.map(async (runId, index) => {
    const adapter = await openLog(reader, runId, "-1")
    for await (const { chunk } of adapter.read("-1")) read[index]!.push((chunk as { delta: string }).delta)
  }))
  await expect.poll(() => read.every((delta) => delta.length === 1)).toBe(true)
  // Every reader waits now: what the reader's layer sends from here on, until three polls have asked about every run.
  const from = sent.length
  const polls = 3
  const lookups = () => sent.slice(from).flatMap((request) => options.lookup(request) ?? [])
  await expect.poll(() => lookups().length, { timeout: 10_000 }).toBeGreaterThanOrEqual(polls * runIds.length)
  const waiting = sent.slice(from)
  // A request about one of the runs that is not a poll's is a read; the store's housekeeping (a sweep of expired logs) names none.
  const aboutTheRuns = (request: SentRequest) => request.parameters.some((parameter) => runIds.some((runId) => String(parameter).includes(runId)))
  expect(waiting.filter((request) => options.lookup(request) === undefined && aboutTheRuns(request))).toEqual([])
  for (const request of waiting) {
    if (options.lookup(request) !== undefined) expect(options.lookup(request)).toHaveLength(options.runsPerLookup === "all" ? runIds.length : 1)
  }
  expect(new Set(lookups())).toEqual(new Set(runIds))
  // Each run moves on and closes in the writer's process: every reader gets the rest, once and in order.
  await Promise.all(producers.map(async (producer) => {
    await producer.append([text("b")])
    await producer.close()
  }))
  await done
  expect(read).toEqual(runIds.map(() => ["a", "b"]))
}

/** Tails `runId` on `runtime`'s log from its start: `read` gets each delta as it comes, and `done` settles once the log ends. */
export const tailDeltas = (runtime: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>, runId: string) => {
  const read: Array<string> = []
  const done = (async () => {
    for await (const { chunk } of (await openLog(runtime, runId, "-1")).read("-1")) read.push((chunk as { delta: string }).delta)
  })()
  return { read, done }
}

export const heardClaimName =
  "a reader waiting for a run another process writes gets each append and the close as they are written, with its poll an hour away"

/**
 * Checks {@link heardClaimName}: `reader`'s poll outlasts the test, so only
 * what the store tells it of `writer`'s writes can deliver them.
 */
export const checkHeard = async (
  writer: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>,
  reader: ManagedRuntime.ManagedRuntime<AI.StreamLog, unknown>
) => {
  // A space in the id: an announcement carries it whole.
  const runId = `run heard ${crypto.randomUUID()}`
  const producer = await openLog(writer, runId, null)
  await producer.append([text("a")])
  const { read, done } = tailDeltas(reader, runId)
  await expect.poll(() => read).toEqual(["a"])
  await producer.append([text("b"), text("c")])
  await expect.poll(() => read).toEqual(["a", "b", "c"])
  await producer.close()
  await done
  expect(read).toEqual(["a", "b", "c"])
}

/** The runs a poll of `layerSqlStreamLog` asks about (the statement that reads the tails), or `undefined` for any other statement. */
export const sqlTailLookup = (request: SentRequest): ReadonlyArray<string> | undefined =>
  request.text.includes("MAX(c.seq)") ? request.parameters.filter((parameter): parameter is string => typeof parameter === "string") : undefined

/** A text delta of message `m`. */
export const text = (delta: string): StreamChunk => ({ type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta, timestamp: 0 }) as StreamChunk
