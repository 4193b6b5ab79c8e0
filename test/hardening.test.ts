/**
 * What a new user and hostile input broke, each defect as the claim its fix
 * proves: a hanging record write, a store made per request, leaking typed
 * errors, keys of two tools colliding, lossy inputs, unchecked options, and
 * arguments or outputs that used to end the whole run.
 */
import { toolDefinition } from "@tanstack/ai"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { scriptedText, type ScriptedTurn, startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Cause, Data, Deferred, Effect, Fiber, Layer, Logger, Option, Redacted, Ref, Schema, Stream } from "effect"

const user = [{ role: "user" as const, content: "Go" }]

const toolResults = (adapter: ReturnType<typeof scriptedText>, turn: number) =>
  (adapter.turns[turn]?.messages ?? []).flatMap((message) => message.role === "tool" ? [JSON.parse(String(message.content))] : [])

const runWith = (store: Layer.Layer<AI.EffectStore>, tools: ReadonlyArray<AI.EffectTool.Any>, script: ReadonlyArray<ScriptedTurn>) =>
  Effect.gen(function*() {
    const adapter = scriptedText(script)
    const chunks = yield* AI.chat({ adapter, messages: user, runId: "run-1", threadId: "thread-1", tools }).pipe(
      Stream.provide(store),
      Stream.runCollect
    )
    return { adapter, chunks }
  })

const commentDef = toolDefinition({
  name: "comment",
  description: "Comments",
  inputSchema: AI.toolSchema(Schema.Struct({ issue: Schema.Int })),
  outputSchema: AI.toolSchema(Schema.Struct({ commentId: Schema.Int }))
})

const closeDef = toolDefinition({
  name: "close",
  description: "Closes",
  inputSchema: AI.toolSchema(Schema.Struct({ issue: Schema.Int })),
  outputSchema: AI.toolSchema(Schema.Struct({ closed: Schema.Boolean }))
})

const captureLogs = () => {
  const logs: Array<{ readonly level: string; readonly message: string }> = []
  const logger = Logger.make((options) => {
    const entry = Logger.formatStructured.log(options)
    logs.push({ level: entry.level, message: String(entry.message) })
  })
  return { logs, layer: Logger.layer([logger]) }
}

describe("hardening: the record write", () => {
  it.live("a put that never answers: the run ends within the store's deadline, and interrupting a run returns", () =>
    Effect.gen(function*() {
      const memory = yield* Effect.service(AI.EffectStore).pipe(Effect.provide(AI.EffectStore.layerMemory()))
      const hangingOnPut = (writing: Deferred.Deferred<void>) =>
        Layer.effect(
          AI.EffectStore,
          AI.EffectStore.make({ ...memory, put: () => Effect.andThen(Deferred.succeed(writing, undefined), Effect.never) }, { timeout: "200 millis" })
        )
      const applied = yield* Ref.make(0)
      const tool = AI.effectTool(commentDef, () => Effect.as(Ref.update(applied, (n) => n + 1), { commentId: 1 }))
      const started = Date.now()
      const { adapter } = yield* runWith(hangingOnPut(yield* Deferred.make<void>()), [tool], [
        { toolCalls: [{ name: "comment", args: { issue: 1 } }] },
        { text: "Done" }
      ])
      // The effect happened, so the call succeeds; its record timed out and was logged.
      expect(toolResults(adapter, 1)).toEqual([{ commentId: 1 }])
      expect(Date.now() - started).toBeLessThan(3_000)

      const writing = yield* Deferred.make<void>()
      const running = yield* Effect.forkChild(
        runWith(hangingOnPut(writing), [tool], [{ toolCalls: [{ name: "comment", args: { issue: 2 } }] }, { text: "Done" }])
      )
      // Interrupted while its record is being written.
      yield* Deferred.await(writing)
      const interruptedAt = Date.now()
      yield* Fiber.interrupt(running)
      expect(Date.now() - interruptedAt).toBeLessThan(3_000)
    }))
})

describe("hardening: a store made per request", () => {
  it.effect("a memory store made per request logs a warning, once, that names the tool and the second store it met", () =>
    Effect.gen(function*() {
      const { logs, layer } = captureLogs()
      const tool = AI.effectTool(commentDef, ({ issue }) => Effect.succeed({ commentId: issue }))
      // The pitfall: every request makes its own store.
      const handler = (issue: number) =>
        AI.chat({ adapter: scriptedText([{ toolCalls: [{ name: "comment", args: { issue } }] }, { text: "Done" }]), messages: user, tools: [tool] })
          .pipe(Stream.provide(AI.EffectStore.layerMemory()), Stream.runDrain)
      for (const issue of [1, 2, 3]) yield* handler(issue).pipe(Effect.provide(layer))
      const warnings = logs.filter((log) => log.level === "WARN")
      expect(warnings).toHaveLength(1)
      expect(warnings[0]!.message).toContain("The effect tool comment has now run against a second EffectStore.layerMemory store")
    }))

  it.effect("a script that provides one memory store inline, after AI.chat, logs no warning: there is no request", () =>
    Effect.gen(function*() {
      const { logs, layer } = captureLogs()
      const tool = AI.effectTool(commentDef, ({ issue }) => Effect.succeed({ commentId: issue }))
      yield* AI.chat({
        adapter: scriptedText([{ toolCalls: [{ name: "comment", args: { issue: 1 } }, { name: "comment", args: { issue: 2 } }] }, { text: "Done" }]),
        messages: user,
        tools: [tool]
      }).pipe(Stream.provide(AI.EffectStore.layerMemory()), Stream.runDrain, Effect.provide(layer))
      expect(logs.filter((log) => log.level === "WARN")).toEqual([])
    }))

  it.effect("a store Layer defined once is one store: providing it per request still de-duplicates across requests", () =>
    Effect.gen(function*() {
      const { logs, layer } = captureLogs()
      const StoreLive = AI.EffectStore.layerMemory()
      const applied = yield* Ref.make(0)
      const tool = AI.effectTool(commentDef, ({ issue }) => Effect.as(Ref.update(applied, (n) => n + 1), { commentId: issue }), {
        effectKey: ({ issue }) => `comment:${issue}`
      })
      const request = () =>
        AI.chat({ adapter: scriptedText([{ toolCalls: [{ name: "comment", args: { issue: 7 } }] }, { text: "Done" }]), messages: user, tools: [tool] })
          .pipe(Stream.provide(StoreLive), Stream.runDrain)
      yield* request().pipe(Effect.provide(layer))
      yield* request().pipe(Effect.provide(layer))
      expect(yield* Ref.get(applied)).toBe(1)
      expect(logs.filter((log) => log.level === "WARN")).toEqual([])
    }))
})

class DbError extends Data.TaggedError("DbError")<{ readonly connectionString: Redacted.Redacted<string>; readonly table: string }> {}

describe("hardening: what a failure tells the model", () => {
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

describe("hardening: records are scoped by tool", () => {
  const sameKey = { effectKey: ({ issue }: { issue: number }) => `issue:${issue}` }

  it.effect("a tool whose custom key equals another tool's key runs, instead of returning the other tool's record", () =>
    Effect.gen(function*() {
      const store = AI.EffectStore.layerMemory()
      const closed = yield* Ref.make(0)
      const comment = AI.effectTool(commentDef, () => Effect.succeed({ commentId: 5 }), sameKey)
      const close = AI.effectTool(closeDef, () => Effect.as(Ref.update(closed, (n) => n + 1), { closed: true }), sameKey)
      const { adapter } = yield* runWith(store, [comment, close], [
        { toolCalls: [{ name: "comment", args: { issue: 7 } }] },
        { toolCalls: [{ name: "close", args: { issue: 7 } }] },
        { text: "Done" }
      ])
      expect(toolResults(adapter, 2)).toEqual([{ commentId: 5 }, { closed: true }])
      expect(yield* Ref.get(closed)).toBe(1)
    }))

  it.effect("a third tool with that key does not fail decoding another tool's record: it reads only its own", () =>
    Effect.gen(function*() {
      const store = AI.EffectStore.layerMemory()
      const labelDef = toolDefinition({
        name: "label",
        description: "Labels",
        inputSchema: AI.toolSchema(Schema.Struct({ issue: Schema.Int })),
        outputSchema: AI.toolSchema(Schema.Struct({ labels: Schema.Array(Schema.String) }))
      })
      const comment = AI.effectTool(commentDef, () => Effect.succeed({ commentId: 5 }), sameKey)
      const label = AI.effectTool(labelDef, () => Effect.succeed({ labels: ["bug"] }), sameKey)
      const { adapter } = yield* runWith(store, [comment, label], [
        { toolCalls: [{ name: "comment", args: { issue: 7 } }] },
        { toolCalls: [{ name: "label", args: { issue: 7 } }] },
        { text: "Done" }
      ])
      expect(toolResults(adapter, 2)).toEqual([{ commentId: 5 }, { labels: ["bug"] }])
    }))
})

describe("hardening: inputs no key can be made from", () => {
  const run = { runId: "run-1", threadId: "t", agent: "a", trigger: "t" }
  const context = { run, toolName: "tag", toolCallId: "c" }

  it.effect("a Map or a Set input is an EffectKeyError, not a key shared by every Map", () =>
    Effect.gen(function*() {
      const map = yield* Effect.flip(AI.EffectKey.perRun({ tags: new Map([["a", 1]]) }, context))
      expect(map).toMatchObject({ _tag: "EffectKeyError", path: "$.tags" })
      expect(map.message).toContain("a Map has no JSON form")
      const set = yield* Effect.flip(AI.EffectKey.perRun({ tags: new Set(["a"]) }, context))
      expect(set).toMatchObject({ _tag: "EffectKeyError", path: "$.tags" })
    }))

  it.effect("a class instance with hidden state and no toJSON is an EffectKeyError", () =>
    Effect.gen(function*() {
      class Secretive {
        readonly #state = 42
        get state() {
          return this.#state
        }
      }
      const error = yield* Effect.flip(AI.EffectKey.perRun({ value: new Secretive() }, context))
      expect(error).toMatchObject({ _tag: "EffectKeyError", path: "$.value" })
    }))

  it.effect("an input nested 20,000 levels deep is an EffectKeyError or a key, never a RangeError", () =>
    Effect.gen(function*() {
      let deep: unknown = 1
      for (let i = 0; i < 20_000; i++) deep = { a: deep }
      const key = yield* AI.EffectKey.perRun(deep, context)
      expect(key).toMatch(/^run-1:tag:[0-9a-f]{64}$/)
    }))

  it.effect("an empty effect key is an EffectKeyError and applies nothing", () =>
    Effect.gen(function*() {
      const applied = yield* Ref.make(0)
      const tool = AI.effectTool(commentDef, () => Effect.as(Ref.update(applied, (n) => n + 1), { commentId: 1 }), { effectKey: () => "" })
      const { adapter } = yield* runWith(AI.EffectStore.layerMemory(), [tool], [
        { toolCalls: [{ name: "comment", args: { issue: 1 } }] },
        { text: "Sorry" }
      ])
      expect(toolResults(adapter, 1)).toEqual([{ error: "EffectKeyError: No effect key can be made from the input: the effect key is empty at $" }])
      expect(yield* Ref.get(applied)).toBe(0)
    }))
})

describe("hardening: one bad call, not the whole run", () => {
  const anyDef = toolDefinition({ name: "raw", description: "Returns whatever it makes", inputSchema: AI.toolSchema(Schema.Struct({})) })

  it.effect("an Effect tool's result that is not JSON is a tool error for that call; nothing is recorded and the run goes on", () =>
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
