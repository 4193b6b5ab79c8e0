/**
 * The responder agent of the reconciliation page against a real HTTP issue
 * tracker on 127.0.0.1: at most one comment per run and issue, across
 * crashes; and the responder as deployed (`npm run responder`), a process
 * whose webhook starts durable runs on PostgreSQL.
 */
import * as AI from "@tanstack/ai-effect"
import { type FakeReply, type ResponsesRequest, scriptedText, startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { Effect, Fiber, Layer, ManagedRuntime, Redacted, Stream } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { CommentPosted, makeResponder, Markers } from "../../examples/responder/responder.ts"
import { Tracker } from "../../examples/responder/Tracker.ts"
import { startTracker, webhookSignature } from "../../examples/responder/tracker-server.ts"
import { freePort, missing, startPostgres } from "../support/services.ts"

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
const signed = AI.signedEffectMarkers(secret)

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
    const wrong = AI.signedEffectMarkers(Redacted.make("someone else's secret")).marker("run-1:comment:1")
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

describe.skipIf(missing("postgres") !== undefined)("the responder as deployed: webhooks start durable runs on PostgreSQL", () => {
  const webhookSecret = "webhook-test-secret"

  /** The model: answer the issue with a comment, then say so. */
  const model = (request: ResponsesRequest): FakeReply =>
    request.input.some((item) => item.type === "function_call_output")
      ? { text: "Answered." }
      : { toolCalls: [{ name: "comment", args: { issue: 1, body: "Try clearing the cache." }, id: "call_comment" }] }

  /** Starts the tracker, the model and PostgreSQL, then the service as `npm run responder` starts it. */
  const deploy = async () => {
    const postgres = await startPostgres()
    cleanups.push(() => postgres.dispose())
    const tracker = await startTracker({ "bot-token": "responder-bot" })
    cleanups.push(() => tracker.close())
    const openai = await startFakeOpenAI(model)
    cleanups.push(() => openai.close())
    const port = await freePort()
    const child: ChildProcess = spawn(process.execPath, ["--conditions=@tanstack/ai-effect/source", "examples/responder/main.ts"], {
      cwd: join(import.meta.dirname, "..", ".."),
      env: {
        ...process.env,
        DATABASE_URL: postgres.url,
        TRACKER_URL: tracker.url,
        TRACKER_TOKEN: "bot-token",
        WEBHOOK_SECRET: webhookSecret,
        MARKER_SECRET: "responder-test-secret",
        OPENAI_API_KEY: "test-key",
        OPENAI_BASE_URL: openai.baseURL,
        PORT: String(port),
        HOST: "127.0.0.1"
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    cleanups.push(async () => {
      if (child.exitCode !== null) return
      const exited = once(child, "exit")
      child.kill("SIGTERM")
      await exited
    })
    let output = ""
    const { promise: listening, resolve: listens } = Promise.withResolvers<void>()
    const read = (part: Buffer) => {
      output += part.toString()
      if (output.includes("The responder is listening on")) listens()
    }
    child.stdout!.on("data", read)
    child.stderr!.on("data", read)
    child.once("exit", () => listens())
    await listening
    expect(child.exitCode, output).toBeNull()
    const url = `http://127.0.0.1:${port}/webhooks/tracker`
    tracker.setWebhook({ url, secret: webhookSecret })
    return { tracker, openai, url }
  }

  /** Resolves once `done` holds, looking again on every turn of the event loop. */
  const until = async (done: () => boolean) => {
    while (!done()) await new Promise((resolve) => setImmediate(resolve))
  }

  it("an opened issue's webhook starts a durable run that comments once; a redelivery joins the run: no second comment, no model request", async () => {
    const { tracker, openai } = await deploy()
    const commented = tracker.nextComment()
    const { issue, status } = await tracker.openIssue("The build fails on Node 24", "npm ci fails with EBADENGINE.")
    expect(status).toBe(202)
    const comment = await commented
    expect(comment.author).toBe("responder-bot")
    expect(signed.find(comment.body)).toEqual(["issue-1:comment:1"])
    await until(() => openai.requests.length === 2)

    expect(await tracker.redeliver(issue)).toBe(202)
    expect(tracker.comments).toHaveLength(1)
    expect(openai.requests).toHaveLength(2)
  }, 120_000)

  it("a delivery that the tracker did not sign is refused, and starts nothing", async () => {
    const { url, openai } = await deploy()
    const body = JSON.stringify({ action: "opened", issue: { number: 7, title: "x", body: "y" } })
    const forged = await fetch(url, { method: "POST", headers: { "x-tracker-signature": webhookSignature("guessed", body) }, body })
    expect(forged.status).toBe(401)
    const unsigned = await fetch(url, { method: "POST", body })
    expect(unsigned.status).toBe(401)
    const malformed = await fetch(url, { method: "POST", headers: { "x-tracker-signature": webhookSignature(webhookSecret, "{}") }, body: "{}" })
    expect(malformed.status).toBe(400)
    expect(openai.requests).toHaveLength(0)
  }, 120_000)
})
