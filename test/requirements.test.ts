/**
 * Claims about types, checked by `tsc --noEmit` (part of `npm test`): an
 * `@ts-expect-error` that no longer meets an error fails the type check.
 */
import { chatParamsFromRequest, toolDefinition, toServerSentEventsResponse } from "@tanstack/ai"
import type { InferSchemaType, ModelMessage, StreamChunk } from "@tanstack/ai"
import * as AI from "@tanstack/ai-effect"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { openaiText } from "@tanstack/ai-openai"
import { describe, expectTypeOf, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema, Stream } from "effect"
import { Db, DbLive, type OrderNotFound } from "../examples/orders/db.ts"
import { getOrder, getOrderDef } from "../examples/orders/tools.ts"

class Clock extends Context.Service<Clock, { readonly now: Effect.Effect<number> }>()("test/Clock") {}

describe("requirements of AI.chat", () => {
  it("keeps the tool Effect's services and typed failure in the tool's type", () => {
    expectTypeOf(getOrder).toEqualTypeOf<
      AI.EffectTool<"get_order", { readonly id: string }, { readonly status: string }, OrderNotFound, Db, typeof getOrderDef>
    >()
  })

  it("keeps the definition's types: tool.definition's input type is the schema's", () => {
    expectTypeOf(getOrder.definition).toEqualTypeOf<typeof getOrderDef>()
    expectTypeOf<InferSchemaType<typeof getOrder.definition.inputSchema>>().toEqualTypeOf<{ readonly id: string }>()
    expectTypeOf<InferSchemaType<typeof getOrder.definition.outputSchema>>().toEqualTypeOf<{ readonly status: string }>()
    const comment = AI.effectTool(getOrderDef, () => Effect.succeed({ status: "sent" }))
    expectTypeOf<InferSchemaType<typeof comment.definition.inputSchema>>().toEqualTypeOf<{ readonly id: string }>()
  })

  it("makes the services of every Effect tool requirements of the stream, until a Layer provides them", () => {
    const now = AI.serverTool(
      toolDefinition({ name: "now", description: "The time", inputSchema: AI.toolSchema(Schema.Struct({})) }),
      () => Effect.flatMap(Effect.service(Clock), (clock) => clock.now)
    )
    const stream = AI.chat({ adapter: scriptedText([]), messages: [], tools: [getOrder, now] })
    expectTypeOf(stream).toEqualTypeOf<Stream.Stream<StreamChunk, AI.ChatError, Db | Clock>>()
    const provided = stream.pipe(Stream.provide(Layer.merge(DbLive, Layer.succeed(Clock, { now: Effect.succeed(0) }))))
    expectTypeOf(provided).toEqualTypeOf<Stream.Stream<StreamChunk, AI.ChatError, never>>()
  })

  it("requires nothing for a chat without Effect tools, and nothing for RunContext, which the stream provides", () => {
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
