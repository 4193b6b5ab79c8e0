/**
 * A worker process for the multi-process store tests: it runs one effect
 * tool for a list of keys, all at once, against a shared store, and prints
 * what each call answered as one JSON line.
 *
 * The remote is the test's HTTP counter: `POST /apply/<key>` applies an
 * effect, `GET /applied/<key>` tells how often it was applied. In `crash`
 * mode the worker kills itself with SIGKILL right after the remote effect,
 * before its record is written: the crash window.
 */
import * as AI from "@tanstack/ai-effect"
import { Duration, Effect, Layer, Option } from "effect"
import { callTool, noteDef, pgClient, redisClient } from "./backends.ts"
import { layerRedis } from "@tanstack/ai-effect/redis"
import { layerSql } from "@tanstack/ai-effect/sql"
import { layerSqlite } from "@tanstack/ai-effect/sqlite"

export interface WorkerConfig {
  readonly backend: "sqlite" | "postgres" | "redis"
  /** The SQLite file, or the server's URL. */
  readonly target: string
  readonly remote: string
  readonly keys: ReadonlyArray<string>
  readonly mode: "apply" | "crash"
  readonly reconcile: boolean
  readonly leaseMillis: number
  /** How often each key is called; default once. */
  readonly repeat?: number
}

export interface WorkerReport {
  readonly ok: number
  readonly errors: ReadonlyArray<string>
}

const config = JSON.parse(process.env.AI_EFFECT_WORKER!) as WorkerConfig

const store: Layer.Layer<AI.EffectStore, unknown> = config.backend === "sqlite"
  ? layerSqlite({ filename: config.target })
  : config.backend === "postgres"
  ? layerSql().pipe(Layer.provide(pgClient(config.target)))
  : layerRedis().pipe(Layer.provide(redisClient(config.target)))

const request = (method: string, path: string) =>
  Effect.promise(() => fetch(`${config.remote}${path}`, { method }).then((response) => response.json() as Promise<{ readonly applied: number }>))

const note = AI.effectTool(
  noteDef,
  ({ id }) =>
    Effect.tap(request("POST", `/apply/${id}`), () =>
      config.mode === "crash" ? Effect.sync(() => process.kill(process.pid, "SIGKILL")) : Effect.void),
  {
    effectKey: ({ id }) => id,
    lease: Duration.millis(config.leaseMillis),
    ...(config.reconcile
      ? { alreadyApplied: (_key, { id }) => Effect.map(request("GET", `/applied/${id}`), ({ applied }) => applied > 0 ? Option.some({ applied }) : Option.none()) }
      : {})
  }
)

const report = await Effect.runPromise(
  Effect.forEach(
    Array.from({ length: config.repeat ?? 1 }, () => config.keys).flat(),
    (id) => Effect.result(callTool(note, { id })),
    { concurrency: "unbounded" }
  ).pipe(
    Effect.map((results): WorkerReport => ({
      ok: results.filter((result) => result._tag === "Success").length,
      errors: results.flatMap((result) => result._tag === "Failure" ? [String(result.failure?.message ?? result.failure)] : [])
    })),
    Effect.provide(store)
  )
)
process.stdout.write(`${JSON.stringify(report)}\n`)
