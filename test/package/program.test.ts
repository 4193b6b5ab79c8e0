import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { consumer, nodes, repositoryRoot, run } from "./consumer.ts"

/** The program of docs/getting-started.md, as a reader saves it. */
const gettingStartedProgram = () => {
  const page = readFileSync(join(repositoryRoot, "docs", "getting-started.md"), "utf8")
  const block = page.match(/```ts\n\/\/ file: notify\.ts\n([\s\S]*?)```/)
  if (block === null) throw new Error("docs/getting-started.md has no notify.ts block")
  return block[1]!
}

/** The tsconfig.json of docs/getting-started.md, as a reader saves it. */
const gettingStartedTsconfig = () => {
  const page = readFileSync(join(repositoryRoot, "docs", "getting-started.md"), "utf8")
  const block = page.match(/```jsonc\n\/\/ file: tsconfig\.json\n([\s\S]*?)```/)
  if (block === null) throw new Error("docs/getting-started.md has no tsconfig.json block")
  return block[1]!
}

/** Saves a program into a folder of the consumer project, as a reader saves one; gives the folder. */
const saveProgram = (folder: string, file: string, source: string): string => {
  const dir = join(consumer().dir, folder)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, file), source)
  return dir
}

/** The JSON a program printed after `label: `, or null when it printed none. */
const printed = (stdout: string, label: string): unknown => {
  const line = stdout.match(new RegExp(`^${label}: (.*)$`, "m"))
  return line === null ? null : JSON.parse(line[1]!)
}

const outcomeOf = (stdout: string) => (JSON.parse(stdout.match(/^notify: (.*)$/m)![1]!) as { readonly outcome: string }).outcome

describe("the getting-started program, run from the installed package", () => {
  it("applies its effect tool once on SQLite, and a second process replays the record", async () => {
    const dir = saveProgram("getting-started", "notify.ts", gettingStartedProgram())

    const first = await run(nodes().oldest, ["notify.ts"], dir)
    expect(first.code, first.stderr).toBe(0)
    expect(outcomeOf(first.stdout)).toBe("applied")
    expect(first.stdout).toContain("outbox: 1 notification(s)")

    const second = await run(nodes().current, ["notify.ts"], dir)
    expect(second.code, second.stderr).toBe(0)
    expect(outcomeOf(second.stdout)).toBe("recorded")
    expect(second.stdout).toContain("outbox: 1 notification(s)")
    expect(existsSync(join(dir, "effects.db"))).toBe(true)
    expect(readFileSync(join(dir, "outbox.txt"), "utf8")).toBe("ada: Welcome aboard\n")
  })
})

describe("the getting-started project, type-checked as a reader sets it up", () => {
  it("tsc with the page's tsconfig.json and @types/node accepts notify.ts against the installed types", async () => {
    const dir = saveProgram("getting-started-types", "notify.ts", gettingStartedProgram())
    writeFileSync(join(dir, "tsconfig.json"), gettingStartedTsconfig())
    const checked = await run(nodes().current, [join(consumer().dir, "node_modules", "typescript", "bin", "tsc"), "-p", dir])
    expect(checked.stdout + checked.stderr).toBe("")
    expect(checked.code).toBe(0)
  })
})

/** A tool call through each provider's real adapter, against the installed package's fake server of it. */
const providersProgram = `
import { toolDefinition } from "@tanstack/ai"
import { createAnthropicChat } from "@tanstack/ai-anthropic"
import * as AI from "@tanstack/ai-effect"
import { startFakeAnthropic, startFakeGemini, startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { createGeminiChat } from "@tanstack/ai-gemini"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Effect, Schema, Stream } from "effect"

const getOrder = AI.serverTool(
  toolDefinition({
    name: "get_order",
    description: "Get the status of an order",
    inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String, note: Schema.optional(Schema.String) })),
    outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String }))
  }),
  ({ id, note }) => Effect.succeed({ status: id + ":" + String(note) })
)
const script = [{ toolCalls: [{ name: "get_order", args: { id: "A-100", note: null }, id: "call_1" }] }, { text: "Shipped." }]
const servers = [
  ["openai", await startFakeOpenAI(script), (url) => createOpenaiChat("gpt-5.2", "k", { baseURL: url, maxRetries: 0 })],
  ["anthropic", await startFakeAnthropic(script), (url) => createAnthropicChat("claude-sonnet-4-5", "k", { baseURL: url, maxRetries: 0 })],
  ["gemini", await startFakeGemini(script), (url) => createGeminiChat("gemini-2.5-flash", "k", { baseURL: url })]
] as const
for (const [name, server, adapter] of servers) {
  const chunks = await Effect.runPromise(Stream.runCollect(
    AI.chat({ adapter: adapter(server.baseURL), messages: [{ role: "user", content: "?" }], tools: [getOrder], runId: "r", threadId: "t" })
  ))
  const text = chunks.flatMap((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" ? [chunk.delta] : []).join("")
  console.log(name + ": " + JSON.stringify({ results: server.toolResults(1), text }))
  await server.close()
}
`

describe("the fake provider servers, run from the installed package", () => {
  it("drive the real OpenAI, Anthropic and Gemini adapters: a tool call decodes, its result reaches the model, the answer streams", async () => {
    const dir = saveProgram("providers", "providers.ts", providersProgram)
    const ran = await run(nodes().oldest, ["providers.ts"], dir)
    expect(ran.code, ran.stderr).toBe(0)
    for (const name of ["openai", "anthropic", "gemini"]) {
      expect(printed(ran.stdout, name), ran.stdout).toEqual({
        results: [{ callId: "call_1", output: JSON.stringify({ status: "A-100:undefined" }) }],
        text: "Shipped."
      })
    }
  })
})

/** The chat route on effect/http, served by the installed package against its fake OpenAI server. */
const routeProgram = `
import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import * as AI from "@tanstack/ai-effect"
import { ChatRoute } from "@tanstack/ai-effect/http"
import { startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Context, Effect, Layer } from "effect"
import { HttpRouter, HttpServer } from "effect/http"

const model = await startFakeOpenAI([{ text: ["Hello ", "there."] }])
const adapter = createOpenaiChat("gpt-5.2", "k", { baseURL: model.baseURL, maxRetries: 0 })
const Server = HttpRouter.serve(HttpRouter.add("POST", "/api/chat", ChatRoute.handler((params) => AI.chat({ adapter, ...params }))), {
  disableListenLog: true,
  disableLogger: true
}).pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))

await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const server = Context.get(yield* Layer.build(Server), HttpServer.HttpServer)
  const url = HttpServer.formatAddress(server.address) + "/api/chat"
  const post = (body: string) => Effect.promise(() => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body }))
  const ok = yield* post(JSON.stringify({ threadId: "t", runId: "r", messages: [{ id: "m1", role: "user", content: "Hi" }], tools: [], context: [] }))
  const events = (yield* Effect.promise(() => ok.text())).split("\\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice(6)))
  const text = events.flatMap((event) => event.type === "TEXT_MESSAGE_CONTENT" ? [event.delta] : []).join("")
  const bad = yield* post("{ not json")
  console.log("route: " + JSON.stringify({ status: ok.status, type: ok.headers.get("content-type"), first: events[0].type, text, badStatus: bad.status }))
})))
await model.close()
`

describe("the effect/http chat route, run from the installed package", () => {
  it("answers an AG-UI request as server-sent events, and a body that is not one with a 400", async () => {
    const dir = saveProgram("route", "route.ts", routeProgram)
    const ran = await run(nodes().oldest, ["route.ts"], dir)
    expect(ran.code, ran.stderr).toBe(0)
    expect(printed(ran.stdout, "route"), ran.stdout).toEqual({ status: 200, type: "text/event-stream", first: "RUN_STARTED", text: "Hello there.", badStatus: 400 })
  })
})

/**
 * A resolve hook that makes @effect/platform-node missing, as in a project
 * that did not install that optional peer.
 */
const withoutPlatformNode = `
import { registerHooks } from "node:module"
registerHooks({
  resolve(specifier, context, next) {
    if (specifier === "@effect/platform-node" || specifier.startsWith("@effect/platform-node/")) {
      throw Object.assign(new Error("Cannot find package '" + specifier + "'"), { code: "ERR_MODULE_NOT_FOUND" })
    }
    return next(specifier, context)
  }
})
`

/** A durable run on the memory engine, then the cluster engine's layer built without its peer. */
const durableProgram = `
import * as AI from "@tanstack/ai-effect"
import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { Cause, Effect, Exit, Layer } from "effect"

const greeter = DurableAgent.make(AI.defineAgent({ name: "greeter", adapter: scriptedText([{ text: "Hello!" }]), instructions: "Greet.", tools: [] }))
const result = await Effect.runPromise(greeter.run({ runId: "run-1", messages: [{ role: "user", content: "Hi" }] }).pipe(
  Effect.provide(greeter.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory)))
))
console.log("memory: " + JSON.stringify(result.text))
const built = await Effect.runPromiseExit(Effect.scoped(Layer.build(DurableEngine.layerSingleRunner())))
console.log("cluster: " + JSON.stringify(Exit.isFailure(built) ? Cause.squash(built.cause).message : "built"))
`

describe("the durable subpath without its optional peer @effect/platform-node", () => {
  it("runs a durable run on the memory engine, and the cluster engine's layer says what to install", async () => {
    const dir = saveProgram("durable-without-platform-node", "durable.ts", durableProgram)
    writeFileSync(join(dir, "without-platform-node.mjs"), withoutPlatformNode)
    const ran = await run(nodes().oldest, ["--import", "./without-platform-node.mjs", "durable.ts"], dir)
    expect(ran.code, ran.stderr).toBe(0)
    expect(printed(ran.stdout, "memory")).toBe("Hello!")
    expect(printed(ran.stdout, "cluster")).toMatch(/^DurableEngine\.layerSingleRunner needs the optional peer @effect\/platform-node/)
  })
})
