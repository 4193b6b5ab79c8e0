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
 * @since 0.1.0
 */
import { chatParamsFromRequestBody } from "@tanstack/ai"
import type { StreamChunk } from "@tanstack/ai"
import { Effect, Schema, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { type ChatRequestParams, fromChatParams } from "../Chat.ts"
import { toServerSentEvents } from "../ServerSentEvents.ts"

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
  cause: Schema.Defect()
}) {
  override get message(): string {
    return `Invalid AG-UI request body: ${this.cause instanceof Error ? this.cause.message : String(this.cause)}`
  }
}

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
    const body = yield* Effect.mapError(request.json, (cause) => new ChatRequestError({ cause }))
    const params = yield* Effect.tryPromise({
      // Core's reader of a parsed body; its failure says which field is wrong.
      try: () => chatParamsFromRequestBody(body),
      catch: (cause) => new ChatRequestError({ cause })
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
    HttpServerResponse.stream(toServerSentEvents(Stream.provideContext(stream, context)), {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache" }
    }))

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
    Effect.catchTag("ChatRequestError", (error) => Effect.succeed(HttpServerResponse.text(error.message, { status: 400 })))
  )
