/**
 * Durable runs on SQLite from the installed package: a program is killed
 * inside a model turn and started again, and the run finishes on the same
 * file with the turn in flight asked once more and nothing else repeated;
 * a durable chat server is killed mid-answer and started again, and the
 * real `@tanstack/ai-client` rejoins the answer and shows it once. The fake
 * model is the installed package's own.
 */
import { spawn } from "node:child_process"
import { once } from "node:events"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { ChatClient, fetchServerSentEvents } from "@tanstack/ai-client"
import { expect, it } from "vitest"
import { freePort } from "../support/services.ts"
import { consumer, installedPackage, nodes } from "./consumer.ts"

/** The programs' order lookup, as their source declares it. */
const getOrderSource = `const getOrder = AI.serverTool(
  toolDefinition({
    name: "get_order",
    description: "Get the status of an order",
    inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
    outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String }))
  }),
  () => Effect.succeed({ status: "shipped" })
)`

/** The durable agent of both programs, asking the fake model at the address in their `model`. */
const ordersAgentSource = `${getOrderSource}

const agent = DurableAgent.make(AI.defineAgent({
  name: "orders",
  adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL: model, maxRetries: 0 }),
  instructions: "Answer questions about orders.",
  tools: [getOrder]
}))`

const program = `
import { toolDefinition } from "@tanstack/ai"
import * as AI from "@tanstack/ai-effect"
import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
import { layerSqlite } from "@tanstack/ai-effect/sqlite"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Effect, Layer, Option, Schedule, Schema } from "effect"

const [model, mode] = process.argv.slice(2)

${ordersAgentSource}

const live = agent.layer.pipe(
  Layer.provideMerge(DurableEngine.layerSqlite({ filename: "runs.db", lockLease: "1 second" })),
  Layer.provide(layerSqlite({ filename: "runs.db" }))
)

const program = Effect.gen(function*() {
  // A restarted program starts nothing: the engine resumes the run from the file.
  if (mode === "start") yield* agent.start({ runId: "run-1", messages: [{ role: "user", content: "Where is A-100?" }] })
  const exit = yield* agent.poll("run-1").pipe(
    Effect.flatMap(Option.match({ onNone: () => Effect.fail("running"), onSome: Effect.succeed })),
    Effect.retry(Schedule.spaced("100 millis"))
  )
  console.log("exit: " + JSON.stringify(exit))
})

await Effect.runPromise(Effect.scoped(Effect.provide(program, live)))
process.exit(0)
`

interface ResponsesRequest {
  readonly input: ReadonlyArray<{ readonly type?: string }>
}

it("a durable run on SQLite, killed inside a model turn and started again, finishes: the turn in flight is asked once more, the finished one never", async () => {
  const dir = join(consumer().dir, "durable-sqlite")
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "durable.ts"), program)

  // The installed package's fake model: it looks the order up, then answers; its first answer is held.
  const testing = await import(join(installedPackage(), "dist", "testing", "index.js")) as typeof import("@tanstack/ai-effect/testing")
  const { promise: held, resolve: holding } = Promise.withResolvers<void>()
  let answers = 0
  const model = await testing.startFakeOpenAI((request: ResponsesRequest) => {
    const looked = request.input.some((item) => item.type === "function_call_output")
    if (!looked) return { toolCalls: [{ name: "get_order", args: { id: "A-100" }, id: "call_lookup" }] }
    if (++answers === 1) {
      holding()
      return { text: "never sent", delayMs: 600_000 }
    }
    return { text: "A-100 has shipped." }
  })
  try {
    const first = spawn(nodes().current, ["durable.ts", model.baseURL, "start"], { cwd: dir, stdio: "ignore" })
    await held
    first.kill("SIGKILL")
    await once(first, "exit")

    const restarted = spawn(nodes().current, ["durable.ts", model.baseURL, "resume"], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    restarted.stdout.on("data", (part: Buffer) => (output += part.toString()))
    restarted.stderr.on("data", (part: Buffer) => (output += part.toString()))
    const [code] = await once(restarted, "exit") as [number | null]
    expect(code, output).toBe(0)
    expect(output).toMatch(/^exit: .*"_tag":"Success".*A-100 has shipped\./m)
    const lookups = model.requests.filter((request: ResponsesRequest) => !request.input.some((item) => item.type === "function_call_output"))
    expect(lookups).toHaveLength(1)
    expect(answers).toBe(2)
  } finally {
    await model.close()
  }
})

const chatServer = `
import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { toolDefinition } from "@tanstack/ai"
import * as AI from "@tanstack/ai-effect"
import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
import { ChatRoute } from "@tanstack/ai-effect/http"
import { layerSql, layerSqlStreamLog, layerSqlThreadStore } from "@tanstack/ai-effect/sql"
import { layerSqliteClient } from "@tanstack/ai-effect/sqlite"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Effect, Layer, Schema } from "effect"
import { HttpRouter } from "effect/http"

const [model, port] = process.argv.slice(2)
const file = "chat.db"

${ordersAgentSource}

const chat = ChatRoute.durableHandler(agent)
// The log, the threads and the tools' effect store on one connection to the file; the engine opens its own.
const stores = Layer.mergeAll(layerSqlStreamLog(), layerSqlThreadStore(), layerSql()).pipe(Layer.provide(layerSqliteClient({ filename: file })))
const server = HttpRouter.serve(
  Layer.mergeAll(HttpRouter.add("POST", "/api/chat", chat), HttpRouter.add("GET", "/api/chat", chat), HttpRouter.add("DELETE", "/api/chat", chat))
).pipe(
  Layer.provide(NodeHttpServer.layer(createServer, { port: Number(port), host: "127.0.0.1" })),
  Layer.provide(agent.layer.pipe(
    Layer.provideMerge(DurableEngine.layerSqlite({ filename: file, lockLease: "1 second" })),
    Layer.provideMerge(stores)
  ))
)

await Effect.runPromise(Layer.launch(server))
`

it("a durable chat on SQLite, its server killed mid-answer and started again: the real ai-client rejoins, and the answer shows once", async () => {
  const dir = join(consumer().dir, "durable-chat")
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "chat.ts"), chatServer)

  const testing = await import(join(installedPackage(), "dist", "testing", "index.js")) as typeof import("@tanstack/ai-effect/testing")
  const words = Array.from({ length: 40 }, (_, index) => `w${index} `)
  let answers = 0
  const model = await testing.startFakeOpenAI((request: ResponsesRequest) => {
    if (!request.input.some((item) => item.type === "function_call_output")) {
      return { toolCalls: [{ name: "get_order", args: { id: "A-100" }, id: "call_lookup" }] }
    }
    answers++
    return { text: words, deltaDelayMs: 50 }
  })
  const port = await freePort()
  const url = `http://127.0.0.1:${port}/api/chat`
  const start = () => spawn(nodes().current, ["chat.ts", model.baseURL, String(port)], { cwd: dir, stdio: "ignore" })
  const ready = async () => {
    while ((await fetch(`${url}?threadId=ready`).then((response) => response.status, () => 0)) !== 404) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const first = start()
  let second: ReturnType<typeof start> | undefined
  try {
    await ready()
    const client = new ChatClient({ connection: fetchServerSentEvents(url, { reconnect: { maxAttempts: 200, delayMs: 100 } }), threadId: "thread-1" })
    const sent = client.sendMessage("Where is A-100?")
    const text = () => client.getMessages().flatMap((message) => message.role === "assistant" ? message.parts : []).flatMap((part) => part.type === "text" ? [part.content] : []).join("")
    await expect.poll(() => text().length, { timeout: 20_000, interval: 10 }).toBeGreaterThan(words.slice(0, 6).join("").length)
    first.kill("SIGKILL")
    await once(first, "exit")
    second = start()
    await sent
    expect(client.getError()).toBeUndefined()
    expect(text()).toBe(words.join(""))
    const lookups = model.requests.filter((request: ResponsesRequest) => !request.input.some((item) => item.type === "function_call_output"))
    expect(lookups).toHaveLength(1)
    expect(answers).toBe(2)
  } finally {
    first.kill("SIGKILL")
    second?.kill("SIGKILL")
    await model.close()
  }
}, 60_000)
