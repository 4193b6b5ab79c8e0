/**
 * A worker of the fault-injection suite, written as a user's program: it
 * imports only the installed package and its peers. It calls one effect tool
 * for each of its keys, against a shared store, and prints one JSON line per
 * call: how it was answered, or the tag of its error.
 *
 * The remote is the suite's HTTP recorder: `POST /intent/<key>` says that an
 * effect is on its way (the suite may pause the worker there), `POST
 * /apply/<key>` applies it (the suite may kill or stop the worker while it
 * answers), and `GET /applied/<key>` is the `alreadyApplied` check. With
 * `fenced`, the effect carries the claim's fence, and the remote refuses a
 * fence lower than one it has seen for the key (409).
 *
 * It runs under `NodeRuntime.runMain`, so SIGTERM interrupts it and its
 * finalizers run, as in a server that stops gracefully.
 */
import { NodeRedis, NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { toolDefinition } from "@tanstack/ai"
import * as AI from "@tanstack/ai-effect"
import { layerRedis } from "@tanstack/ai-effect/redis"
import { layerSql } from "@tanstack/ai-effect/sql"
import { layerSqlite } from "@tanstack/ai-effect/sqlite"
import { Data, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"

export interface FaultWorkerConfig {
  readonly backend: "sqlite" | "postgres" | "redis"
  /** The SQLite file, or the server's URL. */
  readonly target: string
  readonly remote: string
  readonly keys: ReadonlyArray<string>
  readonly leaseMillis: number
  /** Whether the tool has `alreadyApplied` (the remote's `GET /applied`). */
  readonly reconcile: boolean
  /** How long `alreadyApplied` takes. */
  readonly checkMillis: number
  /** Whether the effect carries the claim's fence, for a remote that checks it. */
  readonly fenced: boolean
  /** How long the effect takes to land once sent: the remote counts it only then. */
  readonly effectMillis: number
}

export interface CallLine {
  readonly key: string
  readonly answer: "ok" | "error"
  /** The tag of the error the model would read, or `untyped`. */
  readonly tag?: string
  readonly message?: string
}

const javaScriptErrors = new Set(["Error", "TypeError", "RangeError", "ReferenceError", "SyntaxError", "AbortError", "DOMException"])

class StaleFence extends Data.TaggedError("StaleFence")<{ readonly key: string; readonly fence: number }> {}

const config = JSON.parse(process.env.AI_EFFECT_FAULT_WORKER!) as FaultWorkerConfig

const store: Layer.Layer<AI.EffectStore, unknown> = config.backend === "sqlite"
  ? layerSqlite({ filename: config.target, timeout: "2 seconds" })
  : config.backend === "postgres"
  ? layerSql({ timeout: "2 seconds" }).pipe(
    Layer.provide(PgClient.layer({ url: Redacted.make(config.target), connectTimeout: "2 seconds" }))
  )
  : layerRedis({ timeout: "2 seconds" }).pipe(
    Layer.provide(NodeRedis.layer({ url: config.target, socket: { connectTimeout: 2_000, reconnectStrategy: () => 100 } }))
  )

const remote = (method: string, path: string, query = "") =>
  Effect.promise(() => fetch(`${config.remote}${path}?pid=${process.pid}${query}`, { method }).then(async (response) => ({ status: response.status, body: await response.json() as { readonly applied: number } })))

const noteDef = toolDefinition({
  name: "note",
  description: "Applies a note once",
  inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ applied: Schema.Int }))
})

const note = AI.effectTool(
  noteDef,
  ({ id }, { fence }) =>
    Effect.gen(function*() {
      yield* remote("POST", `/intent/${id}`)
      const { status, body } = yield* remote("POST", `/apply/${id}${config.fenced ? `/${fence}` : ""}`, `&landsIn=${config.effectMillis}`)
      if (status === 409) return yield* new StaleFence({ key: id, fence })
      return body
    }),
  {
    effectKey: ({ id }) => id,
    lease: Duration.millis(config.leaseMillis),
    ...(config.reconcile
      ? {
        alreadyApplied: (_key: string, { id }: { readonly id: string }) =>
          Effect.delay(remote("GET", `/applied/${id}`), Duration.millis(config.checkMillis)).pipe(
            Effect.map(({ body }) => body.applied > 0 ? Option.some(body) : Option.none())
          )
      }
      : {})
  }
)

/** Calls the tool as core chat() does: through its core form, in a run. */
const call = (id: string) =>
  Effect.gen(function*() {
    const [core] = yield* AI.wrapToolsForRun([note])
    return yield* Effect.tryPromise({
      try: () => Promise.resolve(core!.execute!({ id }, { toolCallId: `call-${id}`, emitCustomEvent: () => {} })),
      catch: (error) => error
    })
  }).pipe(
    Effect.scoped,
    Effect.provideService(AI.RunContext, { runId: "faults", threadId: "faults", agent: "faults", trigger: "faults" }),
    Effect.match({
      onSuccess: (): CallLine => ({ key: id, answer: "ok" }),
      onFailure: (error): CallLine => {
        // A typed failure reads "Tag: message" to the model; a defect reads as
        // a JavaScript error ("Error: ...", "TypeError: ..."), which is untyped.
        const message = error instanceof Error ? error.message : String(error)
        const named = /^([A-Z][A-Za-z]+): /.exec(message)?.[1]
        const tag = named === undefined || javaScriptErrors.has(named) ? "untyped" : named
        return { key: id, answer: "error", tag, message }
      }
    }),
    Effect.tap(print)
  )

const print = (line: CallLine) => Effect.sync(() => process.stdout.write(`${JSON.stringify(line)}\n`))

/**
 * Every key answered, the worker ends once the store's client has closed, or
 * after 5 seconds: node-redis's `close()` waits for every command it still
 * holds, and one stranded by a crashed server never answers (seen once in
 * CI, after a Redis crash and restart: a worker with no store deadline
 * running, only the runtime's keep-alive timer, idle on the connection it
 * had reopened, until the test's timeout; redis/node-redis#3089). The timer
 * does not keep the process alive when the close ends.
 */
const endSoon = Effect.sync(() => setTimeout(() => process.exit(0), 5_000).unref())

NodeRuntime.runMain(
  // Ready, then wait for the others: the calls start once every worker has loaded.
  Effect.andThen(remote("POST", "/ready", `&now=${Date.now()}`), Effect.forEach(config.keys, call, { concurrency: "unbounded", discard: true })).pipe(
    Effect.andThen(endSoon),
    Effect.provide(store),
    // A store that cannot be built (a Redis that persists nothing) answers every key.
    Effect.catch((error) => {
      const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "untyped"
      return Effect.forEach(config.keys, (key) => print({ key, answer: "error", tag, message: String(error) }), { discard: true })
    })
  )
)
