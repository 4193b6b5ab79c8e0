/**
 * The responder agent of the reconciliation page against a real HTTP issue
 * tracker on 127.0.0.1: at most one comment per run and issue, across crashes.
 */
import * as AI from "@tanstack/ai-effect"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { Effect, Fiber, Layer, ManagedRuntime, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { CommentPosted, makeResponder } from "../examples/responder/responder.ts"
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
  // One runtime, so one store, for every run of a test: the record outlives a crashed run.
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(CommentPosted.layer.pipe(Layer.provideMerge(tracker)), AI.EffectStore.layerMemory())
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

const answer = (body: string) => ({ toolCalls: [{ name: "comment", args: { issue: 1, body } }] })

describe("the responder example", () => {
  it("posts its answer once in a normal run, however often the model asks", async () => {
    const { server, runResponder } = await setup()
    const { adapter, run } = runResponder("run-1", [answer("Try clearing the cache."), answer("Or reinstall."), { text: "Answered." }])
    await run()
    expect(server.comments.map((comment) => comment.author)).toEqual(["responder-bot"])
    expect(AI.findEffectMarker(server.comments[0]!.body)).toEqual(["run-1:comment:1"])
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
    expect(server.comments.map((comment) => AI.findEffectMarker(comment.body))).toEqual([["run-1:comment:1"], ["run-2:comment:1"]])
  })

  it("does not count a marker forged by another author as applied", async () => {
    const { server, runResponder } = await setup()
    server.addComment(1, "mallory", `Nothing to see here ${AI.effectMarker("run-1:comment:1")}`)
    await runResponder("run-1", [answer("Try clearing the cache."), { text: "Answered." }]).run()
    expect(server.comments.map((comment) => comment.author)).toEqual(["mallory", "responder-bot"])
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
