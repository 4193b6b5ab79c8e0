/**
 * The durable-run tests' models and agent: a fake OpenAI policy that looks
 * an order up, notifies, then answers (and one that asks for a refund),
 * counted per turn, and the orders agent on any engine.
 */
import { expect } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { DurableAgent } from "@tanstack/ai-effect/durable"
import { type FakeReply, fakeOpenAI, type ResponsesRequest } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Deferred, Effect, Layer, Ref, Schedule, Stream } from "effect"
import { getOrderDef, notifyDef, refundDef } from "./tools.ts"

/** How far the conversation got: the number of tool results the model was sent. */
export const stateOf = (request: ResponsesRequest) => request.input.filter((item) => item.type === "function_call_output").length

/** The model of every test: look the order up, then notify, then answer. */
export const ordersModel = (hold?: { readonly state: number; readonly requests: () => number }) => (request: ResponsesRequest): FakeReply => {
  const state = stateOf(request)
  const reply: FakeReply = state === 0
    ? { toolCalls: [{ name: "get_order", args: { id: "A-100" }, id: "call_lookup" }] }
    : state === 1
    ? { toolCalls: [{ name: "notify", args: { to: "ada" }, id: "call_notify" }] }
    : { text: "A-100 has shipped, and ada knows." }
  // The first request of the held turn never completes: the process dies inside it.
  return hold !== undefined && state === hold.state && hold.requests() === 1 ? { ...reply, delayMs: 600_000 } : reply
}

/** The model of the approval tests: ask for a refund, then answer with what the tool said. */
export const refundModel = (request: ResponsesRequest): FakeReply =>
  stateOf(request) === 0
    ? { toolCalls: [{ name: "refund", args: { id: "A-100" }, id: "call_refund" }] }
    : { text: `Refund: ${String(request.input.find((item) => item.type === "function_call_output")?.output)}` }

/**
 * The orders model, whose first request of turn `state` never completes:
 * `held` resolves once that request arrived, while the process is inside it.
 */
export const holdingTurn = (state: number) => {
  let requests = 0
  const { promise: held, resolve: holding } = Promise.withResolvers<void>()
  const policy = (request: ResponsesRequest) => {
    if (stateOf(request) === state && ++requests === 1) holding()
    return ordersModel({ state, requests: () => requests })(request)
  }
  return { policy, held }
}

/** How often each of the three turns was requested. */
export const requestsPerTurn = (requests: ReadonlyArray<ResponsesRequest>) =>
  [0, 1, 2].map((state) => requests.filter((request) => stateOf(request) === state).length)

export const user = [{ role: "user" as const, content: "Where is A-100? Tell ada." }]

/** The orders agent: a Stream tool that looks the order up, and an effect tool that notifies. */
export const makeOrdersAgent = (baseURL: string, applied: Ref.Ref<number>, options?: DurableAgent.DurableAgentOptions) =>
  DurableAgent.make(AI.defineAgent({
    name: "orders",
    adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL, maxRetries: 0 }),
    instructions: "Answer questions about orders.",
    tools: [
      // A Stream tool: each element is progress, the last one the result.
      AI.serverTool(getOrderDef, () => Stream.make({ status: "looking" }, { status: "shipped" })),
      AI.effectTool(notifyDef, () => Effect.map(Ref.updateAndGet(applied, (n) => n + 1), (sent) => ({ sent })))
    ]
  }), options)

/** An agent named `name` whose one tool, a refund that needs approval, runs `refund`. */
const refundAgent = (name: string, baseURL: string, refund: Effect.Effect<void>) =>
  DurableAgent.make(AI.defineAgent({
    name,
    adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL, maxRetries: 0 }),
    instructions: "Refund orders.",
    tools: [AI.serverTool(refundDef, () => Effect.as(refund, { refunded: true }))]
  }))

/** The refunds agent: a refund that needs approval, counted in `refunds` each time it runs. */
export const makeRefundAgent = (baseURL: string, refunds: Ref.Ref<number>) =>
  refundAgent("refunds", baseURL, Ref.update(refunds, (n) => n + 1))

export const completes = (engine: Layer.Layer<DurableAgent.DurableServices, unknown>) =>
  Effect.gen(function*() {
    const model = yield* fakeOpenAI(ordersModel())
    const applied = yield* Ref.make(0)
    const agent = makeOrdersAgent(model.baseURL, applied)
    const live = agent.layer.pipe(Layer.provideMerge(engine), Layer.provide(AI.EffectStore.layerMemory()))
    yield* Effect.gen(function*() {
      const result = yield* agent.run({ runId: "run-1", messages: user })
      expect(result.text).toBe("A-100 has shipped, and ada knows.")
      expect(result.turns).toBe(3)
      expect(result.messages.map((message) => (message as { readonly role: string }).role)).toEqual([
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant"
      ])
      expect(result.usage).toEqual({ input: 30, output: 15 })
      expect(requestsPerTurn(model.requests)).toEqual([1, 1, 1])
      expect(yield* Ref.get(applied)).toBe(1)

      // The run id is the idempotency key: starting it again joins the finished run.
      const again = yield* agent.run({ runId: "run-1", messages: user })
      expect(again).toEqual(result)
      expect(model.requests).toHaveLength(3)
      expect(yield* agent.poll("run-1")).toMatchObject({ _tag: "Some", value: { _tag: "Success" } })
      expect(yield* agent.poll("run-unknown")).toMatchObject({ _tag: "None" })
    }).pipe(Effect.provide(live))
  }).pipe(Effect.scoped)

/** An agent whose order lookup never returns: `started` once the tool runs, `finalized` once its interrupt ran the finalizer. */
export const makeStuckAgent = (baseURL: string, started: Deferred.Deferred<void>, finalized: Deferred.Deferred<void>) =>
  DurableAgent.make(AI.defineAgent({
    name: "stuck",
    adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL, maxRetries: 0 }),
    instructions: "Look orders up.",
    tools: [AI.serverTool(getOrderDef, () =>
      Effect.andThen(Deferred.succeed(started, undefined), Effect.never).pipe(Effect.onInterrupt(() => Deferred.succeed(finalized, undefined))))]
  }))

/** The refunds agent, whose refund counts itself in `refunds`, then waits for `release`; `cutOff` turns true if it is interrupted. */
export const makeGatedRefundAgent = (
  baseURL: string,
  gate: {
    readonly refunds: Ref.Ref<number>
    readonly started: Deferred.Deferred<void>
    readonly release: Deferred.Deferred<void>
    readonly cutOff: Ref.Ref<boolean>
  }
) =>
  refundAgent(
    "gated-refunds",
    baseURL,
    Ref.update(gate.refunds, (n) => n + 1).pipe(
      Effect.andThen(Deferred.succeed(gate.started, undefined)),
      Effect.andThen(Deferred.await(gate.release)),
      Effect.onInterrupt(() => Ref.set(gate.cutOff, true))
    )
  )

/** The approvals a run waits for, once it waits for one. */
export const asked = (agent: Pick<DurableAgent.DurableAgent<ReadonlyArray<unknown>>, "pendingApprovals">, runId: string) =>
  agent.pendingApprovals(runId).pipe(
    Effect.filterOrFail((approvals) => approvals.length > 0),
    Effect.retry(Schedule.spaced("10 millis"))
  )
