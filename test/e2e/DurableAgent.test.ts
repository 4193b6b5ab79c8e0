/**
 * Durable agent runs: a run on Effect's workflow engine completes, replays
 * what it finished, and is resumed by another process after a crash,
 * without requesting a finished model turn again or applying an effect
 * twice. The model is the fake OpenAI server, which counts the requests it
 * answers; the effects go to a remote that counts each application.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { DurableEngine } from "@tanstack/ai-effect/durable"
import { type FakeOpenAIServer, type FakeReply, type ResponsesRequest, startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { Layer } from "effect"
import { pgClient } from "../support/backends.ts"
import { completes, holdingTurn, ordersModel, refundModel, requestsPerTurn } from "../support/durable.ts"
import type { DurableWorkerConfig } from "../support/durable-worker.ts"
import { freePort, missing, startPostgres, type TestServer } from "../support/services.ts"
import { type Remote, startRemote } from "../support/workers.ts"
import { startDurableWorker } from "../support/durableWorkers.ts"

describe.skipIf(missing("postgres") !== undefined)("a durable run in one process, on PostgreSQL", () => {
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
      const crashed = startDurableWorker(configFor("run-crash-after-effect", model.baseURL, { crashAfterEffect: true }))
      expect((await crashed.exited)[1]).toBe("SIGKILL")
      expect(remote.applied.get("notify-ada")).toBe(1)

      // The new process does not start the run: the engine resumes it from storage.
      const resumed = startDurableWorker(configFor("run-crash-after-effect", model.baseURL, { start: false }))
      expect(await resumed.exit()).toMatchObject({ _tag: "Success", value: { text: "A-100 has shipped, and ada knows." } })
      expect(requestsPerTurn(model.requests)).toEqual([1, 1, 1])
      expect(remote.applied.get("notify-ada")).toBe(1)
      expect(remote.applied.get("lookup-A-100")).toBe(1)
    })
  }, 120_000)

  /**
   * A new process on the run's store lists the approval the run waits for,
   * then answers it; the run finishes, with the refund applied once if it
   * was approved, and the model asked twice in all.
   */
  const answeredAfterRestart = async (runId: string, model: FakeOpenAIServer, approved: boolean, storeOf: Partial<DurableWorkerConfig> = {}) => {
    const restarted = startDurableWorker(configFor(runId, model.baseURL, { ...storeOf, start: false, approve: { toolCallId: "call_refund", approved } }))
    // The new process reads what the run waits for before it answers.
    await restarted.printed(`pending ${JSON.stringify(["call_refund"])}`)
    const exit = await restarted.exit()
    expect(exit).toMatchObject({ _tag: "Success" })
    expect(exit.value.text).toBe(`Refund: ${JSON.stringify(approved ? { refunded: true } : { error: "User declined tool execution" })}`)
    expect(remote.applied.get("refund-A-100")).toBe(approved ? 1 : undefined)
    expect(model.requests).toHaveLength(2)
  }

  for (const approved of [true, false]) {
    it(`a run waiting for approval survives its process: a new process lists the pending approval and ${approved ? "approves it, and the tool runs exactly once" : "declines it, and the tool never runs"}`, async () => {
      await withModel(refundModel, async (model) => {
        const runId = `run-approval-restart-${approved}`
        const first = startDurableWorker(configFor(runId, model.baseURL))
        await first.printed("approval call_refund")
        first.child.kill("SIGKILL")
        await first.exited
        expect(remote.applied.get("refund-A-100")).toBeUndefined()

        await answeredAfterRestart(runId, model, approved)
      })
    }, 120_000)
  }

  it("the worker dies as the run asks for approval, before it records the ask; a new process approves before it resumes the run, which asks again and finds the answer: the tool runs exactly once", async () => {
    await withModel(refundModel, async (model) => {
      const runId = "run-approval-while-asking"
      const first = startDurableWorker(configFor(runId, model.baseURL, { crashWhenAsking: true }))
      expect((await first.exited)[1]).toBe("SIGKILL")
      // The new process answers while the dead runner's shards are still locked; it then replays the run, asks again,
      // finds the answer, and runs the tool, while the engine may deliver the answer to the run and replay it once more.
      const restarted = startDurableWorker(configFor(runId, model.baseURL, { start: false, approve: { toolCallId: "call_refund", approved: true } }))
      const exit = await restarted.exit()
      expect(exit).toMatchObject({ _tag: "Success" })
      expect(exit.value.text).toBe(`Refund: ${JSON.stringify({ refunded: true })}`)
      expect(remote.applied.get("refund-A-100")).toBe(1)
      expect(model.requests).toHaveLength(2)
    })
  }, 120_000)

  /**
   * Two runners on a database of their own (runners registered in a shared
   * one would hold shards that a later test's runner waits for); the one
   * that owns the run is killed inside turn 1, and the other finishes it.
   */
  const ownerKilled = async (runId: string, runnerOn: () => Promise<NonNullable<DurableWorkerConfig["runner"]>>) => {
    const { policy, held } = holdingTurn(1)
    await withModel(policy, async (model) => {
      const runners = [await runnerOn(), await runnerOn()]
      const own = await startPostgres()
      cleanupsOf.push(() => own.dispose())
      const workers = runners.map((runner, i) => startDurableWorker(configFor(runId, model.baseURL, { runner, start: i === 0, postgres: own.url })))
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
  }

  it("two runners: the one that owns the run is killed inside a model turn; the other takes its shards over and finishes the run", () =>
    // A short shard lock expiry, so that the survivor takes the dead runner's shards in seconds.
    ownerKilled("run-two-runners", async () => ({ kind: "socket", port: await freePort(), shardLockExpirationMillis: 3_000 })), 120_000)

  it("two single runners on one database, each with its own PORT: the owner is killed inside a model turn; the other finishes the run within seconds, on the layer's defaults", () =>
    // The layer's own settings: the dead runner's session, and with it its advisory locks, end with its process.
    ownerKilled("run-two-single-runners", async () => ({ kind: "single", port: await freePort() })), 30_000)

  /**
   * The first worker (with `firstOnly`'s settings) is killed inside turn 1 of
   * the run; a new process on the same store resumes it: that turn is
   * requested once more, and no other turn or effect repeats.
   */
  const resumesAfterKillInTurn = async (runId: string, storeOf: Partial<DurableWorkerConfig>, firstOnly: Partial<DurableWorkerConfig> = {}) => {
    const { policy, held } = holdingTurn(1)
    await withModel(policy, async (model) => {
      const first = startDurableWorker(configFor(runId, model.baseURL, { ...storeOf, ...firstOnly }))
      await held
      first.child.kill("SIGKILL")
      await first.exited

      const resumed = startDurableWorker(configFor(runId, model.baseURL, { ...storeOf, start: false }))
      expect(await resumed.exit()).toMatchObject({ _tag: "Success", value: { text: "A-100 has shipped, and ada knows." } })
      expect(requestsPerTurn(model.requests)).toEqual([1, 2, 1])
      expect(remote.applied.get("lookup-A-100")).toBe(1)
      expect(remote.applied.get("notify-ada")).toBe(1)
    })
  }

  for (const store of ["PostgreSQL", "SQLite"] as const) {
  const onStore = (): Partial<DurableWorkerConfig> =>
    store === "SQLite" ? { sqlite: join(mkdtempSync(join(tmpdir(), "ai-effect-durable-")), "runs.db") } : {}

  it(`on ${store}: the worker dies inside a model turn; a new process requests that turn once more, and nothing else repeats`, () =>
    resumesAfterKillInTurn("run-crash-in-turn", onStore()), 120_000)

  if (store === "SQLite") {
    /** Resolves once the engine marked the file's one run request processed, as it does when the run suspends. */
    const suspendedIn = async (file: string) => {
      const db = new DatabaseSync(file, { readOnly: true })
      try {
        const processed = db.prepare("SELECT processed FROM cluster_messages WHERE tag = 'run'")
        while (processed.get()?.processed !== 1) await new Promise((resolve) => setTimeout(resolve, 20))
      } finally {
        db.close()
      }
    }

    it("on SQLite: the worker dies right after the effect tool's effect; a restarted process resumes the run: no finished turn is requested again, the effect is applied once", async () => {
      await withModel(ordersModel(), async (model) => {
        const storeOf = onStore()
        const crashed = startDurableWorker(configFor("run-sqlite-crash-after-effect", model.baseURL, { ...storeOf, crashAfterEffect: true }))
        expect((await crashed.exited)[1]).toBe("SIGKILL")
        const resumed = startDurableWorker(configFor("run-sqlite-crash-after-effect", model.baseURL, { ...storeOf, start: false }))
        expect(await resumed.exit()).toMatchObject({ _tag: "Success", value: { text: "A-100 has shipped, and ada knows." } })
        expect(requestsPerTurn(model.requests)).toEqual([1, 1, 1])
        expect(remote.applied.get("notify-ada")).toBe(1)
      })
    }, 120_000)

    it("on SQLite: a file written with effect's 300 shards, its worker killed inside a model turn; a process on the layer's one shard resumes the run, and nothing else repeats", () =>
      resumesAfterKillInTurn("run-sqlite-300-shards", onStore(), { shardsPerGroup: 300 }), 120_000)

    it("on SQLite: a run waiting for approval in a file written with effect's 300 shards; a process on the layer's one shard lists and approves it, and the run finishes with the tool run exactly once", async () => {
      await withModel(refundModel, async (model) => {
        const storeOf = onStore()
        const runId = "run-sqlite-300-shards-approval"
        const first = startDurableWorker(configFor(runId, model.baseURL, { ...storeOf, shardsPerGroup: 300 }))
        await first.printed("approval call_refund")
        // Killed once the engine recorded the run as suspended: the answer then resets its processed request, in its old shard.
        await suspendedIn(storeOf.sqlite!)
        first.child.kill("SIGKILL")
        await first.exited

        await answeredAfterRestart(runId, model, true, storeOf)
      })
    }, 120_000)
  }
  }
})
