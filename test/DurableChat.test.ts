/**
 * Durable chat in one process: `ChatRoute.durableHandler` answers each
 * message with a durable agent run whose runner writes the run's delivery
 * log, driven by the real `@tanstack/ai-client` with `persistence: true`.
 * The answer arrives once, the thread is saved by the run's end, a second
 * client hydrates it and a client that mounts mid-run joins it; a runner
 * that takes a run over fences the one before it and starts with a snapshot,
 * so that a turn cut off mid-answer shows once; a DELETE stops the run.
 * Crashes of real processes are test/e2e/DurableChat.test.ts's.
 */
import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { type AnyTextAdapter, type StreamChunk, StreamProcessor } from "@tanstack/ai"
import { ChatClient, fetchServerSentEvents } from "@tanstack/ai-client"
import * as AI from "@tanstack/ai-effect"
import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
import { ChatRoute } from "@tanstack/ai-effect/http"
import { type FakeReply, fakeOpenAI, scriptedText } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Cause, Context, Deferred, Effect, Exit, Layer, Ref, Schedule } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { chatRequestBody } from "./support/agui.ts"
import { makeOrdersAgent, makeRefundAgent, makeStuckAgent, ordersModel, refundModel, requestsPerTurn } from "./support/durable.ts"

const answer = "A-100 has shipped, and ada knows."

/** The route on a server of its own, with the agent, the memory engine, and a log and thread store the agent's runner writes. */
const serve = <Tools extends ReadonlyArray<unknown>>(
  agent: DurableAgent.DurableAgent<Tools>,
  stores: Layer.Layer<AI.StreamLog | AI.ThreadStore>,
  services: Layer.Layer<never> = Layer.empty
) =>
  Effect.gen(function*() {
    const route = ChatRoute.durableHandler(agent)
    const context = yield* Layer.build(
      HttpRouter.serve(
        Layer.mergeAll(HttpRouter.add("POST", "/api/chat", route), HttpRouter.add("GET", "/api/chat", route), HttpRouter.add("DELETE", "/api/chat", route)),
        { disableListenLog: true, disableLogger: true }
      ).pipe(
        // The tests' tools need at most an EffectStore, provided below; a generic agent's requirements cannot say so.
        Layer.provide(agent.layer as Layer.Layer<DurableAgent.RunChunks, never, DurableAgent.DurableServices | AI.StreamLog | AI.ThreadStore | AI.EffectStore>),
        Layer.provideMerge(DurableEngine.layerMemory),
        Layer.provideMerge(stores),
        Layer.provide(Layer.merge(AI.EffectStore.layerMemory(), services)),
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
      )
    )
    return {
      url: `${HttpServer.formatAddress(Context.get(context, HttpServer.HttpServer).address)}/api/chat`,
      log: Context.get(context, AI.StreamLog),
      threads: Context.get(context, AI.ThreadStore)
    }
  })

const stores = () => Layer.mergeAll(AI.StreamLog.layerMemory(), AI.ThreadStore.layerMemory())

const textOf = (client: ChatClient) =>
  client.getMessages().map((message) => `${message.role}: ${message.parts.flatMap((part) => part.type === "text" ? [part.content] : []).join("")}`)

const toolResultsOf = (client: ChatClient) =>
  client.getMessages().flatMap((message) => message.parts).flatMap((part) => part.type === "tool-result" ? [[part.toolCallId, part.content]] : [])

describe("ChatRoute.durableHandler with @tanstack/ai-client", () => {
  it.live("a message is answered by a durable run through its log: every tool result and the text once, each turn asked once, the thread saved by the run's end and hydrated by a second client", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(ordersModel())
      const applied = yield* Ref.make(0)
      const { url, threads } = yield* serve(makeOrdersAgent(model.baseURL, applied), stores())
      const first = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-durable", persistence: true })
      yield* Effect.promise(() => first.sendMessage("Where is A-100? Tell ada."))
      expect(textOf(first)).toEqual(["user: Where is A-100? Tell ada.", `assistant: ${answer}`])
      expect(toolResultsOf(first)).toEqual([
        ["call_lookup", JSON.stringify({ status: "shipped" })],
        ["call_notify", JSON.stringify({ sent: 1 })]
      ])
      expect(requestsPerTurn(model.requests)).toEqual([1, 1, 1])
      expect(yield* Ref.get(applied)).toBe(1)

      // The runner saved the thread when the run ended: nothing is active, and the transcript is the client's.
      const saved = yield* threads.load("thread-durable")
      expect(saved._tag === "Some" && saved.value.activeRun).toBe(null)
      const second = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-durable", persistence: true })
      second.attach()
      yield* Effect.promise(() => expect.poll(() => textOf(second)).toEqual(textOf(first)))
      expect(toolResultsOf(second)).toEqual(toolResultsOf(first))
      expect(model.requests).toHaveLength(3)
    }).pipe(Effect.scoped))

  it.live("a client that mounts while the durable run answers joins it from the log, and the answer arrives whole, once", () =>
    Effect.gen(function*() {
      const words = Array.from({ length: 30 }, (_, index) => `w${index} `)
      const model = yield* fakeOpenAI((): FakeReply => ({ text: words, deltaDelayMs: 20 }))
      const { url, log } = yield* serve(countingAgent(model.baseURL), stores())
      const first = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-join", persistence: true })
      const sent = first.sendMessage("Count")
      // The thread is saved (with its active run) before the run starts.
      const thread = yield* Effect.tryPromise(() => fetch(`${url}?threadId=thread-join`).then((response) => response.json() as Promise<AI.Thread>)).pipe(
        Effect.filterOrFail((thread) => thread.activeRun !== null),
        Effect.retry(Schedule.spaced("20 millis"))
      )
      // Part of the answer is in the log before the second client mounts.
      const runId = thread.activeRun!.runId
      yield* Effect.promise(() => expect.poll(() => Effect.runPromise(log.read(runId, 0, 100)).then((page) => page.entries.length)).toBeGreaterThan(8))

      const second = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-join", persistence: true })
      second.attach()
      yield* Effect.promise(() => sent)
      yield* Effect.promise(() => expect.poll(() => textOf(second)).toEqual(["user: Count", `assistant: ${words.join("")}`]))
      expect(textOf(first)).toEqual(["user: Count", `assistant: ${words.join("")}`])
      expect(model.requests).toHaveLength(1)
    }).pipe(Effect.scoped))

  it.live("a runner that takes a run over fences the one before it and starts with a snapshot: a client joining the run shows the turn the first cut off once", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(ordersModel())
      const applied = yield* Ref.make(0)
      const ids = { threadId: "thread-taken-over", runId: "run-taken-over" }
      const { url, log } = yield* serve(makeOrdersAgent(model.baseURL, applied), stores())
      // What a runner that died inside the first turn left in the log: the start of a turn, with text it never finished.
      const dead = yield* log.claim(ids.runId)
      const cutOff = [
        { type: "RUN_STARTED", ...ids, timestamp: 1 },
        { type: "TEXT_MESSAGE_START", messageId: "msg-cut-off", role: "assistant", timestamp: 1 },
        { type: "TEXT_MESSAGE_CONTENT", messageId: "msg-cut-off", delta: "Let me look A-1", timestamp: 1 }
      ] as Array<StreamChunk>
      yield* log.append(ids.runId, dead, cutOff)

      // The run starts (a retry of its message), and its runner continues the log.
      const response = yield* Effect.promise(() => fetch(url, { method: "POST", body: chatRequestBody(ids, "Where is A-100? Tell ada.") }))
      expect(response.status).toBe(200)
      const processor = new StreamProcessor()
      const join = fetchServerSentEvents(url).joinRun!
      yield* Effect.promise(async () => {
        for await (const chunk of join(ids.runId)) processor.processChunk(chunk)
      })
      processor.finalizeStream()
      const assistant = processor.getMessages().filter((message) => message.role === "assistant")
      const text = assistant.flatMap((message) => message.parts.flatMap((part) => part.type === "text" ? [part.content] : [])).join("")
      expect(text).toBe(answer)
      const page = yield* log.read(ids.runId, 0, 1_000)
      expect(page.entries.map((entry) => entry.chunk.type).slice(0, 4)).toEqual(["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "MESSAGES_SNAPSHOT"])
      expect(page.complete).toBe(true)
      // The dead runner's late write is refused.
      const late = yield* Effect.exit(log.append(ids.runId, dead, cutOff))
      expect(Exit.isFailure(late) && Cause.pretty(late.cause)).toContain("ProducerFenced")
    }).pipe(Effect.scoped))

  it.live("a DELETE stops the durable run from another request: the tool in flight is interrupted and its finalizer runs, the client's answer ends, and a second DELETE is a 409", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(ordersModel())
      const started = yield* Deferred.make<void>()
      const finalized = yield* Deferred.make<void>()
      const agent = makeStuckAgent(model.baseURL, started, finalized)
      const { url } = yield* serve(agent, stores())
      const ids = { threadId: "thread-stopped", runId: "run-stopped" }
      const answered = Effect.runPromise(Effect.promise(() => fetch(url, { method: "POST", body: chatRequestBody(ids, "Where is A-100?") }).then((response) => response.text())))
      yield* Deferred.await(started)
      const stop = () => Effect.promise(() => fetch(`${url}?runId=${ids.runId}`, { method: "DELETE" }).then((response) => response.status))
      expect(yield* stop()).toBe(202)
      yield* Deferred.await(finalized)
      expect(yield* Effect.promise(() => answered)).toContain("cancelled")
      expect(yield* stop()).toBe(409)
      expect(model.requests).toHaveLength(1)
    }).pipe(Effect.scoped))

  it.live("a DELETE of a durable run that waits for approval: the client's approval that comes after it is refused with a 409 at once, and the tool never runs", () =>
    Effect.gen(function*() {
      const model = yield* fakeOpenAI(refundModel)
      const refunds = yield* Ref.make(0)
      const { url, threads } = yield* serve(makeRefundAgent(model.baseURL, refunds), stores())
      const answers: Array<number> = []
      const fetchClient: typeof fetch = (input, init) =>
        fetch(input, init).then((response) => {
          if (init?.method === "POST") answers.push(response.status)
          return response
        })
      const client = new ChatClient({ connection: fetchServerSentEvents(url, { fetchClient }), threadId: "thread-cancelled-approval", persistence: true })
      yield* Effect.promise(() => client.sendMessage("Refund A-100"))
      expect(client.getPendingInterrupts()).toHaveLength(1)
      const saved = yield* threads.load("thread-cancelled-approval")
      const runId = saved._tag === "Some" ? saved.value.interrupts?.runId : undefined
      expect(yield* Effect.promise(() => fetch(`${url}?runId=${runId}`, { method: "DELETE" }).then((response) => response.status))).toBe(202)
      for (const interrupt of client.getPendingInterrupts()) if (interrupt.kind === "generic") interrupt.resolveInterrupt({ approved: true })
      yield* Effect.promise(() => expect.poll(() => answers).toEqual([200, 409]))
      expect(yield* Ref.get(refunds)).toBe(0)
      expect(model.requests).toHaveLength(1)
    }).pipe(Effect.scoped))

  it.live("a message sent to a thread while its durable run answers is refused with a 409, asking the model nothing; a retry of the answering message joins its run", () =>
    Effect.gen(function*() {
      const words = Array.from({ length: 20 }, (_, index) => `w${index} `)
      const model = yield* fakeOpenAI((): FakeReply => ({ text: words, deltaDelayMs: 20 }))
      const { url, log } = yield* serve(countingAgent(model.baseURL), stores())
      const post = (runId: string, question: string) =>
        Effect.promise(() => fetch(url, { method: "POST", body: chatRequestBody({ threadId: "thread-busy", runId }, question) }))
      const first = yield* post("run-first", "Count")
      expect(first.status).toBe(200)
      yield* Effect.promise(() => expect.poll(() => Effect.runPromise(log.read("run-first", 0, 100)).then((page) => page.entries.length)).toBeGreaterThan(3))
      const second = yield* post("run-second", "Count again")
      expect(second.status).toBe(409)
      expect(yield* Effect.promise(() => second.text())).toContain("is answering another message")
      const retry = yield* post("run-first", "Count")
      expect(retry.status).toBe(200)
      const texts = yield* Effect.promise(() => Promise.all([first.text(), retry.text()]))
      for (const text of texts) expect(text).toContain("w19 ")
      expect(model.requests).toHaveLength(1)
    }).pipe(Effect.scoped))

  it.live("a model turn that breaks off mid-answer and is tried again inside its step shows once: the log puts the recorded conversation back before the new attempt", () =>
    Effect.gen(function*() {
      const words = ["Once ", "upon ", "a ", "time."]
      const model = scriptedText([{ text: words }, { text: words }])
      let attempts = 0
      // The first attempt streams two words, then the connection to the provider breaks.
      const adapter: AnyTextAdapter = Object.create(model, {
        chatStream: {
          value: (options: Parameters<AnyTextAdapter["chatStream"]>[0]) =>
            (async function*() {
              const attempt = ++attempts
              let deltas = 0
              for await (const chunk of model.chatStream(options) as AsyncIterable<StreamChunk>) {
                if (attempt === 1 && chunk.type === "TEXT_MESSAGE_CONTENT" && ++deltas > 2) throw new Error("socket hang up")
                yield chunk
              }
            })()
        }
      })
      const agent = DurableAgent.make(AI.defineAgent({ name: "storyteller", adapter, instructions: "Tell stories.", tools: [] }), {
        turnRetry: Schedule.recurs(1)
      })
      const { url } = yield* serve(agent, stores())
      const client = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-retried", persistence: true })
      yield* Effect.promise(() => client.sendMessage("A story"))
      expect(attempts).toBe(2)
      expect(textOf(client)).toEqual(["user: A story", `assistant: ${words.join("")}`])
    }).pipe(Effect.scoped))

  for (const approved of [true, false]) {
    it.live(`a durable run's approval reaches the client as core's interrupt, a second device hydrates it, and its ${approved ? "approval runs the tool once" : "refusal never runs the tool"}; the answer arrives in the answering client's run`, () =>
      Effect.gen(function*() {
        const model = yield* fakeOpenAI(refundModel)
        const refunds = yield* Ref.make(0)
        const agent = makeRefundAgent(model.baseURL, refunds)
        const { url, threads } = yield* serve(agent, stores())
        const threadId = `thread-approval-${approved}`
        const first = new ChatClient({ connection: fetchServerSentEvents(url), threadId, persistence: true })
        yield* Effect.promise(() => first.sendMessage("Refund A-100"))
        expect(first.getPendingInterrupts()).toHaveLength(1)
        expect(yield* Ref.get(refunds)).toBe(0)

        // Another device opens the thread while the run waits: the pending approval comes with the hydrate.
        const saved = yield* threads.load(threadId)
        expect(saved._tag === "Some" && saved.value.interrupts?.pending).toHaveLength(1)
        const second = new ChatClient({ connection: fetchServerSentEvents(url), threadId, persistence: true })
        second.attach()
        yield* Effect.promise(() => expect.poll(() => second.getPendingInterrupts().length).toBe(1))
        for (const interrupt of second.getPendingInterrupts()) if (interrupt.kind === "generic") interrupt.resolveInterrupt({ approved })

        const expected = `Refund: ${JSON.stringify(approved ? { refunded: true } : { error: "User declined tool execution" })}`
        yield* Effect.promise(() => expect.poll(() => textOf(second).at(-1)).toBe(`assistant: ${expected}`))
        expect(yield* Ref.get(refunds)).toBe(approved ? 1 : 0)
        expect(model.requests).toHaveLength(2)
        expect(second.getPendingInterrupts()).toHaveLength(0)
        // The run saved its thread when it ended: nothing pending, nothing active, the answer kept.
        const ended = yield* threads.load(threadId)
        expect(ended._tag === "Some" && [ended.value.activeRun, ended.value.interrupts]).toEqual([null, null])
        expect(ended._tag === "Some" && JSON.stringify(ended.value.messages)).toContain(JSON.stringify(expected).slice(1, -1))
      }).pipe(Effect.scoped))
  }
})

/** An agent that only answers, with the fake's text. */
const countingAgent = (baseURL: string) =>
  DurableAgent.make(AI.defineAgent({
    name: "counter",
    adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL, maxRetries: 0 }),
    instructions: "Count.",
    tools: []
  }))
