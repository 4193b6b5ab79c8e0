import { toolDefinition } from "@tanstack/ai"
import type { StreamChunk } from "@tanstack/ai"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { fakeOpenAI, type ScriptedTextAdapter, scriptedText } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Cause, Context, Data, Deferred, Effect, Exit, Fiber, Layer, Logger, Ref, Schedule, Schema, Stream } from "effect"

class OrderNotFound extends Data.TaggedError("OrderNotFound")<{ readonly id: string }> {}

class Orders extends Context.Service<Orders, {
  readonly status: (id: string) => Effect.Effect<string, OrderNotFound>
}>()("test/Orders") {
  static readonly layer = Layer.succeed(Orders, {
    status: (id) => id === "A-100" ? Effect.succeed("shipped") : Effect.fail(new OrderNotFound({ id }))
  })
}

const getOrderDef = toolDefinition({
  name: "get_order",
  description: "Get the status of an order",
  inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String }))
})

const getOrder = AI.serverTool(getOrderDef, ({ id }) =>
  Effect.gen(function*() {
    const orders = yield* Orders
    return { status: yield* orders.status(id) }
  }))

const askFor = (id: string) => [
  { toolCalls: [{ name: "get_order", args: { id } }] },
  { text: "Here is what I found." }
]

const user = (content: string) => [{ role: "user" as const, content }]

/** The states of the tool results in the stream, as the client reads them. */
const resultStates = (chunks: ReadonlyArray<StreamChunk>) =>
  chunks.flatMap((chunk) =>
    chunk.type === "TOOL_CALL_RESULT"
      ? [(chunk.metadata as { tanstack?: { state?: string } } | undefined)?.tanstack?.state ?? "output-available"]
      : []
  )

/** The tool results the model received on a turn, parsed. */
const toolMessagesOf = (adapter: ScriptedTextAdapter, turn: number) =>
  (adapter.turns[turn]?.messages ?? []).flatMap((message) =>
    message.role === "tool" ? [JSON.parse(String(message.content))] : []
  )

describe("AI.chat", () => {
  it.effect("a server tool reads its services from the Layer provided to the stream", () =>
    Effect.gen(function*() {
      const adapter = scriptedText(askFor("A-100"))
      const chunks = yield* AI.chat({ adapter, messages: user("Where is A-100?"), tools: [getOrder] }).pipe(
        Stream.provide(Orders.layer),
        Stream.runCollect
      )
      expect(toolMessagesOf(adapter, 1)).toEqual([{ status: "shipped" }])
      expect(chunks.at(-1)?.type).toBe("RUN_FINISHED")
    }))

  it.effect("a typed failure becomes a tool error for the model, and the run continues", () =>
    Effect.gen(function*() {
      const adapter = scriptedText(askFor("B-200"))
      const chunks = yield* AI.chat({ adapter, messages: user("Where is B-200?"), tools: [getOrder] }).pipe(
        Stream.provide(Orders.layer),
        Stream.runCollect
      )
      expect(resultStates(chunks)).toEqual(["output-error"])
      expect(toolMessagesOf(adapter, 1)).toEqual([{ error: `OrderNotFound: {"id":"B-200"}` }])
      // The model was called again after the failure and its reply was streamed.
      expect(adapter.turns).toHaveLength(2)
      expect(chunks.some((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT")).toBe(true)
    }))

  it.effect("a Schema.TaggedError failure reaches the model with its tag and message", () =>
    Effect.gen(function*() {
      class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", { message: Schema.String }) {}
      const tool = AI.serverTool(getOrderDef, () => Effect.fail(new Forbidden({ message: "not your order" })))
      const adapter = scriptedText(askFor("A-100"))
      yield* AI.chat({ adapter, messages: user("?"), tools: [tool] }).pipe(Stream.runDrain)
      expect(toolMessagesOf(adapter, 1)).toEqual([{ error: "Forbidden: not your order" }])
    }))

  it.effect("a defect (Effect.die) becomes a tool error for the model, and the run continues", () =>
    Effect.gen(function*() {
      const tool = AI.serverTool(getOrderDef, () => Effect.die(new RangeError("index out of range")))
      const adapter = scriptedText(askFor("A-100"))
      const chunks = yield* AI.chat({ adapter, messages: user("?"), tools: [tool] }).pipe(Stream.runCollect)
      expect(resultStates(chunks)).toEqual(["output-error"])
      expect(toolMessagesOf(adapter, 1)).toEqual([{ error: "RangeError: index out of range" }])
      expect(adapter.turns).toHaveLength(2)
    }))

  it.effect("a defect is logged at error level with the tool's name, since the stream does not fail", () =>
    Effect.gen(function*() {
      const logs: Array<{ level: string; annotations: Record<string, unknown> }> = []
      const captured = Logger.make((options) => {
        const entry = Logger.formatStructured.log(options)
        logs.push({ level: entry.level, annotations: entry.annotations })
      })
      const tool = AI.serverTool(getOrderDef, () => Effect.die(new RangeError("index out of range")))
      yield* AI.chat({ adapter: scriptedText(askFor("A-100")), messages: user("?"), tools: [tool] }).pipe(
        Stream.runDrain,
        Effect.provide(Logger.layer([captured]))
      )
      expect(logs).toContainEqual({ level: "ERROR", annotations: { tool: "get_order", toolCallId: "call_0_0" } })
    }))

  it.effect("catching the failure in the tool sends the model a normal result", () =>
    Effect.gen(function*() {
      const tool = AI.serverTool(getOrderDef, ({ id }) =>
        Effect.gen(function*() {
          const orders = yield* Orders
          return { status: yield* orders.status(id) }
        }).pipe(Effect.catchTag("OrderNotFound", () => Effect.succeed({ status: "unknown" }))))
      const adapter = scriptedText(askFor("B-200"))
      const chunks = yield* AI.chat({ adapter, messages: user("?"), tools: [tool] }).pipe(
        Stream.provide(Orders.layer),
        Stream.runCollect
      )
      expect(resultStates(chunks)).toEqual(["output-available"])
      expect(toolMessagesOf(adapter, 1)).toEqual([{ status: "unknown" }])
    }))

  it.effect("arguments that do not decode are a tool error naming the path, and the tool does not run", () =>
    Effect.gen(function*() {
      const runs = yield* Ref.make(0)
      const tool = AI.serverTool(getOrderDef, () => Effect.as(Ref.update(runs, (n) => n + 1), { status: "x" }))
      const adapter = scriptedText([{ toolCalls: [{ name: "get_order", args: { id: 42 } }] }, { text: "Sorry." }])
      yield* AI.chat({ adapter, messages: user("?"), tools: [tool] }).pipe(Stream.runDrain)
      expect(yield* Ref.get(runs)).toBe(0)
      const [message] = toolMessagesOf(adapter, 1)
      expect(message.error).toContain("Input validation failed for tool get_order")
      expect(message.error).toContain(`Expected string\n  at ["id"]`)
    }))

  it.effect("the tool's result is encoded by its output schema before the model reads it", () =>
    Effect.gen(function*() {
      const def = toolDefinition({
        name: "next_delivery",
        description: "When the next delivery comes",
        inputSchema: AI.toolSchema(Schema.Struct({})),
        outputSchema: AI.toolSchema(Schema.Struct({ at: Schema.Date }))
      })
      const tool = AI.serverTool(def, () => Effect.succeed({ at: new Date("2026-12-24T08:00:00.000Z") }))
      const adapter = scriptedText([{ toolCalls: [{ name: "next_delivery", args: {} }] }, { text: "ok" }])
      yield* AI.chat({ adapter, messages: user("?"), tools: [tool] }).pipe(Stream.runDrain)
      expect(toolMessagesOf(adapter, 1)).toEqual([{ at: "2026-12-24T08:00:00.000Z" }])
    }))

  it.effect("a result that does not match the output schema is a tool error", () =>
    Effect.gen(function*() {
      const tool = AI.serverTool(getOrderDef, () => Effect.succeed({ status: 7 } as unknown as { status: string }))
      const adapter = scriptedText(askFor("A-100"))
      yield* AI.chat({ adapter, messages: user("?"), tools: [tool] }).pipe(Stream.runDrain)
      const [message] = toolMessagesOf(adapter, 1)
      expect(message.error).toContain(`Invalid tool output: Expected string\n  at ["status"]`)
    }))

  it.effect("a Stream tool sends every element as progress, and the last is also the result", () =>
    Effect.gen(function*() {
      const tool = AI.serverTool(getOrderDef, () =>
        Stream.make({ status: "looking up" }, { status: "found" }, { status: "shipped" }))
      const adapter = scriptedText(askFor("A-100"))
      const chunks = yield* AI.chat({ adapter, messages: user("?"), tools: [tool] }).pipe(Stream.runCollect)
      const progress = chunks.flatMap((chunk) =>
        chunk.type === "CUSTOM" && chunk.name === AI.toolProgressEvent ? [chunk.value] : []
      )
      expect(progress).toEqual([
        { toolName: "get_order", progress: { status: "looking up" }, toolCallId: "call_0_0" },
        { toolName: "get_order", progress: { status: "found" }, toolCallId: "call_0_0" },
        { toolName: "get_order", progress: { status: "shipped" }, toolCallId: "call_0_0" }
      ])
      expect(toolMessagesOf(adapter, 1)).toEqual([{ status: "shipped" }])
    }))

  it.effect("mixes server tools with core server tools and client tools", () =>
    Effect.gen(function*() {
      const weather = toolDefinition({ name: "weather", description: "Weather", inputSchema: AI.toolSchema(Schema.Struct({})) })
        .server(async () => ({ sky: "clear" }))
      const notify = toolDefinition({ name: "notify", description: "Show a toast", inputSchema: AI.toolSchema(Schema.Struct({ text: Schema.String })) })
      const adapter = scriptedText([
        { toolCalls: [{ name: "get_order", args: { id: "A-100" } }, { name: "weather", args: {} }] },
        { toolCalls: [{ name: "notify", args: { text: "shipped" } }] }
      ])
      const chunks = yield* AI.chat({ adapter, messages: user("?"), tools: [getOrder, weather, notify] }).pipe(
        Stream.provide(Orders.layer),
        Stream.runCollect
      )
      expect(adapter.turns[0]?.toolNames).toEqual(["get_order", "weather", "notify"])
      expect(toolMessagesOf(adapter, 1)).toEqual([{ status: "shipped" }, { sky: "clear" }])
      // The server tool and the core server tool both produced their results on the stream.
      const results = chunks.flatMap((chunk) => chunk.type === "TOOL_CALL_RESULT" ? [chunk] : [])
      expect(results.map((chunk) => [chunk.toolCallId, JSON.parse(String(chunk.content))])).toEqual([
        ["call_0_0", { status: "shipped" }],
        ["call_0_1", { sky: "clear" }]
      ])
      // The client tool is handed to the client: its call goes out with its name and arguments, and the run pauses for it.
      const clientCall = chunks.find((chunk) => chunk.type === "TOOL_CALL_START" && chunk.toolCallName === "notify")
      expect(clientCall).toMatchObject({ type: "TOOL_CALL_START", toolCallId: "call_1_0", toolCallName: "notify" })
      const clientArgs = chunks.flatMap((chunk) => chunk.type === "TOOL_CALL_ARGS" && chunk.toolCallId === "call_1_0" ? [chunk.delta] : [])
      expect(JSON.parse(clientArgs.join(""))).toEqual({ text: "shipped" })
      expect(results.some((chunk) => chunk.toolCallId === "call_1_0")).toBe(false)
      const last = chunks.at(-1)
      expect(last?.type).toBe("RUN_FINISHED")
      expect(JSON.stringify(last)).toContain("notify")
    }))

  it.effect("a server tool whose definition needs approval waits for it, as a core tool does, and does not run", () =>
    Effect.gen(function*() {
      const runs = yield* Ref.make(0)
      const cancelDef = toolDefinition({
        name: "cancel_order",
        description: "Cancel an order",
        inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
        needsApproval: true
      })
      const cancel = AI.serverTool(cancelDef, () => Ref.update(runs, (n) => n + 1))
      const adapter = scriptedText([{ toolCalls: [{ name: "cancel_order", args: { id: "A-100" } }] }])
      const chunks = yield* AI.chat({ adapter, messages: user("Cancel A-100"), tools: [cancel] }).pipe(Stream.runCollect)
      expect(yield* Ref.get(runs)).toBe(0)
      expect(adapter.turns).toHaveLength(1)
      expect(chunks.at(-1)).toMatchObject({ type: "RUN_FINISHED", outcome: { type: "interrupt" } })
    }))

  it.effect("the tool reads the run's ids from RunContext, and missing ids are generated", () =>
    Effect.gen(function*() {
      const seen: Array<AI.RunContext["Service"]> = []
      const tool = AI.serverTool(getOrderDef, () =>
        Effect.map(Effect.service(AI.RunContext), (run) => {
          seen.push(run)
          return { status: "ok" }
        }))
      yield* AI.chat({ adapter: scriptedText(askFor("A-1")), messages: user("?"), runId: "run-7", threadId: "thread-7", tools: [tool] })
        .pipe(Stream.runDrain)
      yield* AI.chat({ adapter: scriptedText(askFor("A-1")), messages: user("?"), tools: [tool] }).pipe(Stream.runDrain)
      expect(seen[0]).toMatchObject({ runId: "run-7", threadId: "thread-7", agent: "chat" })
      expect(seen[1]?.runId).toMatch(/^run-/)
      expect(seen[1]?.threadId).toMatch(/^thread-/)
    }))

  it.effect("passes the run's ids to the model on every turn", () =>
    Effect.gen(function*() {
      const adapter = scriptedText(askFor("A-100"))
      yield* AI.chat({ adapter, messages: user("?"), runId: "run-1", threadId: "thread-1", tools: [getOrder] }).pipe(
        Stream.provide(Orders.layer),
        Stream.runDrain
      )
      expect(adapter.turns.map((turn) => [turn.runId, turn.threadId])).toEqual([["run-1", "thread-1"], ["run-1", "thread-1"]])
    }))

  it.effect("core rejecting its options is a typed ChatError, not a defect", () =>
    Effect.gen(function*() {
      const error = yield* AI.chat({ adapter: scriptedText([]), messages: user("?"), tools: [getOrder, getOrder] }).pipe(
        Stream.provide(Orders.layer),
        Stream.runDrain,
        Effect.flip
      )
      expect(error._tag).toBe("ChatError")
      expect(error.message).toContain("get_order")
    }))

  it.effect("runs an adapter whose chatStream is its own read-only property, as a test double or a frozen adapter has", () =>
    Effect.gen(function*() {
      const scripted = scriptedText([{ text: "Hello!" }])
      // `Object.create` with a descriptor: non-writable and non-configurable.
      const adapter: ScriptedTextAdapter = Object.create(scripted, {
        chatStream: { value: (options: Parameters<ScriptedTextAdapter["chatStream"]>[0]) => scripted.chatStream(options) }
      })
      const chunks = yield* AI.chat({ adapter, messages: user("Hi") }).pipe(Stream.runCollect)
      expect(chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : [])).toEqual(["Hello!"])
    }))
})

describe("AI.chat when the run stops", () => {
  /** A tool that reports progress once, then waits forever inside a resource. */
  const blockingTool = (events: Array<string>, started: Deferred.Deferred<void>) =>
    AI.serverTool(getOrderDef, () =>
      Stream.concat(
        Stream.make({ status: "working" }),
        Stream.fromEffect(
          Effect.acquireRelease(
            Effect.sync(() => events.push("acquired")),
            () =>
              Effect.sync(() => {
                events.push("released")
              })
          ).pipe(
            Effect.andThen(Deferred.succeed(started, undefined)),
            Effect.andThen(Effect.never),
            Effect.onInterrupt(() => Effect.sync(() => events.push("interrupted"))),
            Effect.scoped
          )
        )
      ))

  const isProgress = (chunk: StreamChunk) => chunk.type === "CUSTOM" && chunk.name === AI.toolProgressEvent

  it.live("Stream.take ending the stream interrupts the running tool, whose finalizers have run when the stream ends", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const started = yield* Deferred.make<void>()
      const adapter = scriptedText(askFor("A-100"))
      const taken = yield* AI.chat({ adapter, messages: user("?"), tools: [blockingTool(events, started)] }).pipe(
        // Stop right after the first progress event, while the tool is still running.
        Stream.takeUntil(isProgress),
        Stream.tap((chunk) => isProgress(chunk) ? Deferred.await(started) : Effect.void),
        Stream.runCollect
      )
      expect(taken.filter(isProgress)).toHaveLength(1)
      expect(events).toEqual(["acquired", "interrupted", "released"])
      expect(adapter.turns).toHaveLength(1)
    }))

  it.live("progress is live: a tool's first element reaches the consumer while the tool still runs, and stopping there runs its finalizers", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const adapter = scriptedText(askFor("A-100"))
      // One element, then a stream that never ends: only live progress can reach the consumer.
      const working = AI.serverTool(getOrderDef, () =>
        Stream.concat(
          Stream.make({ status: "step 1" }),
          Stream.fromEffect(
            Effect.acquireRelease(Effect.sync(() => events.push("acquired")), () => Effect.sync(() => events.push("released"))).pipe(
              Effect.andThen(Effect.never),
              Effect.scoped
            )
          )
        ))
      const taken = yield* AI.chat({ adapter, messages: user("?"), tools: [working] }).pipe(
        Stream.takeUntil(isProgress),
        Stream.runCollect
      )
      expect(taken.filter(isProgress).map((chunk) => chunk.type === "CUSTOM" && chunk.value)).toEqual([
        { toolName: "get_order", progress: { status: "step 1" }, toolCallId: "call_0_0" }
      ])
      expect(events.at(-1)).toBe("released")
    }))

  it.live("call.progress sends a progress event from a server tool while it runs", () =>
    Effect.gen(function*() {
      const adapter = scriptedText(askFor("A-100"))
      const reporting = AI.serverTool(getOrderDef, (_, call) =>
        Effect.andThen(call.progress({ step: "querying" }), Effect.never))
      const taken = yield* AI.chat({ adapter, messages: user("?"), tools: [reporting] }).pipe(
        Stream.takeUntil(isProgress),
        Stream.runCollect
      )
      expect(taken.filter(isProgress).map((chunk) => chunk.type === "CUSTOM" && chunk.value)).toEqual([
        { toolName: "get_order", progress: { step: "querying" }, toolCallId: "call_0_0" }
      ])
    }))

  it.live("interrupting the fiber that runs the stream interrupts the tool and runs its finalizers", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const started = yield* Deferred.make<void>()
      const adapter = scriptedText(askFor("A-100"))
      const fiber = yield* AI.chat({ adapter, messages: user("?"), tools: [blockingTool(events, started)] }).pipe(
        Stream.runDrain,
        Effect.forkChild
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      expect(events).toEqual(["acquired", "interrupted", "released"])
      expect(adapter.turns).toHaveLength(1)
    }))

  /** A tool whose release takes a turn of the event loop, so that a finalizer that does not wait for it runs first. */
  const slowReleaseTool = (events: Array<string>, started: Deferred.Deferred<void>) =>
    AI.serverTool(getOrderDef, () =>
      Stream.concat(
        Stream.make({ status: "working" }),
        Stream.fromEffect(
          Effect.acquireRelease(
            Deferred.succeed(started, undefined),
            () =>
              Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 20))).pipe(
                Effect.andThen(Effect.sync(() => events.push("tool released")))
              )
          ).pipe(Effect.andThen(Effect.never), Effect.scoped)
        )
      ))

  it.live("a Stream.ensuring after AI.chat runs after the tool's finalizers have finished, when the run is interrupted", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const started = yield* Deferred.make<void>()
      const fiber = yield* AI.chat({ adapter: scriptedText(askFor("A-100")), messages: user("?"), tools: [slowReleaseTool(events, started)] }).pipe(
        Stream.ensuring(Effect.sync(() => events.push("outer finalizer"))),
        Stream.runDrain,
        Effect.forkChild
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      expect(events).toEqual(["tool released", "outer finalizer"])
    }))

  it.live("a Stream.ensuring after AI.chat runs after the tool's finalizers have finished, when the consumer stops taking", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const started = yield* Deferred.make<void>()
      yield* AI.chat({ adapter: scriptedText(askFor("A-100")), messages: user("?"), tools: [slowReleaseTool(events, started)] }).pipe(
        Stream.ensuring(Effect.sync(() => events.push("outer finalizer"))),
        Stream.takeUntil(isProgress),
        Stream.tap((chunk) => isProgress(chunk) ? Deferred.await(started) : Effect.void),
        Stream.runDrain
      )
      expect(events).toEqual(["tool released", "outer finalizer"])
    }))

  it.live("the consumer returning the async iterator (the browser closing the request) interrupts the tool", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const started = yield* Deferred.make<void>()
      const adapter = scriptedText(askFor("A-100"))
      const iterator = AI.chat({ adapter, messages: user("?"), tools: [blockingTool(events, started)] })
        .pipe(Stream.toAsyncIterable)[Symbol.asyncIterator]()
      yield* Effect.promise(async () => {
        for (let next = await iterator.next(); !next.done && !isProgress(next.value); next = await iterator.next()) {
          // read until the tool reports progress
        }
      })
      yield* Deferred.await(started)
      yield* Effect.promise(() => iterator.return!())
      expect(events).toEqual(["acquired", "interrupted", "released"])
      expect(adapter.turns).toHaveLength(1)
    }))
})

describe("AI.failOnProviderError", () => {
  const chatOn = (server: { readonly baseURL: string }) =>
    AI.chat({
      adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL, maxRetries: 0 }),
      messages: [{ role: "user", content: "Hi" }]
    })

  it.live("by default a provider's 429 is a RUN_ERROR chunk in a stream that succeeds, for the client to show", () =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([{ failure: { status: 429 } }])
      const chunks = yield* Stream.runCollect(chatOn(server))
      expect(chunks.map((chunk) => chunk.type)).toContain("RUN_ERROR")
    }).pipe(Effect.scoped))

  it.live("a provider's 429 fails the stream with AiError rate-limited and its status, before any chunk went out", () =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([{ failure: { status: 429 } }])
      const sent: Array<StreamChunk> = []
      const error = yield* chatOn(server).pipe(
        AI.failOnProviderError,
        Stream.runForEach((chunk) => Effect.sync(() => sent.push(chunk))),
        Effect.flip
      )
      expect(error).toMatchObject({ _tag: "AiError", activity: "chat", reason: "rate-limited", status: 429 })
      expect(sent).toEqual([])
    }).pipe(Effect.scoped))

  // Core's chunks as an adapter streams them; cast, since core types `type` as AG-UI's EventType enum, which a literal does not satisfy.
  const started = { type: "RUN_STARTED", runId: "run-1", threadId: "thread-1", timestamp: 0 } as StreamChunk
  const delta = (text: string) => ({ type: "TEXT_MESSAGE_CONTENT", messageId: "m-1", delta: text, timestamp: 0 }) as StreamChunk
  const failed = { type: "RUN_ERROR", message: "Overloaded", code: "overloaded", timestamp: 0 } as StreamChunk
  const deliveredOf = (batches: ReadonlyArray<ReadonlyArray<StreamChunk>>) =>
    Effect.gen(function*() {
      const sent: Array<StreamChunk> = []
      const exit = yield* Stream.fromArrays(...batches).pipe(
        AI.failOnProviderError,
        Stream.runForEach((chunk) => Effect.sync(() => sent.push(chunk))),
        Effect.exit
      )
      return { sent, exit }
    })

  it.effect("a failure later in the run comes after every chunk before it, also those of its own batch, and nothing after it goes out", () =>
    Effect.gen(function*() {
      const { exit, sent } = yield* deliveredOf([[started, delta("a")], [delta("b"), failed, delta("c")]])
      expect(sent).toEqual([started, delta("a"), delta("b")])
      expect(exit).toMatchObject({ _tag: "Failure" })
      expect(Exit.isFailure(exit) && Cause.squash(exit.cause)).toMatchObject({ _tag: "AiError", activity: "chat", message: "Overloaded" })
    }))

  it.effect("a start held alone in its batch is dropped when the next batch fails, and sent when the run ends right after it", () =>
    Effect.gen(function*() {
      const refused = yield* deliveredOf([[started], [failed]])
      expect(refused.sent).toEqual([])
      expect(refused.exit._tag).toBe("Failure")
      const empty = yield* deliveredOf([[started]])
      expect(empty.sent).toEqual([started])
      expect(empty.exit._tag).toBe("Success")
      const answered = yield* deliveredOf([[started], [delta("a")], [delta("b")]])
      expect(answered.sent).toEqual([started, delta("a"), delta("b")])
    }))

  it.live("Stream.retry with a Schedule retries a rate-limited run, and the client gets one clean run", () =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([{ failure: { status: 429 } }, { text: "Hello again." }])
      const chunks = yield* chatOn(server).pipe(
        AI.failOnProviderError,
        Stream.retry(Schedule.max([Schedule.spaced("10 millis"), Schedule.recurs(2)])),
        Stream.runCollect
      )
      expect(server.requests).toHaveLength(2)
      expect(chunks.filter((chunk) => chunk.type === "RUN_STARTED")).toHaveLength(1)
      expect(chunks.some((chunk) => chunk.type === "RUN_ERROR")).toBe(false)
      expect(chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : []).join("")).toBe("Hello again.")
    }).pipe(Effect.scoped))
})
