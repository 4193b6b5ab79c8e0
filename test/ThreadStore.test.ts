/**
 * Threads on the server: the store's compare-and-set on the active run, on
 * memory and SQLite, and the whole persistent route driven by the real
 * `@tanstack/ai-client` with `persistence: true`: a second client hydrates
 * the transcript, and tails a run that is still answering.
 */
import { mkdtempSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type { AnyTextAdapter, StreamChunk } from "@tanstack/ai"
import { ChatClient, fetchServerSentEvents } from "@tanstack/ai-client"
import * as AI from "@tanstack/ai-effect"
import { ChatRoute } from "@tanstack/ai-effect/http"
import { layerSqliteThreadStore } from "@tanstack/ai-effect/sqlite"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { Context, Deferred, Effect, Layer } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { describeThreadRetention, describeThreadStore } from "./support/threads.ts"
import { getOrderDef } from "./support/tools.ts"

for (const [name, layer] of [
  ["memory", () => AI.ThreadStore.layerMemory()],
  ["SQLite", () => layerSqliteThreadStore({ filename: join(mkdtempSync(join(tmpdir(), "ai-effect-threads-")), "chat.db") })]
] as const) {
  describeThreadStore(name, layer)
  describeThreadRetention(name, layer)
}

/**
 * The scripted model, its stream held after its `holdAfter`-th delta until
 * `release` is called. Core's durable encoder appends up to 32 chunks at a
 * time, so a hold past the first batch leaves part of the answer in the log.
 */
const heldModel = (deltas: ReadonlyArray<string>, holdAfter: number) => {
  const model = scriptedText([{ text: deltas }])
  const { promise: released, resolve: release } = Promise.withResolvers<void>()
  const { promise: holding, resolve: hold } = Promise.withResolvers<void>()
  const adapter: AnyTextAdapter = Object.create(model, {
    chatStream: {
      value: (options: Parameters<AnyTextAdapter["chatStream"]>[0]) =>
        (async function*() {
          let deltasSeen = 0
          for await (const chunk of model.chatStream(options) as AsyncIterable<StreamChunk>) {
            yield chunk
            if (chunk.type === "TEXT_MESSAGE_CONTENT" && ++deltasSeen === holdAfter) {
              hold()
              await released
            }
          }
        })()
    }
  })
  return { adapter, holding, release: () => release() }
}

const serve = (
  adapter: AnyTextAdapter,
  options?: ChatRoute.RouteOptions & { readonly tools?: ReadonlyArray<AI.ServerTool.Any>; readonly locks?: boolean }
) =>
  Effect.gen(function*() {
    const route = ChatRoute.persistentHandler((params) => AI.chat({ adapter, ...params, tools: options?.tools ?? [] }), options)
    const locks = options?.locks === true
      ? AI.Locks.layer({ waitFor: "0 millis" }).pipe(Layer.provide(AI.EffectStore.layerMemory()))
      : Layer.empty
    const context = yield* Layer.build(
      HttpRouter.serve(
        Layer.mergeAll(HttpRouter.add("POST", "/api/chat", route), HttpRouter.add("GET", "/api/chat", route), HttpRouter.add("DELETE", "/api/chat", route)),
        { disableListenLog: true, disableLogger: true }
      ).pipe(
        Layer.provide(Layer.mergeAll(AI.StreamLog.layerMemory(), AI.ThreadStore.layerMemory(), locks)),
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
      )
    )
    return `${HttpServer.formatAddress(Context.get(context, HttpServer.HttpServer).address)}/api/chat`
  })

const textOf = (client: ChatClient) =>
  client.getMessages().map((message) => `${message.role}: ${message.parts.flatMap((part) => part.type === "text" ? [part.content] : []).join("")}`)

describe("ChatRoute.persistentHandler with @tanstack/ai-client and persistence: true", () => {
  it.live("a second client on the thread hydrates the transcript the first one produced, asking the model nothing", () =>
    Effect.gen(function*() {
      const model = scriptedText([{ text: ["Hello", " there."] }])
      const url = yield* serve(model)
      const first = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-hydrate", persistence: true })
      yield* Effect.promise(() => first.sendMessage("Hi"))
      expect(textOf(first)).toEqual(["user: Hi", "assistant: Hello there."])

      const second = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-hydrate", persistence: true })
      second.attach()
      yield* Effect.promise(() => expect.poll(() => textOf(second)).toEqual(["user: Hi", "assistant: Hello there."]))
      expect(model.turns).toHaveLength(1)
    }).pipe(Effect.scoped))

  it.live("a client that mounts while a run answers tails it: the active run comes with the hydrate, and the answer arrives whole", () =>
    Effect.gen(function*() {
      const words = Array.from({ length: 40 }, (_, index) => `w${index} `)
      const { adapter, holding, release } = heldModel(words, 36)
      const url = yield* serve(adapter)
      const first = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-tail", persistence: true })
      const sent = first.sendMessage("Count")
      yield* Effect.promise(() => holding)
      const hydrated = yield* Effect.promise(() => fetch(`${url}?threadId=thread-tail`).then((response) => response.json()))
      expect(hydrated).toMatchObject({ activeRun: { runId: expect.any(String) }, messages: [{ role: "user" }] })

      const second = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-tail", persistence: true })
      second.attach()
      // While the run is held, the second client already shows the part in the log: it tails the run.
      yield* Effect.promise(() => expect.poll(() => textOf(second).find((line) => line.startsWith("assistant: w0 w1 "))).toBeDefined())
      expect(textOf(second)).not.toContain(`assistant: ${words.join("")}`)
      release()
      yield* Effect.promise(() => sent)
      yield* Effect.promise(() => expect.poll(() => textOf(second)).toContain(`assistant: ${words.join("")}`))
    }).pipe(Effect.scoped))

  it.live("a thread nothing was saved to is a 404, and a GET without a thread or an offset is a 400", () =>
    Effect.gen(function*() {
      const url = yield* serve(scriptedText([{ text: "never" }]))
      const status = (query: string) => Effect.promise(() => fetch(`${url}${query}`).then((response) => response.status))
      expect(yield* status("?threadId=thread-nobody")).toBe(404)
      expect(yield* status("")).toBe(400)
    }).pipe(Effect.scoped))

  it.live("authorize refuses a thread or a run the caller may not read with a 403: no hydrate, no run, no join", () =>
    Effect.gen(function*() {
      const model = scriptedText([{ text: "Hello." }])
      const seen: Array<unknown> = []
      const url = yield* serve(model, {
        authorize: (request, target) => {
          seen.push(target)
          const user = request.headers["x-user"]
          return Effect.succeed(user !== undefined && (target.threadId ?? target.runId ?? "").startsWith(`${user}:`))
        }
      })
      const call = (query: string, user: string, init: RequestInit = {}) =>
        Effect.promise(() =>
          fetch(`${url}${query}`, { ...init, headers: { "x-user": user, "content-type": "application/json", ...init.headers } }).then(async (response) => ({
            status: response.status,
            text: await response.text()
          }))
        )
      const body = JSON.stringify({ threadId: "alice:t1", runId: "alice:r1", messages: [{ id: "m1", role: "user", content: "Hi" }], tools: [], context: [] })
      expect((yield* call("", "bob", { method: "POST", body })).status).toBe(403)
      expect(model.turns).toHaveLength(0)
      expect((yield* call("", "alice", { method: "POST", body })).status).toBe(200)
      expect((yield* call("?threadId=alice:t1", "bob")).status).toBe(403)
      expect((yield* call("?threadId=alice:t1", "alice")).status).toBe(200)
      expect((yield* call("?runId=alice:r1&offset=-1", "bob")).status).toBe(403)
      expect((yield* call("?runId=alice:r1&offset=-1", "alice")).text).toContain("Hello.")
      expect(seen).toContainEqual({ threadId: "alice:t1", runId: "alice:r1" })
    }).pipe(Effect.scoped))

  const runBody = (threadId: string, runId: string, text: string) =>
    JSON.stringify({ threadId, runId, messages: [{ id: `m-${runId}`, role: "user", content: text }], tools: [], context: [] })

  it.live("with AI.Locks, a message sent to a thread while a run answers it is a 409 that says so, and the thread keeps the running run", () =>
    Effect.gen(function*() {
      const { adapter, holding, release } = heldModel(["Still ", "answering."], 1)
      const url = yield* serve(adapter, { locks: true })
      const first = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-busy", persistence: true })
      const sent = first.sendMessage("First")
      yield* Effect.promise(() => holding)
      const post = (runId: string) =>
        Effect.promise(() =>
          fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: runBody("thread-busy", runId, "Second") })
            .then(async (response) => ({ status: response.status, text: await response.text() }))
        )
      expect(yield* post("run-second")).toEqual({ status: 409, text: "Thread thread-busy is answering another message; send yours when that answer ends" })
      const hydrated = yield* Effect.promise(() => fetch(`${url}?threadId=thread-busy`).then((response) => response.json()))
      expect(hydrated.messages.map((message: { parts: Array<{ content: string }> }) => message.parts[0]!.content)).toEqual(["First"])
      release()
      yield* Effect.promise(() => sent)
      // The lock is released with the run's end: the next message runs.
      expect((yield* post("run-third")).status).toBe(200)
    }).pipe(Effect.scoped))

  it.live("a DELETE with ?runId cancels a running run from another request: its tool is interrupted, a joining reader ends on the cancel, the thread keeps what was answered", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const started = yield* Deferred.make<void>()
      const waiting = AI.serverTool(getOrderDef, () =>
        Effect.andThen(Deferred.succeed(started, undefined), Effect.never).pipe(Effect.onInterrupt(() => Effect.sync(() => events.push("interrupted")))))
      const model = scriptedText([{ text: "Looking it up.", toolCalls: [{ name: "get_order", args: { id: "A-100" }, id: "call-1" }] }, { text: "never" }])
      const url = yield* serve(model, { tools: [waiting] })
      const client = new ChatClient({ connection: fetchServerSentEvents(url), threadId: "thread-cancel", persistence: true })
      const sent = client.sendMessage("Where is A-100?")
      yield* Deferred.await(started)
      const runId = model.turns[0]!.runId!
      const cancel = () => Effect.promise(() => fetch(`${url}?runId=${encodeURIComponent(runId)}`, { method: "DELETE" }).then((response) => response.status))
      expect(yield* cancel()).toBe(202)
      yield* Effect.promise(() => expect.poll(() => events).toEqual(["interrupted"]))
      const joined = yield* Effect.promise(() => fetch(`${url}?runId=${encodeURIComponent(runId)}&offset=-1`).then((response) => response.text()))
      const last = joined.trim().split("\n").filter((line) => line.startsWith("data: ")).at(-1)!
      expect(JSON.parse(last.slice(6))).toMatchObject({ type: "RUN_ERROR", code: "cancelled" })
      expect(yield* cancel()).toBe(409)
      client.stop()
      yield* Effect.promise(() => sent.catch(() => undefined))
      const hydrated = yield* Effect.promise(() => fetch(`${url}?threadId=thread-cancel`).then((response) => response.json()))
      expect(hydrated).toMatchObject({ activeRun: null })
      expect(JSON.stringify(hydrated.messages)).toContain("Looking it up.")
      expect(model.turns).toHaveLength(1)
    }).pipe(Effect.scoped))
})
