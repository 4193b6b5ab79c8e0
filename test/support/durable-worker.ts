/**
 * A worker process for the durable-run tests: the orders agent on the
 * PostgreSQL engine (or the SQLite one), its effects stored in the same
 * database.
 *
 * It starts a run (or, with `start: false`, only serves what storage holds,
 * as a process restarted after a crash does) and prints the run's exit as
 * one JSON line once the run finished. `get_order` and `notify` both apply
 * to the test's remote (`POST /apply/<key>`), which counts each application;
 * with `crashAfterEffect` the worker SIGKILLs itself right after `notify`'s
 * effect, before its record is written. `refund` needs approval: the worker
 * prints `approval <toolCallId>` when the run asks for it, and with
 * `approve` prints the approvals the run waits for (`pending [ids]`, read
 * from the run store) and answers one.
 *
 * With `http`, the worker is a node of a durable chat: it serves
 * `ChatRoute.durableHandler` on that port of 127.0.0.1, and runs until it
 * is killed. Every run writes its delivery log and thread in its database.
 */
import * as AI from "@tanstack/ai-effect"
import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
import { ChatRoute } from "@tanstack/ai-effect/http"
import { layerSql, layerSqlStreamLog, layerSqlThreadStore } from "@tanstack/ai-effect/sql"
import { layerSqlite, layerSqliteStreamLog, layerSqliteThreadStore } from "@tanstack/ai-effect/sqlite"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { Duration, Effect, Layer, Option, Schedule, Stream } from "effect"
import { HttpRouter } from "effect/http"
import { pgClient } from "./backends.ts"
import { getOrderDef, notifyDef, refundDef } from "./tools.ts"

export interface DurableWorkerConfig {
  readonly postgres: string
  /** Runs on this SQLite file instead (the engine, the run store and the effects), with a 1 s engine lock lease. */
  readonly sqlite?: string
  /** The SQLite engine's shard count, where not the layer's own: 300 writes a file as versions before one shard did. */
  readonly shardsPerGroup?: number
  readonly model: string
  readonly remote: string
  readonly runId: string
  readonly start: boolean
  readonly crashAfterEffect: boolean
  /** Dies as the run asks for approval, before it records that it asked. */
  readonly crashWhenAsking?: boolean
  readonly leaseMillis: number
  /**
   * One runner among several on this port of 127.0.0.1: a socket runner, or
   * a single runner whose process has this `PORT` (as a platform sets it),
   * and how long its shard locks outlive it.
   */
  readonly runner?: { readonly kind: "socket" | "single"; readonly port: number; readonly shardLockExpirationMillis?: number }
  /** Answers an approval before it waits for the run, as a restarted process would. */
  readonly approve?: { readonly toolCallId: string; readonly approved: boolean }
  /** Serves the durable chat route on this port, and runs until killed. */
  readonly http?: number
}

const config = JSON.parse(process.env.AI_EFFECT_DURABLE_WORKER!) as DurableWorkerConfig

const remote = (method: string, key: string) =>
  Effect.promise(() =>
    fetch(`${config.remote}/${method === "POST" ? "apply" : "applied"}/${key}`, { method })
      .then((response) => response.json() as Promise<{ readonly applied: number }>)
  )

// The lookup's key names the runner that ran it, so that a test knows which process owns the run.
const getOrder = AI.serverTool(getOrderDef, ({ id }) =>
  Effect.as(remote("POST", `lookup-${id}${config.runner === undefined ? "" : `-on-${config.runner.port}`}`), { status: "shipped" }))

const notify = AI.effectTool(
  notifyDef,
  ({ to }) =>
    remote("POST", `notify-${to}`).pipe(
      Effect.tap(() => config.crashAfterEffect ? Effect.sync(() => process.kill(process.pid, "SIGKILL")) : Effect.void),
      Effect.map(({ applied }) => ({ sent: applied }))
    ),
  {
    lease: Duration.millis(config.leaseMillis),
    alreadyApplied: (_key, { to }) =>
      Effect.map(remote("GET", `notify-${to}`), ({ applied }) => applied > 0 ? Option.some({ sent: applied }) : Option.none())
  }
)

const refund = AI.serverTool(refundDef, ({ id }) => Effect.as(remote("POST", `refund-${id}`), { refunded: true }))

const agent = DurableAgent.make(AI.defineAgent({
  name: "orders",
  adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL: config.model, maxRetries: 0 }),
  instructions: "Answer questions about orders.",
  tools: [getOrder, notify, refund]
}))

/** The run's delivery log and threads, in the run's database: what the runner writes and the route reads. */
const chatStores = config.sqlite === undefined
  ? Layer.mergeAll(layerSqlStreamLog(), layerSqlThreadStore()).pipe(Layer.provide(pgClient(config.postgres)))
  : Layer.mergeAll(layerSqliteStreamLog({ filename: config.sqlite }), layerSqliteThreadStore({ filename: config.sqlite }))

const agentLayer = agent.layer.pipe(Layer.provideMerge(chatStores))

const onPostgres = agentLayer.pipe(
  Layer.provideMerge(
    config.runner === undefined
      ? DurableEngine.layerSingleRunner()
      : config.runner.kind === "single"
      ? DurableEngine.layerSingleRunner(lockSettings(config.runner))
      : DurableEngine.layerSocketRunner({ host: "127.0.0.1", port: config.runner.port, ...lockSettings(config.runner) })
  ),
  Layer.provide(layerSql()),
  Layer.provide(pgClient(config.postgres))
)

const live: Layer.Layer<DurableAgent.DurableServices | DurableAgent.RunChunks | AI.StreamLog | AI.ThreadStore, unknown> = config.sqlite === undefined ? onPostgres : agentLayer.pipe(
  Layer.provideMerge(DurableEngine.layerSqlite({
    filename: config.sqlite,
    lockLease: Duration.seconds(1),
    ...(config.shardsPerGroup === undefined ? {} : { shardingConfig: { shardsPerGroup: config.shardsPerGroup } })
  })),
  Layer.provide(layerSqlite({ filename: config.sqlite }))
)

function lockSettings(runner: { readonly shardLockExpirationMillis?: number }) {
  return runner.shardLockExpirationMillis === undefined
    ? {}
    : { shardingConfig: { shardLockExpiration: Duration.millis(runner.shardLockExpirationMillis) } }
}

const program = Effect.gen(function*() {
  if (config.start) {
    // The run's chunks, while it runs here: each approval it asks for is a line for the test.
    yield* agent.stream({ runId: config.runId, messages: [{ role: "user", content: "Where is A-100? Tell ada." }] }).pipe(
      Stream.runForEach((chunk) =>
        chunk.type === "CUSTOM" && chunk.name === "approval-requested"
          ? Effect.sync(() =>
            config.crashWhenAsking === true
              ? process.kill(process.pid, "SIGKILL")
              : process.stdout.write(`approval ${(chunk.value as { readonly toolCallId: string }).toolCallId}\n`)
          )
          : Effect.void
      ),
      Effect.ignore,
      Effect.forkScoped
    )
  }
  if (config.approve !== undefined) {
    // What the run waits for, read in this process from the run store: the test reads the line.
    const pending = yield* agent.pendingApprovals(config.runId)
    process.stdout.write(`pending ${JSON.stringify(pending.map(({ toolCallId }) => toolCallId))}\n`)
    yield* agent.approve(config.runId, config.approve.toolCallId, config.approve.approved)
  }
  // Wait for the run to finish here, or in whichever process resumes it.
  const exit = yield* agent.poll(config.runId).pipe(
    Effect.flatMap(Option.match({ onNone: () => Effect.fail("running" as const), onSome: Effect.succeed })),
    Effect.retry(Schedule.spaced("100 millis"))
  )
  process.stdout.write(`${JSON.stringify(exit)}\n`)
})

if (config.http === undefined) {
  await Effect.runPromise(Effect.scoped(program.pipe(Effect.provide(live))))
  process.exit(0)
} else {
  const route = ChatRoute.durableHandler(agent)
  const node = HttpRouter.serve(
    Layer.mergeAll(HttpRouter.add("POST", "/api/chat", route), HttpRouter.add("GET", "/api/chat", route), HttpRouter.add("DELETE", "/api/chat", route)),
    { disableListenLog: true, disableLogger: true }
  ).pipe(
    // The server listens once the engine and stores are up: a request it accepted earlier would wait for a handler forever.
    Layer.provide(NodeHttpServer.layer(createServer, { port: config.http, host: "127.0.0.1" })),
    Layer.provide(live)
  )
  await Effect.runPromise(Layer.launch(node))
}
