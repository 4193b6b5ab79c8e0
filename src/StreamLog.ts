/**
 * The delivery log of a run: every chunk a run sent, stored before it is
 * delivered, so that a client that reloads, drops its connection or joins
 * from a second tab reads the run from where it was, without running it
 * again. It is core's delivery durability (`StreamDurability`,
 * `UpsertableStreamDurability` of `@tanstack/ai`) on this package's stores.
 *
 * Each run's log is written by one **producer** at a time. A producer
 * claims the log's next **epoch** at its first write; every later write
 * (append, upsert, close) is a compare-and-set on that epoch, so once a
 * second producer took the log over (a takeover after a crash), nothing the
 * first one sends is stored. Offsets are minted here, opaque to core:
 * `ai-effect:v1:<run id>:<sequence>`.
 *
 * This module has the service, the in-memory backend and the adapter core
 * asks for ({@link StreamLog.durability}). `@tanstack/ai-effect/sql` and
 * `@tanstack/ai-effect/sqlite` have the durable backends.
 *
 * @since 0.1.0
 */
import type { StreamChunk, UpsertableStreamDurability } from "@tanstack/ai"
import { resolveResumeRunId } from "@tanstack/ai"
import { Clock, Context, Deferred, Duration, Effect, Layer, Schema } from "effect"
import { runErrorChunk } from "./internal/agui.ts"
import { frontSweep } from "./internal/frontSweep.ts"
import { planUpsert } from "./internal/streamLog.ts"

/**
 * The log's store could not answer (`unavailable`, `timeout`), or holds an
 * entry it cannot read (`corrupt`). Nothing was written.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.StreamLogError({ operation: "append", runId: "run-1", reason: "unavailable", cause: new Error("connection refused") })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class StreamLogError extends Schema.TaggedError<StreamLogError>()("StreamLogError", {
  operation: Schema.String,
  runId: Schema.String,
  reason: Schema.Literals(["unavailable", "timeout", "corrupt"]),
  cause: Schema.Defect()
}) {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `The stream log could not ${this.operation} for run ${this.runId} (${this.reason}): ${cause}`
  }
}

/**
 * The write came from a producer that no longer owns the log: another
 * producer claimed a later epoch (a takeover), or the log was closed.
 * Nothing was stored.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.ProducerFenced({ runId: "run-1", epoch: 1 })
 * error.message // "The producer of run run-1 with epoch 1 no longer owns its log; nothing was stored"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ProducerFenced extends Schema.TaggedError<ProducerFenced>()("ProducerFenced", {
  runId: Schema.String,
  epoch: Schema.Number
}) {
  override get message(): string {
    return `The producer of run ${this.runId} with epoch ${this.epoch} no longer owns its log; nothing was stored`
  }
}

/**
 * An offset this log cannot use: not one it minted, another run's, repeated
 * in one batch, missing (a hole), or a new one at or before the tail.
 * Nothing was stored.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.InvalidOffset({ offset: "42", reason: "it is not an offset of this log" })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOffset extends Schema.TaggedError<InvalidOffset>()("InvalidOffset", {
  offset: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `The stream offset ${JSON.stringify(this.offset.slice(0, 200))} cannot be used: ${this.reason}`
  }
}

/**
 * A read of a run whose log is not stored: it never ran here, or its log
 * expired. Raised at once for a resume offset, and after
 * `firstChunkDeadline` for a join from the start.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.UnknownRun({ runId: "run-1" })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class UnknownRun extends Schema.TaggedError<UnknownRun>()("UnknownRun", {
  runId: Schema.String
}) {
  override get message(): string {
    return `No stream log of run ${this.runId} is stored: it never ran here, or its log expired`
  }
}

/**
 * One stored chunk and its position in the run's log (1, 2, ...).
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  readonly seq: number
  readonly chunk: StreamChunk
}

/**
 * A page of a run's log: the entries after a position, whether the log is
 * closed, and whether it is stored at all.
 *
 * @since 0.1.0
 * @category models
 */
export interface Page {
  readonly entries: ReadonlyArray<Entry>
  readonly complete: boolean
  readonly known: boolean
}

/**
 * The operations a backend implements, each one atomic step against its
 * store. `append`, `upsert` and `close` are compare-and-set on the
 * producer's epoch.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamLogBackend {
  /**
   * Claims the run's next epoch, creating its log: every earlier producer
   * is fenced from now on. The claim that creates a log answers 1, each
   * later one the next number, so that epoch 1 tells a producer the log
   * is empty.
   */
  readonly claim: (runId: string) => Effect.Effect<number, StreamLogError | ProducerFenced>
  /** Stores chunks after the tail; answers their positions. One round trip on a networked store. */
  readonly append: (
    runId: string,
    epoch: number,
    chunks: ReadonlyArray<StreamChunk>
  ) => Effect.Effect<ReadonlyArray<number>, StreamLogError | ProducerFenced>
  /** Stores chunks at given positions, replacing what is there; validated whole before anything is written. */
  readonly upsert: (
    runId: string,
    epoch: number,
    entries: ReadonlyArray<Entry>
  ) => Effect.Effect<void, StreamLogError | ProducerFenced | InvalidOffset>
  /** Closes the log: readers end once they read what it holds. */
  readonly close: (runId: string, epoch: number) => Effect.Effect<void, StreamLogError | ProducerFenced>
  /** Up to `limit` entries after position `after`, in order. Never waits. */
  readonly read: (runId: string, after: number, limit: number) => Effect.Effect<Page, StreamLogError>
  /**
   * Waits until the log may have changed since `after` was read (a signal, or
   * one poll interval). `ended` passes a position past any, to wait for the
   * log's close.
   */
  readonly awaitChange: (runId: string, after: number) => Effect.Effect<void>
}

/**
 * Options every log layer takes.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamLogOptions {
  /** How long a log is kept after it closed, or after its producer claimed it. Default 24 hours. */
  readonly retention?: Duration.Input | undefined
  /**
   * How long a join from the start of a run whose log is not stored yet
   * waits for its first chunk before it fails with `UnknownRun`: a producer
   * may start a moment after a second tab joins. Default 1 second.
   */
  readonly firstChunkDeadline?: Duration.Input | undefined
}

const offsetPrefix = "ai-effect:v1:"

/**
 * Where a resumed read starts: from the start (`-1`), from what is stored
 * now (`now`), or after a position.
 */
type ReadFrom = { readonly _tag: "Start" } | { readonly _tag: "Now" } | { readonly _tag: "After"; readonly seq: number }

/** The offset of a position in a run's log, as the client sees it in the SSE `id:` line. */
const offsetOf = (runId: string, seq: number): string => `${offsetPrefix}${encodeURIComponent(runId)}:${seq}`

/**
 * The offset of the `index`-th chunk a producer sent without storing it,
 * after the log failed to store position `afterSeq`: the connected client
 * still gets the chunk, and a resume from it reads what the log stored
 * after `afterSeq` (the run's terminal, once the store answers again).
 */
const unstoredOffsetOf = (runId: string, afterSeq: number, index: number): string =>
  `${offsetPrefix}${encodeURIComponent(runId)}:${afterSeq}.${index}`

/**
 * The run and position of an offset this log minted (`unstored` for a chunk
 * sent without being stored, its position the last one stored before it),
 * or why it is not one.
 */
const parseOffset = (offset: string): { readonly runId: string; readonly seq: number; readonly unstored: boolean } | InvalidOffset => {
  const invalid = new InvalidOffset({ offset, reason: "it is not an offset of this log" })
  if (!offset.startsWith(offsetPrefix)) return invalid
  const rest = offset.slice(offsetPrefix.length)
  const separator = rest.lastIndexOf(":")
  if (separator <= 0) return invalid
  const position = rest.slice(separator + 1).match(/^(0|[1-9]\d*)(?:\.([1-9]\d*))?$/)
  const seq = Number(position?.[1])
  const unstored = position?.[2] !== undefined
  if (position === null || !Number.isSafeInteger(seq) || (seq < 1 && !unstored)) return invalid
  try {
    return { runId: decodeURIComponent(rest.slice(0, separator)), seq, unstored }
  } catch {
    return invalid
  }
}

/** Where a read from `offset` of `runId` starts. */
const readFrom = (runId: string, offset: string): ReadFrom | InvalidOffset => {
  if (offset === "-1") return { _tag: "Start" }
  if (offset === "now") return { _tag: "Now" }
  const parsed = parseOffset(offset)
  if (parsed instanceof InvalidOffset) return parsed
  if (parsed.runId !== runId) return new InvalidOffset({ offset, reason: `it is an offset of run ${parsed.runId}, not ${runId}` })
  return { _tag: "After", seq: parsed.seq }
}

/** A run id as core accepts one: not empty, no CR or LF (it goes into headers). */
const checkRunId = (runId: string): InvalidOffset | undefined =>
  runId.length === 0 || /[\r\n]/.test(runId) ? new InvalidOffset({ offset: runId, reason: "a run id must be non-empty and hold no CR or LF" }) : undefined

const isAborted = (signal: AbortSignal | undefined): boolean => signal?.aborted === true

/** How many entries one read asks for. */
const pageSize = 256

/**
 * What a run's delivery log is for a request: the run it names and the
 * offset the client resumes from (null for a producer).
 *
 * @since 0.1.0
 * @category models
 */
export interface LogRequest {
  readonly runId: string
  readonly offset?: string | null | undefined
}

/**
 * The delivery logs of runs.
 *
 * @example
 * ```ts
 * import { chat, toServerSentEventsResponse } from "@tanstack/ai"
 * import * as AI from "@tanstack/ai-effect"
 * import { openaiText } from "@tanstack/ai-openai"
 * import { Effect, ManagedRuntime } from "effect"
 *
 * const runtime = ManagedRuntime.make(AI.StreamLog.layerMemory())
 *
 * // A route as core writes it, with the log on this package's store.
 * export async function POST(request: Request) {
 *   const adapter = await runtime.runPromise(Effect.flatMap(Effect.service(AI.StreamLog), (log) => log.durability(request)))
 *   const stream = chat({ adapter: openaiText("gpt-5.2"), messages: [{ role: "user", content: "Hi" }] })
 *   return toServerSentEventsResponse(stream, { durability: { adapter } })
 * }
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export class StreamLog extends Context.Service<StreamLog, StreamLog.Service>()("@tanstack/ai-effect/StreamLog") {
  /**
   * Makes the service from a backend: the offsets, the tailing reads and
   * core's adapter over its operations. Backends are built with it.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   * import { Layer } from "effect"
   *
   * declare const backend: AI.StreamLogBackend
   * const layer = Layer.effect(AI.StreamLog, AI.StreamLog.make(backend))
   * ```
   */
  static readonly make = (backend: StreamLogBackend, options?: StreamLogOptions): Effect.Effect<StreamLog.Service> =>
    Effect.map(Effect.context<never>(), (context) => makeService(backend, options, context))

  /**
   * Logs in memory, for one process: closed logs are kept for `retention`
   * (default 5 minutes, as core's `memoryStream`), and at most `capacity`
   * closed logs (default 1,024), the one that closed first dropped first.
   * Open logs are never dropped while their producer writes.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   *
   * export const StreamLogLive = AI.StreamLog.layerMemory({ retention: "10 minutes" })
   * ```
   */
  static readonly layerMemory = (options?: StreamLogOptions & { readonly capacity?: number | undefined }): Layer.Layer<StreamLog> =>
    Layer.effect(
      StreamLog,
      StreamLog.make(
        makeMemoryBackend(options?.capacity ?? 1_024, Duration.toMillis(Duration.fromInputUnsafe(options?.retention ?? "5 minutes"))),
        options
      )
    )

  /**
   * The offset of a position in a run's log, as this log mints it.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   *
   * AI.StreamLog.offsetOf("run-1", 3) // "ai-effect:v1:run-1:3"
   * ```
   */
  static readonly offsetOf = offsetOf

  /**
   * The run and offset a request names, as core's adapters read them:
   * `Last-Event-ID` (or `?offset`), and `X-Run-Id` (or `?runId`), or the run
   * of the offset. A request that names neither is a new run with a fresh
   * id.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   *
   * declare const request: Request
   * const { runId, offset } = AI.StreamLog.requestOf(request)
   * ```
   */
  static readonly requestOf = (request: Request): LogRequest => {
    const offset = request.headers.get("Last-Event-ID") ?? searchParam(request, "offset")
    const named = resolveResumeRunId(request)
    if (named !== null) return { runId: named, offset }
    const parsed = offset === null ? undefined : parseOffset(offset)
    return { runId: parsed === undefined || parsed instanceof InvalidOffset ? crypto.randomUUID() : parsed.runId, offset }
  }
}

const searchParam = (request: Request, name: string): string | null => {
  try {
    return new URL(request.url).searchParams.get(name)
  } catch {
    return null
  }
}

/**
 * The shape of {@link StreamLog}.
 *
 * @since 0.1.0
 * @category models
 */
export declare namespace StreamLog {
  export interface Service extends StreamLogBackend {
    /**
     * Core's adapter for one request's view of a run's log: a producer
     * (no offset) that claims an epoch at its first write, or a reader that
     * resumes from the offset. Fails with `InvalidOffset` for a run id core
     * would refuse. Pass it as `durability.adapter` to core's
     * `toServerSentEventsResponse` or `resumeServerSentEventsResponse`.
     */
    readonly durability: (request: Request | LogRequest) => Effect.Effect<UpsertableStreamDurability, InvalidOffset>
    /**
     * Whether a resume from `offset` can be answered, without waiting: the
     * offset is this log's and names this run (or is `-1` or `now`), and the
     * run's log is stored. A route answers `InvalidOffset` with a 400 and
     * `UnknownRun` with a 404, before it streams anything.
     */
    readonly check: (runId: string, offset: string) => Effect.Effect<void, InvalidOffset | UnknownRun | StreamLogError>
    /**
     * Stops a run from any process: takes its log over (a new epoch, so that
     * nothing the run's producer sends afterwards is stored), appends core's
     * `RUN_ERROR` for a cancelled run (code `cancelled`), so that every
     * reader ends, and closes the log. Answers `false` when the log was
     * already closed (the run had ended). The process running the run sees
     * the log closed (see {@link ended}) and interrupts it.
     */
    readonly cancel: (runId: string) => Effect.Effect<boolean, UnknownRun | StreamLogError>
    /**
     * Completes once the run's log is closed, by its producer or by a
     * {@link cancel} from any process. It waits as a reader waits (on a
     * store that is polled, within the readers' shared poll, which asks
     * about every run at once), and a read the store cannot answer is
     * looked at again.
     */
    readonly ended: (runId: string) => Effect.Effect<void>
  }
}

/**
 * The backend, with the readers of its service that caught up woken as soon
 * as the service stores to their run (a durable run's runner and the route
 * that tails its log, in one server): a networked store has no signal to
 * wait on, so only another process's writes wait for its poll.
 */
const wakingReaders = (backend: StreamLogBackend): StreamLogBackend => {
  const waiting = new Map<string, Set<() => void>>()
  const woken = <A, E>(runId: string, write: Effect.Effect<A, E>) =>
    Effect.tap(write, () =>
      Effect.sync(() => {
        const readers = waiting.get(runId)
        waiting.delete(runId)
        readers?.forEach((wake) => wake())
      }))
  const writeHere = (runId: string) =>
    Effect.callback<void>((resume) => {
      const wake = () => resume(Effect.void)
      const readers = waiting.get(runId) ?? new Set()
      waiting.set(runId, readers.add(wake))
      return Effect.sync(() => {
        readers.delete(wake)
        if (readers.size === 0 && waiting.get(runId) === readers) waiting.delete(runId)
      })
    })
  return {
    claim: backend.claim,
    read: backend.read,
    append: (runId, epoch, chunks) => woken(runId, backend.append(runId, epoch, chunks)),
    upsert: (runId, epoch, entries) => woken(runId, backend.upsert(runId, epoch, entries)),
    close: (runId, epoch) => woken(runId, backend.close(runId, epoch)),
    awaitChange: (runId, after) => Effect.raceFirst(writeHere(runId), backend.awaitChange(runId, after))
  }
}

const makeService = (store: StreamLogBackend, options: StreamLogOptions | undefined, context: Context.Context<never>): StreamLog.Service => {
  const backend = wakingReaders(store)
  const firstChunkDeadline = Duration.toMillis(Duration.fromInputUnsafe(options?.firstChunkDeadline ?? "1 second"))
  const run = <A, E>(effect: Effect.Effect<A, E>, signal?: AbortSignal) =>
    Effect.runPromiseWith(context)(effect, signal === undefined ? undefined : { signal })

  const durability = (request: Request | LogRequest) =>
    Effect.suspend(() => {
      const { runId, offset } = request instanceof Request ? StreamLog.requestOf(request) : request
      const refused = checkRunId(runId)
      if (refused !== undefined) return Effect.fail(refused)
      const resumeFrom = offset ?? null
      // The producer's epoch, claimed at its first write (again after a claim the store could not answer).
      let epoch: Promise<number> | undefined
      const claimed = () => {
        const claim = epoch ??= run(backend.claim(runId))
        claim.catch(() => {
          if (epoch === claim) epoch = undefined
        })
        return claim
      }
      // The last position stored, and the chunks sent unstored since the store failed, if it did.
      let lastSeq = 0
      let unstored: { readonly afterSeq: number; count: number } | undefined

      const adapter: UpsertableStreamDurability = {
        resumeFrom: () => resumeFrom,
        append: async (chunks) => {
          if (unstored === undefined) {
            try {
              const seqs = await run(backend.append(runId, await claimed(), chunks))
              lastSeq = seqs.at(-1) ?? lastSeq
              return seqs.map((seq) => offsetOf(runId, seq))
            } catch (error) {
              // Another producer owns the log: this one stops. A store that cannot answer does not stop the answer.
              if (!(error instanceof StreamLogError)) throw error
              unstored = { afterSeq: lastSeq, count: 0 }
              await run(Effect.logWarning(
                `${error.message}. The connected client still receives run ${runId}; its log ends after position ${lastSeq}, and a resume from later gets the run's RUN_ERROR.`
              ))
            }
          }
          const gap = unstored
          return chunks.map(() => unstoredOffsetOf(runId, gap.afterSeq, ++gap.count))
        },
        upsert: async (entries) => {
          // Validated whole, before anything is claimed or written.
          const planned: Array<Entry> = []
          const seen = new Set<string>()
          for (let index = 0; index < entries.length; index++) {
            const entry = entries[index]
            if (entry === undefined) throw new InvalidOffset({ offset: `entries[${index}]`, reason: "the entries must be dense (this one is a hole)" })
            const parsed = parseOffset(entry.offset)
            if (parsed instanceof InvalidOffset) throw parsed
            if (parsed.runId !== runId) throw new InvalidOffset({ offset: entry.offset, reason: `it is an offset of run ${parsed.runId}, not ${runId}` })
            if (parsed.unstored) throw new InvalidOffset({ offset: entry.offset, reason: "it names a chunk the log did not store" })
            if (seen.has(entry.offset)) throw new InvalidOffset({ offset: entry.offset, reason: "it is repeated within the batch" })
            seen.add(entry.offset)
            planned.push({ seq: parsed.seq, chunk: entry.chunk })
          }
          const mine = await claimed()
          await run(backend.upsert(runId, mine, planned))
          return entries.map((entry) => entry.offset)
        },
        close: async () => {
          // A reader's close, or a producer's that never wrote, leaves the log as it is.
          if (epoch === undefined && unstored === undefined) return
          const mine = await claimed()
          // A log that could not store part of the run ends on a RUN_ERROR that says so: a reader stops there.
          if (unstored !== undefined) await run(backend.append(runId, mine, [unstoredChunk(unstored.afterSeq)]))
          await run(backend.close(runId, mine))
        },
        snapshot: async () => {
          const out: Array<{ offset: string; chunk: StreamChunk }> = []
          for (let after = 0;;) {
            const page = await run(backend.read(runId, after, pageSize))
            for (const entry of page.entries) out.push({ offset: offsetOf(runId, entry.seq), chunk: entry.chunk })
            if (page.entries.length < pageSize) return out
            after = page.entries.at(-1)!.seq
          }
        },
        read: (offset, signal) => tail(runId, offset, signal)
      }
      return Effect.succeed(adapter)
    })

  async function* tail(runId: string, offset: string, signal: AbortSignal | undefined) {
    const from = readFrom(runId, offset)
    if (from instanceof InvalidOffset) throw from
    let after = from._tag === "After" ? from.seq : 0
    const startedAt = await run(Clock.currentTimeMillis)
    if (from._tag === "Now") after = await run(tailOf(runId))
    let seenAny = false
    for (;;) {
      if (isAborted(signal)) return
      const page = await run(backend.read(runId, after, pageSize))
      if (!page.known) {
        // A resume offset names a log that was stored: it is gone. A join from the start may come before its producer.
        if (from._tag === "After" || seenAny) throw new UnknownRun({ runId })
        if ((await run(Clock.currentTimeMillis)) - startedAt >= firstChunkDeadline) throw new UnknownRun({ runId })
      }
      for (const entry of page.entries) {
        seenAny = true
        after = entry.seq
        yield { offset: offsetOf(runId, entry.seq), chunk: entry.chunk }
      }
      if (page.entries.length === pageSize) continue
      if (page.complete) return
      try {
        await run(backend.awaitChange(runId, after), signal)
      } catch (error) {
        if (isAborted(signal)) return
        throw error
      }
    }
  }

  /** The position of the last entry stored now. */
  const tailOf = (runId: string): Effect.Effect<number, StreamLogError> =>
    Effect.gen(function*() {
      let after = 0
      for (;;) {
        const page = yield* backend.read(runId, after, pageSize)
        after = page.entries.at(-1)?.seq ?? after
        if (page.entries.length < pageSize) return after
      }
    })

  const check = (runId: string, offset: string) =>
    Effect.suspend((): Effect.Effect<void, InvalidOffset | UnknownRun | StreamLogError> => {
      const refused = checkRunId(runId)
      if (refused !== undefined) return Effect.fail(refused)
      const from = readFrom(runId, offset)
      if (from instanceof InvalidOffset) return Effect.fail(from)
      return Effect.flatMap(backend.read(runId, Number.MAX_SAFE_INTEGER, 1), (page) => page.known ? Effect.void : Effect.fail(new UnknownRun({ runId })))
    })

  /** The log's state now, without its entries. */
  const stateOf = (runId: string) => backend.read(runId, Number.MAX_SAFE_INTEGER, 1)

  const cancel = (runId: string) =>
    Effect.gen(function*() {
      const state = yield* stateOf(runId)
      if (!state.known) return yield* Effect.fail(new UnknownRun({ runId }))
      if (state.complete) return false
      const epoch = yield* backend.claim(runId)
      yield* backend.append(runId, epoch, [cancelledChunk()])
      yield* backend.close(runId, epoch)
      return true
    }).pipe(
      // Closed meanwhile, by its producer or another cancel: the run has ended.
      Effect.catchTag("ProducerFenced", () => Effect.succeed(false))
    )

  const ended = (runId: string) =>
    Effect.repeat(
      // The store's own wait, not this service's: a write from this process (the run's own appends) does not wake it.
      // No position is past the last, so it wakes once the log closes or is gone, or a poll fails; a read that fails
      // is not an end: the run goes on, and a cancel is seen at the next look (its fence holds meanwhile).
      Effect.andThen(store.awaitChange(runId, Number.MAX_SAFE_INTEGER), Effect.orElseSucceed(stateOf(runId), () => ({ complete: false }))),
      { until: (state) => state.complete }
    ).pipe(Effect.asVoid)

  return { ...backend, durability, check, cancel, ended }
}

/** The terminal of a log that could not store part of its run: a reader that resumes past what it stored ends on it. */
const unstoredChunk = (afterSeq: number): StreamChunk =>
  runErrorChunk(`The delivery log could not store this run after position ${afterSeq}: the rest of its answer went to the connected client only`, "log-unavailable")

/** The terminal a cancel stores: core's `RUN_ERROR` of an explicit cancel, so that a reader ends and shows why. */
const cancelledChunk = (): StreamChunk => runErrorChunk("The run was cancelled", "cancelled")

interface MemoryLog {
  epoch: number
  complete: boolean
  entries: Array<Entry>
  /** When a closed log may be dropped. */
  expiresAt: number
  changed: Deferred.Deferred<void>
}

const makeMemoryBackend = (capacity: number, retention: number): StreamLogBackend => {
  const logs = new Map<string, MemoryLog>()
  // The closed logs in the order they closed, so that they expire from the front: a sweep visits only the logs it drops
  // and the one it keeps, however many logs are stored.
  const closed = new Map<string, MemoryLog>()
  const sweepClosed = frontSweep(closed, (runId) => logs.delete(runId))
  const sweep = (now: number) => sweepClosed((log) => log.expiresAt <= now || closed.size > capacity)
  const notify = (log: MemoryLog) => {
    const changed = log.changed
    log.changed = Deferred.makeUnsafe<void>()
    return Deferred.succeed(changed, undefined)
  }
  const owned = (runId: string, epoch: number) =>
    Effect.suspend(() => {
      const log = logs.get(runId)
      return log === undefined || log.epoch !== epoch || log.complete ? Effect.fail(new ProducerFenced({ runId, epoch })) : Effect.succeed(log)
    })
  return {
    claim: (runId) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        sweep(now)
        const log = logs.get(runId)
        if (log?.complete === true) return Effect.fail(new ProducerFenced({ runId, epoch: log.epoch }))
        if (log !== undefined) return Effect.succeed(++log.epoch)
        logs.set(runId, { epoch: 1, complete: false, entries: [], expiresAt: Number.POSITIVE_INFINITY, changed: Deferred.makeUnsafe() })
        return Effect.succeed(1)
      }),
    append: (runId, epoch, chunks) =>
      Effect.flatMap(owned(runId, epoch), (log) => {
        const first = (log.entries.at(-1)?.seq ?? 0) + 1
        const seqs = chunks.map((chunk, index) => {
          log.entries.push({ seq: first + index, chunk })
          return first + index
        })
        return Effect.as(notify(log), seqs)
      }),
    upsert: (runId, epoch, entries) =>
      Effect.flatMap(owned(runId, epoch), (log) => {
        const indexOf = (seq: number) => {
          const index = firstAfter(log.entries, seq - 1)
          return log.entries[index]?.seq === seq ? index : -1
        }
        const plan = planUpsert(entries.map((entry) => entry.seq), {
          tail: log.entries.at(-1)?.seq ?? 0,
          has: (seq) => indexOf(seq) !== -1
        })
        if (plan._tag === "Refused") return Effect.fail(new InvalidOffset({ offset: offsetOf(runId, plan.seq), reason: plan.reason }))
        for (const entry of entries) {
          if (plan.pushed.has(entry.seq)) log.entries.push(entry)
          else log.entries[indexOf(entry.seq)] = entry
        }
        return notify(log)
      }),
    close: (runId, epoch) =>
      Effect.flatMap(Effect.zip(owned(runId, epoch), Clock.currentTimeMillis), ([log, now]) => {
        log.complete = true
        log.expiresAt = now + retention
        closed.set(runId, log)
        return notify(log)
      }),
    read: (runId, after, limit) =>
      Effect.map(Clock.currentTimeMillis, (now): Page => {
        const log = logs.get(runId)
        if (log === undefined || (log.complete && log.expiresAt <= now)) return { entries: [], complete: false, known: false }
        const start = firstAfter(log.entries, after)
        return { entries: log.entries.slice(start, start + limit), complete: log.complete, known: true }
      }),
    awaitChange: (runId, after) =>
      Effect.suspend(() => {
        const log = logs.get(runId)
        // Nothing stored yet: look again shortly (a producer may come).
        if (log === undefined) return Effect.sleep(Duration.millis(10))
        if (log.complete || (log.entries.at(-1)?.seq ?? 0) > after) return Effect.void
        return Deferred.await(log.changed)
      })
  }
}

/** The index of the first entry after position `after` (entries are in position order). */
const firstAfter = (entries: ReadonlyArray<Entry>, after: number): number => {
  let low = 0
  let high = entries.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (entries[middle]!.seq <= after) low = middle + 1
    else high = middle
  }
  return low
}
