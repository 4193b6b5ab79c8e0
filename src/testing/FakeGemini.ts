/**
 * A fake Gemini API on 127.0.0.1.
 *
 * It answers `POST /v1beta/models/{model}:streamGenerateContent?alt=sse`
 * from a script, streamed as server-sent events of `GenerateContentResponse`
 * chunks the way the Gemini API streams them (a chunk per text delta, then
 * the function calls with the finish reason and the usage metadata), so the
 * real `@tanstack/ai-gemini` adapter runs over real HTTP without reaching the
 * internet. `:generateContent` (the adapter's structured output) gets the
 * whole answer. Failures come in Google's error shape (`{ error: { code,
 * message, status } }`).
 *
 * The Gemini API sends a function call's arguments as a JSON object, so a
 * scripted call's `rawArgs` must be a JSON object's text; and it sends a
 * call's `id` only for some models, so the fake sends one only when the
 * script gives it (the adapter makes one up otherwise).
 *
 * Not covered: thinking parts, code execution, grounding, safety ratings,
 * the Interactions API, embeddings and files.
 *
 * @since 0.1.0
 */
import type { ServerResponse } from "node:http"
import { type Effect, Predicate, type Scope } from "effect"
import type { FakeFailure, FakeProviderScript, FakeProviderServer, FakeReply } from "./FakeProvider.ts"
import { afterDelay, argumentsText, defaultUsage, eventStream, replyAt, scopedServer, sendJson, sendMalformedJson, sleep, startFakeHttp, textDeltas } from "./internal.ts"

/**
 * The parts of a Gemini `generateContent` request body that tests read.
 *
 * @since 0.1.0
 * @category models
 */
export interface GenerateContentRequest {
  readonly contents: ReadonlyArray<{ readonly role: "user" | "model"; readonly parts: ReadonlyArray<Record<string, unknown>> }>
  readonly tools?: ReadonlyArray<{
    readonly functionDeclarations?: ReadonlyArray<{ readonly name: string; readonly parametersJsonSchema?: unknown; readonly parameters?: unknown }>
  }>
  readonly [key: string]: unknown
}

/**
 * A running fake Gemini server.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeGeminiServer extends FakeProviderServer<GenerateContentRequest> {}

/**
 * Starts a fake Gemini API on a free port of 127.0.0.1.
 *
 * @example
 * ```ts
 * import { createGeminiChat } from "@tanstack/ai-gemini"
 * import { startFakeGemini } from "@tanstack/ai-effect/testing"
 *
 * const server = await startFakeGemini([{ text: "Hello from the fake." }])
 * const adapter = createGeminiChat("gemini-2.5-flash", "test-key", { baseURL: server.baseURL })
 * // ... run a chat with the adapter ...
 * await server.close()
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const startFakeGemini = async (script: FakeProviderScript<GenerateContentRequest>): Promise<FakeGeminiServer> => {
  const requests: Array<GenerateContentRequest> = []
  const http = await startFakeHttp(
    (method, path) => {
      const route = method === "POST" ? /^\/v1beta\/models\/([^/:]+):(streamGenerateContent|generateContent)$/.exec(path) : null
      if (route === null) return undefined
      const [, model = "", verb] = route
      return (body, res) => {
        const request = body as GenerateContentRequest
        const index = requests.length
        requests.push(request)
        void answer(res, model, verb === "streamGenerateContent", index, replyAt(script, request, index))
      }
    },
    (res, status, message) => sendFailure(res, { status, message })
  )
  return {
    baseURL: http.origin,
    requests,
    tools: (index) =>
      (requests[index]?.tools ?? []).flatMap((tool) =>
        (tool.functionDeclarations ?? []).map((declaration) => ({
          name: declaration.name,
          parameters: declaration.parametersJsonSchema ?? declaration.parameters
        }))
      ),
    toolResults: (index) =>
      (requests[index]?.contents ?? []).flatMap((content) =>
        content.parts.flatMap((part) => {
          const response = part.functionResponse
          if (!Predicate.isObject(response)) return []
          const { id, name, response: result } = response as { id?: unknown; name?: unknown; response?: unknown }
          const output = Predicate.hasProperty(result, "content") && Predicate.isString(result.content) ? result.content : JSON.stringify(result)
          return [{ callId: String(id ?? name), output }]
        })
      ),
    aborted: http.aborted,
    close: http.close
  }
}

/**
 * The fake Gemini server as a scoped resource: started on acquire, closed
 * with the scope.
 *
 * @example
 * ```ts
 * import { fakeGemini } from "@tanstack/ai-effect/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const server = yield* fakeGemini([{ text: "Hi" }])
 *   return server.baseURL
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fakeGemini = (script: FakeProviderScript<GenerateContentRequest>): Effect.Effect<FakeGeminiServer, never, Scope.Scope> =>
  scopedServer(() => startFakeGemini(script))

/** Google's status name for an HTTP status. */
const statusNames: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED"
}

const sendFailure = (res: ServerResponse, failure: FakeFailure): void =>
  sendJson(res, failure.status, {
    error: { code: failure.status, message: failure.message ?? `Fake failure ${failure.status}`, status: statusNames[failure.status] ?? "UNKNOWN" }
  })

const usageOf = (reply: FakeReply) => {
  const { inputTokens, outputTokens } = reply.usage ?? defaultUsage
  return { promptTokenCount: inputTokens, candidatesTokenCount: outputTokens, totalTokenCount: inputTokens + outputTokens }
}

/** The function calls of a reply as Gemini parts; a `rawArgs` that is not a JSON object cannot be sent. */
const functionCallParts = (reply: FakeReply): ReadonlyArray<unknown> | string =>
  (reply.toolCalls ?? []).reduce<Array<unknown> | string>((parts, call) => {
    if (typeof parts === "string") return parts
    let args: unknown
    try {
      args = JSON.parse(argumentsText(call))
    } catch {
      args = undefined
    }
    if (!Predicate.isObject(args) || Array.isArray(args)) {
      return `The Gemini API sends a function call's arguments as a JSON object; the script's arguments for ${call.name} are not one`
    }
    return [...parts, { functionCall: { ...(call.id === undefined ? {} : { id: call.id }), name: call.name, args } }]
  }, [])

const answer = async (res: ServerResponse, model: string, stream: boolean, index: number, reply: FakeReply | undefined): Promise<void> => {
  if (reply === undefined) return sendFailure(res, { status: 500, message: `The script has no turn ${index + 1}` })
  const calls = functionCallParts(reply)
  if (typeof calls === "string") return sendFailure(res, { status: 500, message: calls })
  const chunk = (parts: ReadonlyArray<unknown>, last: boolean) => ({
    candidates: [{
      content: { role: "model", parts },
      index: 0,
      ...(last ? { finishReason: "STOP" } : {})
    }],
    ...(last ? { usageMetadata: usageOf(reply) } : {}),
    modelVersion: model,
    responseId: `resp_${index}`
  })
  const { failure } = reply
  if (failure !== undefined) return afterDelay(res, reply.delayMs, () => sendFailure(res, failure))
  if (!stream) {
    return afterDelay(res, reply.delayMs, () =>
      reply.malformed === true
        ? sendMalformedJson(res)
        : sendJson(res, 200, chunk([{ text: textDeltas(reply).join("") }, ...calls], true)))
  }
  const send = eventStream(res)
  if (reply.malformed === true) {
    res.write("data: { this is not json\n\n")
    return void res.end()
  }
  for (const [i, text] of textDeltas(reply).entries()) {
    if (i > 0) await sleep(reply.deltaDelayMs)
    if (res.destroyed) return
    send(chunk([{ text }], false))
  }
  await sleep(reply.delayMs)
  if (res.destroyed) return
  send(chunk(calls, true))
  res.end()
}
