/**
 * Server tools: the types a tool and a chat stream carry (checked by
 * `tsc --noEmit`, part of `npm test`: an `@ts-expect-error` that no longer
 * meets an error fails the type check), what a failure tells the model, and
 * one bad call that does not end the run.
 */
import { chatParamsFromRequest, toolDefinition, toServerSentEventsResponse } from "@tanstack/ai"
import type { InferSchemaType, ModelMessage, StreamChunk } from "@tanstack/ai"
import * as AI from "@tanstack/ai-effect"
import { scriptedText, startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { createOpenaiChat, openaiText } from "@tanstack/ai-openai"
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Cause, Context, Data, Effect, Layer, Option, Redacted, Ref, Schema, Stream } from "effect"
import { Db, DbLive, type OrderNotFound } from "../examples/orders/db.ts"
import { getOrder, getOrderDef } from "../examples/orders/tools.ts"
import { runWith, toolResults, user } from "./support/runs.ts"

class Clock extends Context.Service<Clock, { readonly now: Effect.Effect<number> }>()("test/Clock") {}

describe("requirements of AI.chat", () => {
  it("keeps the tool Effect's services and typed failure in the tool's type", () => {
    expectTypeOf(getOrder).toEqualTypeOf<
      AI.ServerTool<"get_order", { readonly id: string }, { readonly status: string }, OrderNotFound, Db, typeof getOrderDef>
    >()
  })

  it("keeps the definition's types: tool.definition's input type is the schema's", () => {
    expectTypeOf(getOrder.definition).toEqualTypeOf<typeof getOrderDef>()
    expectTypeOf<InferSchemaType<typeof getOrder.definition.inputSchema>>().toEqualTypeOf<{ readonly id: string }>()
    expectTypeOf<InferSchemaType<typeof getOrder.definition.outputSchema>>().toEqualTypeOf<{ readonly status: string }>()
    const comment = AI.effectTool(getOrderDef, () => Effect.succeed({ status: "sent" }))
    expectTypeOf<InferSchemaType<typeof comment.definition.inputSchema>>().toEqualTypeOf<{ readonly id: string }>()
  })

  it("makes the services of every server tool requirements of the stream, until a Layer provides them", () => {
    const now = AI.serverTool(
      toolDefinition({ name: "now", description: "The time", inputSchema: AI.toolSchema(Schema.Struct({})) }),
      () => Effect.flatMap(Effect.service(Clock), (clock) => clock.now)
    )
    const stream = AI.chat({ adapter: scriptedText([]), messages: [], tools: [getOrder, now] })
    expectTypeOf(stream).toEqualTypeOf<Stream.Stream<StreamChunk, AI.ChatError, Db | Clock>>()
    const provided = stream.pipe(Stream.provide(Layer.merge(DbLive, Layer.succeed(Clock, { now: Effect.succeed(0) }))))
    expectTypeOf(provided).toEqualTypeOf<Stream.Stream<StreamChunk, AI.ChatError, never>>()
  })

  it("requires nothing for a chat without server tools, and nothing for RunContext, which the stream provides", () => {
    const runId = AI.serverTool(
      toolDefinition({ name: "run_id", description: "The run id", inputSchema: AI.toolSchema(Schema.Struct({})) }),
      () => Effect.map(Effect.service(AI.RunContext), (run) => run.runId)
    )
    expectTypeOf(AI.chat({ adapter: scriptedText([]), messages: [] })).toEqualTypeOf<Stream.Stream<StreamChunk, AI.ChatError, never>>()
    expectTypeOf(AI.chat({ adapter: scriptedText([]), messages: [], tools: [runId] })).toEqualTypeOf<
      Stream.Stream<StreamChunk, AI.ChatError, never>
    >()
  })

  it("makes the store and the Remote reconciler of an effect tool requirements of the stream", () => {
    class Exists extends AI.Remote<Exists, { readonly id: string }, { readonly status: string }>()("test/Exists") {}
    const tool = AI.effectTool(getOrderDef, ({ id }) => Effect.succeed({ status: id }), { alreadyApplied: Exists })
    expectTypeOf(AI.chat({ adapter: scriptedText([]), messages: [], tools: [tool] })).toEqualTypeOf<
      Stream.Stream<StreamChunk, AI.ChatError, AI.EffectStore | Exists>
    >()
  })

  it("does not compile the seed's route when Stream.provide(DbLive) is removed", () => {
    // The route of examples/orders/route.ts without Stream.provide(DbLive). It is
    // type-checked, never called.
    async function POST(request: Request) {
      const params = await chatParamsFromRequest(request)
      const stream = AI.chat({
        adapter: openaiText("gpt-5.2"),
        messages: params.messages,
        threadId: params.threadId,
        runId: params.runId,
        tools: [getOrder]
      })
      // @ts-expect-error Stream.toAsyncIterable needs a stream whose requirements are met; this one needs Db.
      return toServerSentEventsResponse(Stream.toAsyncIterable(stream))
    }
    expectTypeOf(POST).toBeFunction()
  })
})

describe("inputs the run only reads", () => {
  it("accepts a readonly array of messages in AI.chat, AI.runAgent, AI.generateObject and AI.fromChatParams", () => {
    const history: ReadonlyArray<ModelMessage> = [{ role: "user", content: "Hi" }]
    const adapter = scriptedText([{ text: "Hello" }])
    expectTypeOf(AI.chat({ adapter, messages: history })).toEqualTypeOf<Stream.Stream<StreamChunk, AI.ChatError, never>>()
    const agent = AI.defineAgent({ name: "greeter", adapter, instructions: "Greet.", tools: [] })
    expectTypeOf(AI.runAgent(agent, { messages: history })).toEqualTypeOf<Stream.Stream<StreamChunk, AI.ChatError, never>>()
    const Greeting = Schema.Struct({ text: Schema.String })
    expectTypeOf(AI.generateObject({ adapter, messages: history, schema: Greeting })).toEqualTypeOf<
      Effect.Effect<{ readonly text: string }, AI.AiError>
    >()
    expectTypeOf(AI.fromChatParams({ messages: history, threadId: "t", runId: "r" }).messages).toEqualTypeOf<
      AI.ChatRequestParams["messages"]
    >()
  })
})

describe("tool names", () => {
  it("keep their literal when the definition is written inline, in serverTool and effectTool", () => {
    const inline = AI.serverTool(
      toolDefinition({ name: "notify", description: "Notifies", inputSchema: AI.toolSchema(Schema.Struct({ to: Schema.String })) }),
      ({ to }) => Effect.succeed({ sent: to })
    )
    expectTypeOf(inline.name).toEqualTypeOf<"notify">()
    const inlineEffect = AI.effectTool(
      toolDefinition({ name: "charge", description: "Charges", inputSchema: AI.toolSchema(Schema.Struct({ cents: Schema.Int })) }),
      ({ cents }) => Effect.succeed({ charged: cents })
    )
    expectTypeOf(inlineEffect.name).toEqualTypeOf<"charge">()
  })

  it("keep their literal when the definition is a separate const", () => {
    const definition = toolDefinition({ name: "notify", description: "Notifies", inputSchema: AI.toolSchema(Schema.Struct({ to: Schema.String })) })
    expectTypeOf(AI.serverTool(definition, ({ to }) => Effect.succeed({ sent: to })).name).toEqualTypeOf<"notify">()
    expectTypeOf(AI.effectTool(definition, ({ to }) => Effect.succeed({ sent: to })).name).toEqualTypeOf<"notify">()
  })
})


class DbError extends Data.TaggedError("DbError")<{ readonly connectionString: Redacted.Redacted<string>; readonly table: string }> {}

describe("what a failure tells the model", () => {
  const lookupDef = toolDefinition({
    name: "lookup",
    description: "Looks up",
    inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String }))
  })
  const failing = Effect.fail(new DbError({ connectionString: Redacted.make("postgres://admin:secret@db/app"), table: "orders" }))

  it.effect("a Redacted field of a message-less tagged error never reaches the model; the other fields do", () =>
    Effect.gen(function*() {
      const tool = AI.serverTool(lookupDef, () => failing)
      const adapter = scriptedText([{ toolCalls: [{ name: "lookup", args: { id: "x" } }] }, { text: "Sorry" }])
      const chunks = yield* AI.chat({ adapter, messages: user, tools: [tool] }).pipe(Stream.runCollect)
      expect(toolResults(adapter, 1)).toEqual([{ error: `DbError: {"table":"orders"}` }])
      expect(JSON.stringify(chunks)).not.toContain("secret")
    }))

  it.effect("toModelError chooses what the model reads for a failure of that tool", () =>
    Effect.gen(function*() {
      const tool = AI.serverTool(lookupDef, () => failing, {
        toModelError: (cause) => Cause.hasFails(cause) ? "The database is unavailable; try again later." : "Unexpected error"
      })
      const adapter = scriptedText([{ toolCalls: [{ name: "lookup", args: { id: "x" } }] }, { text: "Sorry" }])
      yield* AI.chat({ adapter, messages: user, tools: [tool] }).pipe(Stream.runDrain)
      expect(toolResults(adapter, 1)).toEqual([{ error: "The database is unavailable; try again later." }])
    }))
})

describe("one bad call, not the whole run", () => {
  const anyDef = toolDefinition({ name: "raw", description: "Returns whatever it makes", inputSchema: AI.toolSchema(Schema.Struct({})) })

  it.effect("a server tool's result that is not JSON is a tool error for that call; nothing is recorded and the run goes on", () =>
    Effect.gen(function*() {
      const store = AI.EffectStore.layerMemory()
      const cyclic: Record<string, unknown> = {}
      cyclic.self = cyclic
      const bigint = AI.serverTool(anyDef, () => Effect.succeed({ total: 10n }))
      const { adapter, chunks } = yield* runWith(store, [bigint], [{ toolCalls: [{ name: "raw", args: {} }] }, { text: "Recovered" }])
      expect(toolResults(adapter, 1)).toEqual([{ error: "Invalid tool output: the result is not JSON: a BigInt has no JSON form at $.total" }])
      expect(chunks.some((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" && chunk.delta === "Recovered")).toBe(true)

      const effect = AI.effectTool(anyDef, () => Effect.succeed(cyclic), { effectKey: () => "cyclic" })
      const service = yield* Effect.service(AI.EffectStore).pipe(Effect.provide(store))
      const second = yield* runWith(Layer.succeed(AI.EffectStore, service), [effect], [
        { toolCalls: [{ name: "raw", args: {} }] },
        { text: "Recovered" }
      ])
      expect(toolResults(second.adapter, 1)[0].error).toMatch(/^ToolOutputError: the result is not JSON: the value refers to itself/)
      expect(second.chunks.some((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" && chunk.delta === "Recovered")).toBe(true)
      expect(yield* service.get({ tool: "raw", key: "cyclic" })).toEqual(Option.none())
    }))

  it.live("arguments nested 10,000 levels deep through the real OpenAI adapter are a tool error, and the run goes on", () =>
    Effect.gen(function*() {
      const deep = `{"id":${"[".repeat(10_000)}${"]".repeat(10_000)}}`
      const server = yield* Effect.acquireRelease(
        Effect.promise(() => startFakeOpenAI([{ toolCalls: [{ name: "get_order", rawArgs: deep }] }, { text: "Recovered" }])),
        (server) => Effect.promise(() => server.close())
      )
      const ran = yield* Ref.make(false)
      const getOrder = AI.serverTool(
        toolDefinition({ name: "get_order", description: "Order", inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })) }),
        () => Effect.as(Ref.set(ran, true), { ok: true })
      )
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL })
      const chunks = yield* AI.chat({ adapter, messages: user, tools: [getOrder] }).pipe(Stream.runCollect)
      const output = server.requests[1]?.input.find((item) => item.type === "function_call_output")
      expect(JSON.parse(String(output?.output))).toEqual({
        error: "Input validation failed for tool get_order: Validation failed: The arguments are nested deeper than 512 levels"
      })
      expect(yield* Ref.get(ran)).toBe(false)
      expect(chunks.some((chunk) => chunk.type === "RUN_FINISHED")).toBe(true)
    }).pipe(Effect.scoped))

  it.live("invalid JSON arguments through the real OpenAI adapter: the model reads that they were not valid JSON, not \"Missing key\"", () =>
    Effect.gen(function*() {
      const server = yield* Effect.acquireRelease(
        Effect.promise(() => startFakeOpenAI([{ toolCalls: [{ name: "get_order", rawArgs: `{"id": "A-1"` }] }, { text: "Recovered" }])),
        (server) => Effect.promise(() => server.close())
      )
      const getOrder = AI.serverTool(
        toolDefinition({ name: "get_order", description: "Order", inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })) }),
        () => Effect.succeed({ ok: true })
      )
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL })
      yield* AI.chat({ adapter, messages: user, tools: [getOrder] }).pipe(Stream.runDrain)
      const output = server.requests[1]?.input.find((item) => item.type === "function_call_output")
      expect(JSON.parse(String(output?.output))).toEqual({ error: `Failed to parse tool arguments as JSON: {"id": "A-1"` })
    }).pipe(Effect.scoped))

  it.effect("the scripted adapter sends raw argument text as it is", () =>
    Effect.gen(function*() {
      const adapter = scriptedText([{ toolCalls: [{ name: "get_order", rawArgs: "not json" }] }])
      const chunks = yield* Effect.promise(() => Array.fromAsync(adapter.chatStream({ model: "scripted", messages: [] } as never)))
      expect(chunks.find((chunk) => chunk.type === "TOOL_CALL_ARGS")).toMatchObject({ delta: "not json" })
    }))
})
