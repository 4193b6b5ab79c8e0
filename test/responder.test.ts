/**
 * The responder agent of the reconciliation page against a real HTTP issue
 * tracker on 127.0.0.1: at most one comment per run and issue, across crashes.
 */
import * as AI from "@tanstack/ai-effect"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { Effect, Fiber, Layer, ManagedRuntime, Redacted, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { CommentPosted, makeResponder, Markers } from "../examples/responder/responder.ts"
import { Tracker } from "../examples/responder/Tracker.ts"
import { startTracker } from "../examples/responder/tracker-server.ts"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const setup = async () => {
  const server = await startTracker({ "bot-token": "responder-bot", "mallory-token": "mallory" })
  cleanups.push(async () => {
    if (server.listening()) await server.close()
  })
  const tracker = Tracker.layer({ url: server.url, token: "bot-token" })
  const markers = Markers.layer(secret)
  // One runtime, so one store, for every run of a test: the record outlives a crashed run.
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(CommentPosted.layer.pipe(Layer.provideMerge(Layer.merge(tracker, markers))), AI.EffectStore.layerMemory())
  )
  cleanups.push(() => runtime.dispose())
  await runtime.runPromise(Effect.void) // builds the layers: the tracker client learns its account
  const runResponder = (runId: string, script: Parameters<typeof scriptedText>[0]) => {
    const adapter = scriptedText(script)
    const drain = AI.runAgent(makeResponder(adapter), {
      messages: [{ role: "user", content: "Issue #1: the build fails on Node 24" }],
      runId,
      trigger: "webhook"
    }).pipe(Stream.runDrain)
    return { adapter, run: () => runtime.runPromise(drain), fork: () => runtime.runFork(drain) }
  }
  return { server, runResponder }
}

const secret = Redacted.make("responder-test-secret")
const signed = AI.EffectMarker.signed(secret)

const answer = (body: string) => ({ toolCalls: [{ name: "comment", args: { issue: 1, body } }] })

describe("the responder example", () => {
  it("posts its answer once in a normal run, however often the model asks", async () => {
    const { server, runResponder } = await setup()
    const { adapter, run } = runResponder("run-1", [answer("Try clearing the cache."), answer("Or reinstall."), { text: "Answered." }])
    await run()
    expect(server.comments.map((comment) => comment.author)).toEqual(["responder-bot"])
    expect(signed.find(server.comments[0]!.body)).toEqual(["run-1:comment:1"])
    expect(adapter.turns[0]?.systemPrompts).toEqual(["Answer new issues."])
  })

  it("leaves exactly one comment after a crash between the post and the record, and a retry", async () => {
    const { server, runResponder } = await setup()
    const accepted = server.holdNextResponse()
    const crashed = runResponder("run-1", [answer("Try clearing the cache."), { text: "Answered." }]).fork()
    await accepted // the tracker stored the comment; the poster never hears back
    await Effect.runPromise(Fiber.interrupt(crashed))

    const retry = runResponder("run-1", [answer("Try clearing the cache, please."), { text: "Answered." }])
    await retry.run()
    expect(server.comments).toHaveLength(1)
    const [toolMessage] = (retry.adapter.turns[1]?.messages ?? []).filter((message) => message.role === "tool")
    expect(JSON.parse(String(toolMessage?.content))).toEqual({ commentId: 1 })
  })

  it("posts again in a second run with another run id, since the key includes the run id", async () => {
    const { server, runResponder } = await setup()
    await runResponder("run-1", [answer("First."), { text: "Answered." }]).run()
    await runResponder("run-2", [answer("Second."), { text: "Answered." }]).run()
    expect(server.comments.map((comment) => signed.find(comment.body))).toEqual([["run-1:comment:1"], ["run-2:comment:1"]])
  })

  it("does not count a marker by another author as applied, even one with a valid signature copied from elsewhere", async () => {
    const { server, runResponder } = await setup()
    server.addComment(1, "mallory", `Nothing to see here ${signed.marker("run-1:comment:1")}`)
    await runResponder("run-1", [answer("Try clearing the cache."), { text: "Answered." }]).run()
    expect(server.comments.map((comment) => comment.author)).toEqual(["mallory", "responder-bot"])
  })

  it("does not count a signed marker copied onto another key, even in the bot's own comment (a quote)", async () => {
    const { server, runResponder } = await setup()
    // The signature of run-0's key, with run-1's key written in front of it.
    const copied = signed.marker("run-0:comment:1").replace("run-0:comment:1", "run-1:comment:1")
    server.addComment(1, "responder-bot", `> quoting a user: ${copied}`)
    await runResponder("run-1", [answer("Try clearing the cache."), { text: "Answered." }]).run()
    expect(server.comments).toHaveLength(2)
  })

  it("does not count a marker with a wrong signature, nor an unsigned one, even in the bot's own comment", async () => {
    const { server, runResponder } = await setup()
    const wrong = AI.EffectMarker.signed(Redacted.make("someone else's secret")).marker("run-1:comment:1")
    server.addComment(1, "responder-bot", `> quoting a user: ${wrong} ${AI.effectMarker("run-1:comment:1")}`)
    await runResponder("run-1", [answer("Try clearing the cache."), { text: "Answered." }]).run()
    expect(server.comments).toHaveLength(2)
  })

  it("fails closed when the tracker cannot be searched: a tool error, and no comment", async () => {
    const { server, runResponder } = await setup()
    const { adapter, run } = runResponder("run-1", [{ toolCalls: [{ name: "comment", args: { issue: 1, body: "x" } }] }, { text: "Sorry." }])
    await server.close()
    await run()
    const [toolMessage] = (adapter.turns[1]?.messages ?? []).filter((message) => message.role === "tool")
    expect(JSON.parse(String(toolMessage?.content)).error).toMatch(/^TrackerError: listComments failed/)
    expect(server.comments).toHaveLength(0)
  })
})
