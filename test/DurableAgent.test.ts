/**
 * Durable agent runs in one process, on the memory engine: a run completes
 * and replays what it finished, streams its chunks, waits for approvals any
 * caller can list and answer once, refuses a second input under its id,
 * retries a failing model turn, and is tried again under its id after it
 * failed, without asking a finished turn again. The PostgreSQL engine and
 * crashes are test/e2e/DurableAgent.test.ts's.
 */
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
import { fakeOpenAI, type FakeReply, type ResponsesRequest, scriptedText } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Deferred, Effect, Exit, Layer, Option, Ref, Schedule, Scope, Stream } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { inMemoryTracer } from "./support/tracing.ts"
import { asked, completes, makeGatedRefundAgent, makeOrdersAgent, makeRefundAgent, makeStuckAgent, ordersModel, refundModel, requestsPerTurn, stateOf, user } from "./support/durable.ts"

describe("a durable run in one process", () => {
  it.live("3 turns with 2 tool calls, one an effect tool, complete on the memory engine; the same run id returns the result and requests nothing", () =>
    completes(DurableEngine.layerMemory))

  it.live("stream gives the run's chunks while it runs: each turn's text and tool calls, a tool's progress, a TOOL_CALL_RESULT per call, and it ends with the run", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(ordersModel())
      const applied = yield* Ref.make(0)
      const agent = makeOrdersAgent(model.baseURL, applied)
      const chunks = yield* agent.stream({ runId: "run-stream", messages: user }).pipe(
        Stream.runCollect,
        Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory), Layer.provide(AI.EffectStore.layerMemory())))
      )
      expect(chunks.filter((chunk) => chunk.type === "RUN_FINISHED")).toHaveLength(3)
      // The tool's progress, live and before its result, as AI.chat sends it.
      const progress = chunks.findIndex((chunk) => chunk.type === "CUSTOM" && chunk.name === AI.toolProgressEvent)
      expect(chunks[progress]).toMatchObject({ value: { toolName: "get_order", progress: { status: "looking" }, toolCallId: "call_lookup" } })
      expect(progress).toBeLessThan(chunks.findIndex((chunk) => chunk.type === "TOOL_CALL_RESULT"))
      expect(chunks.flatMap((chunk) => chunk.type === "TOOL_CALL_RESULT" ? [[chunk.toolCallId, chunk.content]] : [])).toEqual([
        ["call_lookup", JSON.stringify({ status: "shipped" })],
        ["call_notify", JSON.stringify({ sent: 1 })]
      ])
      expect(chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : []).join("")).toBe("A-100 has shipped, and ada knows.")
      // The tools run in the run's steps, not on the client: core's client notices stay out.
      expect(chunks.some((chunk) => chunk.type === "MESSAGES_SNAPSHOT" || (chunk.type === "CUSTOM" && chunk.name === "tool-input-available"))).toBe(false)
    }).pipe(Effect.scoped))

  it.live("runs streamed at once in one process: each stream has its own run's text, in order, and ends with its own run", () =>
    Effect.gen(function*() {
      // Each run asks its own question; the model answers it in three deltas.
      const model = yield* fakeOpenAI((request) => {
        const question = /question (\d+)/.exec(JSON.stringify(request.input))?.[1]
        return { text: ["answer ", "to question ", `${question}`] }
      })
      const agent = DurableAgent.make(AI.defineAgent({
        name: "echo",
        adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL: model.baseURL, maxRetries: 0 }),
        instructions: "Answer the question.",
        tools: []
      }))
      const runs = Array.from({ length: 20 }, (_, index) => index)
      const streamed = yield* Effect.forEach(runs, (index) =>
        agent.stream({ runId: `run-at-once-${index}`, messages: [{ role: "user", content: `question ${index}` }] }).pipe(
          Stream.runCollect,
          Effect.map((chunks) => ({
            text: chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : []).join(""),
            runs: chunks.filter((chunk) => chunk.type === "RUN_FINISHED").length
          }))
        ), { concurrency: "unbounded" }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory))))
      expect(streamed).toEqual(runs.map((index) => ({ text: `answer to question ${index}`, runs: 1 })))
    }).pipe(Effect.scoped))

  for (const approved of [true, false]) {
    it.live(`a tool that needs approval suspends the run until it is ${approved ? "approved, then runs once" : "declined, and never runs"}; the run goes on`, () =>
      Effect.gen(function*() {
        const model = yield* fakeOpenAI(refundModel)
        const refunds = yield* Ref.make(0)
        const agent = makeRefundAgent(model.baseURL, refunds)
        const chunks = yield* agent.stream({ runId: `run-approval-${approved}`, messages: user }).pipe(
          Stream.tap((chunk) =>
            chunk.type === "CUSTOM" && chunk.name === "approval-requested"
              ? Effect.gen(function*() {
                // Suspended: the model was asked once, and the tool has not run.
                expect(model.requests).toHaveLength(1)
                expect(yield* Ref.get(refunds)).toBe(0)
                yield* agent.approve(`run-approval-${approved}`, "call_refund", approved)
              })
              : Effect.void
          ),
          Stream.runCollect,
          Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory)))
        )
        expect(chunks.filter((chunk) => chunk.type === "CUSTOM" && chunk.name === "approval-requested")).toHaveLength(1)
        expect(yield* Ref.get(refunds)).toBe(approved ? 1 : 0)
        const answer = chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : []).join("")
        expect(answer).toBe(`Refund: ${JSON.stringify(approved ? { refunded: true } : { error: "User declined tool execution" })}`)
        expect(model.requests).toHaveLength(2)
      }).pipe(Effect.scoped))
  }

})

describe("DurableEngine.layerSqlite, the embedded engine", () => {
  const fileOf = () => join(mkdtempSync(join(tmpdir(), "ai-effect-durable-")), "runs.db")

  it.live("3 turns with 2 tool calls, one an effect tool, complete on the SQLite file; the same run id returns the result and requests nothing", () =>
    completes(DurableEngine.layerSqlite({ filename: fileOf() })), 60_000)

  it.live("a second engine on a file whose engine is up is refused with LockTimeout, and one starts once the first is gone", () =>
    Effect.gen(function*() {
      const filename = fileOf()
      const engine = () => DurableEngine.layerSqlite({ filename, lockLease: "300 millis" })
      const first = yield* Scope.make()
      yield* Layer.buildWithScope(engine(), first)
      const refused = yield* Effect.flip(Effect.scoped(Layer.build(engine())))
      expect(refused).toMatchObject({ _tag: "LockTimeout" })
      yield* Scope.close(first, Exit.void)
      yield* Effect.scoped(Layer.build(engine()))
    }), 60_000)
})

describe("a durable run cancelled", () => {
  /** The run's exit, once the engine applied the interrupt and ended it. */
  const finished = (agent: { readonly poll: DurableAgent.DurableAgent<ReadonlyArray<unknown>>["poll"] }, runId: string) =>
    agent.poll(runId).pipe(Effect.repeat({ until: Option.isSome, schedule: Schedule.spaced("20 millis") }), Effect.flatMap(Effect.fromOption))

  const inToolCall = (engine: Layer.Layer<DurableAgent.DurableServices, unknown>) =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(ordersModel())
      const started = yield* Deferred.make<void>()
      const finalized = yield* Deferred.make<void>()
      const agent = makeStuckAgent(model.baseURL, started, finalized)
      yield* Effect.gen(function*() {
        yield* agent.start({ runId: "run-cancelled", messages: user })
        yield* Deferred.await(started)
        expect(yield* agent.cancel("run-cancelled")).toBe(true)
        yield* Deferred.await(finalized)
        const exit = yield* finished(agent, "run-cancelled")
        expect(Exit.hasInterrupts(exit)).toBe(true)
        expect(yield* agent.cancel("run-cancelled")).toBe(false)
        expect(model.requests).toHaveLength(1)
      }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(engine))))
    }).pipe(Effect.scoped)

  /** A run that waits for its refund's approval, cancelled: it ends, and neither the tool nor the model runs again. */
  const waitingForApproval = (engine: Layer.Layer<DurableAgent.DurableServices, unknown>) =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(refundModel)
      const refunds = yield* Ref.make(0)
      const agent = makeRefundAgent(model.baseURL, refunds)
      yield* Effect.gen(function*() {
        yield* agent.start({ runId: "run-cancelled-waiting", messages: user })
        yield* asked(agent, "run-cancelled-waiting")
        expect(yield* agent.cancel("run-cancelled-waiting")).toBe(true)
        const exit = yield* finished(agent, "run-cancelled-waiting")
        expect(Exit.hasInterrupts(exit)).toBe(true)
        // The run waits for no answer any more: an answer that comes after the cancel is refused, and the refund never runs.
        expect(yield* agent.pendingApprovals("run-cancelled-waiting")).toEqual([])
        const refused = yield* Effect.flip(agent.approve("run-cancelled-waiting", "call_refund", true))
        expect(refused).toMatchObject({ _tag: "DurableRunCancelled", runId: "run-cancelled-waiting" })
        expect(yield* agent.status("run-cancelled-waiting")).toMatchObject({ _tag: "Finished" })
        expect(yield* Ref.get(refunds)).toBe(0)
        expect(model.requests).toHaveLength(1)
      }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(engine))))
    }).pipe(Effect.scoped)

  const sqliteEngine = () => DurableEngine.layerSqlite({ filename: join(mkdtempSync(join(tmpdir(), "ai-effect-durable-")), "runs.db") })

  it.live("in its tool call, on the memory engine: the tool is interrupted and its finalizer runs, the run ends interrupted, and the model is asked nothing more", () =>
    inToolCall(DurableEngine.layerMemory))

  it.live("in its tool call, on SQLite: the tool is interrupted and its finalizer runs, the run ends interrupted, and the model is asked nothing more", () =>
    inToolCall(sqliteEngine()), 60_000)

  it.live("while it waits for approval, on the memory engine: the run ends interrupted, lists no pending approval, and refuses a later approval with DurableRunCancelled; neither the tool nor the model runs", () =>
    waitingForApproval(DurableEngine.layerMemory))

  it.live("while it waits for approval, on SQLite: the run ends interrupted, lists no pending approval, and refuses a later approval with DurableRunCancelled; neither the tool nor the model runs", () =>
    waitingForApproval(sqliteEngine()), 60_000)
})

describe("a durable run asked for after it ended", () => {
  it.live("stream on a finished run replays its turns, tool calls and results from its result and ends, asking the model nothing", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(ordersModel())
      const applied = yield* Ref.make(0)
      const agent = makeOrdersAgent(model.baseURL, applied)
      const live = agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory), Layer.provide(AI.EffectStore.layerMemory()))
      yield* Effect.gen(function*() {
        const result = yield* agent.run({ runId: "run-replay", messages: user })
        const chunks = yield* agent.stream({ runId: "run-replay", messages: user }).pipe(Stream.runCollect)
        expect(model.requests).toHaveLength(3)
        expect(chunks.filter((chunk) => chunk.type === "RUN_FINISHED")).toHaveLength(3)
        expect(chunks.flatMap((chunk) => chunk.type === "TOOL_CALL_START" ? [chunk.toolCallName] : [])).toEqual(["get_order", "notify"])
        expect(chunks.flatMap((chunk) => chunk.type === "TOOL_CALL_RESULT" ? [chunk.content] : [])).toEqual([
          JSON.stringify({ status: "shipped" }),
          JSON.stringify({ sent: 1 })
        ])
        expect(chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : []).join("")).toBe(result.text)
      }).pipe(Effect.provide(live))
    }).pipe(Effect.scoped))

  it.live("stream on a run that fails while it is streamed gives every chunk the run sent, then fails with the run's AiError", () =>
    Effect.gen(function*() {
      // The first turn looks the order up; the second is refused.
      const model = yield* fakeOpenAI((request: ResponsesRequest): FakeReply =>
        request.input.some((item) => item.type === "function_call_output")
          ? { failure: { status: 400, message: "bad request" } }
          : { toolCalls: [{ id: "call_lookup", name: "get_order", args: { id: "A-100" } }] }
      )
      const agent = makeOrdersAgent(model.baseURL, yield* Ref.make(0))
      const sent: Array<string> = []
      const failed = yield* agent.stream({ runId: "run-fails-live", messages: user }).pipe(
        Stream.runForEach((chunk) => Effect.sync(() => sent.push(chunk.type))),
        Effect.flip,
        Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory), Layer.provide(AI.EffectStore.layerMemory())))
      )
      expect(failed).toMatchObject({ _tag: "AiError", reason: "invalid-request" })
      expect(sent.filter((type) => type === "TOOL_CALL_START" || type === "TOOL_CALL_RESULT")).toEqual(["TOOL_CALL_START", "TOOL_CALL_RESULT"])
      expect(sent.at(-1)).toBe("TOOL_CALL_RESULT")
      expect(model.requests).toHaveLength(2)
    }).pipe(Effect.scoped))

  it.live("stream on a failed run fails at once with the run's AiError, asking the model nothing more", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(() => ({ failure: { status: 400, message: "bad request" } }))
      const agent = makeOrdersAgent(model.baseURL, yield* Ref.make(0))
      const live = agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory), Layer.provide(AI.EffectStore.layerMemory()))
      yield* Effect.gen(function*() {
        const failed = yield* Effect.flip(agent.run({ runId: "run-failed", messages: user }))
        expect(failed).toMatchObject({ _tag: "AiError", reason: "invalid-request" })
        const streamed = yield* Effect.flip(agent.stream({ runId: "run-failed", messages: user }).pipe(Stream.runDrain))
        expect(streamed).toMatchObject({ _tag: "AiError", reason: "invalid-request" })
        expect(model.requests).toHaveLength(1)
      }).pipe(Effect.provide(live))
    }).pipe(Effect.scoped))
})

describe("approvals of a durable run that nobody streams", () => {
  it.live("start, then any caller lists the pending approval, answers it once, and the tool runs once; a second answer is ApprovalAlreadyAnswered", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(refundModel)
      const refunds = yield* Ref.make(0)
      const agent = makeRefundAgent(model.baseURL, refunds)
      yield* Effect.gen(function*() {
        yield* agent.start({ runId: "run-unwatched", messages: user })
        const pending = yield* asked(agent, "run-unwatched")
        expect(pending).toEqual([{ toolCallId: "call_refund", toolName: "refund", input: { id: "A-100" } }])
        expect(yield* agent.status("run-unwatched")).toEqual({ _tag: "WaitingForApproval", approvals: pending })
        expect(yield* agent.poll("run-unwatched")).toMatchObject({ _tag: "None" })

        yield* agent.approve("run-unwatched", "call_refund", true)
        const again = yield* Effect.flip(agent.approve("run-unwatched", "call_refund", false))
        expect(again).toMatchObject({ _tag: "ApprovalAlreadyAnswered", approved: true })
        const result = yield* agent.run({ runId: "run-unwatched", messages: user })
        expect(result.text).toBe(`Refund: ${JSON.stringify({ refunded: true })}`)
        expect(yield* Ref.get(refunds)).toBe(1)
        expect(yield* agent.pendingApprovals("run-unwatched")).toEqual([])
      }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory))))
    }).pipe(Effect.scoped))

  it.live("each step is a span named after it, with the run's execution id; the replay after an approval answers the finished steps from their records", () =>
    Effect.gen(function*() {
      const { spans, tracer } = inMemoryTracer()
      const model = yield* fakeOpenAI(refundModel)
      const agent = makeRefundAgent(model.baseURL, yield* Ref.make(0))
      yield* Effect.gen(function*() {
        const executionId = yield* agent.start({ runId: "run-traced", messages: user })
        yield* asked(agent, "run-traced")
        yield* agent.approve("run-traced", "call_refund", true)
        yield* agent.run({ runId: "run-traced", messages: user })
        const steps = spans.filter((span) => span.attributes.get("executionId") === executionId && span.attributes.has("replayed"))
        expect(steps.map((span) => [span.name, span.attributes.get("replayed")])).toEqual([
          ["turn-0", false],
          ["ask-0", false],
          ["turn-0", true],
          ["ask-0", true],
          ["tool-call_refund", false],
          ["turn-1", false]
        ])
        expect(model.requests).toHaveLength(2)
      }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory))), Effect.withTracer(tracer))
    }).pipe(Effect.scoped))

  it.live("approve on an unknown run, or on a call the run did not ask about, is a typed failure and changes nothing", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(refundModel)
      const refunds = yield* Ref.make(0)
      const agent = makeRefundAgent(model.baseURL, refunds)
      yield* Effect.gen(function*() {
        expect(yield* Effect.flip(agent.approve("run-nobody-started", "call_refund", true))).toMatchObject({ _tag: "DurableRunNotFound" })
        expect(yield* Effect.flip(agent.pendingApprovals("run-nobody-started"))).toMatchObject({ _tag: "DurableRunNotFound" })
        yield* agent.start({ runId: "run-asks", messages: user })
        yield* asked(agent, "run-asks")
        expect(yield* Effect.flip(agent.approve("run-asks", "call_other", true))).toMatchObject({ _tag: "ApprovalNotFound", toolCallId: "call_other" })
        expect(yield* agent.pendingApprovals("run-asks")).toHaveLength(1)
        expect(yield* Ref.get(refunds)).toBe(0)
      }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory))))
    }).pipe(Effect.scoped))

  it.live("stream on a run that waits for approval sends the approval it waits for, once, and goes on when it is answered", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(refundModel)
      const refunds = yield* Ref.make(0)
      const agent = makeRefundAgent(model.baseURL, refunds)
      yield* Effect.gen(function*() {
        yield* agent.start({ runId: "run-rejoined", messages: user })
        yield* asked(agent, "run-rejoined")
        const chunks = yield* agent.stream({ runId: "run-rejoined", messages: user }).pipe(
          Stream.tap((chunk) => chunk.type === "CUSTOM" && chunk.name === "approval-requested" ? agent.approve("run-rejoined", "call_refund", true) : Effect.void),
          Stream.runCollect
        )
        expect(chunks.filter((chunk) => chunk.type === "CUSTOM" && chunk.name === "approval-requested")).toHaveLength(1)
        expect(chunks.some((chunk) => chunk.type === "TOOL_CALL_RESULT")).toBe(true)
        expect(yield* Ref.get(refunds)).toBe(1)
      }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory))))
    }).pipe(Effect.scoped))
})

describe("an approval answered twice", () => {
  // A second answer (a second device, a double click) sends the first answer to the run again while its tool runs.
  const answeredTwice = (engine: Layer.Layer<DurableAgent.DurableServices, unknown>) =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(refundModel)
      const gate = {
        refunds: yield* Ref.make(0),
        started: yield* Deferred.make<void>(),
        release: yield* Deferred.make<void>(),
        cutOff: yield* Ref.make(false)
      }
      const agent = makeGatedRefundAgent(model.baseURL, gate)
      yield* Effect.gen(function*() {
        yield* agent.start({ runId: "run-answered-twice", messages: user })
        yield* asked(agent, "run-answered-twice")
        yield* agent.approve("run-answered-twice", "call_refund", true)
        yield* Deferred.await(gate.started)
        const again = yield* Effect.flip(agent.approve("run-answered-twice", "call_refund", true))
        expect(again).toMatchObject({ _tag: "ApprovalAlreadyAnswered", approved: true })
        yield* Deferred.succeed(gate.release, undefined)
        const result = yield* agent.run({ runId: "run-answered-twice", messages: user })
        expect(result.text).toBe(`Refund: ${JSON.stringify({ refunded: true })}`)
        expect(yield* Ref.get(gate.refunds)).toBe(1)
        expect(yield* Ref.get(gate.cutOff)).toBe(false)
        expect(model.requests).toHaveLength(2)
      }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(engine))))
    }).pipe(Effect.scoped)

  it.live("on the memory engine: a second answer while the approved tool runs neither cuts the tool off nor runs it again", () =>
    answeredTwice(DurableEngine.layerMemory))

  it.live("on SQLite: a second answer while the approved tool runs neither cuts the tool off nor runs it again", () =>
    answeredTwice(DurableEngine.layerSqlite({ filename: join(mkdtempSync(join(tmpdir(), "ai-effect-durable-")), "runs.db") })), 60_000)
})

describe("a run id is one run", () => {
  it.live("starting a run id again with another input is DurableRunInputMismatch, and the first run's result stands", () =>
    Effect.gen(function*() {
      const agent = DurableAgent.make(AI.defineAgent({ name: "greeter", adapter: scriptedText([{ text: "Hello!" }, { text: "Bye!" }]), instructions: "Greet.", tools: [] }))
      yield* Effect.gen(function*() {
        const first = yield* agent.run({ runId: "run-once", messages: [{ role: "user", content: "Hi" }] })
        const other = yield* Effect.flip(agent.run({ runId: "run-once", messages: [{ role: "user", content: "Something else" }] }))
        expect(other).toMatchObject({ _tag: "DurableRunInputMismatch", runId: "run-once" })
        expect(yield* agent.run({ runId: "run-once", messages: [{ role: "user", content: "Hi" }] })).toEqual(first)
      }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory))))
    }))
})

describe("a failing model turn", () => {
  /** The orders model, whose turn `state` answers `failure` for its first `times` requests. */
  const failingTurn = (state: number, times: number, failure: FakeReply) => {
    let failures = 0
    return (request: ResponsesRequest): FakeReply =>
      stateOf(request) === state && failures++ < times ? failure : ordersModel()(request)
  }
  const quickly = { turnRetry: Schedule.max([Schedule.spaced("10 millis"), Schedule.recurs(3)]) }

  it.live("a turn answered twice with a 429 is tried again inside its step: the run completes, and no other turn is asked twice", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(failingTurn(1, 2, { failure: { status: 429, message: "slow down" } }))
      const applied = yield* Ref.make(0)
      const agent = makeOrdersAgent(model.baseURL, applied, quickly)
      const result = yield* agent.run({ runId: "run-rate-limited", messages: user }).pipe(
        Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory), Layer.provide(AI.EffectStore.layerMemory())))
      )
      expect(result.text).toBe("A-100 has shipped, and ada knows.")
      expect(requestsPerTurn(model.requests)).toEqual([1, 3, 1])
      expect(yield* Ref.get(applied)).toBe(1)
    }).pipe(Effect.scoped))

  it.live("a run that failed is tried again under its id: the failed turn is asked again, the finished turns and the effect are not", () =>
    Effect.gen(function*() {
      // Turn 2 fails four times: the step's try and its three retries, so the run fails once.
      const model = yield* fakeOpenAI(failingTurn(2, 4, { failure: { status: 503, message: "unavailable" } }))
      const applied = yield* Ref.make(0)
      const agent = makeOrdersAgent(model.baseURL, applied, quickly)
      yield* Effect.gen(function*() {
        const failed = yield* Effect.flip(agent.run({ runId: "run-retried", messages: user }))
        expect(failed).toMatchObject({ _tag: "AiError", status: 503 })
        expect(yield* agent.poll("run-retried")).toMatchObject({ _tag: "Some", value: { _tag: "Failure" } })
        expect(requestsPerTurn(model.requests)).toEqual([1, 1, 4])

        yield* agent.retry("run-retried")
        const result = yield* agent.run({ runId: "run-retried", messages: user })
        expect(result.text).toBe("A-100 has shipped, and ada knows.")
        expect(result.turns).toBe(3)
        expect(result.messages.map((message) => (message as { readonly role: string }).role)).toEqual([
          "user", "assistant", "tool", "assistant", "tool", "assistant"
        ])
        expect(requestsPerTurn(model.requests)).toEqual([1, 1, 5])
        expect(yield* Ref.get(applied)).toBe(1)
        expect(yield* agent.poll("run-retried")).toMatchObject({ _tag: "Some", value: { _tag: "Success" } })
        // A run that did not fail is left as it is.
        yield* agent.retry("run-retried")
        expect(model.requests).toHaveLength(7)
      }).pipe(Effect.provide(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory), Layer.provide(AI.EffectStore.layerMemory()))))
    }).pipe(Effect.scoped))
})
