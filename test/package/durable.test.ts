/**
 * A durable run on SQLite from the installed package: the program is killed
 * inside a model turn and started again, and the run finishes on the same
 * file with the turn in flight asked once more and nothing else repeated.
 * The fake model is the installed package's own.
 */
import { spawn } from "node:child_process"
import { once } from "node:events"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { expect, it } from "vitest"
import { consumer, installedPackage, nodes } from "./consumer.ts"

const program = `
import { toolDefinition } from "@tanstack/ai"
import * as AI from "@tanstack/ai-effect"
import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
import { layerSqlite } from "@tanstack/ai-effect/sqlite"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Effect, Layer, Option, Schedule, Schema } from "effect"

const [model, mode] = process.argv.slice(2)

const getOrder = AI.serverTool(
  toolDefinition({
    name: "get_order",
    description: "Get the status of an order",
    inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
    outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String }))
  }),
  () => Effect.succeed({ status: "shipped" })
)

const agent = DurableAgent.make(AI.defineAgent({
  name: "orders",
  adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL: model, maxRetries: 0 }),
  instructions: "Answer questions about orders.",
  tools: [getOrder]
}))

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
