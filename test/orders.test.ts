/**
 * The orders example (the seed page's three files) driven as a browser drives
 * it: a ChatClient posts to the route over HTTP, and the route's real OpenAI
 * adapter talks to the fake Responses API on 127.0.0.1.
 */
import { chatParamsFromRequest, toolDefinition, toServerSentEventsResponse } from "@tanstack/ai"
import { ChatClient, fetchServerSentEvents } from "@tanstack/ai-client"
import * as AI from "@tanstack/ai-effect"
import { type FakeOpenAIServer, startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { openaiText } from "@tanstack/ai-openai"
import { Deferred, Effect, Schema, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { serve } from "../examples/http.ts"
import { chatRequestBody } from "./support/agui.ts"
import { Db, DbLive } from "../examples/orders/db.ts"
import { ordersModel } from "../examples/orders/offline-model.ts"
import { POST } from "../examples/orders/route.ts"
import { getOrderDef } from "../examples/orders/tools.ts"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const startModel = async (script: Parameters<typeof startFakeOpenAI>[0]): Promise<FakeOpenAIServer> => {
  const model = await startFakeOpenAI(script)
  cleanups.push(model.close)
  // route.ts creates its adapter with openaiText(), which reads these.
  process.env.OPENAI_BASE_URL = model.baseURL
  process.env.OPENAI_API_KEY = "test-key"
  return model
}

const startRoute = async (route: (request: Request) => Promise<Response>) => {
  const server = await serve({ "POST /api/chat": route })
  cleanups.push(server.close)
  return `${server.url}/api/chat`
}

const ask = async (url: string, question: string) => {
  const client = new ChatClient({ connection: fetchServerSentEvents(url) })
  await client.sendMessage(question)
  return client.getMessages()
}

const functionOutputs = (model: FakeOpenAIServer, request: number) =>
  (model.requests[request]?.input ?? []).flatMap((item) =>
    item.type === "function_call_output" ? [JSON.parse(String(item.output))] : []
  )

const assistantText = (messages: Awaited<ReturnType<typeof ask>>) =>
  messages.filter((message) => message.role === "assistant")
    .flatMap((message) => message.parts.flatMap((part) => part.type === "text" ? [part.content] : []))
    .join("")

describe("the orders example", () => {
  it("answers 'Where is order A-100?': the model calls get_order, the Effect reads Db, the reply says shipped", async () => {
    const model = await startModel(ordersModel)
    const messages = await ask(await startRoute(POST), "Where is order A-100?")

    const [first] = model.requests
    expect(first?.tools?.map((tool) => tool.name)).toEqual(["get_order"])
    expect(functionOutputs(model, 1)).toEqual([{ status: "shipped" }])
    expect(assistantText(messages)).toBe("Order A-100 is shipped.")
    const toolCall = messages.flatMap((message) => message.parts).find((part) => part.type === "tool-call")
    expect(toolCall).toMatchObject({ name: "get_order", arguments: JSON.stringify({ id: "A-100" }) })
  })

  it("sends get_order to OpenAI in strict mode, with its closed JSON Schema", async () => {
    const model = await startModel(ordersModel)
    await ask(await startRoute(POST), "Where is order A-100?")
    expect(model.requests[0]?.tools?.[0]).toMatchObject({
      name: "get_order",
      strict: true,
      parameters: { type: "object", properties: { id: { type: "string" } }, required: ["id"], additionalProperties: false }
    })
  })

  it("sends OrderNotFound for order B-200 back to the model as the tool error, and the run continues to a reply", async () => {
    const model = await startModel(ordersModel)
    const messages = await ask(await startRoute(POST), "Where is order B-200?")
    expect(functionOutputs(model, 1)).toEqual([{ error: `OrderNotFound: {"id":"B-200"}` }])
    expect(model.requests).toHaveLength(2)
    expect(assistantText(messages)).toContain("I could not find order B-200")
    const result = messages.flatMap((message) => message.parts).find((part) => part.type === "tool-result")
    expect(result).toMatchObject({ state: "error" })
  })

  it("gives the model a normal result when the tool catches OrderNotFound with Effect.catchTag", async () => {
    const getOrderOrUnknown = AI.serverTool(getOrderDef, ({ id }) =>
      Effect.gen(function*() {
        const db = yield* Db
        return yield* db.findOrder(id)
      }).pipe(Effect.catchTag("OrderNotFound", () => Effect.succeed({ status: "unknown" }))))
    const route = async (request: Request) => {
      const params = await chatParamsFromRequest(request)
      const stream = AI.chat({
        adapter: openaiText("gpt-5.2"),
        messages: params.messages,
        threadId: params.threadId,
        runId: params.runId,
        tools: [getOrderOrUnknown]
      }).pipe(Stream.provide(DbLive))
      return toServerSentEventsResponse(Stream.toAsyncIterable(stream))
    }
    const model = await startModel(ordersModel)
    const messages = await ask(await startRoute(route), "Where is order B-200?")
    expect(functionOutputs(model, 1)).toEqual([{ status: "unknown" }])
    expect(assistantText(messages)).toBe("Order B-200 is unknown.")
  })

  it("interrupts the running tool and runs its finalizers when the browser closes the request", async () => {
    const events: Array<string> = []
    const started = Effect.runSync(Deferred.make<void>())
    const released = Effect.runSync(Deferred.make<void>())
    const slowLookup = AI.serverTool(getOrderDef, () =>
      Effect.acquireRelease(
        Effect.sync(() => events.push("connection opened")),
        () => Effect.andThen(Effect.sync(() => events.push("connection closed")), Deferred.succeed(released, undefined))
      ).pipe(
        Effect.andThen(Deferred.succeed(started, undefined)),
        Effect.andThen(Effect.never),
        Effect.scoped
      ))
    const route = async (request: Request) => {
      const params = await chatParamsFromRequest(request)
      const stream = AI.chat({ adapter: openaiText("gpt-5.2"), messages: params.messages, tools: [slowLookup] })
      return toServerSentEventsResponse(Stream.toAsyncIterable(stream))
    }
    const model = await startModel(ordersModel)
    const url = await startRoute(route)

    const browser = new AbortController()
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: chatRequestBody({ threadId: "thread-1", runId: "run-1" }, "Where is order A-100?"),
      signal: browser.signal
    })
    expect(response.status).toBe(200)
    await Effect.runPromise(Deferred.await(started))
    browser.abort()
    await Effect.runPromise(Deferred.await(released))

    expect(events).toEqual(["connection opened", "connection closed"])
    // The run ended with the tool: the model was not asked again.
    expect(model.requests).toHaveLength(1)
  })

  it("aborts the in-flight model request when the stream stops early", async () => {
    const model = await startModel([{ text: ["Order ", "A-100 ", "is shipped."], delayMs: 60_000 }])
    const chunks = await Effect.runPromise(
      AI.chat({
        adapter: openaiText("gpt-5.2"),
        messages: [{ role: "user", content: "Where is order A-100?" }],
        tools: []
      }).pipe(Stream.takeUntil((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT"), Stream.runCollect)
    )
    expect(chunks.at(-1)?.type).toBe("TEXT_MESSAGE_CONTENT")
    await expect.poll(() => model.aborted()).toBe(1)
  })

  it("decodes a null the strict model sends for an absent optional argument", async () => {
    const search = AI.serverTool(
      toolDefinition({
        name: "search_orders",
        description: "Search orders",
        inputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String, limit: Schema.optionalKey(Schema.Int) })),
        outputSchema: AI.toolSchema(Schema.Struct({ received: Schema.String }))
      }),
      (input) => Effect.succeed({ received: JSON.stringify(input) })
    )
    const model = await startModel([
      { toolCalls: [{ name: "search_orders", args: { status: "shipped", limit: null } }] },
      { text: "Done." }
    ])
    await Effect.runPromise(
      AI.chat({ adapter: openaiText("gpt-5.2"), messages: [{ role: "user", content: "Shipped orders?" }], tools: [search] })
        .pipe(Stream.runDrain)
    )
    expect(model.requests[0]?.tools?.[0]).toMatchObject({
      strict: true,
      parameters: { properties: { limit: { type: ["integer", "null"] } }, required: ["status", "limit"] }
    })
    expect(functionOutputs(model, 1)).toEqual([{ received: JSON.stringify({ status: "shipped" }) }])
  })
})
