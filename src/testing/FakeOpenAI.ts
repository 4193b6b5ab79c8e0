/**
 * A fake OpenAI Responses API on 127.0.0.1.
 *
 * It answers `POST /v1/responses` with a streamed response played from a
 * script, so the real `@tanstack/ai-openai` adapter runs over real HTTP
 * without reaching the internet. Every request body is recorded: tests read
 * the tools (and their `strict` flag) and the tool results the model was sent.
 *
 * @since 0.1.0
 */
import type { ServerResponse } from "node:http"
import type { Effect, Scope } from "effect"
import type { FakeFailure, FakeProviderScript, FakeProviderServer, FakeProviderTurn, FakeReply } from "./FakeProvider.ts"
import { afterDelay, argumentsText, defaultUsage, eventStream, replyAt, type Route, scopedServer, sendJson, sendMalformedJson, sleep, startFakeHttp, textDeltas } from "./internal.ts"

/**
 * One model turn of the fake OpenAI server.
 *
 * @since 0.1.0
 * @category models
 */
export type FakeTurn = FakeProviderTurn<ResponsesRequest>

/**
 * A script of the fake OpenAI server.
 *
 * @since 0.1.0
 * @category models
 */
export type FakeScript = FakeProviderScript<ResponsesRequest>

/**
 * How the fake answers an endpoint other than `/responses`: embeddings and
 * image generation. By default it answers with made-up vectors and images.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeEndpoint {
  readonly failure?: FakeFailure
  readonly malformed?: boolean
  /** Milliseconds to wait before answering. */
  readonly delayMs?: number
}

/**
 * Options of {@link startFakeOpenAI}.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeOpenAIOptions {
  /** `POST /v1/embeddings`: deterministic vectors by default. */
  readonly embeddings?: FakeEndpoint
  /** `POST /v1/images/generations`: a small base64 image by default. */
  readonly images?: FakeEndpoint
}

/**
 * The parts of a Responses API request body that tests read.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResponsesRequest {
  readonly model: string
  readonly input: ReadonlyArray<Record<string, unknown>>
  readonly tools?: ReadonlyArray<{ readonly name: string; readonly strict?: boolean; readonly parameters?: unknown }>
  readonly [key: string]: unknown
}

/**
 * A running fake server.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeOpenAIServer extends FakeProviderServer<ResponsesRequest> {
  /** The requests received by the other endpoints (embeddings, images), in order. */
  readonly otherRequests: ReadonlyArray<{ readonly path: string; readonly body: Record<string, unknown> }>
}

/**
 * Starts a fake Responses API on a free port of 127.0.0.1.
 *
 * @example
 * ```ts
 * import { createOpenaiChat } from "@tanstack/ai-openai"
 * import { startFakeOpenAI } from "@tanstack/ai-effect/testing"
 *
 * const server = await startFakeOpenAI([{ text: "Hello from the fake." }])
 * const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL })
 * // ... run a chat with the adapter ...
 * await server.close()
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const startFakeOpenAI = async (script: FakeScript, options: FakeOpenAIOptions = {}): Promise<FakeOpenAIServer> => {
  const requests: Array<ResponsesRequest> = []
  const otherRequests: Array<{ readonly path: string; readonly body: Record<string, unknown> }> = []
  const routes: Record<string, Route> = {
    "/v1/responses": (body, res) => {
      const request = body as ResponsesRequest
      const index = requests.length
      requests.push(request)
      const reply = replyAt(script, request, index)
      if (reply === undefined) return sendFailure(res, { status: 500, message: `The script has no turn ${index + 1}` })
      if (reply.failure !== undefined) return afterDelay(res, reply.delayMs, () => sendFailure(res, reply.failure!))
      // The SDK asks for a stream for chat, and for a whole response for structured output.
      if (request.stream !== true) return reply.malformed === true ? sendMalformedJson(res) : sendResponse(res, request.model, index, reply)
      return void streamReply(res, request.model, index, reply)
    },
    "/v1/embeddings": (body, res) => {
      otherRequests.push({ path: "/v1/embeddings", body })
      answerOther(res, options.embeddings, () => {
        const inputs = Array.isArray(body.input) ? body.input.map(String) : [String(body.input)]
        return {
          object: "list",
          model: body.model,
          data: inputs.map((text, index) => ({ object: "embedding", index, embedding: vectorOf(text) })),
          usage: { prompt_tokens: inputs.length * 3, total_tokens: inputs.length * 3 }
        }
      })
    },
    "/v1/images/generations": (body, res) => {
      otherRequests.push({ path: "/v1/images/generations", body })
      answerOther(res, options.images, () => ({
        created: Math.floor(Date.now() / 1000),
        data: Array.from({ length: Number(body.n ?? 1) }, () => ({ b64_json: fakeImage }))
      }))
    }
  }
  const http = await startFakeHttp(
    (method, path) => method === "POST" ? routes[path] : undefined,
    (res, status, message) => sendFailure(res, { status, message })
  )
  return {
    baseURL: `${http.origin}/v1`,
    requests,
    otherRequests,
    tools: (index) =>
      (requests[index]?.tools ?? []).map((tool) => ({
        name: tool.name,
        parameters: tool.parameters,
        ...(tool.strict === undefined ? {} : { strict: tool.strict })
      })),
    toolResults: (index) =>
      (requests[index]?.input ?? []).flatMap((item) =>
        item.type === "function_call_output" ? [{ callId: String(item.call_id), output: String(item.output) }] : []
      ),
    aborted: http.aborted,
    close: http.close
  }
}

/**
 * The fake server as a scoped resource: started on acquire, closed with the scope.
 *
 * @example
 * ```ts
 * import { fakeOpenAI } from "@tanstack/ai-effect/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const server = yield* fakeOpenAI([{ text: "Hi" }])
 *   return server.baseURL
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fakeOpenAI = (script: FakeScript, options?: FakeOpenAIOptions): Effect.Effect<FakeOpenAIServer, never, Scope.Scope> =>
  scopedServer(() => startFakeOpenAI(script, options))

const sendFailure = (res: ServerResponse, failure: FakeFailure): void =>
  sendJson(res, failure.status, { error: { message: failure.message ?? `Fake failure ${failure.status}`, type: "fake_error", code: null } })


const answerOther = (res: ServerResponse, endpoint: FakeEndpoint | undefined, body: () => unknown): void =>
  afterDelay(res, endpoint?.delayMs, () => {
    if (endpoint?.failure !== undefined) return sendFailure(res, endpoint.failure)
    if (endpoint?.malformed === true) return sendMalformedJson(res)
    sendJson(res, 200, body())
  })

/** A small vector made from the text, the same for the same text. */
const vectorOf = (text: string): Array<number> => {
  let hash = 0
  for (const char of text) hash = (hash * 31 + char.charCodeAt(0)) % 1_000_003
  return [text.length / 100, (hash % 1000) / 1000, ((hash >> 3) % 1000) / 1000]
}

// A 1x1 transparent PNG.
const fakeImage = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

/** A whole (not streamed) Responses API answer: the reply's text as one message. */
/** The usage of a turn in the Responses API's shape. */
const usageOf = (reply: FakeReply) => {
  const { inputTokens, outputTokens } = reply.usage ?? defaultUsage
  return {
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    total_tokens: inputTokens + outputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens_details: { reasoning_tokens: 0 }
  }
}

/** A whole (not streamed) Responses API answer: the reply's text as one message. */
const sendResponse = (res: ServerResponse, model: string, index: number, reply: FakeReply): void =>
  afterDelay(res, reply.delayMs, () =>
    sendJson(res, 200, {
      id: `resp_${index}`,
      object: "response",
      created_at: Math.floor(Date.now() / 1000),
      model,
      status: "completed",
      output: [{
        type: "message",
        id: `msg_${index}`,
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: textDeltas(reply).join(""), annotations: [] }]
      }],
      usage: usageOf(reply)
    }))

const streamReply = async (res: ServerResponse, model: string, index: number, reply: FakeReply): Promise<void> => {
  const write = eventStream(res)
  if (reply.malformed === true) {
    res.write("event: response.created\ndata: { this is not json\n\n")
    return void res.end()
  }
  let sequence = 0
  const send = (event: Record<string, unknown> & { type: string }) => write({ ...event, sequence_number: sequence++ }, event.type)
  const responseId = `resp_${index}`
  const output: Array<Record<string, unknown>> = []
  const response = (status: string) => ({
    id: responseId,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    model,
    status,
    output: status === "completed" ? output : [],
    usage: status === "completed" ? usageOf(reply) : null
  })
  send({ type: "response.created", response: response("in_progress") })
  const deltas = textDeltas(reply)
  if (deltas.length > 0) {
    const itemId = `msg_${index}`
    const outputIndex = output.length
    for (const [i, delta] of deltas.entries()) {
      if (i > 0) await sleep(reply.deltaDelayMs)
      if (res.destroyed) return
      send({ type: "response.output_text.delta", item_id: itemId, output_index: outputIndex, content_index: 0, delta, logprobs: [] })
    }
    output.push({
      type: "message",
      id: itemId,
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: deltas.join(""), annotations: [] }]
    })
  }
  for (const [i, call] of (reply.toolCalls ?? []).entries()) {
    const itemId = `fc_${index}_${i}`
    const callId = call.id ?? `call_${index}_${i}`
    const args = argumentsText(call)
    const outputIndex = output.length
    send({
      type: "response.output_item.added",
      output_index: outputIndex,
      item: { type: "function_call", id: itemId, call_id: callId, name: call.name, arguments: "", status: "in_progress" }
    })
    send({ type: "response.function_call_arguments.delta", item_id: itemId, output_index: outputIndex, delta: args })
    send({ type: "response.function_call_arguments.done", item_id: itemId, output_index: outputIndex, arguments: args })
    output.push({ type: "function_call", id: itemId, call_id: callId, name: call.name, arguments: args, status: "completed" })
  }
  await sleep(reply.delayMs)
  if (res.destroyed) return
  send({ type: "response.completed", response: response("completed") })
  res.end()
}
