import { chat as coreChat, toolDefinition } from "@tanstack/ai"
import type { StreamChunk } from "@tanstack/ai"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { type ScriptedTextAdapter, scriptedText } from "@tanstack/ai-effect/testing"
import { Data, Deferred, Duration, Effect, Fiber, Latch, Layer, Logger, Metric, Option, Ref, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import { inMemoryTracer } from "./support/tracing.ts"

class PostFailed extends Data.TaggedError("PostFailed")<{ readonly reason: string }> {}

const commentDef = toolDefinition({
  name: "comment",
  description: "Posts a comment on the issue.",
  inputSchema: AI.toolSchema(Schema.Struct({ issue: Schema.Int, body: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ commentId: Schema.Int }))
})

/**
 * A remote issue tracker in memory: the comments it holds, and counters of
 * how often each step of the pipeline reached it.
 */
const makeTracker = Effect.gen(function*() {
  const comments = yield* Ref.make<Array<{ readonly issue: number; readonly body: string }>>([])
  const executed = yield* Ref.make(0)
  const checked = yield* Ref.make(0)
  const post = (issue: number, body: string) =>
    Effect.gen(function*() {
      yield* Ref.update(executed, (n) => n + 1)
      const all = yield* Ref.updateAndGet(comments, (list) => [...list, { issue, body }])
      return { commentId: all.length }
    })
  const find = (key: string, issue: number) =>
    Effect.gen(function*() {
      yield* Ref.update(checked, (n) => n + 1)
      const all = yield* Ref.get(comments)
      const index = all.findIndex((comment) => comment.issue === issue && AI.findEffectMarker(comment.body).includes(key))
      return index === -1 ? Option.none() : Option.some({ commentId: index + 1 })
    })
  return { comments, executed, checked, post, find }
})

type Tracker = Effect.Success<typeof makeTracker>

const commentTool = (tracker: Tracker, options: { readonly reconcile?: boolean } = {}) =>
  AI.effectTool(
    commentDef,
    ({ issue, body }, { key }) => tracker.post(issue, `${body}\n${AI.effectMarker(key)}`),
    options.reconcile === false ? {} : { alreadyApplied: (key, { issue }) => tracker.find(key, issue) }
  )

const run = { runId: "run-1", threadId: "thread-1", agent: "responder", trigger: "test" }

const commentOn = (issue: number, body = "Thanks for the report") => ({ name: "comment", args: { issue, body } })

const user = [{ role: "user" as const, content: "Answer the new issues" }]

/** The tool results the model read on a turn, parsed. */
const toolResultsOf = (adapter: ScriptedTextAdapter, turn: number) =>
  (adapter.turns[turn]?.messages ?? []).flatMap((message) =>
    message.role === "tool" ? [JSON.parse(String(message.content))] : []
  )

/** Runs one chat over the given store and returns the adapter, to read what the model saw. */
const runChat = (
  store: AI.EffectStore["Service"],
  tools: ReadonlyArray<AI.ServerTool.Any>,
  script: ReadonlyArray<Parameters<typeof scriptedText>[0][number]>,
  ids: { readonly runId?: string; readonly threadId?: string } = run
) =>
  Effect.gen(function*() {
    const adapter = scriptedText(script)
    const chunks = yield* AI.chat({ adapter, messages: user, ...ids, tools }).pipe(
      Stream.provideService(AI.EffectStore, store),
      Stream.runCollect
    )
    return { adapter, chunks }
  })

const memoryStore = Effect.flatMap(
  Layer.build(AI.EffectStore.layerMemory()),
  (context) => Effect.succeed(context.mapUnsafe.get(AI.EffectStore.key) as AI.EffectStore["Service"])
)

const withStore = <A, E, R>(f: (store: AI.EffectStore["Service"]) => Effect.Effect<A, E, R>) =>
  Effect.scoped(Effect.flatMap(Effect.service(AI.EffectStore), f).pipe(Effect.provide(AI.EffectStore.layerMemory())))

/** Records an effect as an earlier call would have: claim, then a fenced put. */
const seedRecord = (store: AI.EffectStore["Service"], key: string, recorded: AI.Recorded) =>
  Effect.gen(function*() {
    const id = { tool: "comment", key }
    const claim = yield* store.claim(id, { owner: "earlier-call", ttl: Duration.seconds(30) })
    if (claim._tag !== "Claimed") return yield* Effect.die(`expected to claim ${key}, got ${claim._tag}`)
    yield* store.put(id, recorded, { fence: claim.fence })
  })

const recordOf = (store: AI.EffectStore["Service"], key: string) => store.get({ tool: "comment", key })

/**
 * The store, counting the calls that reached its in-process sharing: a
 * concurrency test opens its gate once every caller has arrived there.
 */
const countingArrivals = (store: AI.EffectStore["Service"], expected: number) =>
  Effect.gen(function*() {
    const arrived = yield* Ref.make(0)
    const allArrived = yield* Latch.make()
    const counting: AI.EffectStore["Service"] = {
      ...store,
      share: (id, effect) =>
        Effect.andThen(
          Effect.flatMap(Ref.updateAndGet(arrived, (n) => n + 1), (n) => n === expected ? allArrived.open : Effect.void),
          store.share(id, effect)
        )
    }
    return { store: counting, allArrived }
  })

const defaultKey = (input: { issue: number; body: string }, runId = run.runId) =>
  AI.EffectKey.perRun(input, { run: { ...run, runId }, toolName: "comment", toolCallId: "" })

describe("effect tools: what happens on every call", () => {
  it.effect("1. a recorded result is returned, and neither alreadyApplied nor execute runs", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
        yield* seedRecord(store, key, { output: { commentId: 41 }, outcome: "applied", recordedAt: 0 })
        const { adapter } = yield* runChat(store, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 41 }])
        expect(yield* Ref.get(tracker.checked)).toBe(0)
        expect(yield* Ref.get(tracker.executed)).toBe(0)
      })
    ))

  it.effect("2. a remote check that finds the effect records and returns its result, and execute does not run", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
        // An earlier attempt posted the comment and crashed before recording it.
        yield* Ref.set(tracker.comments, [{ issue: 7, body: `Thanks\n${AI.effectMarker(key)}` }])
        const { adapter } = yield* runChat(store, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 1 }])
        expect(yield* Ref.get(tracker.executed)).toBe(0)
        expect(yield* recordOf(store, key)).toMatchObject(Option.some({ output: { commentId: 1 }, outcome: "reconciled", recordedAt: 0 }))
      })
    ))

  it.effect("2. a remote check that finds nothing goes on to execute", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        yield* runChat(store, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        expect(yield* Ref.get(tracker.checked)).toBe(1)
        expect(yield* Ref.get(tracker.executed)).toBe(1)
      })
    ))

  it.effect("3. otherwise execute runs and its result is recorded", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const { adapter } = yield* runChat(store, [commentTool(tracker, { reconcile: false })], [
          { toolCalls: [commentOn(7)] },
          { text: "Done" }
        ])
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 1 }])
        const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
        expect(yield* recordOf(store, key)).toMatchObject(Option.some({ output: { commentId: 1 }, outcome: "applied", recordedAt: 0 }))
        const comments = yield* Ref.get(tracker.comments)
        expect(comments.map((comment) => AI.findEffectMarker(comment.body))).toEqual([[key]])
      })
    ))

  const failures = [
    ["execute fails with a typed failure", "execute", Effect.fail(new PostFailed({ reason: "rate limited" })), `PostFailed: {"reason":"rate limited"}`],
    ["execute dies with a defect", "execute", Effect.die(new Error("socket hang up")), "Error: socket hang up"],
    ["alreadyApplied fails with a typed failure", "alreadyApplied", Effect.fail(new PostFailed({ reason: "search down" })), `PostFailed: {"reason":"search down"}`],
    ["alreadyApplied dies with a defect", "alreadyApplied", Effect.die(new TypeError("bad page")), "TypeError: bad page"]
  ] as const

  for (const [name, where, failure, message] of failures) {
    it.effect(`4. when ${name}, nothing is recorded, the model gets a tool error, and a retry still applies the effect`, () =>
      withStore((store) =>
        Effect.gen(function*() {
          const tracker = yield* makeTracker
          const failing = AI.effectTool(
            commentDef,
            (input, call) => where === "execute" ? failure : tracker.post(input.issue, call.key),
            { alreadyApplied: (key, input) => where === "alreadyApplied" ? failure : tracker.find(key, input.issue) }
          )
          const first = yield* runChat(store, [failing], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
          expect(toolResultsOf(first.adapter, 1)).toEqual([{ error: message }])
          const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
          expect(yield* recordOf(store, key)).toEqual(Option.none())

          yield* runChat(store, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
          expect((yield* Ref.get(tracker.comments)).length).toBe(1)
        })
      ))
  }

  it.effect("5. identical calls of one step share one application: one execute, and both callers get its result", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const { adapter } = yield* runChat(store, [commentTool(tracker)], [
          { toolCalls: [commentOn(7), commentOn(7)] },
          { text: "Done" }
        ])
        expect(yield* Ref.get(tracker.executed)).toBe(1)
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 1 }, { commentId: 1 }])
      })
    ))

  it.live("5. concurrent identical callers through wrapToolsForRun share one application", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const executed = yield* Ref.make(0)
        const slow = AI.effectTool(commentDef, () =>
          Effect.gen(function*() {
            yield* Ref.update(executed, (n) => n + 1)
            yield* Deferred.await(gate)
            return { commentId: 99 }
          }))
        const counting = yield* countingArrivals(store, 3)
        const [tool] = yield* AI.wrapToolsForRun([slow]).pipe(
          Effect.provideService(AI.RunContext, run),
          Effect.provideService(AI.EffectStore, counting.store)
        )
        const call = (toolCallId: string) =>
          Effect.promise(() => Promise.resolve(tool!.execute!({ issue: 7, body: "x" }, { toolCallId, emitCustomEvent: () => {} })))
        const callers = yield* Effect.forkChild(Effect.all([call("a"), call("b"), call("c")], { concurrency: "unbounded" }))
        yield* counting.allArrived.await
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(callers)).toEqual([{ commentId: 99 }, { commentId: 99 }, { commentId: 99 }])
        expect(yield* Ref.get(executed)).toBe(1)
      })
    ))

  it.live("5. two concurrent runs in one process with the same key share one application", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const executed = yield* Ref.make(0)
        const slow = AI.effectTool(
          commentDef,
          () =>
            Effect.gen(function*() {
              yield* Ref.update(executed, (n) => n + 1)
              yield* Deferred.await(gate)
              return { commentId: 5 }
            }),
          { effectKey: ({ issue }) => `release:comment:${issue}` }
        )
        const counting = yield* countingArrivals(store, 2)
        const runs = yield* Effect.forkChild(Effect.all([
          runChat(counting.store, [slow], [{ toolCalls: [commentOn(7, "one")] }, { text: "Done" }], { runId: "run-a" }),
          runChat(counting.store, [slow], [{ toolCalls: [commentOn(7, "two")] }, { text: "Done" }], { runId: "run-b" })
        ], { concurrency: 2 }))
        yield* counting.allArrived.await
        yield* Deferred.succeed(gate, undefined)
        const [a, b] = yield* Fiber.join(runs)
        expect(yield* Ref.get(executed)).toBe(1)
        expect(toolResultsOf(a.adapter, 1)).toEqual([{ commentId: 5 }])
        expect(toolResultsOf(b.adapter, 1)).toEqual([{ commentId: 5 }])
      })
    ))

  it.live("5. when the call that applies the effect is interrupted, a waiting identical call takes over and reconciles", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const posted = yield* Deferred.make<void>()
        const attempts = yield* Ref.make(0)
        // The first attempt posts, then hangs before it returns: its run is then interrupted.
        const tool = AI.effectTool(
          commentDef,
          ({ issue, body }, { key }) =>
            Effect.gen(function*() {
              const attempt = yield* Ref.updateAndGet(attempts, (n) => n + 1)
              const comment = yield* tracker.post(issue, `${body}\n${AI.effectMarker(key)}`)
              if (attempt === 1) {
                yield* Deferred.succeed(posted, undefined)
                return yield* Effect.never
              }
              return comment
            }),
          { effectKey: ({ issue }) => `release:comment:${issue}`, alreadyApplied: (key, { issue }) => tracker.find(key, issue) }
        )
        const counting = yield* countingArrivals(store, 2)
        const first = yield* Effect.forkChild(runChat(counting.store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Done" }], { runId: "run-a" }))
        yield* Deferred.await(posted)
        const second = yield* Effect.forkChild(runChat(counting.store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Done" }], { runId: "run-b" }))
        yield* counting.allArrived.await
        expect(yield* Ref.get(attempts)).toBe(1) // the second call waits for the first
        yield* Fiber.interrupt(first)
        const { adapter } = yield* Fiber.join(second)
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 1 }])
        expect(yield* Ref.get(attempts)).toBe(1)
        expect((yield* Ref.get(tracker.comments)).length).toBe(1)
      })
    ))

  it.effect("6. the default key applies the same call with the same input once per run, and again in another run", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const tools = [commentTool(tracker, { reconcile: false })]
        yield* runChat(store, tools, [{ toolCalls: [commentOn(7)] }, { toolCalls: [commentOn(7)] }, { text: "Done" }])
        expect(yield* Ref.get(tracker.executed)).toBe(1)
        yield* runChat(store, tools, [{ toolCalls: [commentOn(7, "Different body")] }, { text: "Done" }])
        expect(yield* Ref.get(tracker.executed)).toBe(2)
        yield* runChat(store, tools, [{ toolCalls: [commentOn(7)] }, { text: "Done" }], { runId: "run-2" })
        expect(yield* Ref.get(tracker.executed)).toBe(3)
      })
    ))

  it.effect("6. a custom key makes one comment per run and issue, whatever the body says", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const perIssue = AI.effectTool(
          commentDef,
          ({ issue, body }, { key }) => tracker.post(issue, `${body}\n${AI.effectMarker(key)}`),
          { effectKey: ({ issue }, { run }) => `${run.runId}:comment:${issue}` }
        )
        const { adapter } = yield* runChat(store, [perIssue], [
          { toolCalls: [commentOn(7, "First answer")] },
          { toolCalls: [commentOn(7, "Second thoughts")] },
          { text: "Done" }
        ])
        expect(yield* Ref.get(tracker.executed)).toBe(1)
        expect(toolResultsOf(adapter, 2)).toEqual([{ commentId: 1 }, { commentId: 1 }])
        expect(AI.findEffectMarker((yield* Ref.get(tracker.comments))[0]!.body)).toEqual(["run-1:comment:7"])
      })
    ))

  it.effect("6. an input a key cannot be made from is a tool error naming the path, and nothing runs", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const withTotal = AI.effectTool(
          commentDef,
          ({ issue, body }) => tracker.post(issue, body),
          { effectKey: (input, context) => AI.EffectKey.perRun({ ...input, total: 10n }, context) }
        )
        const { adapter } = yield* runChat(store, [withTotal], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
        expect(toolResultsOf(adapter, 1)).toEqual([{
          error: "EffectKeyError: No effect key can be made from the input: a BigInt has no JSON form at $.total"
        }])
        expect(yield* Ref.get(tracker.executed)).toBe(0)
      })
    ))

  it.effect("7. when recording fails after the effect, the call succeeds, a warning with the key is logged, and alreadyApplied guards the retry", () =>
    Effect.gen(function*() {
      const tracker = yield* makeTracker
      const memory = yield* memoryStore
      const writable = yield* Ref.make(false)
      const store = yield* AI.EffectStore.make({
        ...memory,
        put: (id, recorded, options) =>
          Effect.flatMap(Ref.get(writable), (ok) =>
            ok
              ? memory.put(id, recorded, options)
              : Effect.fail(new AI.EffectStoreError({ operation: "put", ...id, reason: "unavailable", cause: new Error("disk full") })))
      })
      const logs: Array<{ level: string; message: unknown; annotations: Record<string, unknown> }> = []
      const captured = Logger.make((options) => {
        const entry = Logger.formatStructured.log(options)
        logs.push({ level: entry.level, message: entry.message, annotations: entry.annotations })
      })
      const first = yield* runChat(store, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { text: "Done" }]).pipe(
        Effect.provide(Logger.layer([captured]))
      )
      expect(toolResultsOf(first.adapter, 1)).toEqual([{ commentId: 1 }])
      const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
      const warning = logs.find((log) => log.level === "WARN")
      expect(warning?.annotations).toMatchObject({ effectKey: key, tool: "comment" })
      expect(String(warning?.message)).toContain("could not be written")

      yield* Ref.set(writable, true)
      const retry = yield* runChat(store, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
      expect(toolResultsOf(retry.adapter, 1)).toEqual([{ commentId: 1 }])
      expect((yield* Ref.get(tracker.comments)).length).toBe(1)
      expect(yield* recordOf(store, key)).toMatchObject(Option.some({ outcome: "reconciled" }))
    }).pipe(Effect.scoped))

  it.effect("the warning for an unrecorded effect shows a 100 KB key bounded and the cause's message, without a stack trace", () =>
    Effect.gen(function*() {
      const memory = yield* memoryStore
      const store = yield* AI.EffectStore.make({
        ...memory,
        put: (id) => Effect.fail(new AI.EffectStoreError({ operation: "put", ...id, reason: "unavailable", cause: new Error("disk full") }))
      })
      const longKey = "k".repeat(100_000)
      const tool = AI.effectTool(commentDef, () => Effect.succeed({ commentId: 1 }), { effectKey: () => longKey })
      const logs: Array<{ level: string; message: unknown; annotations: Record<string, unknown> }> = []
      const captured = Logger.make((options) => {
        const entry = Logger.formatStructured.log(options)
        logs.push({ level: entry.level, message: entry.message, annotations: entry.annotations })
      })
      yield* runChat(store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Done" }]).pipe(Effect.provide(Logger.layer([captured])))
      const warning = logs.find((log) => log.level === "WARN")!
      expect(String(warning.annotations.effectKey)).toBe(`${"k".repeat(100)}… (100000 characters)`)
      expect(String(warning.message)).toContain("EffectStore put failed for")
      expect(String(warning.message)).toContain("disk full")
      expect(String(warning.message).length).toBeLessThan(500)
      expect(JSON.stringify(warning)).not.toMatch(/\n\s+at /)
    }).pipe(Effect.scoped))

  it.effect("8. when the store cannot be read, the call fails closed: a tool error, and execute does not run", () =>
    Effect.gen(function*() {
      const tracker = yield* makeTracker
      const memory = yield* memoryStore
      const down = yield* AI.EffectStore.make({
        ...memory,
        claim: (id) => Effect.fail(new AI.EffectStoreError({ operation: "claim", ...id, reason: "unavailable", cause: new Error("connection refused") }))
      })
      const { adapter } = yield* runChat(down, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
      const [result] = toolResultsOf(adapter, 1)
      expect(result.error).toMatch(/^EffectStoreError: EffectStore claim failed for run-1:comment:[0-9a-f]{64} \(tool comment\): connection refused$/)
      expect(yield* Ref.get(tracker.checked)).toBe(0)
      expect(yield* Ref.get(tracker.executed)).toBe(0)
    }))

  it.effect("8. a record the output schema cannot decode fails closed too", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
        yield* seedRecord(store, key, { output: { commentId: "not a number" }, outcome: "applied", recordedAt: 0 })
        const { adapter } = yield* runChat(store, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
        expect(toolResultsOf(adapter, 1)[0].error).toContain("EffectStoreError")
        expect(yield* Ref.get(tracker.executed)).toBe(0)
      })
    ))

  it.effect("9. a streaming execute records its last element, and a replay returns it without running the stream again", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const pulled = yield* Ref.make(0)
        const pushing = AI.effectTool(commentDef, () =>
          Stream.make({ commentId: 1 }, { commentId: 2 }, { commentId: 3 }).pipe(
            Stream.tap(() => Ref.update(pulled, (n) => n + 1))
          ))
        const first = yield* runChat(store, [pushing], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        const progress = first.chunks.filter((chunk: StreamChunk) => chunk.type === "CUSTOM" && chunk.name === AI.toolProgressEvent)
        expect(progress).toHaveLength(3)
        expect(toolResultsOf(first.adapter, 1)).toEqual([{ commentId: 3 }])
        const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
        expect(yield* recordOf(store, key)).toMatchObject(Option.some({ output: { commentId: 3 } }))

        const replay = yield* runChat(store, [pushing], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        expect(toolResultsOf(replay.adapter, 1)).toEqual([{ commentId: 3 }])
        expect(yield* Ref.get(pulled)).toBe(3)
      })
    ))

  it.live("10. interrupted while execute runs: finalizers run, nothing is recorded, and a retry reconciles through alreadyApplied", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const posted = yield* Deferred.make<void>()
        const events: Array<string> = []
        // Posts the comment, then hangs before returning: the crash window.
        const hanging = AI.effectTool(
          commentDef,
          ({ issue, body }, { key }) =>
            Effect.acquireRelease(Effect.sync(() => events.push("open")), () => Effect.sync(() => events.push("close"))).pipe(
              Effect.andThen(tracker.post(issue, `${body}\n${AI.effectMarker(key)}`)),
              Effect.andThen(Deferred.succeed(posted, undefined)),
              Effect.andThen(Effect.never),
              Effect.scoped
            ),
          { alreadyApplied: (key, { issue }) => tracker.find(key, issue) }
        )
        const crashed = yield* Effect.forkChild(runChat(store, [hanging], [{ toolCalls: [commentOn(7)] }, { text: "Done" }]))
        yield* Deferred.await(posted)
        yield* Fiber.interrupt(crashed)
        expect(events).toEqual(["open", "close"])
        const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
        expect(yield* recordOf(store, key)).toEqual(Option.none())

        const retry = yield* runChat(store, [hanging], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        expect(toolResultsOf(retry.adapter, 1)).toEqual([{ commentId: 1 }])
        expect((yield* Ref.get(tracker.comments)).length).toBe(1)
        expect(yield* recordOf(store, key)).toMatchObject(Option.some({ outcome: "reconciled" }))
      })
    ))
})

describe("effect tools when the run stops after the effect", () => {
  it.live("a run interrupted while the record is being written waits for the record", () =>
    Effect.gen(function*() {
      const tracker = yield* makeTracker
      const memory = yield* memoryStore
      const writing = yield* Deferred.make<void>()
      const slowDisk = yield* Deferred.make<void>()
      const store = yield* AI.EffectStore.make({
        ...memory,
        put: (id, recorded, options) =>
          Deferred.succeed(writing, undefined).pipe(Effect.andThen(Deferred.await(slowDisk)), Effect.andThen(memory.put(id, recorded, options)))
      })
      const running = yield* Effect.forkChild(runChat(store, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { text: "Done" }]))
      yield* Deferred.await(writing)
      const stopping = yield* Effect.forkChild(Fiber.interrupt(running))
      yield* Deferred.succeed(slowDisk, undefined)
      yield* Fiber.join(stopping)
      const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
      expect(yield* recordOf(memory, key)).toMatchObject(Option.some({ outcome: "applied", output: { commentId: 1 } }))
    }).pipe(Effect.scoped))
})

describe("effect tools beyond the seed", () => {
  it.effect("perToolCall: a resubmitted request with a new run id does not apply the call of its history again", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const perCall = AI.effectTool(commentDef, ({ issue, body }) => tracker.post(issue, body), {
          effectKey: AI.EffectKey.perToolCall
        })
        const first = yield* runChat(store, [perCall], [{ toolCalls: [{ ...commentOn(7), id: "call_7" }] }, { text: "Done" }], {
          runId: "run-1",
          threadId: "thread-9"
        })
        // The client resubmits the conversation up to the tool call, without its
        // result, in a new run: core executes that call again before the model.
        const history = [
          ...user,
          { role: "assistant" as const, content: null, toolCalls: [{ id: "call_7", type: "function" as const, function: { name: "comment", arguments: JSON.stringify({ issue: 7, body: "Thanks for the report" }) } }] }
        ]
        const adapter = scriptedText([{ text: "Done again" }])
        yield* AI.chat({ adapter, messages: history, runId: "run-2", threadId: "thread-9", tools: [perCall] }).pipe(
          Stream.provideService(AI.EffectStore, store),
          Stream.runDrain
        )
        expect(toolResultsOf(first.adapter, 1)).toEqual([{ commentId: 1 }])
        expect(toolResultsOf(adapter, 0)).toEqual([{ commentId: 1 }])
        expect(yield* Ref.get(tracker.executed)).toBe(1)
      })
    ))

  it.effect("the default key applies that resubmitted call again, since its run id is new", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const perRun = AI.effectTool(commentDef, ({ issue, body }) => tracker.post(issue, body))
        const history = [
          ...user,
          { role: "assistant" as const, content: null, toolCalls: [{ id: "call_7", type: "function" as const, function: { name: "comment", arguments: JSON.stringify({ issue: 7, body: "x" }) } }] }
        ]
        for (const runId of ["run-1", "run-2"]) {
          yield* AI.chat({ adapter: scriptedText([{ text: "Done" }]), messages: history, runId, threadId: "thread-9", tools: [perRun] }).pipe(
            Stream.provideService(AI.EffectStore, store),
            Stream.runDrain
          )
        }
        expect(yield* Ref.get(tracker.executed)).toBe(2)
      })
    ))

  it.effect("a Remote reconciler is a service supplied by a Layer, and its requirement joins the tool's", () =>
    withStore((store) =>
      Effect.gen(function*() {
        class CommentExists extends AI.Remote<CommentExists, { readonly issue: number; readonly body: string }, { readonly commentId: number }>()(
          "test/CommentExists"
        ) {}
        const tracker = yield* makeTracker
        const tool = AI.effectTool(commentDef, ({ issue, body }) => tracker.post(issue, body), { alreadyApplied: CommentExists })
        const found = Layer.succeed(CommentExists, { alreadyApplied: () => Effect.succeed(Option.some({ commentId: 77 })) })
        const adapter = scriptedText([{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        yield* AI.chat({ adapter, messages: user, tools: [tool] }).pipe(
          Stream.provide(found),
          Stream.provideService(AI.EffectStore, store),
          Stream.runDrain
        )
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 77 }])
        expect(yield* Ref.get(tracker.executed)).toBe(0)
      })
    ))

  it.effect("wrapToolsForRun passes tools that are not server tools through unchanged", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const plain = toolDefinition({ name: "plain", description: "A core tool", inputSchema: AI.toolSchema(Schema.Struct({})) })
          .server(async () => "ok")
        const definitionOnly = toolDefinition({ name: "client_side", description: "A client tool" })
        const wrapped = yield* AI.wrapToolsForRun([plain, definitionOnly, commentTool(tracker)]).pipe(
          Effect.provideService(AI.RunContext, run),
          Effect.provideService(AI.EffectStore, store)
        )
        expect(wrapped[0]).toBe(plain)
        expect(wrapped[1]).toBe(definitionOnly)
        expect(wrapped[2]).toMatchObject({ __toolSide: "server", name: "comment" })
      })
    ).pipe(Effect.scoped))

  it.live("wrapToolsForRun's tools run in core chat() outside AI.chat", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const adapter = scriptedText([{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        const tools = yield* AI.wrapToolsForRun([commentTool(tracker)]).pipe(
          Effect.provideService(AI.RunContext, run),
          Effect.provideService(AI.EffectStore, store)
        )
        yield* Effect.promise(() => Array.fromAsync(coreChat({ adapter, messages: user, tools, runId: run.runId, threadId: run.threadId })))
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 1 }])
      })
    ).pipe(Effect.scoped))

  it.effect("each call runs in a span named after the tool, with the key and the outcome, and is counted by outcome", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const { spans, tracer } = inMemoryTracer()
        const tracker = yield* makeTracker
        const counter = (outcome: AI.Outcome) =>
          Metric.value(Metric.withAttributes(AI.effectToolCalls, { tool: "comment", outcome }))
        const before = { applied: (yield* counter("applied")).count, recorded: (yield* counter("recorded")).count }
        yield* runChat(store, [commentTool(tracker)], [{ toolCalls: [commentOn(7)] }, { toolCalls: [commentOn(7)] }, { text: "Done" }])
          .pipe(Effect.withTracer(tracer))
        const toolSpans = spans.filter((span) => span.name === "AI.tool comment")
        expect(toolSpans.map((span) => span.attributes.get("effect.outcome"))).toEqual(["applied", "recorded"])
        const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
        expect(toolSpans.map((span) => span.attributes.get("effect.key"))).toEqual([key, key])
        expect((yield* counter("applied")).count - before.applied).toBe(1)
        expect((yield* counter("recorded")).count - before.recorded).toBe(1)
      })
    ))
})

describe("EffectStore.layerMemory", () => {
  const recorded = (n: number): AI.Recorded => ({ output: n, outcome: "applied", recordedAt: 0 })

  it.effect("keeps at most its capacity, dropping the oldest records first", () =>
    Effect.gen(function*() {
      const store = yield* AI.EffectStore
      for (const key of ["a", "b", "c"]) yield* seedRecord(store, key, recorded(1))
      expect(yield* recordOf(store, "a")).toEqual(Option.none())
      expect(Option.isSome(yield* recordOf(store, "b"))).toBe(true)
      expect(Option.isSome(yield* recordOf(store, "c"))).toBe(true)
    }).pipe(Effect.provide(AI.EffectStore.layerMemory({ capacity: 2 }))))

  it.effect("forgets a record once its retention has passed", () =>
    Effect.gen(function*() {
      const store = yield* AI.EffectStore
      yield* seedRecord(store, "k", recorded(1))
      yield* TestClock.adjust("59 minutes")
      expect(Option.isSome(yield* recordOf(store, "k"))).toBe(true)
      yield* TestClock.adjust("2 minutes")
      expect(yield* recordOf(store, "k")).toEqual(Option.none())
    }).pipe(Effect.provide(AI.EffectStore.layerMemory({ retention: "1 hour" }))))

  it("rejects a capacity that is not a positive integer when the layer is defined", () => {
    for (const capacity of [0, -1, Number.NaN, 1.5]) {
      expect(() => AI.EffectStore.layerMemory({ capacity })).toThrow(/capacity must be a positive integer/)
    }
  })

  it.effect("after 5,000 evictions at capacity, each put still evicts exactly the oldest record", () =>
    Effect.gen(function*() {
      const store = yield* AI.EffectStore
      // Many evictions leave deleted slots at the front of the Map; each put still evicts exactly the oldest.
      for (let i = 0; i < 5_000; i++) yield* seedRecord(store, `k${i}`, recorded(i))
      expect(yield* recordOf(store, "k4899")).toEqual(Option.none())
      expect(yield* recordOf(store, "k4900")).toMatchObject(Option.some({ output: 4900 }))
    }).pipe(Effect.provide(AI.EffectStore.layerMemory({ capacity: 100 }))))
})

describe("effect tools on claims", () => {
  it.live("a long execute keeps its lease: past the lease, another owner still finds the key busy", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const started = yield* Deferred.make<void>()
        const finish = yield* Deferred.make<void>()
        const slow = AI.effectTool(
          commentDef,
          () => Deferred.succeed(started, undefined).pipe(Effect.andThen(Deferred.await(finish)), Effect.as({ commentId: 1 })),
          { effectKey: ({ issue }) => `lease:${issue}`, lease: "150 millis" }
        )
        const running = yield* Effect.forkChild(runChat(store, [slow], [{ toolCalls: [commentOn(7)] }, { text: "Done" }]))
        yield* Deferred.await(started)
        // Three leases pass while execute runs; its renewals keep the claim.
        yield* Effect.sleep("450 millis")
        const other = yield* store.claim({ tool: "comment", key: "lease:7" }, { owner: "other", ttl: Duration.seconds(1) })
        expect(other._tag).toBe("Busy")
        yield* Deferred.succeed(finish, undefined)
        const { adapter } = yield* Fiber.join(running)
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 1 }])
      })
    ))

  it.live("when a renewal finds the claim lost, execute is interrupted and the call fails with EffectTakenOver: its effect may have been applied", () =>
    Effect.gen(function*() {
      const memory = yield* memoryStore
      const store = yield* AI.EffectStore.make({
        ...memory,
        renew: (id, { fence }) => Effect.fail(new AI.ClaimLost({ ...id, fence }))
      })
      const interrupted = yield* Deferred.make<void>()
      const slow = AI.effectTool(
        commentDef,
        () => Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))),
        { effectKey: ({ issue }) => `lost:${issue}`, lease: "60 millis" }
      )
      const { adapter } = yield* runChat(store, [slow], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
      expect(toolResultsOf(adapter, 1)[0].error).toMatch(/^EffectTakenOver: The effect lost:7 of tool comment may have been applied by this call \(fence 1\)/)
      expect(yield* Deferred.isDone(interrupted)).toBe(true)
    }).pipe(Effect.scoped))

  it.live("an owner whose renewals fail stops before its lease may lapse: execute is interrupted, and the call fails with EffectTakenOver", () =>
    Effect.gen(function*() {
      const memory = yield* memoryStore
      const store = yield* AI.EffectStore.make({
        ...memory,
        renew: (id) => Effect.fail(new AI.EffectStoreError({ operation: "renew", ...id, reason: "unavailable", cause: "connection refused" }))
      })
      const interrupted = yield* Deferred.make<void>()
      const slow = AI.effectTool(
        commentDef,
        () => Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))),
        { effectKey: ({ issue }) => `unrenewed:${issue}`, lease: "150 millis" }
      )
      const { adapter } = yield* runChat(store, [slow], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
      expect(toolResultsOf(adapter, 1)[0].error).toMatch(/^EffectTakenOver: The effect unrenewed:7 of tool comment may have been applied/)
      expect(yield* Deferred.isDone(interrupted)).toBe(true)
    }).pipe(Effect.scoped))

  /** A tool without alreadyApplied whose execute posts the comment, then ends as `after` says. */
  const postingThen = <E>(
    tracker: Tracker,
    key: string,
    after: Effect.Effect<{ readonly commentId: number }, E>,
    posted?: Deferred.Deferred<void>
  ) =>
    AI.effectTool(
      commentDef,
      ({ issue, body }) =>
        tracker.post(issue, body).pipe(
          Effect.andThen(posted === undefined ? Effect.void : Deferred.succeed(posted, undefined)),
          Effect.andThen(after)
        ),
      { effectKey: () => key }
    )

  it.live("a run stopped while execute runs leaves its effect in doubt: the next caller fails with EffectInDoubt instead of applying again", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const posted = yield* Deferred.make<void>()
        const stopped = yield* Effect.forkChild(
          runChat(store, [postingThen(tracker, "stop:7", Effect.never, posted)], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        )
        yield* Deferred.await(posted)
        yield* Fiber.interrupt(stopped)
        const retry = yield* runChat(store, [postingThen(tracker, "stop:7", Effect.never)], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
        expect(toolResultsOf(retry.adapter, 1)[0].error).toMatch(/^EffectInDoubt: /)
        expect((yield* Ref.get(tracker.comments)).length).toBe(1)
      })
    ))

  it.effect("a defect in execute leaves its effect in doubt too, and the call's outcome says in-doubt", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const tool = postingThen(tracker, "defect:7", Effect.die(new Error("socket hang up")))
        const first = yield* runChat(store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
        expect(toolResultsOf(first.adapter, 1)).toEqual([{ error: "Error: socket hang up" }])
        const retry = yield* runChat(store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
        expect(toolResultsOf(retry.adapter, 1)[0].error).toMatch(/^EffectInDoubt: /)
        expect((yield* Ref.get(tracker.comments)).length).toBe(1)
      })
    ))

  it.effect("a typed failure of execute releases the claim: the tool says nothing happened, so the next caller applies", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const refusing = AI.effectTool(commentDef, () => Effect.fail(new PostFailed({ reason: "rate limited" })), {
          effectKey: () => "typed:7"
        })
        yield* runChat(store, [refusing], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
        const retry = yield* runChat(store, [postingThen(tracker, "typed:7", Effect.succeed({ commentId: 1 }))], [
          { toolCalls: [commentOn(7)] },
          { text: "Done" }
        ])
        expect(toolResultsOf(retry.adapter, 1)).toEqual([{ commentId: 1 }])
        expect((yield* Ref.get(tracker.comments)).length).toBe(1)
      })
    ))

  it.live("a run stopped during the remote check releases the claim: nothing was applied, and the key is free without doubt", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const checking = yield* Deferred.make<void>()
        const tool = AI.effectTool(commentDef, () => Effect.succeed({ commentId: 1 }), {
          effectKey: () => "check-stop:7",
          alreadyApplied: () => Deferred.succeed(checking, undefined).pipe(Effect.andThen(Effect.never))
        })
        const stopped = yield* Effect.forkChild(runChat(store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Done" }]))
        yield* Deferred.await(checking)
        yield* Fiber.interrupt(stopped)
        const next = yield* store.claim({ tool: "comment", key: "check-stop:7" }, { owner: "next", ttl: Duration.seconds(1) })
        expect(next).toEqual(AI.Claim.Claimed({ fence: 2, takenOver: false }))
      })
    ))

  it.live("a slow alreadyApplied keeps the lease: past the lease, another owner still finds the key busy", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const checking = yield* Deferred.make<void>()
        const answer = yield* Deferred.make<Option.Option<{ commentId: number }>>()
        const tool = AI.effectTool(commentDef, () => Effect.succeed({ commentId: 1 }), {
          effectKey: () => "slow-check:7",
          lease: "150 millis",
          alreadyApplied: () => Deferred.succeed(checking, undefined).pipe(Effect.andThen(Deferred.await(answer)))
        })
        const running = yield* Effect.forkChild(runChat(store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Done" }]))
        yield* Deferred.await(checking)
        // Three leases pass while the owner checks the remote; its renewals keep the claim.
        yield* Effect.sleep("450 millis")
        const other = yield* store.claim({ tool: "comment", key: "slow-check:7" }, { owner: "other", ttl: Duration.seconds(1) })
        expect(other._tag).toBe("Busy")
        yield* Deferred.succeed(answer, Option.some({ commentId: 9 }))
        const { adapter } = yield* Fiber.join(running)
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 9 }])
      })
    ))

  it.live("alreadyApplied past checkTimeout fails closed with EffectCheckTimeout, applies nothing and releases the claim", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const tool = AI.effectTool(commentDef, ({ issue, body }) => tracker.post(issue, body), {
          effectKey: () => "check-timeout:7",
          checkTimeout: "50 millis",
          alreadyApplied: () => Effect.never
        })
        const { adapter } = yield* runChat(store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
        expect(toolResultsOf(adapter, 1)[0].error).toMatch(/^EffectCheckTimeout: alreadyApplied did not answer within 50 ms/)
        expect(yield* Ref.get(tracker.executed)).toBe(0)
        const next = yield* store.claim({ tool: "comment", key: "check-timeout:7" }, { owner: "next", ttl: Duration.seconds(1) })
        expect(next).toEqual(AI.Claim.Claimed({ fence: 2, takenOver: false }))
      })
    ))

  it.effect("execute gets its claim's fence, greater for an owner that took the key over", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const fences: Array<number> = []
        const tool = AI.effectTool(commentDef, (_, { fence }) => Effect.sync(() => fences.push(fence)).pipe(Effect.as({ commentId: 1 })), {
          effectKey: ({ issue }) => `fence:${issue}`,
          inDoubt: "reapply"
        })
        yield* runChat(store, [tool], [{ toolCalls: [commentOn(1)] }, { text: "Done" }])
        yield* crashedClaim(store, "fence:2")
        yield* runChat(store, [tool], [{ toolCalls: [commentOn(2)] }, { text: "Done" }])
        expect(fences).toEqual([1, 2])
      })
    ))

  it.effect("a late owner whose record is refused fails with EffectTakenOver, and its span and counter say in-doubt", () =>
    Effect.gen(function*() {
      const { tracer, spans } = inMemoryTracer()
      const memory = yield* memoryStore
      const store = yield* AI.EffectStore.make({
        ...memory,
        // Another owner took the key over while this one applied the effect.
        put: (id, _, { fence }) => Effect.fail(new AI.ClaimLost({ ...id, fence }))
      })
      const tracker = yield* makeTracker
      const inDoubt = Metric.value(Metric.withAttributes(AI.effectToolCalls, { tool: "comment", outcome: "in-doubt" }))
      const before = (yield* inDoubt).count
      const { adapter } = yield* runChat(store, [postingThen(tracker, "late:7", Effect.succeed({ commentId: 1 }))], [
        { toolCalls: [commentOn(7)] },
        { text: "Sorry" }
      ]).pipe(Effect.withTracer(tracer))
      expect(toolResultsOf(adapter, 1)[0].error).toMatch(/^EffectTakenOver: .* may have been applied by this call \(fence 1\)/)
      expect(spans.find((span) => span.name === "AI.tool comment")?.attributes.get("effect.outcome")).toBe("in-doubt")
      expect((yield* inDoubt).count - before).toBe(1)
      expect((yield* Ref.get(tracker.comments)).length).toBe(1)
    }).pipe(Effect.scoped))

  const crashedClaim = (store: AI.EffectStore["Service"], key: string) =>
    // An owner that claimed the key and vanished: its lease has already ended.
    store.claim({ tool: "comment", key }, { owner: "crashed", ttl: Duration.zero })

  it.effect("an expired claim of a crashed owner, without alreadyApplied, fails with EffectInDoubt and runs nothing", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const tool = AI.effectTool(commentDef, ({ issue, body }) => tracker.post(issue, body), { effectKey: ({ issue }) => `doubt:${issue}` })
        yield* crashedClaim(store, "doubt:7")
        const { adapter } = yield* runChat(store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Sorry" }])
        expect(toolResultsOf(adapter, 1)[0].error).toMatch(/^EffectInDoubt: /)
        expect(yield* Ref.get(tracker.executed)).toBe(0)
      })
    ))

  it.effect("inDoubt: \"reapply\" applies an effect in doubt again, by the tool's own choice", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const tool = AI.effectTool(commentDef, ({ issue, body }) => tracker.post(issue, body), {
          effectKey: ({ issue }) => `reapply:${issue}`,
          inDoubt: "reapply"
        })
        yield* crashedClaim(store, "reapply:7")
        const { adapter } = yield* runChat(store, [tool], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 1 }])
        expect(yield* Ref.get(tracker.executed)).toBe(1)
      })
    ))
})

describe("effect tools: key reuse", () => {
  it.effect("onKeyReuse: \"fail\": a call whose key is recorded for another input fails with EffectKeyReused, naming the key, and nothing runs", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const strict = AI.effectTool(
          commentDef,
          ({ issue, body }) => tracker.post(issue, body),
          { effectKey: ({ issue }, { run }) => `${run.runId}:comment:${issue}`, onKeyReuse: "fail" }
        )
        const { adapter } = yield* runChat(store, [strict], [
          { toolCalls: [commentOn(7, "First answer")] },
          { toolCalls: [commentOn(7, "First answer")] },
          { toolCalls: [commentOn(7, "Another body")] },
          { text: "Done" }
        ])
        expect(toolResultsOf(adapter, 1)).toEqual([{ commentId: 1 }])
        // The same input replays; another input under the same key is refused.
        expect(toolResultsOf(adapter, 2)).toEqual([{ commentId: 1 }, { commentId: 1 }])
        expect(toolResultsOf(adapter, 3).at(-1)).toEqual({
          error: "EffectKeyReused: The effect key run-1:comment:7 of tool comment is recorded for another input"
        })
        expect(yield* Ref.get(tracker.executed)).toBe(1)
      })
    ))

  it.effect("each record keeps the SHA-256 of its canonical input", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        yield* runChat(store, [commentTool(tracker, { reconcile: false })], [{ toolCalls: [commentOn(7)] }, { text: "Done" }])
        const input = { issue: 7, body: "Thanks for the report" }
        const key = yield* defaultKey(input)
        const fingerprint = yield* AI.EffectKey.fingerprint(input)
        expect(yield* recordOf(store, key)).toMatchObject(Option.some({ fingerprint }))
        expect(key.endsWith(fingerprint)).toBe(true)
      })
    ))
})

describe("effect tools tell the client how a call was answered", () => {
  it.effect("each call sends an effect-outcome event with the tool, a digest of the key and the outcome", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const { chunks } = yield* runChat(store, [commentTool(tracker)], [
          { toolCalls: [commentOn(7)] },
          { toolCalls: [commentOn(7)] },
          { text: "Done" }
        ])
        const key = yield* defaultKey({ issue: 7, body: "Thanks for the report" })
        const outcomes = chunks.flatMap((chunk: StreamChunk) =>
          chunk.type === "CUSTOM" && chunk.name === AI.effectOutcomeEvent ? [chunk.value] : []
        )
        const keyDigest = (yield* AI.EffectKey.sha256Hex(key)).slice(0, 16)
        expect(outcomes).toEqual([
          { toolName: "comment", keyDigest, outcome: "applied", toolCallId: "call_0_0" },
          { toolName: "comment", keyDigest, outcome: "recorded", toolCallId: "call_1_0" }
        ])
      })
    ))

  it.effect("a key built from 1 MB of input reaches the client as a 16-digit digest; with exposeKey the client gets the key", () =>
    withStore((store) =>
      Effect.gen(function*() {
        const tracker = yield* makeTracker
        const secretive = AI.effectTool(commentDef, ({ issue, body }) => tracker.post(issue, body), { effectKey: ({ body }) => `comment:${body}` })
        const body = "x".repeat(1_000_000)
        const { chunks } = yield* runChat(store, [secretive], [{ toolCalls: [commentOn(7, body)] }, { text: "Done" }])
        const [event] = chunks.flatMap((chunk: StreamChunk) => chunk.type === "CUSTOM" && chunk.name === AI.effectOutcomeEvent ? [chunk.value] : [])
        expect(event).toEqual({ toolName: "comment", keyDigest: expect.stringMatching(/^[0-9a-f]{16}$/), outcome: "applied", toolCallId: "call_0_0" })
        expect(JSON.stringify(event).length).toBeLessThan(200)

        const exposed = AI.effectTool(commentDef, ({ issue }) => tracker.post(issue, "short"), { effectKey: ({ issue }) => `comment:${issue}`, exposeKey: true })
        const second = yield* runChat(store, [exposed], [{ toolCalls: [commentOn(8)] }, { text: "Done" }])
        expect(second.chunks.flatMap((chunk: StreamChunk) => chunk.type === "CUSTOM" && chunk.name === AI.effectOutcomeEvent ? [chunk.value] : []))
          .toEqual([{ toolName: "comment", key: "comment:8", outcome: "applied", toolCallId: "call_0_0" }])
      })
    ))
})
