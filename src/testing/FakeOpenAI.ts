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
  /** The request bodies received, in order. */
  readonly requests: ReadonlyArray<ResponsesRequest>
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
export const startFakeOpenAI = async (script: FakeScript): Promise<FakeOpenAIServer> => {
  const requests: Array<ResponsesRequest> = []
  let aborted = 0
  const server = createServer((req, res) => {
    if (req.method !== "POST" || req.url !== "/v1/responses") {
      res.writeHead(404, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: `No route ${req.method} ${req.url}`, type: "invalid_request_error" } }))
      return
    }
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (part: string) => (body += part))
    req.on("end", () => {
      const request = JSON.parse(body) as ResponsesRequest
      const index = requests.length
      requests.push(request)
      const turn = typeof script === "function" ? script(request, index) : script[index]
      if (turn === undefined) {
        res.writeHead(500, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: `The script has no turn ${index + 1}`, type: "server_error" } }))
        return
      }
      const reply = typeof turn === "function" ? turn(request) : turn
      res.on("close", () => {
        if (!res.writableFinished) aborted++
      })
      void streamReply(res, request.model, index, reply)
    })
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const { port } = server.address() as AddressInfo
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
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
export const fakeOpenAI = (script: FakeScript): Effect.Effect<FakeOpenAIServer, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => startFakeOpenAI(script)),
    (server) => Effect.promise(() => server.close())
  )

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
