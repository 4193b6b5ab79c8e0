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
import { once } from "node:events"
import { createServer, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"
import type { Scope } from "effect"
import { argumentsText, textDeltas } from "./internal.ts"
import type { ScriptedReply } from "./ScriptedText.ts"

/**
 * One model turn of the fake: text, then function calls. A function gets the
 * request body of the turn, so a reply can depend on what the model was sent.
 *
 * @since 0.1.0
 * @category models
 */
export type FakeTurn =
  | FakeReply
  | ((request: ResponsesRequest) => FakeReply)

/**
 * A script: fixed turns played in order, or a model policy that answers every
 * request (its index counts from 0).
 *
 * @since 0.1.0
 * @category models
 */
export type FakeScript = ReadonlyArray<FakeTurn> | ((request: ResponsesRequest, index: number) => FakeReply)

/**
 * What the fake model answers in one turn.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeReply extends ScriptedReply {
  /** Milliseconds to wait before the response completes. */
  readonly delayMs?: number
  /** Answer with this HTTP error instead (a 429 rate limit, a 500). */
  readonly failure?: FakeFailure
  /** Answer 200 with a body that is not JSON. */
  readonly malformed?: boolean
}

/**
 * An HTTP error the fake answers with, in OpenAI's error shape.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeFailure {
  readonly status: number
  readonly message?: string
}

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
export interface FakeOpenAIServer {
  /** The base URL for the OpenAI client, ending in `/v1`. */
  readonly baseURL: string
  /** The request bodies received by `/responses`, in order. */
  readonly requests: ReadonlyArray<ResponsesRequest>
  /** The requests received by the other endpoints (embeddings, images), in order. */
  readonly otherRequests: ReadonlyArray<{ readonly path: string; readonly body: Record<string, unknown> }>
  /** How many requests were aborted by the client before they completed. */
  readonly aborted: () => number
  readonly close: () => Promise<void>
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
  let aborted = 0
  const endpoints: Record<string, (body: Record<string, unknown>, res: ServerResponse) => void> = {
    "/v1/responses": (body, res) => {
      const request = body as ResponsesRequest
      const index = requests.length
      requests.push(request)
      const turn = typeof script === "function" ? script(request, index) : script[index]
      if (turn === undefined) return sendFailure(res, { status: 500, message: `The script has no turn ${index + 1}` })
      const reply = typeof turn === "function" ? turn(request) : turn
      if (reply.failure !== undefined) return sendFailure(res, reply.failure)
      if (reply.malformed === true) return sendMalformed(res)
      // The SDK asks for a stream for chat, and for a whole response for structured output.
      return request.stream === true ? void streamReply(res, request.model, index, reply) : sendResponse(res, request.model, index, reply)
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
  const server = createServer((req, res) => {
    const endpoint = req.method === "POST" ? endpoints[req.url ?? ""] : undefined
    if (endpoint === undefined) return sendFailure(res, { status: 404, message: `No route ${req.method} ${req.url}` })
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (part: string) => (body += part))
    req.on("end", () => {
      res.on("close", () => {
        if (!res.writableFinished) aborted++
      })
      endpoint(JSON.parse(body) as Record<string, unknown>, res)
    })
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const { port } = server.address() as AddressInfo
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    otherRequests,
    aborted: () => aborted,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      })
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
  Effect.acquireRelease(
    Effect.promise(() => startFakeOpenAI(script, options)),
    (server) => Effect.promise(() => server.close())
  )

const sendFailure = (res: ServerResponse, failure: FakeFailure): void => {
  res.writeHead(failure.status, { "content-type": "application/json" })
  res.end(JSON.stringify({ error: { message: failure.message ?? `Fake failure ${failure.status}`, type: "fake_error", code: null } }))
}

const sendMalformed = (res: ServerResponse): void => {
  res.writeHead(200, { "content-type": "application/json" })
  res.end("{ this is not json")
}

const answerOther = (res: ServerResponse, endpoint: FakeEndpoint | undefined, body: () => unknown): void => {
  const answer = () => {
    if (endpoint?.failure !== undefined) return sendFailure(res, endpoint.failure)
    if (endpoint?.malformed === true) return sendMalformed(res)
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify(body()))
  }
  if (endpoint?.delayMs === undefined) answer()
  else setTimeout(() => res.destroyed || answer(), endpoint.delayMs)
}

/** A small vector made from the text, the same for the same text. */
const vectorOf = (text: string): Array<number> => {
  let hash = 0
  for (const char of text) hash = (hash * 31 + char.charCodeAt(0)) % 1_000_003
  return [text.length / 100, (hash % 1000) / 1000, ((hash >> 3) % 1000) / 1000]
}

// A 1x1 transparent PNG.
const fakeImage = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

/** A whole (not streamed) Responses API answer: the reply's text as one message. */
const sendResponse = (res: ServerResponse, model: string, index: number, reply: FakeReply): void => {
  const answer = () => {
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify({
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
      usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } }
    }))
  }
  if (reply.delayMs === undefined) answer()
  else setTimeout(() => res.destroyed || answer(), reply.delayMs)
}

const streamReply = async (
  res: ServerResponse,
  model: string,
  index: number,
  reply: FakeReply
): Promise<void> => {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
  let sequence = 0
  const send = (event: Record<string, unknown> & { type: string }) =>
    res.write(`event: ${event.type}\ndata: ${JSON.stringify({ ...event, sequence_number: sequence++ })}\n\n`)
  const responseId = `resp_${index}`
  const output: Array<Record<string, unknown>> = []
  const response = (status: string) => ({
    id: responseId,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    model,
    status,
    output: status === "completed" ? output : [],
    usage: status === "completed"
      ? { input_tokens: 10, output_tokens: 5, total_tokens: 15, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } }
      : null
  })
  send({ type: "response.created", response: response("in_progress") })
  const deltas = textDeltas(reply)
  if (deltas.length > 0) {
    const itemId = `msg_${index}`
    const outputIndex = output.length
    for (const delta of deltas) {
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
  if (reply.delayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, reply.delayMs))
  if (res.destroyed) return
  send({ type: "response.completed", response: response("completed") })
  res.end()
}
