/**
 * Effect tools against their store, as new users and hostile input met them:
 * a record write that never answers, a store made per request, keys of two
 * tools that collide, and inputs no key can be made from.
 */
import { toolDefinition } from "@tanstack/ai"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { Deferred, Duration, Effect, Fiber, Layer, Logger, Ref, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import { runWith, toolResults, user } from "./support/runs.ts"


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

describe("the record write", () => {
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

describe("the deadline of a store operation", () => {
  const id = { tool: "comment", key: "k-1" }
  /** A memory store whose claim never answers, counting the claims it was asked for and the ones interrupted. */
  const hangingClaims = (timeout: Duration.Input) =>
    Effect.gen(function*() {
      const memory = yield* Effect.service(AI.EffectStore).pipe(Effect.provide(AI.EffectStore.layerMemory()))
      const asked = yield* Deferred.make<void>()
      const interrupted = yield* Ref.make(0)
      const store = yield* AI.EffectStore.make({
        ...memory,
        claim: () => Effect.andThen(Deferred.succeed(asked, undefined), Effect.onInterrupt(Effect.never, () => Ref.update(interrupted, (n) => n + 1)))
      }, { timeout })
      return { store, asked, interrupted }
    })

  it.live("an operation past its deadline fails with reason timeout, and is interrupted before the failure is seen", () =>
    Effect.gen(function*() {
      const { store, interrupted } = yield* hangingClaims("50 millis")
      const error = yield* Effect.flip(store.claim(id, { owner: "a", ttl: Duration.seconds(10) }))
      expect(error).toMatchObject({ _tag: "EffectStoreError", operation: "claim", reason: "timeout" })
      expect(yield* Ref.get(interrupted)).toBe(1)
    }))

  it.live("interrupting the caller interrupts the operation it waits for, and returns once that has ended", () =>
    Effect.gen(function*() {
      const { store, asked, interrupted } = yield* hangingClaims("10 seconds")
      const call = yield* Effect.forkChild(store.claim(id, { owner: "a", ttl: Duration.seconds(10) }))
      yield* Deferred.await(asked)
      yield* Fiber.interrupt(call)
      expect(yield* Ref.get(interrupted)).toBe(1)
    }))

  it.effect("under a TestClock the deadline passes only when the test clock passes it", () =>
    Effect.gen(function*() {
      // An hour: a deadline kept by real timers would outlast the test.
      const { store, asked, interrupted } = yield* hangingClaims("1 hour")
      const call = yield* Effect.forkChild(Effect.flip(store.claim(id, { owner: "a", ttl: Duration.seconds(10) })))
      yield* Deferred.await(asked)
      yield* TestClock.adjust("3599999 millis")
      expect(call.pollUnsafe()).toBeUndefined()
      yield* TestClock.adjust("1 milli")
      expect(yield* Fiber.join(call)).toMatchObject({ operation: "claim", reason: "timeout" })
      expect(yield* Ref.get(interrupted)).toBe(1)
    }))
})

describe("a store made per request", () => {
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

describe("records are scoped by tool", () => {
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

describe("inputs that look alike", () => {
  it.effect("a name typed in NFC and in NFD is one default key: the effect is applied once and the second call replays it", () =>
    Effect.gen(function*() {
      const applied = yield* Ref.make(0)
      const greet = AI.effectTool(
        toolDefinition({
          name: "greet",
          description: "Greets",
          inputSchema: AI.toolSchema(Schema.Struct({ name: Schema.String })),
          outputSchema: AI.toolSchema(Schema.Struct({ greeted: Schema.Boolean }))
        }),
        () => Effect.as(Ref.update(applied, (n) => n + 1), { greeted: true })
      )
      const { chunks } = yield* runWith(AI.EffectStore.layerMemory(), [greet], [
        { toolCalls: [{ name: "greet", args: { name: "Zo\u00eb" } }] },
        { toolCalls: [{ name: "greet", args: { name: "Zoe\u0308" } }] },
        { text: "Done" }
      ])
      expect(yield* Ref.get(applied)).toBe(1)
      const outcomes = chunks.flatMap((chunk) =>
        chunk.type === "CUSTOM" && chunk.name === AI.effectOutcomeEvent ? [(chunk.value as { outcome: string }).outcome] : []
      )
      expect(outcomes).toEqual(["applied", "recorded"])
    }))
})

describe("inputs no key can be made from", () => {
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
