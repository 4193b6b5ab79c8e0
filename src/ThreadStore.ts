/**
 * Threads kept on the server, for `useChat({ threadId, persistence: true })`:
 * a thread's transcript, the run still answering in it, and the interrupts
 * (tool approvals) its last run waits on, which the client reads when it
 * mounts (the hydrate GET) to paint the transcript, restore the approvals
 * and tail the active run.
 *
 * {@link ThreadStore.persist} keeps a thread as a chat stream runs: it marks
 * the run active when it starts, folds the run's chunks into the transcript
 * with core's own `StreamProcessor` (the one the client runs), and saves the
 * transcript when the run ends. The save is a compare-and-set on the active
 * run, so that a run that ends after a newer one started in the same thread
 * does not overwrite the newer run's state.
 *
 * @since 0.1.0
 */
import type { StreamChunk, UIMessage } from "@tanstack/ai"
import { modelMessagesToUIMessages, StreamProcessor } from "@tanstack/ai"
import { Clock, Context, Duration, Effect, Layer, Option, Schema, Stream } from "effect"
import type { ChatRequestParams } from "./Chat.ts"
import { frontSweep } from "./internal/frontSweep.ts"

/**
 * The store of threads could not answer. Nothing was saved.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.ThreadStoreError({ operation: "load", threadId: "thread-1", cause: new Error("connection refused") })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadStoreError extends Schema.TaggedError<ThreadStoreError>()("ThreadStoreError", {
  operation: Schema.String,
  threadId: Schema.String,
  cause: Schema.Defect()
}) {
  override get message(): string {
    return `The thread store could not ${this.operation} thread ${this.threadId}: ${
      this.cause instanceof Error ? this.cause.message : String(this.cause)
    }`
  }
}

/**
 * A thread as the client hydrates it: its transcript, the run still
 * answering (to tail with `joinRun`), and the interrupts its last run waits
 * on.
 *
 * @since 0.1.0
 * @category models
 */
export interface Thread {
  readonly messages: ReadonlyArray<UIMessage>
  readonly activeRun: { readonly runId: string } | null
  readonly interrupts: { readonly runId: string; readonly pending: ReadonlyArray<unknown> } | null
}

/**
 * The operations a thread backend implements.
 *
 * @since 0.1.0
 * @category models
 */
export interface ThreadStoreBackend {
  readonly load: (threadId: string) => Effect.Effect<Option.Option<Thread>, ThreadStoreError>
  /**
   * Saves the thread. With `whileRun`, only while that run is the thread's
   * active one (a compare-and-set); answers whether it saved.
   */
  readonly save: (
    threadId: string,
    thread: Thread,
    options?: { readonly whileRun?: string | undefined }
  ) => Effect.Effect<boolean, ThreadStoreError>
}

/**
 * Options every thread store layer takes.
 *
 * @since 0.1.0
 * @category models
 */
export interface ThreadStoreOptions {
  /** How long a thread is kept after its last save. Default 30 days. */
  readonly retention?: Duration.Input | undefined
}

/**
 * The threads of a chat, kept on the server.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Stream } from "effect"
 *
 * const params = { threadId: "thread-1", runId: "run-1", messages: [{ role: "user" as const, content: "Hi" }] }
 * // The run's transcript is saved to the thread as it runs.
 * const kept = AI.chat({ adapter: scriptedText([{ text: "Hello!" }]), ...params }).pipe(AI.ThreadStore.persist(params))
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export class ThreadStore extends Context.Service<ThreadStore, ThreadStoreBackend>()("@tanstack/ai-effect/ThreadStore") {
  /**
   * Threads in memory, for one process: kept for `retention` after their
   * last save, then freed at a later save.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   *
   * export const ThreadsLive = AI.ThreadStore.layerMemory()
   * ```
   */
  static readonly layerMemory = (options?: ThreadStoreOptions): Layer.Layer<ThreadStore> =>
    Layer.sync(ThreadStore, () => makeMemory(Duration.toMillis(Duration.fromInputUnsafe(options?.retention ?? "30 days"))))

  /**
   * Keeps the thread of a chat stream: the run is marked active at its
   * start, and its transcript (the request's messages, then what the run
   * answered, folded by core's `StreamProcessor`) and the interrupts it ends
   * on are saved when it ends, however it ends. A store that cannot answer
   * at the start fails the stream before the model is asked; at the end, the
   * failure is logged and the client keeps what it received.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   * import { ChatRoute } from "@tanstack/ai-effect/http"
   * import { scriptedText } from "@tanstack/ai-effect/testing"
   *
   * const adapter = scriptedText([{ text: "Hello!" }])
   * const chat = ChatRoute.resumableHandler((params) => AI.chat({ adapter, ...params }).pipe(AI.ThreadStore.persist(params)))
   * ```
   */
  static readonly persist = (params: Pick<ChatRequestParams, "threadId" | "runId" | "messages">) =>
  <E, R>(stream: Stream.Stream<StreamChunk, E, R>): Stream.Stream<StreamChunk, E | ThreadStoreError, R | ThreadStore> =>
    Stream.unwrap(Effect.gen(function*() {
      const threads = yield* ThreadStore
      const initial = toUIMessages(params.messages)
      yield* threads.save(params.threadId, { messages: initial, activeRun: { runId: params.runId }, interrupts: null })
      const transcript = makeTranscript(initial, params.runId)
      return stream.pipe(
        // Folded a batch at a time, not with an Effect per chunk.
        Stream.mapArray((chunks) => {
          for (const chunk of chunks) transcript.add(chunk)
          return chunks
        }),
        Stream.onExit(() =>
          Effect.suspend(() => threads.save(params.threadId, transcript.ended(), { whileRun: params.runId })).pipe(
            Effect.catchTag("ThreadStoreError", (error) => Effect.logWarning(`The thread's transcript could not be saved: ${error.message}`)),
            Effect.asVoid
          )
        )
      )
    }))
}

/**
 * A run's chunks folded onto a thread's transcript as the client folds them
 * (core's `StreamProcessor`), with the interrupts the run ends on: the
 * thread to save when the run ended.
 */
export const makeTranscript = (initial: ReadonlyArray<UIMessage>, runId: string) => {
  const processor = new StreamProcessor({ initialMessages: [...initial] })
  let interrupts: Thread["interrupts"] = null
  return {
    add: (chunk: StreamChunk): void => {
      processor.processChunk(chunk)
      if (chunk.type === "RUN_FINISHED") interrupts = interruptsOf(runId, chunk)
    },
    ended: (): Thread => {
      processor.finalizeStream()
      return { messages: processor.getMessages(), activeRun: null, interrupts }
    }
  }
}

/** The interrupts a `RUN_FINISHED` ends on (a tool approval), as the client's hydrate reads them. */
const interruptsOf = (runId: string, chunk: StreamChunk): Thread["interrupts"] => {
  // Core's RUN_FINISHED carries AG-UI's outcome; an interrupt outcome lists what the run waits on.
  const outcome = (chunk as { readonly outcome?: { readonly type?: unknown; readonly interrupts?: unknown } }).outcome
  return outcome?.type === "interrupt" && Array.isArray(outcome.interrupts) && outcome.interrupts.length > 0
    ? { runId, pending: outcome.interrupts }
    : null
}

/** The request's messages as the client keeps them: UI messages stay, model messages are converted as core converts them. */
export const toUIMessages = (messages: ChatRequestParams["messages"]): ReadonlyArray<UIMessage> => {
  const all = [...messages]
  // Core's request body holds UI messages (with parts) or model messages; its converter takes the latter.
  return all.every((message) => "parts" in message)
    ? all as Array<UIMessage>
    : modelMessagesToUIMessages(all.filter((message) => !("parts" in message)) as Parameters<typeof modelMessagesToUIMessages>[0])
}

const makeMemory = (retention: number): ThreadStoreBackend => {
  // In the order of their last save, so that an expired thread is dropped from the front at the next save.
  const threads = new Map<string, { readonly thread: Thread; readonly expiresAt: number }>()
  const sweep = frontSweep(threads)
  return {
    load: (threadId) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const kept = threads.get(threadId)
        if (kept === undefined || kept.expiresAt <= now) return Option.none()
        // A copy: the caller cannot reach the kept thread through it.
        return Option.some(structuredClone(kept.thread))
      }),
    save: (threadId, thread, options) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const kept = threads.get(threadId)
        if (options?.whileRun !== undefined && kept?.thread.activeRun?.runId !== options.whileRun) return false
        threads.delete(threadId)
        threads.set(threadId, { thread: structuredClone(thread), expiresAt: now + retention })
        sweep((expired) => expired.expiresAt <= now)
        return true
      })
  }
}
