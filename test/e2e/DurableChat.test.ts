/**
 * Durable chat under faults, from the client: real server processes (the
 * durable-run worker serving `ChatRoute.durableHandler`) are SIGKILLed while
 * a run answers, and the real `@tanstack/ai-client` receives the answer once.
 * The model is the fake OpenAI server, which counts the requests per turn;
 * the effects go to a remote that counts each application.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type StreamChunk, StreamProcessor } from "@tanstack/ai"
import { ChatClient, fetchServerSentEvents } from "@tanstack/ai-client"
import type * as AI from "@tanstack/ai-effect"
import { type FakeOpenAIServer, type FakeReply, type ResponsesRequest, startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { chatRequestBody } from "../support/agui.ts"
import { ordersModel, refundModel, requestsPerTurn, stateOf } from "../support/durable.ts"
import type { DurableWorkerConfig } from "../support/durable-worker.ts"
import { startDurableWorker } from "../support/durableWorkers.ts"
import { freePort, missing, startPostgres, type TestServer } from "../support/services.ts"
import { type Remote, startRemote } from "../support/workers.ts"

const words = Array.from({ length: 40 }, (_, index) => `w${index} `)
const answer = words.join("")

/** The orders model, whose answer (the third turn) streams a word every 50 ms: long enough to kill its server inside it. */
const slowAnswer = (request: ResponsesRequest): FakeReply => stateOf(request) === 2 ? { text: words, deltaDelayMs: 50 } : ordersModel()(request)

/** Resolves once the route on this URL answers. */
const ready = async (url: string) => {
  for (;;) {
    const status = await fetch(`${url}?threadId=ready`).then((response) => response.status, () => 0)
    if (status === 404) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** The client's reconnects outlast a server's restart. */
const connectionTo = (url: string) => fetchServerSentEvents(url, { reconnect: { maxAttempts: 200, delayMs: 100 } })

const assistantText = (messages: ReadonlyArray<{ readonly role: string; readonly parts: ReadonlyArray<{ readonly type: string; readonly content?: unknown }> }>) =>
  messages.filter((message) => message.role === "assistant")
    .flatMap((message) => message.parts.flatMap((part) => part.type === "text" ? [String(part.content)] : []))
    .join("")

let remote: Remote
beforeAll(async () => {
  remote = await startRemote()
})
afterAll(() => remote?.close())

const configFor = (model: FakeOpenAIServer, overrides: Partial<DurableWorkerConfig>): DurableWorkerConfig => ({
  postgres: "",
  model: model.baseURL,
  remote: remote.url,
  runId: "unused",
  start: false,
  crashAfterEffect: false,
  leaseMillis: 1_000,
  ...overrides
})

/**
 * A durable chat server on a SQLite file of its own, on a free port, with
 * a fake model of `policy`: `test` gets its URL, the model, and `restart`,
 * which SIGKILLs the server and starts it again on the same port and file.
 */
const onSqliteServer = async (
  policy: (request: ResponsesRequest) => FakeReply,
  test: (server: { readonly url: string; readonly model: FakeOpenAIServer; readonly restart: () => Promise<void> }) => Promise<void>
) => {
  const model = await startFakeOpenAI(policy)
  const port = await freePort()
  const url = `http://127.0.0.1:${port}/api/chat`
  const config = configFor(model, { sqlite: join(mkdtempSync(join(tmpdir(), "ai-effect-durable-chat-")), "chat.db"), http: port })
  let worker = startDurableWorker(config)
  try {
    await ready(url)
    await test({
      url,
      model,
      restart: async () => {
        worker.child.kill("SIGKILL")
        await worker.exited
        worker = startDurableWorker(config)
      }
    })
  } finally {
    worker.child.kill("SIGKILL")
    await model.close()
    remote.applied.clear()
  }
}

describe("a durable chat on SQLite, its server killed mid-answer", () => {
  it("the server is SIGKILLed inside the answer and started again: the client reconnects, the answer shows once, the finished turns are not asked again, and the effect applied once", async () => {
    await onSqliteServer(slowAnswer, async ({ url, model, restart }) => {
      const client = new ChatClient({ connection: connectionTo(url), threadId: "thread-crash" })
      const sent = client.sendMessage("Where is A-100? Tell ada.")
      // Part of the answer is on the page when the server dies.
      await expect.poll(() => assistantText(client.getMessages()).length, { timeout: 20_000, interval: 10 }).toBeGreaterThan(words.slice(0, 6).join("").length)
      await restart()
      await sent
      expect(client.getError()).toBeUndefined()
      expect(assistantText(client.getMessages())).toBe(answer)
      // The turn in flight was asked again; the two finished ones were not. The effect was applied once.
      expect(requestsPerTurn(model.requests)).toEqual([1, 1, 2])
      expect(remote.applied.get("lookup-A-100")).toBe(1)
      expect(remote.applied.get("notify-ada")).toBe(1)
      // The restarted runner saved the thread: a reload hydrates the answer once.
      const thread = await fetch(`${url}?threadId=thread-crash`).then((response) => response.json() as Promise<AI.Thread>)
      expect(thread.activeRun).toBe(null)
      expect(assistantText(thread.messages)).toBe(answer)
    })
  }, 120_000)
})

describe("a durable chat on SQLite, its server killed while a run waits for approval", () => {
  it("the server is SIGKILLed while the run waits and started again: a reload restores the pending approval, and its approval runs the tool once", async () => {
    await onSqliteServer(refundModel, async ({ url, model, restart }) => {
      const asking = new ChatClient({ connection: connectionTo(url), threadId: "thread-refund", persistence: true })
      await asking.sendMessage("Refund A-100")
      expect(asking.getPendingInterrupts()).toHaveLength(1)
      await restart()
      await ready(url)

      // The page loaded again: the hydrate restores the pending approval, and the person approves it.
      const reloaded = new ChatClient({ connection: connectionTo(url), threadId: "thread-refund", persistence: true })
      reloaded.attach()
      await expect.poll(() => reloaded.getPendingInterrupts().length, { timeout: 10_000 }).toBe(1)
      for (const interrupt of reloaded.getPendingInterrupts()) if (interrupt.kind === "generic") interrupt.resolveInterrupt({ approved: true })
      await expect.poll(() => assistantText(reloaded.getMessages()), { timeout: 20_000 }).toContain(`Refund: ${JSON.stringify({ refunded: true })}`)
      expect(remote.applied.get("refund-A-100")).toBe(1)
      expect(model.requests).toHaveLength(2)
    })
  }, 120_000)
})

describe.skipIf(missing("postgres") !== undefined)("a durable chat on two runners sharing PostgreSQL", () => {
  let postgres: TestServer
  beforeAll(async () => {
    postgres = await startPostgres()
  }, 60_000)
  afterAll(async () => {
    await postgres?.dispose()
  })

  it("the runner that owns a run is killed mid-answer: a client joined through the other node receives every chunk of the run once, in order, to its end", async () => {
    const model = await startFakeOpenAI(slowAnswer)
    const nodes = await Promise.all([0, 1].map(async () => ({ runner: await freePort(), http: await freePort() })))
    const workers = nodes.map((node) =>
      startDurableWorker(configFor(model, {
        postgres: postgres.url,
        http: node.http,
        // A short shard lock expiry, so that the survivor takes the dead runner's shards in seconds.
        runner: { kind: "socket", port: node.runner, shardLockExpirationMillis: 3_000 }
      }))
    )
    try {
      const urls = nodes.map((node) => `http://127.0.0.1:${node.http}/api/chat`)
      await Promise.all(urls.map(ready))
      const ids = { threadId: "thread-two-runners", runId: "run-two-runners" }
      // The message goes to the first node; whichever runner owns the run's shard runs it.
      void fetch(urls[0]!, { method: "POST", body: chatRequestBody(ids, "Where is A-100? Tell ada.") }).then((response) => response.text()).catch(() => undefined)
      await expect.poll(() => nodes.findIndex((node) => remote.applied.has(`lookup-A-100-on-${node.runner}`)), { timeout: 30_000 }).not.toBe(-1)
      const owner = nodes.findIndex((node) => remote.applied.has(`lookup-A-100-on-${node.runner}`))

      const joined: Array<StreamChunk> = []
      const join = connectionTo(urls[1 - owner]!).joinRun!
      const reading = (async () => {
        for await (const chunk of join(ids.runId)) joined.push(chunk)
      })()
      await expect.poll(() => joined.filter((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT").length, { timeout: 30_000, interval: 10 }).toBeGreaterThan(5)
      workers[owner]!.child.kill("SIGKILL")
      await workers[owner]!.exited
      await reading

      // Every chunk of the run's log, once and in order, to its end: what a second join from the start reads now.
      const whole: Array<StreamChunk> = []
      for await (const chunk of connectionTo(urls[1 - owner]!).joinRun!(ids.runId)) whole.push(chunk)
      expect(joined).toEqual(whole)
      expect(joined.at(-1)?.type).toBe("RUN_FINISHED")
      const processor = new StreamProcessor()
      for (const chunk of joined) processor.processChunk(chunk)
      processor.finalizeStream()
      expect(assistantText(processor.getMessages())).toBe(answer)
      expect(requestsPerTurn(model.requests)).toEqual([1, 1, 2])
      expect(remote.applied.get("notify-ada")).toBe(1)
    } finally {
      for (const worker of workers) worker.child.kill("SIGKILL")
      await model.close()
      remote.applied.clear()
    }
  }, 120_000)
})
