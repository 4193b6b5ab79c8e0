/**
 * A fake Anthropic Messages API on 127.0.0.1.
 *
 * It answers `POST /v1/messages` from a script, streamed as server-sent
 * events the way the Messages API streams them (`message_start`, a content
 * block per text and per `tool_use`, `message_delta` with the stop reason
 * and the usage, `message_stop`), so the real `@tanstack/ai-anthropic`
 * adapter runs over real HTTP without reaching the internet. A request
 * without `stream` (the adapter's structured output) gets a whole message:
 * when the request forces a tool, the reply's text is that tool's input.
 * Failures come in Anthropic's error shape (`{ type: "error", error: { type,
 * message } }`), with the error type of the status.
 *
 * Not covered: thinking blocks, server tools (web search, code execution),
 * citations, prompt caching, the token-counting and batch endpoints.
 *
 * @since 0.1.0
 */
import type { ServerResponse } from "node:http"
import type { Effect, Scope } from "effect"
import type { FakeFailure, FakeProviderScript, FakeProviderServer, FakeReply } from "./FakeProvider.ts"
import { afterDelay, argumentsText, defaultUsage, eventStream, replyAt, scopedServer, sendJson, sendMalformedJson, sleep, startFakeHttp, textDeltas } from "./internal.ts"

/**
 * The parts of a Messages API request body that tests read.
 *
 * @since 0.1.0
 * @category models
 */
export interface MessagesRequest {
  readonly model: string
  readonly max_tokens: number
  readonly messages: ReadonlyArray<{
    readonly role: "user" | "assistant"
    readonly content: string | ReadonlyArray<Record<string, unknown>>
  }>
  readonly tools?: ReadonlyArray<{ readonly name: string; readonly input_schema?: unknown; readonly strict?: boolean }>
  readonly tool_choice?: { readonly type: string; readonly name?: string }
  readonly stream?: boolean
  readonly [key: string]: unknown
}

/**
 * A running fake Anthropic server.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeAnthropicServer extends FakeProviderServer<MessagesRequest> {}

/**
 * Starts a fake Messages API on a free port of 127.0.0.1.
 *
 * @example
 * ```ts
 * import { createAnthropicChat } from "@tanstack/ai-anthropic"
 * import { startFakeAnthropic } from "@tanstack/ai-effect/testing"
 *
 * const server = await startFakeAnthropic([{ text: "Hello from the fake." }])
 * const adapter = createAnthropicChat("claude-sonnet-4-5", "test-key", { baseURL: server.baseURL, maxRetries: 0 })
 * // ... run a chat with the adapter ...
 * await server.close()
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const startFakeAnthropic = async (script: FakeProviderScript<MessagesRequest>): Promise<FakeAnthropicServer> => {
  const requests: Array<MessagesRequest> = []
  const http = await startFakeHttp(
    (method, path) =>
      method === "POST" && path === "/v1/messages"
        ? (body, res) => {
          const request = body as MessagesRequest
          const index = requests.length
          requests.push(request)
          void answer(res, request, index, replyAt(script, request, index))
        }
        : undefined,
    (res, status, message) => sendFailure(res, { status, message })
  )
  return {
    baseURL: http.origin,
    requests,
    tools: (index) =>
      (requests[index]?.tools ?? []).map((tool) => ({
        name: tool.name,
        parameters: tool.input_schema,
        ...(tool.strict === undefined ? {} : { strict: tool.strict })
      })),
    toolResults: (index) =>
      (requests[index]?.messages ?? []).flatMap((message) =>
        typeof message.content === "string" ? [] : message.content.flatMap((block) =>
          block.type === "tool_result" ? [{ callId: String(block.tool_use_id), output: textOf(block.content) }] : []
        )
      ),
    aborted: http.aborted,
    close: http.close
  }
}

/**
 * The fake Anthropic server as a scoped resource: started on acquire, closed
 * with the scope.
 *
 * @example
 * ```ts
 * import { fakeAnthropic } from "@tanstack/ai-effect/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const server = yield* fakeAnthropic([{ text: "Hi" }])
 *   return server.baseURL
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fakeAnthropic = (script: FakeProviderScript<MessagesRequest>): Effect.Effect<FakeAnthropicServer, never, Scope.Scope> =>
  scopedServer(() => startFakeAnthropic(script))

/** A tool result's content: a string, or text blocks. */
const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((block: { readonly text?: unknown }) => typeof block.text === "string" ? block.text : "").join("")
    : ""

/** Anthropic's error type for an HTTP status. */
const errorTypes: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  529: "overloaded_error"
}

const sendFailure = (res: ServerResponse, failure: FakeFailure): void =>
  sendJson(res, failure.status, {
    type: "error",
    error: { type: errorTypes[failure.status] ?? "api_error", message: failure.message ?? `Fake failure ${failure.status}` }
  })

const usageOf = (reply: FakeReply) => {
  const { inputTokens, outputTokens } = reply.usage ?? defaultUsage
  return { input_tokens: inputTokens, output_tokens: outputTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
}

const answer = async (res: ServerResponse, request: MessagesRequest, index: number, reply: FakeReply | undefined): Promise<void> => {
  if (reply === undefined) return sendFailure(res, { status: 500, message: `The script has no turn ${index + 1}` })
  const { failure } = reply
  if (failure !== undefined) return afterDelay(res, reply.delayMs, () => sendFailure(res, failure))
  if (request.stream !== true) {
    return afterDelay(res, reply.delayMs, () =>
      reply.malformed === true
        ? sendMalformedJson(res)
        : sendJson(res, 200, { ...message(request, index, reply), content: wholeContent(request, index, reply) }))
  }
  const send = eventStream(res)
  if (reply.malformed === true) {
    res.write("event: message_start\ndata: { this is not json\n\n")
    return void res.end()
  }
  send({ type: "message_start", message: { ...message(request, index, reply), content: [], stop_reason: null } }, "message_start")
  let block = 0
  const deltas = textDeltas(reply)
  if (deltas.length > 0) {
    send({ type: "content_block_start", index: block, content_block: { type: "text", text: "" } }, "content_block_start")
    for (const [i, text] of deltas.entries()) {
      if (i > 0) await sleep(reply.deltaDelayMs)
      if (res.destroyed) return
      send({ type: "content_block_delta", index: block, delta: { type: "text_delta", text } }, "content_block_delta")
    }
    send({ type: "content_block_stop", index: block++ }, "content_block_stop")
  }
  for (const [i, call] of (reply.toolCalls ?? []).entries()) {
    const id = call.id ?? `call_${index}_${i}`
    send({ type: "content_block_start", index: block, content_block: { type: "tool_use", id, name: call.name, input: {} } }, "content_block_start")
    send({ type: "content_block_delta", index: block, delta: { type: "input_json_delta", partial_json: argumentsText(call) } }, "content_block_delta")
    send({ type: "content_block_stop", index: block++ }, "content_block_stop")
  }
  await sleep(reply.delayMs)
  if (res.destroyed) return
  const stopReason = (reply.toolCalls ?? []).length > 0 ? "tool_use" : "end_turn"
  send({ type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: null }, usage: usageOf(reply) }, "message_delta")
  send({ type: "message_stop" }, "message_stop")
  res.end()
}

/** The message envelope of a turn. */
const message = (request: MessagesRequest, index: number, reply: FakeReply) => ({
  id: `msg_${index}`,
  type: "message",
  role: "assistant",
  model: request.model,
  stop_reason: (reply.toolCalls ?? []).length > 0 ? "tool_use" : "end_turn",
  stop_sequence: null,
  usage: usageOf(reply)
})

/**
 * The content of a whole message: the reply's text, or, when the request
 * forces a tool (structured output does), a call of it whose input is the
 * reply's text read as JSON.
 */
const wholeContent = (request: MessagesRequest, index: number, reply: FakeReply): ReadonlyArray<unknown> => {
  const text = textDeltas(reply).join("")
  const forced = request.tool_choice?.type === "tool" ? request.tool_choice.name : undefined
  if (forced !== undefined) {
    try {
      return [{ type: "tool_use", id: `call_${index}_0`, name: forced, input: JSON.parse(text) }]
    } catch {
      // Not JSON: the model answered in text, which the adapter then tries to parse.
    }
  }
  return [{ type: "text", text }]
}
