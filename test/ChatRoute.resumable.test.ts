/**
 * ChatRoute.resumableHandler on effect/http, driven by the real
 * `@tanstack/ai-client`: a connection dropped mid-answer is resumed from the
 * last event id, every chunk reaching the client once, in order, and the
 * model asked once; a join reads a finished run from its log; bad offsets
 * and unknown runs are answered at once.
 */
import { createServer as createHttpServer } from "node:http"
import { connect, createServer, type Server, type Socket } from "node:net"
import type { AddressInfo } from "node:net"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ChatClient, fetchServerSentEvents } from "@tanstack/ai-client"
import type { StreamChunk } from "@tanstack/ai"
import * as AI from "@tanstack/ai-effect"
import { ChatRoute } from "@tanstack/ai-effect/http"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { Context, Effect, Layer } from "effect"
import { HttpRouter, HttpServer } from "effect/http"

const answer = ["Hello", " there,", " how", " are", " you?"]

/** The resumable route on 127.0.0.1 for the test's scope, with a memory log (or `log`); gives its URL and the model. */
const serveResumable = (log: Layer.Layer<AI.StreamLog> = AI.StreamLog.layerMemory(), options?: ChatRoute.RouteOptions) => Effect.gen(function*() {
  const model = scriptedText([{ text: answer }])
  const route = ChatRoute.resumableHandler((params) => AI.chat({ adapter: model, ...params }), options)
  const context = yield* Layer.build(
    HttpRouter.serve(
      Layer.mergeAll(HttpRouter.add("POST", "/api/chat", route), HttpRouter.add("GET", "/api/chat", route)),
      { disableListenLog: true, disableLogger: true }
    ).pipe(
      Layer.provide(log),
      Layer.provideMerge(NodeHttpServer.layer(createHttpServer, { port: 0, host: "127.0.0.1" }))
    )
  )
  const server = Context.get(context, HttpServer.HttpServer)
  return { url: `${HttpServer.formatAddress(server.address)}/api/chat`, model }
})

/**
 * A TCP proxy in front of the route whose first connection is destroyed
 * once `events` whole events of the response went through: the socket dies
 * mid-answer, as a dropped network does.
 */
const droppingProxy = (target: string, events: number) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const { port } = new URL(target)
      let connections = 0
      const sockets = new Set<Socket>()
      const server: Server = createServer((client) => {
        const first = ++connections === 1
        const upstream = connect(Number(port), "127.0.0.1")
        sockets.add(client).add(upstream)
        client.pipe(upstream)
        let seen = ""
        upstream.on("data", (data: Buffer) => {
          if (!first) return void client.write(data)
          seen += data.toString("latin1")
          // An event ends with a blank line, wherever it falls in the HTTP chunks (events ready together share one).
          const ends = [...seen.matchAll(/\n\n/g)]
          if (ends.length < events) return void client.write(data)
          // latin1: one character per byte, so positions in `seen` are byte offsets.
          const cut = ends[events - 1]!.index! + 2
          client.write(data.subarray(0, cut - (seen.length - data.length)))
          client.destroy()
          upstream.destroy()
        })
        for (const socket of [client, upstream]) socket.on("error", () => socket.destroy())
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${new URL(target).pathname}`
      return { url, server, sockets, connections: () => connections }
    }),
    ({ server, sockets }) =>
      Effect.promise(() => {
        for (const socket of sockets) socket.destroy()
        return new Promise<void>((resolve) => server.close(() => resolve()))
      })
  )

/** A memory log whose store cannot answer the `failing`-th append: a blip in the middle of a run. */
const logFailingAppend = (failing: number) =>
  Layer.effect(AI.StreamLog)(Effect.gen(function*() {
    const memory = yield* AI.StreamLog
    let appends = 0
    return yield* AI.StreamLog.make({
      ...memory,
      append: (runId, epoch, chunks) =>
        ++appends === failing
          ? Effect.fail(new AI.StreamLogError({ operation: "append", runId, reason: "unavailable", cause: "the store did not answer" }))
          : memory.append(runId, epoch, chunks)
    })
  })).pipe(Layer.provide(AI.StreamLog.layerMemory()))

const textOf = (chunks: ReadonlyArray<StreamChunk>) => chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : [])

describe("ChatRoute.resumableHandler with @tanstack/ai-client", () => {
  it.live("a connection destroyed mid-answer is resumed from the last event id: every delta once, in order, and the model asked once", () =>
    Effect.gen(function*() {
      const { url, model } = yield* serveResumable()
      // The accepted marker, RUN_STARTED and the message's start go through; then the socket dies.
      const proxy = yield* droppingProxy(url, 3)
      const chunks: Array<StreamChunk> = []
      const client = new ChatClient({ connection: fetchServerSentEvents(proxy.url), onChunk: (chunk) => chunks.push(chunk) })
      yield* Effect.promise(() => client.sendMessage("Hi"))
      expect(proxy.connections()).toBe(2)
      expect(textOf(chunks)).toEqual(answer)
      const assistant = client.getMessages().find((message) => message.role === "assistant")
      expect(assistant?.parts.flatMap((part) => part.type === "text" ? [part.content] : []).join("")).toBe(answer.join(""))
      expect(model.turns).toHaveLength(1)
    }).pipe(Effect.scoped))

  it.live("a join of a finished run from the start reads it from the log, and the model is not asked again", () =>
    Effect.gen(function*() {
      const { url, model } = yield* serveResumable()
      const client = new ChatClient({ connection: fetchServerSentEvents(url) })
      yield* Effect.promise(() => client.sendMessage("Hi"))
      const runId = model.turns[0]!.runId
      const joined = yield* Effect.promise(() => fetch(`${url}?runId=${encodeURIComponent(runId!)}&offset=-1`).then((response) => response.text()))
      const deltas = joined.split("\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice(6)) as StreamChunk)
      expect(textOf(deltas)).toEqual(answer)
      expect(joined).toMatch(/^id: ai-effect:v1:/m)
      expect(model.turns).toHaveLength(1)
    }).pipe(Effect.scoped))

  it.live("a store that fails mid-run: the connected client still gets the whole answer, once; a join or a resume past what was stored ends on core's RUN_ERROR that says why", () =>
    Effect.gen(function*() {
      // One append per chunk, the third one failing: the accepted marker and RUN_STARTED are stored, the rest is not.
      const { url, model } = yield* serveResumable(logFailingAppend(3), { batch: 1 })
      const chunks: Array<StreamChunk> = []
      const client = new ChatClient({ connection: fetchServerSentEvents(url), onChunk: (chunk) => chunks.push(chunk) })
      yield* Effect.promise(() => client.sendMessage("Hi"))
      expect(client.getError()).toBeUndefined()
      expect(textOf(chunks)).toEqual(answer)
      expect(model.turns).toHaveLength(1)

      const runId = model.turns[0]!.runId!
      const read = (offset: string) =>
        Effect.promise(() =>
          fetch(`${url}?runId=${encodeURIComponent(runId)}&offset=${encodeURIComponent(offset)}`).then(async (response) =>
            (await response.text()).split("\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice(6)) as StreamChunk)
          )
        )
      const joined = yield* read("-1")
      expect(joined.map((chunk) => chunk.type)).toEqual(["CUSTOM", "RUN_STARTED", "RUN_ERROR"])
      expect(joined.at(-1)).toMatchObject({ code: "log-unavailable" })
      // The connected client's offsets past the failure name no stored position: a resume from one reads the terminal.
      const resumed = yield* read(`${AI.StreamLog.offsetOf(runId, 2)}.3`)
      expect(resumed.map((chunk) => chunk.type)).toEqual(["RUN_ERROR"])
    }).pipe(Effect.scoped))

  it.live("an offset this log did not mint is a 400, and a run whose log is not stored is a 404, both at once", () =>
    Effect.gen(function*() {
      const { url } = yield* serveResumable()
      const get = (query: string, headers: Record<string, string> = {}) =>
        Effect.promise(() => fetch(`${url}${query}`, { headers }).then(async (response) => ({ status: response.status, text: await response.text() })))
      expect(yield* get("?runId=run-1&offset=42")).toMatchObject({ status: 400, text: expect.stringContaining("is not an offset of this log") })
      expect(yield* get("", { "Last-Event-ID": "garbage", "X-Run-Id": "run-1" })).toMatchObject({ status: 400 })
      expect(yield* get(`?offset=${encodeURIComponent(AI.StreamLog.offsetOf("run-nowhere", 3))}`)).toMatchObject({ status: 404 })
      expect(yield* get("?runId=run-nowhere&offset=-1")).toMatchObject({ status: 404, text: expect.stringContaining("run-nowhere") })
    }).pipe(Effect.scoped))
})
