/**
 * A chat route on `effect/http`: the AG-UI request read from the body, the
 * run's chunks written back as server-sent events.
 *
 * The route stays in Effect from the socket to the model: no web `Request`
 * or `Response` is made, each batch of chunks goes out in one write, and when
 * the client goes away the server interrupts the handler's fiber, which stops
 * the run (the model request is aborted, the tool fibers are interrupted and
 * their finalizers run).
 *
 * {@link resumableHandler} serves a run through its delivery log
 * (`AI.StreamLog`) with core's own durable encoder, so that a client that
 * drops its connection, reloads or joins from a second tab reads the run
 * from the last event it saw.
 *
 * @since 0.1.0
 */
import { chatParamsFromRequestBody, convertMessagesToModelMessages, resumeServerSentEventsResponse, toServerSentEventsResponse } from "@tanstack/ai"
import type { StreamChunk } from "@tanstack/ai"
import { ByteSize, Duration, Effect, Exit, identity, Option, Predicate, Schedule, Schema, Scope, Stream } from "effect"
import { HttpBody, HttpIncomingMessage, HttpServerRequest, HttpServerResponse } from "effect/http"
import { type ChatRequestParams, fromChatParams } from "../Chat.ts"
import { toServerSentEvents } from "../ServerSentEvents.ts"
import { Locks } from "../Locks.ts"
import type * as DurableAgent from "../durable/DurableAgent.ts"
import { fromReadableStreamJoined } from "../internal/batched.ts"
import { retryOnFailure } from "../internal/retry.ts"
import { provideStreamContext } from "../internal/streamContext.ts"
import { StreamLog } from "../StreamLog.ts"
import { ThreadStore, toUIMessages } from "../ThreadStore.ts"

/**
 * The request's body is not JSON, or not an AG-UI run input (a thread id, a
 * run id, messages, tools and context). {@link handler} answers it with a
 * 400 that says why.
 *
 * @example
 * ```ts
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 * import { Effect } from "effect"
 * import { HttpServerResponse } from "effect/http"
 *
 * const params = ChatRoute.requestParams.pipe(
 *   Effect.catchTag("ChatRequestError", (error) => Effect.fail(HttpServerResponse.text(error.message, { status: 422 })))
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ChatRequestError extends Schema.TaggedError<ChatRequestError>()("ChatRequestError", {
  /** What is wrong: the body is larger than the route reads, is not JSON, or is not an AG-UI run input. */
  reason: Schema.Literals(["too-large", "not-json", "not-a-run"]),
  cause: Schema.Defect()
}) {
  override get message(): string {
    if (this.reason === "too-large") return `The request body is larger than the route reads (${describeCause(this.cause)})`
    if (this.reason === "not-json") return `The request body is not JSON: ${describeCause(this.cause)}`
    return `Invalid AG-UI request body: ${describeCause(this.cause)}`
  }
}

/** The innermost message of a cause: the parser's reason, not the wrapper's tag. */
const describeCause = (cause: unknown): string => {
  let current = cause
  for (let depth = 0; depth < 8; depth++) {
    const inner = Predicate.hasProperty(current, "reason") && Predicate.isObject(current.reason) ? current.reason : undefined
    const next = inner ?? (Predicate.hasProperty(current, "cause") ? current.cause : undefined)
    if (next === undefined || next === null) break
    current = next
  }
  return current instanceof Error ? current.message : String(current)
}

/**
 * How large a request body {@link requestParams} reads when the server sets
 * no `MaxBodySize` of its own: 8 MiB, a long conversation with images. A
 * larger body is refused with a 413 before it is read whole.
 *
 * @example
 * ```ts
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 *
 * ChatRoute.defaultMaxBodySize // 8 MiB, in bytes
 * ```
 *
 * @since 0.1.0
 * @category request
 */
export const defaultMaxBodySize = 8 * 1024 * 1024

/**
 * Reads the current request's body as an AG-UI run input, with core's
 * validation, into the options a chat run takes from a request (see
 * `AI.fromChatParams`).
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Effect } from "effect"
 *
 * const handler = Effect.flatMap(ChatRoute.requestParams, (params) =>
 *   ChatRoute.response(AI.chat({ adapter: scriptedText([{ text: "Hello!" }]), ...params })))
 * ```
 *
 * @since 0.1.0
 * @category request
 */
export const requestParams: Effect.Effect<ChatRequestParams, ChatRequestError, HttpServerRequest.HttpServerRequest> =
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const limit = (yield* HttpIncomingMessage.MaxBodySize) ?? ByteSize.bytes(defaultMaxBodySize)
    const text = yield* request.text.pipe(
      Effect.provideService(HttpIncomingMessage.MaxBodySize, limit),
      Effect.mapError((cause) => new ChatRequestError({ reason: isTooLarge(cause) ? "too-large" : "not-json", cause }))
    )
    const body = yield* Effect.try({
      try: (): unknown => JSON.parse(text),
      catch: (cause) => new ChatRequestError({ reason: "not-json", cause })
    })
    const params = yield* Effect.tryPromise({
      // Core's reader of a parsed body; its failure says which field is wrong.
      try: () => chatParamsFromRequestBody(body),
      catch: (cause) => new ChatRequestError({ reason: "not-a-run", cause })
    })
    return fromChatParams(params)
  })

/**
 * Answers with a chat stream as server-sent events (see
 * `AI.toServerSentEvents`). The stream's services come from the handler's
 * context, since the server runs the body after the handler has returned.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 *
 * const hello = ChatRoute.response(
 *   AI.chat({ adapter: scriptedText([{ text: "Hello!" }]), messages: [{ role: "user", content: "Hi" }] })
 * )
 * ```
 *
 * @since 0.1.0
 * @category response
 */
export const response = <E, R>(
  stream: Stream.Stream<StreamChunk, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, R> =>
  Effect.map(Effect.context<R>(), (context) =>
    HttpServerResponse.stream(toServerSentEvents(provideStreamContext(stream, context)), {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache" }
    }))

/**
 * Core's response (its durable encoder's, or its resume's) served as it
 * is, status, headers and bytes, except that the events ready together go
 * out in one write: `HttpServerResponse.fromWeb` writes each event on its
 * own, a socket write per chunk.
 */
const fromCoreResponse = (response: Response): HttpServerResponse.HttpServerResponse => {
  const head = HttpServerResponse.fromWeb(new Response(null, { status: response.status, statusText: response.statusText, headers: response.headers }))
  if (response.body === null) return head
  return HttpServerResponse.setBody(
    head,
    HttpBody.stream(fromReadableStreamJoined(response.body), response.headers.get("content-type") ?? undefined)
  )
}

/**
 * A chat route's handler: reads the AG-UI request, runs the chat `run`
 * makes of it, and streams its chunks back as server-sent events. A body
 * that is not an AG-UI run input gets a 400 with the reason, and starts
 * nothing.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { HttpRouter } from "effect/http"
 *
 * const adapter = scriptedText([{ text: "Hello!" }])
 *
 * const Api = HttpRouter.add("POST", "/api/chat", ChatRoute.handler((params) => AI.chat({ adapter, ...params })))
 * ```
 *
 * @since 0.1.0
 * @category handlers
 */
export const handler = <E, R>(
  run: (params: ChatRequestParams) => Stream.Stream<StreamChunk, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | R> =>
  requestParams.pipe(
    Effect.flatMap((params) => response(run(params))),
    Effect.catchTag("ChatRequestError", requestRefused)
  )

/** A 413 for a body too large to read, a 400 for one that is not a run. */
const requestRefused = (error: ChatRequestError) =>
  Effect.succeed(HttpServerResponse.text(error.message, { status: error.reason === "too-large" ? 413 : 400 }))

const isTooLarge = (cause: unknown): boolean =>
  Predicate.hasProperty(cause, "reason") && Predicate.hasProperty(cause.reason, "reason") && cause.reason.reason === "BodyTooLarge"

/** The request's URL, absolute: the server's request carries the path and query only. */
const urlOf = (request: HttpServerRequest.HttpServerRequest): URL => new URL(request.url, "http://route.invalid")

/** The run and resume offset a request names, read as core's adapters read them (see `AI.StreamLog.requestOf`). */
const logRequestOf = (request: HttpServerRequest.HttpServerRequest) => {
  const headers: Record<string, string> = {}
  for (const name of ["last-event-id", "x-run-id"]) {
    const value = request.headers[name]
    if (value !== undefined) headers[name] = value
  }
  return StreamLog.requestOf(new Request(urlOf(request), { headers }))
}

const textResponse = (status: number) => (error: { readonly message: string }) =>
  Effect.succeed(HttpServerResponse.text(error.message, { status }))

/**
 * Who may read or start what: the route asks before it starts a run
 * (`threadId` and `runId` of the body), before it answers a resume or a join
 * (the `runId` it names), and before a hydrate (the `threadId`). `false` is
 * a 403, and nothing is read or started.
 *
 * @example
 * ```ts
 * import type { ChatRoute } from "@tanstack/ai-effect/http"
 * import { Effect } from "effect"
 *
 * // Only the signed-in owner of a thread reads it (here: the thread id names its owner).
 * const options: ChatRoute.RouteOptions = {
 *   authorize: (request, { threadId }) => Effect.succeed(threadId === undefined || threadId.startsWith(`${request.headers["x-user"]}:`))
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface RouteOptions<R = never> {
  /**
   * How many chunks of a run one append to its delivery log holds at most
   * (core's durability `batch`); core also appends early at a run's start
   * and end, a tool call's end and most custom events. Default 32, core's.
   * A smaller batch shows a slowly streaming model's text sooner, at a
   * round trip to the log per batch.
   */
  readonly batch?: number | undefined
  readonly authorize?:
    | ((
      request: HttpServerRequest.HttpServerRequest,
      target: { readonly threadId?: string | undefined; readonly runId?: string | undefined }
    ) => Effect.Effect<boolean, never, R>)
    | undefined
}

/** Runs `then` when `authorize` allows the target, answers 403 otherwise. */
const authorized = <A, E, R, R2>(
  request: HttpServerRequest.HttpServerRequest,
  options: RouteOptions<R2> | undefined,
  target: { readonly threadId?: string | undefined; readonly runId?: string | undefined },
  then: Effect.Effect<A, E, R>
): Effect.Effect<A | HttpServerResponse.HttpServerResponse, E, R | R2> =>
  options?.authorize === undefined
    ? then
    : Effect.flatMap(
      options.authorize(request, target),
      (allowed): Effect.Effect<A | HttpServerResponse.HttpServerResponse, E, R> =>
        allowed ? then : Effect.succeed(HttpServerResponse.text("Forbidden", { status: 403 }))
    )

/**
 * A resumable chat route's handler, for `POST` and `GET` alike: a request
 * without a resume offset starts the run `run` makes of its AG-UI body,
 * storing every chunk in the run's delivery log before it is sent; a request
 * with one (`Last-Event-ID`, which `@tanstack/ai-client` sends when it
 * reconnects, or `?offset` with `?runId`, as `joinRun` does) answers what the
 * log holds after it and tails it to the run's end, without running anything
 * again. The bytes are core's `toServerSentEventsResponse(…, { durability })`
 * and `resumeServerSentEventsResponse`, `id:` lines included.
 *
 * A run goes on when its client goes away (a reload, a dropped connection),
 * writing into its log, so that the client that comes back reads it to the
 * end; this is core's own behaviour for durable responses. A body that is
 * not an AG-UI run input is a 400; an offset this log did not mint, or that
 * names another run, is a 400; a run whose log is not stored (unknown, or
 * expired) is a 404 at once; a log that cannot answer is a 503.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { HttpRouter } from "effect/http"
 *
 * const adapter = scriptedText([{ text: "Hello!" }])
 * const chat = ChatRoute.resumableHandler((params) => AI.chat({ adapter, ...params }))
 *
 * // Provide AI.StreamLog (for example layerSqliteStreamLog) to the server.
 * const Api = HttpRouter.addAll([HttpRouter.route("POST", "/api/chat", chat), HttpRouter.route("GET", "/api/chat", chat)])
 * ```
 *
 * @since 0.1.0
 * @category handlers
 */
export const resumableHandler = <E, R, R2 = never>(
  run: (params: ChatRequestParams) => Stream.Stream<StreamChunk, E, R>,
  options?: RouteOptions<R2>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | StreamLog | R | R2> =>
  serveThroughLog(run, options, () => Effect.succeed<RunWrapper>(identity))

/** How a guard wraps a run it admitted. */
type RunWrapper = <E, R>(stream: Stream.Stream<StreamChunk, E, R>) => Stream.Stream<StreamChunk, E, R>

/**
 * Serves a run through its log, or a resume of one. `guard` is asked once
 * the run is authorized and before anything is written: it answers how to
 * wrap the run (for example in a lock it took), or the response that
 * refuses it.
 */
const serveThroughLog = <E, R, R2, R3>(
  run: (params: ChatRequestParams) => Stream.Stream<StreamChunk, E, R>,
  options: RouteOptions<R2> | undefined,
  guard: (params: ChatRequestParams) => Effect.Effect<RunWrapper | HttpServerResponse.HttpServerResponse, never, R3>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | StreamLog | R | R2 | R3> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const log = yield* StreamLog
    const named = logRequestOf(request)
    if (named.offset !== null && named.offset !== undefined) return yield* resumeFromLog(request, options, named.runId, named.offset)
    const params = yield* requestParams
    // The client's run id (X-Run-Id) when it sent one, the body's otherwise: the id it resumes by.
    const runId = request.headers["x-run-id"] ?? params.runId
    return yield* authorized(request, options, { threadId: params.threadId, runId }, Effect.gen(function*() {
      const adapter = yield* log.durability({ runId, offset: null })
      const guarded = yield* guard(params)
      if (HttpServerResponse.isHttpServerResponse(guarded)) return guarded
      // A cancel from any process closes the log; the run stops when this process sees it.
      const chunks = yield* Stream.toAsyncIterableEffect(guarded(run(params)).pipe(Stream.interruptWhen(log.ended(runId))))
      const durability = options?.batch === undefined ? { adapter } : { adapter, batch: options.batch }
      return fromCoreResponse(toServerSentEventsResponse(chunks, { durability }))
    }))
  }).pipe(
    Effect.catchTags({
      ChatRequestError: requestRefused,
      InvalidOffset: textResponse(400),
      UnknownRun: textResponse(404),
      StreamLogError: textResponse(503)
    })
  )

/**
 * Answers what a run's log holds after `offset`, then tails it to the run's
 * end. Refused before anything streams: a bad offset is a 400, a run whose
 * log is not stored a 404.
 */
const resumeFromLog = <R2>(
  request: HttpServerRequest.HttpServerRequest,
  options: RouteOptions<R2> | undefined,
  runId: string,
  offset: string
) =>
  authorized(request, options, { runId }, Effect.gen(function*() {
    const log = yield* StreamLog
    yield* log.check(runId, offset)
    return fromCoreResponse(resumeServerSentEventsResponse({ adapter: yield* log.durability({ runId, offset }) }))
  }))

/**
 * Stops a run from any process: a `DELETE` with `?runId` takes the run's
 * log over and closes it with core's `RUN_ERROR` of a cancel (see
 * `AI.StreamLog.cancel`), so that every reader ends, and the process
 * running it interrupts it (the model request is aborted, tool fibers are
 * interrupted and their finalizers run). A 202 when it was running, a 409
 * when it had already ended, a 404 for a run whose log is not stored, a 403
 * when `authorize` refuses the run. This is what a Stop button calls, since
 * a resumable run goes on when its client goes away.
 *
 * @example
 * ```ts
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 * import { HttpRouter } from "effect/http"
 *
 * // Provide AI.StreamLog (for example layerSqliteStreamLog) to the server.
 * const Cancel = HttpRouter.add("DELETE", "/api/chat", ChatRoute.cancel())
 * ```
 *
 * @since 0.1.0
 * @category handlers
 */
export const cancel = <R2 = never>(
  options?: RouteOptions<R2>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | StreamLog | R2> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const runId = urlOf(request).searchParams.get("runId")
    if (runId === null || runId === "") return HttpServerResponse.text("A cancel needs ?runId", { status: 400 })
    const log = yield* StreamLog
    return yield* authorized(request, options, { runId }, Effect.map(log.cancel(runId), (stopped) =>
      stopped
        ? HttpServerResponse.text(`Run ${runId} is cancelled`, { status: 202 })
        : HttpServerResponse.text(`Run ${runId} had already ended`, { status: 409 })))
  }).pipe(Effect.catchTags({ UnknownRun: textResponse(404), StreamLogError: textResponse(503) }))

/**
 * The hydrate GET of `useChat({ threadId, persistence: true })`: answers
 * `?threadId` with the thread as the client reads it, `{ messages,
 * activeRun, interrupts }` as JSON. A thread nothing was saved to (or whose
 * retention passed) is a 404, which the client reads as an empty thread; a
 * store that cannot answer is a 503.
 *
 * @example
 * ```ts
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 * import { HttpRouter } from "effect/http"
 *
 * // Provide AI.ThreadStore (for example layerSqliteThreadStore) to the server.
 * const Threads = HttpRouter.add("GET", "/api/chat", ChatRoute.hydrate())
 * ```
 *
 * @since 0.1.0
 * @category handlers
 */
export const hydrate = <R2 = never>(
  options?: RouteOptions<R2>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | ThreadStore | R2> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const threadId = urlOf(request).searchParams.get("threadId")
    if (threadId === null || threadId === "") return HttpServerResponse.text("A hydrate needs ?threadId", { status: 400 })
    const threads = yield* ThreadStore
    return yield* authorized(request, options, { threadId }, Effect.gen(function*() {
      const thread = yield* threads.load(threadId)
      if (Option.isNone(thread)) return HttpServerResponse.text(`No thread ${threadId} is stored`, { status: 404 })
      return HttpServerResponse.jsonUnsafe(thread.value)
    }))
  }).pipe(Effect.catchTag("ThreadStoreError", textResponse(503)))

/**
 * The whole route of a chat whose threads live on the server, for `POST`,
 * `GET` and `DELETE` on one path, as `useChat({ threadId, persistence: true
 * })` with `fetchServerSentEvents` uses it: a run is served through its
 * delivery log (see {@link resumableHandler}) and kept in its thread (see
 * `AI.ThreadStore.persist`); a `GET` with `?threadId` and no offset is the
 * {@link hydrate} of that thread; a `DELETE` is a {@link cancel}. Needs
 * `AI.StreamLog` and `AI.ThreadStore`.
 *
 * One run answers in a thread at a time when `AI.Locks` is provided: a run
 * holds the lock `thread:<threadId>` from before its thread is touched to
 * its end, and a message sent meanwhile waits for it up to the locks'
 * `waitFor`, then gets a 409 that says so, with nothing saved or started.
 * A run whose lock is lost (its lease lapsed) is stopped.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 * import { layerSqlite, layerSqliteStreamLog, layerSqliteThreadStore } from "@tanstack/ai-effect/sqlite"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Layer } from "effect"
 * import { HttpRouter } from "effect/http"
 *
 * const adapter = scriptedText([{ text: "Hello!" }])
 * const chat = ChatRoute.persistentHandler((params) => AI.chat({ adapter, ...params }))
 *
 * export const Api = Layer.mergeAll(
 *   HttpRouter.add("POST", "/api/chat", chat),
 *   HttpRouter.add("GET", "/api/chat", chat),
 *   HttpRouter.add("DELETE", "/api/chat", chat)
 * ).pipe(
 *   Layer.provide(layerSqliteStreamLog({ filename: ".data/chat.db" })),
 *   Layer.provide(layerSqliteThreadStore({ filename: ".data/chat.db" })),
 *   Layer.provide(AI.Locks.layer({ waitFor: "5 seconds" }).pipe(Layer.provide(layerSqlite({ filename: ".data/chat.db" }))))
 * )
 * ```
 *
 * @since 0.1.0
 * @category handlers
 */
export const persistentHandler = <E, R, R2 = never>(
  run: (params: ChatRequestParams) => Stream.Stream<StreamChunk, E, R>,
  options?: RouteOptions<R2>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | StreamLog | ThreadStore | R | R2> => {
  const resumable = serveThroughLog((params) => run(params).pipe(ThreadStore.persist(params)), options, threadLock)
  const hydrateThread = hydrate(options)
  const cancelRun = cancel(options)
  return Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
    if (request.method === "DELETE") return cancelRun
    const named = logRequestOf(request)
    const asksThread = request.method === "GET" && urlOf(request).searchParams.has("threadId")
    return asksThread && (named.offset === null || named.offset === undefined) ? hydrateThread : resumable
  })
}

/**
 * The thread's lock, when `AI.Locks` is provided: taken before the run
 * touches its thread and held to the run's end, in a scope of the run's own
 * (the response streams after the handler returned).
 */
const threadLock = (params: ChatRequestParams): Effect.Effect<RunWrapper | HttpServerResponse.HttpServerResponse> =>
  Effect.gen(function*() {
    const locks = yield* Effect.serviceOption(Locks)
    if (Option.isNone(locks)) return identity
    const scope = yield* Scope.make()
    const lost = yield* locks.value.acquire(`thread:${params.threadId}`).pipe(
      Scope.provide(scope),
      Effect.onError(() => Scope.close(scope, Exit.void))
    )
    const wrap: RunWrapper = (stream) =>
      stream.pipe(
        // A run that lost its thread's lock stops: another run may hold it now.
        Stream.interruptWhen(Effect.ignore(lost)),
        Stream.ensuring(Scope.close(scope, Exit.void))
      )
    return wrap
  }).pipe(
    Effect.catchTags({
      LockTimeout: () =>
        Effect.succeed(HttpServerResponse.text(
          `Thread ${params.threadId} is answering another message; send yours when that answer ends`,
          { status: 409 }
        )),
      EffectStoreError: textResponse(503)
    })
  )

/**
 * Options of {@link durableHandler}.
 *
 * @example
 * ```ts
 * import type { ChatRoute } from "@tanstack/ai-effect/http"
 *
 * const options: ChatRoute.DurableRouteOptions = { startDeadline: "30 seconds" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableRouteOptions<R = never> extends Omit<RouteOptions<R>, "batch"> {
  /**
   * How long a message waits for its run to open its log (the engine hands
   * the run to a runner, which may be another process) before it is
   * answered with a 503. Default 10 seconds.
   */
  readonly startDeadline?: Duration.Input | undefined
}

/** A durable run's log, looked at again every 20 ms until its runner opens it (it is usually open at the first look). */
const untilOpened = {
  schedule: Schedule.spaced("20 millis"),
  while: (error: { readonly _tag: string }) => error._tag === "UnknownRun"
}

/**
 * The route of a chat whose every message is answered by a durable agent
 * run (`@tanstack/ai-effect/durable`), for `POST`, `GET` and `DELETE` on
 * one path, as `useChat({ threadId, persistence: true })` with
 * `fetchServerSentEvents` uses it:
 *
 * - a message starts the run of the request's run id (`X-Run-Id`, or the
 *   body's), marks it active in its thread, and answers the run's delivery
 *   log from its start. The runner that executes the run writes the log,
 *   whichever process it is; a runner that takes the run over after a crash
 *   continues it (see `DurableAgent.make`), and saves the thread when the
 *   run ends;
 * - an answer to a run's approval (core's `resume` with `parentRunId`, as
 *   the client sends it when the interrupt is resolved) reaches
 *   `DurableAgent.approve`, and the run goes on writing this request's
 *   run's log; a run that waits for approval has its interrupt in its
 *   thread, for a client that hydrates it;
 * - a resume (`Last-Event-ID`, or `?offset` with `?runId`) and a join are
 *   answered from the log by any process;
 * - a `GET` with `?threadId` is the {@link hydrate} of the thread;
 * - a `DELETE` with `?runId` stops the run (`DurableAgent.cancel`): 202,
 *   or 409 when it had already finished.
 *
 * One run answers in a thread at a time: a message sent while the thread's
 * active run still writes its log is a 409 that says so, with nothing saved
 * or started (with `AI.Locks` provided, the look at the thread and the
 * start are one step across processes). A run id is the message's
 * idempotency key: the client's retry of a message joins its run, and the
 * same run id with another conversation is a 409.
 *
 * Provide the agent's layer, its engine, `AI.StreamLog` and
 * `AI.ThreadStore` to the server, and the same log and thread store to the
 * agent's layer.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
 * import { ChatRoute } from "@tanstack/ai-effect/http"
 * import { layerSqlite, layerSqliteStreamLog, layerSqliteThreadStore } from "@tanstack/ai-effect/sqlite"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Layer } from "effect"
 * import { HttpRouter } from "effect/http"
 *
 * const agent = DurableAgent.make(AI.defineAgent({
 *   name: "assistant",
 *   adapter: scriptedText([{ text: "Hello!" }]),
 *   instructions: "Answer briefly.",
 *   tools: []
 * }))
 * const chat = ChatRoute.durableHandler(agent)
 *
 * const stores = Layer.mergeAll(layerSqliteStreamLog({ filename: ".data/chat.db" }), layerSqliteThreadStore({ filename: ".data/chat.db" }))
 * export const Api = Layer.mergeAll(
 *   HttpRouter.add("POST", "/api/chat", chat),
 *   HttpRouter.add("GET", "/api/chat", chat),
 *   HttpRouter.add("DELETE", "/api/chat", chat)
 * ).pipe(
 *   Layer.provideMerge(agent.layer),
 *   Layer.provideMerge(DurableEngine.layerSqlite({ filename: ".data/chat.db" })),
 *   Layer.provideMerge(stores),
 *   Layer.provide(layerSqlite({ filename: ".data/chat.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category handlers
 */
export const durableHandler = <Tools extends ReadonlyArray<unknown>, R2 = never>(
  agent: Pick<DurableAgent.DurableAgent<Tools>, "start" | "approve" | "cancel">,
  options?: DurableRouteOptions<R2>
): Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  never,
  HttpServerRequest.HttpServerRequest | StreamLog | ThreadStore | DurableAgent.DurableServices | R2
> => {
  const startDeadline = Duration.fromInputUnsafe(options?.startDeadline ?? "10 seconds")
  const hydrateThread = hydrate(options)
  const start = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const params = yield* requestParams
    const runId = request.headers["x-run-id"] ?? params.runId
    return yield* authorized(request, options, { threadId: params.threadId, runId }, Effect.gen(function*() {
      const log = yield* StreamLog
      const threads = yield* ThreadStore
      const answers = yield* approvalAnswers(params)
      const busy = HttpServerResponse.text(`Thread ${params.threadId} is answering another message; send yours when that answer ends`, { status: 409 })
      const begin = Effect.gen(function*() {
        const answering = yield* answeringRun(params.threadId)
        // The client's retry of this very message joins its run.
        if (answering === runId) return undefined
        if (answering !== undefined) return busy
        // Active before the run goes on: the runner saves the thread when it stops writing this run's log, only while it is the thread's active run.
        yield* threads.save(params.threadId, { messages: toUIMessages(params.messages), activeRun: { runId }, interrupts: null })
        if (answers === undefined) {
          yield* agent.start({
            runId,
            threadId: params.threadId,
            // Core's request messages (UI or model messages), as the model reads them.
            messages: convertMessagesToModelMessages([...params.messages] as Parameters<typeof convertMessagesToModelMessages>[0]),
            trigger: "chat"
          })
        } else {
          // The client's answers to the durable run's approvals: the run goes on, writing this request's run's log.
          for (const answer of answers.items) yield* agent.approve(answers.runId, answer.toolCallId, answer.approved, { continueIn: runId })
        }
        return undefined
      })
      // With AI.Locks, the look at the thread and the start are one step across processes.
      const locks = yield* Effect.serviceOption(Locks)
      const refused = yield* Option.isSome(locks)
        ? locks.value.withLock(`thread:${params.threadId}`, begin).pipe(Effect.catchTag("LockTimeout", () => Effect.succeed(busy)))
        : begin
      if (refused !== undefined) return refused
      // The runner opens the log when it starts the run, here or in another process.
      const opened = yield* retryOnFailure(log.check(runId, "-1"), untilOpened).pipe(Effect.timeoutOption(startDeadline))
      if (Option.isNone(opened)) {
        return HttpServerResponse.text(`Run ${runId} is started, but no runner opened its log within ${Duration.format(startDeadline)}`, { status: 503 })
      }
      return fromCoreResponse(resumeServerSentEventsResponse({ adapter: yield* log.durability({ runId, offset: "-1" }) }))
    }))
  })
  /** The thread's active run while it still answers (its log is open), or undefined. */
  const answeringRun = (threadId: string) =>
    Effect.gen(function*() {
      const thread = yield* (yield* ThreadStore).load(threadId)
      const active = Option.isSome(thread) ? thread.value.activeRun : null
      if (active === null) return undefined
      const page = yield* (yield* StreamLog).read(active.runId, Number.MAX_SAFE_INTEGER, 1)
      return page.known && !page.complete ? active.runId : undefined
    })
  const stop = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const runId = urlOf(request).searchParams.get("runId")
    if (runId === null || runId === "") return HttpServerResponse.text("A cancel needs ?runId", { status: 400 })
    return yield* authorized(request, options, { runId }, Effect.map(agent.cancel(runId), (stopped) =>
      stopped
        ? HttpServerResponse.text(`Run ${runId} is cancelled`, { status: 202 })
        : HttpServerResponse.text(`Run ${runId} had already ended`, { status: 409 })))
  })
  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (request.method === "DELETE") return yield* stop
    const named = logRequestOf(request)
    if (named.offset !== null && named.offset !== undefined) return yield* resumeFromLog(request, options, named.runId, named.offset)
    return yield* request.method === "GET" && urlOf(request).searchParams.has("threadId") ? hydrateThread : start
  }).pipe(
    Effect.catchTags({
      ChatRequestError: requestRefused,
      InvalidOffset: textResponse(400),
      UnknownRun: textResponse(404),
      DurableRunNotFound: textResponse(404),
      DurableRunInputMismatch: textResponse(409),
      ApprovalNotFound: textResponse(409),
      ApprovalAlreadyAnswered: textResponse(409),
      DurableRunCancelled: textResponse(409),
      LockLost: textResponse(503),
      EffectStoreError: textResponse(503),
      StreamLogError: textResponse(503),
      ThreadStoreError: textResponse(503),
      DurableRunStoreError: textResponse(503)
    })
  )
}

/** Core's id of the interrupt that asks to approve a tool call. */
const approvalPrefix = "approval_"

/**
 * The approvals a request answers (core's `resume` entries, for the run
 * `parentRunId`), or undefined for a new message. An entry that is not a
 * tool approval is a `ChatRequestError`: a durable run asks nothing else.
 */
const approvalAnswers = (params: ChatRequestParams) =>
  Effect.suspend(() => {
    const resume = params.resume ?? []
    if (resume.length === 0) return Effect.succeed(undefined)
    if (params.parentRunId === undefined) {
      return Effect.fail(new ChatRequestError({ reason: "not-a-run", cause: "an answer to an interrupt needs the interrupted run's id (parentRunId)" }))
    }
    const items: Array<{ readonly toolCallId: string; readonly approved: boolean }> = []
    for (const entry of resume) {
      if (!entry.interruptId.startsWith(approvalPrefix)) {
        return Effect.fail(new ChatRequestError({ reason: "not-a-run", cause: `interrupt ${entry.interruptId} is not a tool approval` }))
      }
      items.push({
        toolCallId: entry.interruptId.slice(approvalPrefix.length),
        // A cancelled interrupt, or an answer without `approved: true`, declines the call.
        approved: entry.status === "resolved" && Predicate.hasProperty(entry.payload, "approved") && entry.payload.approved === true
      })
    }
    return Effect.succeed({ runId: params.parentRunId, items })
  })
