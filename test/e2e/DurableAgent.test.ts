/**
 * Durable agent runs: a run on Effect's workflow engine completes, replays
 * what it finished, and is resumed by another process after a crash,
 * without requesting a finished model turn again or applying an effect
 * twice. The model is the fake OpenAI server, which counts the requests it
 * answers; the effects go to a remote that counts each application.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
import { type FakeOpenAIServer, type FakeReply, fakeOpenAI, type ResponsesRequest, startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Effect, Layer, Ref, Stream } from "effect"
import { WorkflowEngine } from "effect/workflow"
import { pgClient } from "../support/backends.ts"
import type { DurableWorkerConfig } from "../support/durable-worker.ts"
import { freePort, missing, startPostgres, type TestServer } from "../support/services.ts"
import { getOrderDef, notifyDef, refundDef } from "../support/tools.ts"
import { type Remote, startRemote } from "../support/workers.ts"

/** How far the conversation got: the number of tool results the model was sent. */
const stateOf = (request: ResponsesRequest) => request.input.filter((item) => item.type === "function_call_output").length

/** The model of every test: look the order up, then notify, then answer. */
const ordersModel = (hold?: { readonly state: number; readonly requests: () => number }) => (request: ResponsesRequest): FakeReply => {
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
const refundModel = (request: ResponsesRequest): FakeReply =>
  stateOf(request) === 0
    ? { toolCalls: [{ name: "refund", args: { id: "A-100" }, id: "call_refund" }] }
    : { text: `Refund: ${String(request.input.find((item) => item.type === "function_call_output")?.output)}` }

/**
 * The orders model, whose first request of turn `state` never completes:
 * `held` resolves once that request arrived, while the process is inside it.
 */
const holdingTurn = (state: number) => {
  let requests = 0
  const { promise: held, resolve: holding } = Promise.withResolvers<void>()
  const policy = (request: ResponsesRequest) => {
    if (stateOf(request) === state && ++requests === 1) holding()
    return ordersModel({ state, requests: () => requests })(request)
  }
  return { policy, held }
}

/** How often each of the three turns was requested. */
const requestsPerTurn = (requests: ReadonlyArray<ResponsesRequest>) =>
  [0, 1, 2].map((state) => requests.filter((request) => stateOf(request) === state).length)

const user = [{ role: "user" as const, content: "Where is A-100? Tell ada." }]

describe("a durable run in one process", () => {
  const makeAgent = (baseURL: string, applied: Ref.Ref<number>) =>
    DurableAgent.make(AI.defineAgent({
      name: "orders",
      adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL, maxRetries: 0 }),
      instructions: "Answer questions about orders.",
      tools: [
        // A Stream tool: each element is progress, the last one the result.
        AI.serverTool(getOrderDef, () => Stream.make({ status: "looking" }, { status: "shipped" })),
        AI.effectTool(notifyDef, () => Effect.map(Ref.updateAndGet(applied, (n) => n + 1), (sent) => ({ sent })))
      ]
    }))

  const completes = (engine: Layer.Layer<WorkflowEngine.WorkflowEngine, unknown>) =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(ordersModel())
      const applied = yield* Ref.make(0)
      const agent = makeAgent(model.baseURL, applied)
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

  it.live("3 turns with 2 tool calls, one an effect tool, complete on the memory engine; the same run id returns the result and requests nothing", () =>
    completes(WorkflowEngine.layerMemory))

  it.live("stream gives the run's chunks while it runs: each turn's text and tool calls, a tool's progress, a TOOL_CALL_RESULT per call, and it ends with the run", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(ordersModel())
      const applied = yield* Ref.make(0)
      const agent = makeAgent(model.baseURL, applied)
      const chunks = yield* agent.stream({ runId: "run-stream", messages: user }).pipe(
        Stream.runCollect,
        Effect.provide(agent.layer.pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provide(AI.EffectStore.layerMemory())))
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
      // The tools run in the run's activities, not on the client: core's client notices stay out.
      expect(chunks.some((chunk) => chunk.type === "MESSAGES_SNAPSHOT" || (chunk.type === "CUSTOM" && chunk.name === "tool-input-available"))).toBe(false)
    }).pipe(Effect.scoped))

  for (const approved of [true, false]) {
    it.live(`a tool that needs approval suspends the run until it is ${approved ? "approved, then runs once" : "declined, and never runs"}; the run goes on`, () =>
      Effect.gen(function*() {
        const model = yield* fakeOpenAI(refundModel)
        const refunds = yield* Ref.make(0)
        const agent = DurableAgent.make(AI.defineAgent({
          name: "refunds",
          adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL: model.baseURL, maxRetries: 0 }),
          instructions: "Refund orders.",
          tools: [AI.serverTool(refundDef, () => Effect.as(Ref.update(refunds, (n) => n + 1), { refunded: true }))]
        }))
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
          Effect.provide(agent.layer.pipe(Layer.provideMerge(WorkflowEngine.layerMemory)))
        )
        expect(chunks.filter((chunk) => chunk.type === "CUSTOM" && chunk.name === "approval-requested")).toHaveLength(1)
        expect(yield* Ref.get(refunds)).toBe(approved ? 1 : 0)
        const answer = chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : []).join("")
        expect(answer).toBe(`Refund: ${JSON.stringify(approved ? { refunded: true } : { error: "User declined tool execution" })}`)
        expect(model.requests).toHaveLength(2)
      }).pipe(Effect.scoped))
  }

  describe.skipIf(missing("postgres") !== undefined)("on PostgreSQL", () => {
    let postgres: TestServer
    beforeAll(async () => {
      postgres = await startPostgres()
    }, 60_000)
    afterAll(async () => {
      await postgres?.dispose()
    })

    it.live("3 turns with 2 tool calls, one an effect tool, complete on the cluster engine; the same run id returns the result and requests nothing", () =>
      completes(DurableEngine.layerSingleRunner().pipe(Layer.provide(pgClient(postgres.url)))), 60_000)
  })
})

describe.skipIf(missing("postgres") !== undefined)("a durable run across a crash", () => {
  let postgres: TestServer
  let remote: Remote
  beforeAll(async () => {
    postgres = await startPostgres()
    remote = await startRemote()
  }, 60_000)
  const cleanupsOf: Array<() => Promise<void>> = []
  afterAll(async () => {
    for (const cleanup of cleanupsOf.splice(0)) await cleanup()
    remote?.close()
    await postgres?.dispose()
  })

  const startWorker = (config: DurableWorkerConfig) => {
    const child: ChildProcess = spawn(
      process.execPath,
      ["--conditions=@tanstack/ai-effect/source", join(import.meta.dirname, "..", "support", "durable-worker.ts")],
      { env: { ...process.env, AI_EFFECT_DURABLE_WORKER: JSON.stringify(config) }, stdio: ["ignore", "pipe", "inherit"] }
    )
    let output = ""
    const waiting: Array<{ readonly line: string; readonly seen: () => void }> = []
    child.stdout!.on("data", (part: Buffer) => {
      output += part.toString()
      for (const wait of waiting) if (output.includes(wait.line)) wait.seen()
    })
    const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>
    return {
      child,
      exited,
      /** Resolves once the worker printed the line. */
      printed: (line: string) =>
        new Promise<void>((resolve) => {
          if (output.includes(line)) resolve()
          else waiting.push({ line, seen: resolve })
        }),
      /** The run's exit, as the worker printed it when the run finished. */
      exit: async () => {
        await exited
        return JSON.parse(output.trim().split("\n").at(-1)!) as { readonly _tag: string; readonly value: { readonly text: string } }
      }
    }
  }

  /** Runs a test with a fake model of its own, and a remote whose counts start at zero. */
  const withModel = async (policy: (request: ResponsesRequest) => FakeReply, test: (model: FakeOpenAIServer) => Promise<void>) => {
    const model = await startFakeOpenAI(policy)
    try {
      await test(model)
    } finally {
      await model.close()
      remote.applied.clear()
    }
  }

  const configFor = (runId: string, model: string, overrides: Partial<DurableWorkerConfig> = {}): DurableWorkerConfig => ({
    postgres: postgres.url,
    model,
    remote: remote.url,
    runId,
    start: true,
    crashAfterEffect: false,
    leaseMillis: 1_000,
    ...overrides
  })

  it("the worker dies right after the effect tool's effect; a new process resumes the run by itself: no finished turn is requested again, the effect is applied once", async () => {
    await withModel(ordersModel(), async (model) => {
      const crashed = startWorker(configFor("run-crash-after-effect", model.baseURL, { crashAfterEffect: true }))
      expect((await crashed.exited)[1]).toBe("SIGKILL")
      expect(remote.applied.get("notify-ada")).toBe(1)

      // The new process does not start the run: the engine resumes it from storage.
      const resumed = startWorker(configFor("run-crash-after-effect", model.baseURL, { start: false }))
      expect(await resumed.exit()).toMatchObject({ _tag: "Success", value: { text: "A-100 has shipped, and ada knows." } })
      expect(requestsPerTurn(model.requests)).toEqual([1, 1, 1])
      expect(remote.applied.get("notify-ada")).toBe(1)
      expect(remote.applied.get("lookup-A-100")).toBe(1)
    })
  }, 120_000)

  for (const approved of [true, false]) {
    it(`a run waiting for approval survives its process: a new process ${approved ? "approves it, and the tool runs exactly once" : "declines it, and the tool never runs"}`, async () => {
      await withModel(refundModel, async (model) => {
        const runId = `run-approval-restart-${approved}`
        const first = startWorker(configFor(runId, model.baseURL))
        await first.printed("approval call_refund")
        first.child.kill("SIGKILL")
        await first.exited
        expect(remote.applied.get("refund-A-100")).toBeUndefined()

        const restarted = startWorker(configFor(runId, model.baseURL, { start: false, approve: { toolCallId: "call_refund", approved } }))
        const exit = await restarted.exit()
        expect(exit).toMatchObject({ _tag: "Success" })
        expect(exit.value.text).toBe(`Refund: ${JSON.stringify(approved ? { refunded: true } : { error: "User declined tool execution" })}`)
        expect(remote.applied.get("refund-A-100")).toBe(approved ? 1 : undefined)
        expect(model.requests).toHaveLength(2)
      })
    }, 120_000)
  }

  it("two runners: the one that owns the run is killed inside a model turn; the other takes its shards over and finishes the run", async () => {
    const { policy, held } = holdingTurn(1)
    await withModel(policy, async (model) => {
      const runId = "run-two-runners"
      // A short shard lock expiry, so that the survivor takes the dead runner's shards in seconds.
      const runnerOn = async () => ({ port: await freePort(), shardLockExpirationMillis: 3_000 })
      const runners = [await runnerOn(), await runnerOn()]
      // A database of its own: runners registered here would hold shards that a later test's runner waits for.
      const own = await startPostgres()
      cleanupsOf.push(() => own.dispose())
      const workers = runners.map((runner, i) => startWorker(configFor(runId, model.baseURL, { runner, start: i === 0, postgres: own.url })))
      await held
      // The runner that looked the order up owns the run's shard.
      const owner = runners.findIndex((runner) => remote.applied.has(`lookup-A-100-on-${runner.port}`))
      expect(owner).not.toBe(-1)
      workers[owner]!.child.kill("SIGKILL")
      await workers[owner]!.exited

      const survivor = workers[1 - owner]!
      expect(await survivor.exit()).toMatchObject({ _tag: "Success", value: { text: "A-100 has shipped, and ada knows." } })
      expect(requestsPerTurn(model.requests)).toEqual([1, 2, 1])
      expect(remote.appliedOf(runners.map((runner) => `lookup-A-100-on-${runner.port}`))).toBe(1)
      expect(remote.applied.get("notify-ada")).toBe(1)
    })
  }, 120_000)

  it("the worker dies inside a model turn; a new process requests that turn once more, and nothing else repeats", async () => {
    const { policy, held } = holdingTurn(1)
    await withModel(policy, async (model) => {
      const first = startWorker(configFor("run-crash-in-turn", model.baseURL))
      await held
      first.child.kill("SIGKILL")
      await first.exited

      const resumed = startWorker(configFor("run-crash-in-turn", model.baseURL, { start: false }))
      expect(await resumed.exit()).toMatchObject({ _tag: "Success", value: { text: "A-100 has shipped, and ada knows." } })
      expect(requestsPerTurn(model.requests)).toEqual([1, 2, 1])
      expect(remote.applied.get("lookup-A-100")).toBe(1)
      expect(remote.applied.get("notify-ada")).toBe(1)
    })
  }, 120_000)
})
