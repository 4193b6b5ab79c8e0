import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { ChatRoute } from "@tanstack/ai-effect/http"
import { fakeOpenAI } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Context, Deferred, Effect, Layer } from "effect"
import { HttpRouter, HttpServer, HttpServerRequest, type HttpServerResponse } from "effect/http"
import { chatRequestBody } from "./support/agui.ts"
import { getOrderDef } from "./support/tools.ts"

class Orders extends Context.Service<Orders, { readonly status: (id: string) => string }>()("test/http/Orders") {
  static readonly layer = Layer.succeed(Orders, { status: (id) => id === "A-100" ? "shipped" : "unknown" })
}

/** Who sent the request: a service each request gets from its handler. */
class Caller extends Context.Service<Caller, { readonly name: string }>()("test/http/Caller") {}

const getOrder = AI.serverTool(getOrderDef, ({ id }) =>
  Effect.gen(function*() {
    const orders = yield* Orders
    return { status: orders.status(id) }
  }))

/** Serves `POST /api/chat` with the handler on 127.0.0.1, for the test's scope; gives the route's URL. */
const serve = <R>(
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | R>,
  services: Layer.Layer<R>
) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      HttpRouter.serve(HttpRouter.add("POST", "/api/chat", handler), { disableListenLog: true, disableLogger: true }).pipe(
        Layer.provide(services),
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
      )
    )
    const server = Context.get(context, HttpServer.HttpServer)
    return `${HttpServer.formatAddress(server.address)}/api/chat`
  })

const post = (url: string, body: string, signal?: AbortSignal) =>
  Effect.promise(() => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body, signal: signal ?? null }))

const events = (text: string) =>
  text.split("\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice("data: ".length)))

describe("ChatRoute.handler on effect/http", () => {
  it.live("answers an AG-UI request with the run as server-sent events, its tools served by the server's Layer", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI([{ toolCalls: [{ name: "get_order", args: { id: "A-100" } }] }, { text: "It shipped." }])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: model.baseURL, maxRetries: 0 })
      const url = yield* serve(ChatRoute.handler((params) => AI.chat({ adapter, ...params, tools: [getOrder] })), Orders.layer)
      const response = yield* post(url, chatRequestBody({ threadId: "thread-1", runId: "run-1" }, "Where is A-100?"))
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toBe("text/event-stream")
      const sent = events(yield* Effect.promise(() => response.text()))
      expect(sent[0]).toMatchObject({ type: "RUN_STARTED", threadId: "thread-1", runId: "run-1" })
      expect(sent.find((event) => event.type === "TOOL_CALL_RESULT")).toMatchObject({ content: `{"status":"shipped"}` })
      expect(sent.filter((event) => event.type === "TEXT_MESSAGE_CONTENT").map((event) => event.delta).join("")).toBe("It shipped.")
      expect(sent.at(-1)).toMatchObject({ type: "RUN_FINISHED" })
    }).pipe(Effect.scoped))

  it.live("a service the handler provides for each request reaches that request's tools, after the handler has returned", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI([
        { toolCalls: [{ name: "get_order", args: { id: "A-100" } }] },
        { text: "Done." },
        { toolCalls: [{ name: "get_order", args: { id: "A-100" } }] },
        { text: "Done." }
      ])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: model.baseURL, maxRetries: 0 })
      const forCaller = AI.serverTool(getOrderDef, () => Effect.map(Effect.service(Caller), (caller) => ({ status: `for ${caller.name}` })))
      const handler = Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) =>
        ChatRoute.handler((params) => AI.chat({ adapter, ...params, tools: [forCaller] })).pipe(
          Effect.provideService(Caller, { name: request.headers["x-caller"] ?? "nobody" })
        ))
      const url = yield* serve(handler, Layer.empty)
      for (const name of ["ada", "grace"]) {
        const response = yield* Effect.promise(() =>
          fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json", "x-caller": name },
            body: chatRequestBody({ threadId: `thread-${name}`, runId: `run-${name}` }, "Where is A-100?")
          })
        )
        const sent = events(yield* Effect.promise(() => response.text()))
        expect(sent.find((event) => event.type === "TOOL_CALL_RESULT")).toMatchObject({ content: `{"status":"for ${name}"}` })
      }
    }).pipe(Effect.scoped))

  it.live("a body that is not JSON, or not an AG-UI run input, gets a 400 that says why, and the model is never asked", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI([{ text: "never" }])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: model.baseURL, maxRetries: 0 })
      const url = yield* serve(ChatRoute.handler((params) => AI.chat({ adapter, ...params })), Layer.empty)
      const notJson = yield* post(url, "{ not json")
      expect(notJson.status).toBe(400)
      // The parser's reason, not only the wrapper's tag.
      expect(yield* Effect.promise(() => notJson.text())).toMatch(/^The request body is not JSON: .*JSON/)
      const noRunId = yield* post(url, JSON.stringify({ threadId: "t", messages: [], tools: [], context: [] }))
      expect(noRunId.status).toBe(400)
      expect(yield* Effect.promise(() => noRunId.text())).toContain("runId")
      expect(model.requests).toHaveLength(0)
    }).pipe(Effect.scoped))

  it.live("a body larger than the route reads (8 MiB by default) gets a 413 and starts nothing, though it is valid", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI([{ text: "never" }])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: model.baseURL, maxRetries: 0 })
      const url = yield* serve(ChatRoute.handler((params) => AI.chat({ adapter, ...params })), Layer.empty)
      const huge = JSON.parse(chatRequestBody({ threadId: "t", runId: "r" }, "x".repeat(ChatRoute.defaultMaxBodySize + 1)))
      const refused = yield* post(url, JSON.stringify(huge))
      expect(refused.status).toBe(413)
      expect(yield* Effect.promise(() => refused.text())).toMatch(/^The request body is larger than the route reads/)
      expect(model.requests).toHaveLength(0)
    }).pipe(Effect.scoped))

  it.live("a run that fails before its first chunk ends the body with a RUN_ERROR event that says why", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI([{ text: "never" }])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: model.baseURL, maxRetries: 0 })
      // Core refuses two tools with one name.
      const url = yield* serve(ChatRoute.handler((params) => AI.chat({ adapter, ...params, tools: [getOrder, getOrder] })), Orders.layer)
      const response = yield* post(url, chatRequestBody({ threadId: "t", runId: "r" }, "Hi"))
      expect(response.status).toBe(200)
      const sent = events(yield* Effect.promise(() => response.text()))
      expect(sent).toEqual([{ type: "RUN_ERROR", timestamp: expect.any(Number), message: expect.stringContaining("get_order") }])
    }).pipe(Effect.scoped))

  it.live("a client that goes away during a tool call interrupts the tool's fiber and runs its finalizer", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const finalized = yield* Deferred.make<void>()
      const slow = AI.serverTool(getOrderDef, () =>
        Effect.andThen(Deferred.succeed(started, undefined), Effect.never).pipe(
          Effect.onInterrupt(() => Deferred.succeed(finalized, undefined))
        ))
      const model = yield* fakeOpenAI([{ toolCalls: [{ name: "get_order", args: { id: "A-100" } }] }, { text: "never" }])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: model.baseURL, maxRetries: 0 })
      const url = yield* serve(ChatRoute.handler((params) => AI.chat({ adapter, ...params, tools: [slow] })), Layer.empty)
      const client = new AbortController()
      const response = yield* post(url, chatRequestBody({ threadId: "t", runId: "r" }, "Where is A-100?"), client.signal)
      expect(response.status).toBe(200)
      yield* Deferred.await(started)
      client.abort()
      yield* Deferred.await(finalized)
      // The model was asked once: the run stopped at the tool, and no second turn began.
      expect(model.requests).toHaveLength(1)
    }).pipe(Effect.scoped))
})
