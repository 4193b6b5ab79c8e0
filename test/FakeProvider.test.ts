/**
 * The claims of server tools and chat, for every TanStack provider: each
 * claim runs through the real OpenAI, Anthropic and Gemini adapters against
 * their fake servers (real HTTP on 127.0.0.1, each provider's wire format).
 * A row per claim, a column per provider: a missing cell shows as a missing
 * test under its claim.
 */
import { type AnyTextAdapter, type StreamChunk, toolDefinition } from "@tanstack/ai"
import { describe, expect, it } from "@effect/vitest"
import { createAnthropicChat } from "@tanstack/ai-anthropic"
import * as AI from "@tanstack/ai-effect"
import {
  type FakeProviderServer,
  type FakeReply,
  type FakeToolDeclaration,
  fakeAnthropic,
  fakeGemini,
  fakeOpenAI
} from "@tanstack/ai-effect/testing"
import { createGeminiChat } from "@tanstack/ai-gemini"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Deferred, Effect, Fiber, Ref, Schema, type Scope, Stream } from "effect"
import { getOrderDef, notifyDef } from "./support/tools.ts"
import { inMemoryTracer } from "./support/tracing.ts"

interface Provider {
  readonly name: string
  readonly serve: (script: ReadonlyArray<FakeReply>) => Effect.Effect<FakeProviderServer<unknown>, never, Scope.Scope>
  readonly adapter: (server: FakeProviderServer<unknown>) => AnyTextAdapter
  /** What the adapter sends of a tool whose schema is `{ id: string, note?: string }`, as AI.toolSchema made it. */
  readonly sends: (made: JsonObject) => Omit<FakeToolDeclaration, "name">
}

type JsonObject = { readonly [key: string]: unknown }

// The SDKs' own retries are off, so that one scripted failure is one request.
const providers: ReadonlyArray<Provider> = [
  {
    name: "openai",
    serve: fakeOpenAI,
    adapter: (server) => createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL, maxRetries: 0 }),
    // Strict function calling: every key required (the optional one takes null), strict on.
    sends: (made) => ({ parameters: { ...made, required: ["id", "note"] }, strict: true })
  },
  {
    name: "anthropic",
    serve: fakeAnthropic,
    adapter: (server) => createAnthropicChat("claude-sonnet-4-5", "test-key", { baseURL: server.baseURL, maxRetries: 0 }),
    // input_schema keeps only type, properties and required: the top-level additionalProperties goes, no strict flag.
    sends: ({ type, properties, required }) => ({ parameters: { type, properties, required } })
  },
  {
    name: "gemini",
    serve: fakeGemini,
    adapter: (server) => createGeminiChat("gemini-2.5-flash", "test-key", { baseURL: server.baseURL }),
    // parametersJsonSchema: the schema as it is.
    sends: (made) => ({ parameters: made })
  }
]

const user = [{ role: "user" as const, content: "Where is my order?" }]
const run = { runId: "run-1", threadId: "thread-1" }


const askForOrder: ReadonlyArray<FakeReply> = [
  { toolCalls: [{ name: "get_order", args: { id: "A-100" }, id: "call_1" }] },
  { text: "Here is what I found." }
]

const chatOn = <const Tools extends ReadonlyArray<AI.ServerTool.Any>>(provider: Provider, server: FakeProviderServer<unknown>, tools: Tools) =>
  AI.chat({ adapter: provider.adapter(server), messages: user, tools, ...run })

const parsedResults = (server: FakeProviderServer<unknown>, index: number) =>
  server.toolResults(index).map((result) => JSON.parse(result.output) as unknown)

const textOf = (chunks: ReadonlyArray<StreamChunk>) =>
  chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : []).join("")

const isProgress = (chunk: StreamChunk) => chunk.type === "CUSTOM" && chunk.name === AI.toolProgressEvent

class OrderNotFound extends Schema.TaggedError<OrderNotFound>()("OrderNotFound", { id: Schema.String }) {}

type Claim = (provider: Provider) => Effect.Effect<void, unknown, Scope.Scope>

const claims: Record<string, Claim> = {
  "a tool call decodes into the Effect Schema's type: nested objects, arrays, literals, integers, optional fields absent or null, unknown keys dropped":
    (provider) =>
      Effect.gen(function*() {
        const received: Array<unknown> = []
        const shipment = AI.serverTool(
          toolDefinition({
            name: "ship",
            description: "Ships an order",
            inputSchema: AI.toolSchema(Schema.Struct({
              order: Schema.Struct({ id: Schema.String, lines: Schema.Array(Schema.Struct({ sku: Schema.String, quantity: Schema.Int })) }),
              speed: Schema.Literals(["standard", "express"]),
              note: Schema.optional(Schema.String),
              giftWrap: Schema.optional(Schema.Boolean)
            })),
            outputSchema: AI.toolSchema(Schema.Struct({ ok: Schema.Boolean }))
          }),
          (input) => Effect.sync(() => received.push(input)).pipe(Effect.as({ ok: true }))
        )
        const order = { id: "A-100", lines: [{ sku: "tea", quantity: 2 }, { sku: "cup", quantity: 1 }] }
        const server = yield* provider.serve([
          {
            toolCalls: [
              { name: "ship", args: { order, speed: "express", note: null, giftWrap: null }, id: "call_1" },
              // Anthropic's adapter drops the top-level additionalProperties: false, so a model may add a key.
              { name: "ship", args: { order, speed: "standard", priority: "high" }, id: "call_2" }
            ]
          },
          { text: "Shipped." }
        ])
        yield* Stream.runDrain(chatOn(provider, server, [shipment]))
        expect(received).toEqual([{ order, speed: "express" }, { order, speed: "standard" }])
        expect(parsedResults(server, 1)).toEqual([{ ok: true }, { ok: true }])
      }),

  "a tool's parameters reach the provider as the JSON Schema AI.toolSchema made, with the adapter's own changes": (provider) =>
    Effect.gen(function*() {
      const inputSchema = AI.toolSchema(Schema.Struct({ id: Schema.String, note: Schema.optional(Schema.String) }))
      const tool = AI.serverTool(
        toolDefinition({ name: "get_order", description: "Get an order", inputSchema, outputSchema: getOrderDef.outputSchema }),
        () => Effect.succeed({ status: "shipped" })
      )
      const server = yield* provider.serve([{ text: "Hi." }])
      yield* Stream.runDrain(chatOn(provider, server, [tool]))
      expect(server.tools(0)).toEqual([{ name: "get_order", ...provider.sends(inputSchema.jsonSchema) }])
    }),

  "arguments that do not decode are a tool error naming the path, and the tool does not run": (provider) =>
    Effect.gen(function*() {
      let ran = false
      const tool = AI.serverTool(getOrderDef, () => Effect.sync(() => (ran = true)).pipe(Effect.as({ status: "x" })))
      const server = yield* provider.serve([{ toolCalls: [{ name: "get_order", args: { id: 42 }, id: "call_1" }] }, { text: "Sorry." }])
      yield* Stream.runDrain(chatOn(provider, server, [tool]))
      expect(ran).toBe(false)
      expect(JSON.stringify(parsedResults(server, 1))).toContain("id")
    }),

  "argument text that is not JSON is a tool error, and the tool does not run (Gemini sends arguments as an object, so its fake refuses the script)":
    (provider) =>
      Effect.gen(function*() {
        let ran = false
        const tool = AI.serverTool(getOrderDef, () => Effect.sync(() => (ran = true)).pipe(Effect.as({ status: "x" })))
        const server = yield* provider.serve([{ toolCalls: [{ name: "get_order", rawArgs: '{"id": "A-1', id: "call_1" }] }, { text: "Sorry." }])
        const chunks = yield* Stream.runCollect(chatOn(provider, server, [tool]))
        expect(ran).toBe(false)
        if (provider.name === "gemini") {
          expect(chunks.find((chunk) => chunk.type === "RUN_ERROR")).toMatchObject({ message: expect.stringContaining("JSON object") })
        } else {
          expect(JSON.stringify(parsedResults(server, 1))).toContain("error")
        }
      }),

  "a typed failure and a defect reach the model as tool errors, and the run goes on": (provider) =>
    Effect.gen(function*() {
      const tool = AI.serverTool(getOrderDef, ({ id }) => id === "A-1" ? Effect.fail(new OrderNotFound({ id })) : Effect.die(new Error("boom")))
      const server = yield* provider.serve([
        { toolCalls: [{ name: "get_order", args: { id: "A-1" }, id: "call_1" }, { name: "get_order", args: { id: "A-2" }, id: "call_2" }] },
        { text: "Neither order could be found." }
      ])
      const chunks = yield* Stream.runCollect(chatOn(provider, server, [tool]))
      const [failure, defect] = parsedResults(server, 1) as Array<{ readonly error: string }>
      expect(failure!.error).toContain("OrderNotFound")
      expect(defect!.error).toContain("boom")
      expect(textOf(chunks)).toBe("Neither order could be found.")
    }),

  "an effect tool applies its effect once and replays its record to a second run": (provider) =>
    Effect.gen(function*() {
      const applied = yield* Ref.make(0)
      const notify = AI.effectTool(
        notifyDef,
        () => Ref.updateAndGet(applied, (n) => n + 1).pipe(Effect.map((sent) => ({ sent })))
      )
      const store = AI.EffectStore.layerMemory()
      const turns: ReadonlyArray<FakeReply> = [{ toolCalls: [{ name: "notify", args: { to: "ada" }, id: "call_1" }] }, { text: "Done." }]
      const first = yield* provider.serve(turns)
      yield* Stream.runDrain(chatOn(provider, first, [notify]).pipe(Stream.provide(store)))
      const second = yield* provider.serve(turns)
      yield* Stream.runDrain(chatOn(provider, second, [notify]).pipe(Stream.provide(store)))
      expect(yield* Ref.get(applied)).toBe(1)
      expect(parsedResults(second, 1)).toEqual(parsedResults(first, 1))
    }),

  "progress is live: a Stream tool's first element reaches the consumer while the tool still runs": (provider) =>
    Effect.gen(function*() {
      const released = yield* Deferred.make<void>()
      const working = AI.serverTool(getOrderDef, () =>
        Stream.concat(
          Stream.make({ status: "step 1" }),
          Stream.fromEffect(Effect.never.pipe(Effect.ensuring(Deferred.succeed(released, undefined))))
        ))
      const server = yield* provider.serve(askForOrder)
      const taken = yield* chatOn(provider, server, [working]).pipe(Stream.takeUntil(isProgress), Stream.runCollect)
      expect(taken.filter(isProgress).map((chunk) => chunk.type === "CUSTOM" && chunk.value)).toEqual([
        { toolName: "get_order", progress: { status: "step 1" }, toolCallId: "call_1" }
      ])
      expect(yield* Deferred.isDone(released)).toBe(true)
    }),

  "stopping the run while a tool runs interrupts it and runs its finalizers": (provider) =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const started = yield* Deferred.make<void>()
      const blocking = AI.serverTool(getOrderDef, () =>
        Effect.acquireRelease(Effect.sync(() => events.push("acquired")), () => Effect.sync(() => events.push("released"))).pipe(
          Effect.andThen(Deferred.succeed(started, undefined)),
          Effect.andThen(Effect.never),
          Effect.scoped
        ))
      const server = yield* provider.serve(askForOrder)
      const fiber = yield* Effect.forkChild(Stream.runDrain(chatOn(provider, server, [blocking])))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      expect(events).toEqual(["acquired", "released"])
      expect(server.requests).toHaveLength(1)
    }),

  "stopping the run during a model turn aborts the provider's request": (provider) =>
    Effect.gen(function*() {
      const server = yield* provider.serve([{ text: ["Let me ", "think..."], delayMs: 60_000 }])
      // Stop once the first text delta arrived: the response is still open.
      yield* chatOn(provider, server, []).pipe(Stream.takeUntil((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT"), Stream.runDrain)
      yield* Effect.promise(() => waitFor(() => server.aborted() === 1))
      expect(server.aborted()).toBe(1)
    }),

  "token usage reaches the run's span, summed over its turns": (provider) =>
    Effect.gen(function*() {
      const { spans, tracer } = inMemoryTracer()
      const tool = AI.serverTool(getOrderDef, () => Effect.succeed({ status: "shipped" }))
      const server = yield* provider.serve([
        { ...askForOrder[0], usage: { inputTokens: 100, outputTokens: 7 } },
        { text: "Shipped.", usage: { inputTokens: 120, outputTokens: 3 } }
      ])
      yield* Stream.runDrain(chatOn(provider, server, [tool])).pipe(Effect.withTracer(tracer))
      const span = spans.find((span) => span.name === "AI.chat")!
      expect(Object.fromEntries(span.attributes)).toMatchObject({
        "gen_ai.provider.name": provider.name,
        "gen_ai.usage.input_tokens": 220,
        "gen_ai.usage.output_tokens": 10
      })
    }),

  "a provider error is a RUN_ERROR chunk by default, and AiError with its reason and status through AI.failOnProviderError":
    (provider) =>
      Effect.gen(function*() {
        const expected = [[401, "authentication"], [429, "rate-limited"], [400, "invalid-request"], [500, "provider"]] as const
        for (const [status, reason] of expected) {
          const server = yield* provider.serve([{ failure: { status, message: `Fake ${status}` } }, { failure: { status } }])
          const chunks = yield* Stream.runCollect(chatOn(provider, server, []))
          expect(chunks.map((chunk) => chunk.type)).toContain("RUN_ERROR")
          const error = yield* chatOn(provider, server, []).pipe(AI.failOnProviderError, Stream.runDrain, Effect.flip)
          expect(error).toMatchObject({ _tag: "AiError", activity: "chat", reason, status })
          expect(server.requests).toHaveLength(2)
        }
      }),

  "a malformed answer is a RUN_ERROR chunk, and the run ends": (provider) =>
    Effect.gen(function*() {
      const server = yield* provider.serve([{ malformed: true }])
      const chunks = yield* Stream.runCollect(chatOn(provider, server, []))
      expect(chunks.at(-1)?.type).toBe("RUN_ERROR")
    }),

  "AI.generateObject decodes the provider's structured answer into the schema's type, and a 429 is rate-limited": (provider) =>
    Effect.gen(function*() {
      const Answer = Schema.Struct({ order: Schema.String, eta: Schema.Int })
      const server = yield* provider.serve([{ text: JSON.stringify({ order: "A-100", eta: 3 }) }, { failure: { status: 429 } }])
      const ask = AI.generateObject({ adapter: provider.adapter(server), messages: user, schema: Answer })
      expect(yield* ask).toEqual({ order: "A-100", eta: 3 })
      expect(yield* Effect.flip(ask)).toMatchObject({ _tag: "AiError", reason: "rate-limited", status: 429 })
    })
}

/** Polls `done` on the event loop until it holds (the server sees the abort after the client sent it). */
const waitFor = async (done: () => boolean): Promise<void> => {
  while (!done()) await new Promise((resolve) => setImmediate(resolve))
}

for (const [claim, prove] of Object.entries(claims)) {
  describe(claim, () => {
    for (const provider of providers) {
      it.live(provider.name, () => prove(provider).pipe(Effect.scoped))
    }
  })
}
