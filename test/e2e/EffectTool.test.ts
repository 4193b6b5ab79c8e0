/**
 * The store across processes: SQLite (one file), PostgreSQL and Redis shared
 * by worker processes; a worker killed in the crash window; a server that
 * goes away during a run; and a restart that replays from the SQLite file.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { NodeRedis } from "@effect/platform-node"
import * as AI from "@tanstack/ai-effect"
import { layerRedis } from "@tanstack/ai-effect/redis"
import { layerSql } from "@tanstack/ai-effect/sql"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { Effect, Layer, Stream } from "effect"
import { makeRemote, noteDef, pgClient } from "../support/backends.ts"
import { missing, startPostgres, startRedis, type TestServer } from "../support/services.ts"
import type { WorkerConfig } from "../support/worker.ts"
import { type Remote, runWorker as runWorkerWith, startRemote } from "../support/workers.ts"

const noPostgres = missing("postgres")
const noRedis = missing("redis")
let postgres: TestServer | undefined
let redis: TestServer | undefined
let remote: Remote

beforeAll(async () => {
  ;[postgres, redis, remote] = await Promise.all([
    noPostgres === undefined ? startPostgres() : undefined,
    noRedis === undefined ? startRedis() : undefined,
    startRemote()
  ])
}, 60_000)

afterAll(async () => {
  remote.close()
  await Promise.all([postgres?.dispose(), redis?.dispose()])
})

/** Runs one worker against the test's remote. */
const runWorker = (config: Omit<WorkerConfig, "remote">) => runWorkerWith({ ...config, remote: remote.url })

const appliedOf = (keys: ReadonlyArray<string>) => remote.appliedOf(keys)

let run = 0
const keysFor = (name: string, count: number) => {
  run++
  return Array.from({ length: count }, (_, i) => `${name}-${process.pid}-${run}-${i}`)
}

const shared: ReadonlyArray<readonly [string, () => Pick<WorkerConfig, "backend" | "target">, string | undefined]> = [
  ["SQLite (one file)", () => ({ backend: "sqlite", target: join(mkdtempSync(join(tmpdir(), "ai-effect-procs-")), "effects.db") }), undefined],
  ["PostgreSQL", () => ({ backend: "postgres", target: postgres!.url }), noPostgres],
  ["Redis", () => ({ backend: "redis", target: redis!.url }), noRedis]
]

for (const [name, target, skip] of shared) {
  describe.skipIf(skip !== undefined)(`effect tools across processes: ${name}`, () => {
    it("4 worker processes apply the same 100 keys at once: exactly 100 applications, and a fifth process replays all 100", async () => {
      const store = target()
      const keys = keysFor("many", 100)
      const config = { ...store, keys, mode: "apply", reconcile: false, leaseMillis: 10_000 } as const
      const workers = await Promise.all([1, 2, 3, 4].map(() => runWorker(config)))
      for (const worker of workers) expect(worker.report).toEqual({ ok: 100, errors: [] })
      expect(appliedOf(keys)).toBe(100)
      const fifth = await runWorker(config)
      expect(fifth.report).toEqual({ ok: 100, errors: [] })
      expect(appliedOf(keys)).toBe(100)
    }, 60_000)

    it("a worker killed after the remote effect and before its record: the next one reconciles once the lease ends, one application in all", async () => {
      const store = target()
      const keys = keysFor("crash-reconcile", 1)
      const crashed = await runWorker({ ...store, keys, mode: "crash", reconcile: true, leaseMillis: 500 })
      expect(crashed.signal).toBe("SIGKILL")
      expect(appliedOf(keys)).toBe(1)
      const next = await runWorker({ ...store, keys, mode: "apply", reconcile: true, leaseMillis: 500 })
      expect(next.report).toEqual({ ok: 1, errors: [] })
      expect(appliedOf(keys)).toBe(1)
    }, 60_000)

    it("without alreadyApplied, the call after the crash fails with EffectInDoubt and applies nothing again", async () => {
      const store = target()
      const keys = keysFor("crash-doubt", 1)
      await runWorker({ ...store, keys, mode: "crash", reconcile: false, leaseMillis: 500 })
      const next = await runWorker({ ...store, keys, mode: "apply", reconcile: false, leaseMillis: 500 })
      expect(next.report?.ok).toBe(0)
      expect(next.report?.errors[0]).toMatch(/^EffectInDoubt: /)
      expect(appliedOf(keys)).toBe(1)
    }, 60_000)
  })
}

describe("effect tools after a restart", () => {
  it("an effect applied before the process exits is replayed by a new process from the SQLite file", async () => {
    const target = join(mkdtempSync(join(tmpdir(), "ai-effect-restart-")), "effects.db")
    const keys = keysFor("restart", 3)
    const config = { backend: "sqlite", target, keys, mode: "apply", reconcile: false, leaseMillis: 10_000 } as const
    expect((await runWorker(config)).report).toEqual({ ok: 3, errors: [] })
    expect((await runWorker(config)).report).toEqual({ ok: 3, errors: [] })
    expect(appliedOf(keys)).toBe(3)
  }, 60_000)
})

/** A chat whose model calls the tool, then answers; the tool result the model read, and the final text. */
const chatOnce = (tool: AI.ServerTool.Any, id: string) =>
  Effect.gen(function*() {
    const adapter = scriptedText([{ toolCalls: [{ name: "note", args: { id } }] }, { text: "Done." }])
    const chunks = yield* AI.chat({ adapter, messages: [{ role: "user", content: "note it" }], tools: [tool] }).pipe(Stream.runCollect)
    const result = adapter.turns[1]?.messages.find((message) => message.role === "tool")
    return {
      result: JSON.parse(String(result?.content)) as Record<string, unknown>,
      finished: chunks.some((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" && chunk.delta === "Done.")
    }
  })

const outages: ReadonlyArray<readonly [string, () => TestServer, () => Layer.Layer<AI.EffectStore, unknown>, string | undefined]> = [
  ["PostgreSQL", () => postgres!, () => layerSql({ timeout: "1 second" }).pipe(Layer.provide(pgClient(postgres!.url))), noPostgres],
  [
    "Redis",
    () => redis!,
    () =>
      layerRedis({ timeout: "1 second" }).pipe(
        Layer.provide(NodeRedis.layer({ url: redis!.url, socket: { connectTimeout: 500, reconnectStrategy: () => 100 } }))
      ),
    noRedis
  ]
]

for (const [name, server, layer, skip] of outages) {
  describe.skipIf(skip !== undefined)(`effect tools during an outage: ${name}`, () => {
    it.live("while the server is down, calls fail closed with a typed tool error and the chat goes on; once it is back, calls succeed", () =>
      Effect.gen(function*() {
        const applications = makeRemote()
        const tool = AI.effectTool(noteDef, ({ id }) => applications.apply(id), { effectKey: ({ id }) => id })
        const before = yield* chatOnce(tool, `outage-before-${run}`)
        expect(before.result).toEqual({ applied: 1 })

        yield* Effect.promise(() => server().stop())
        const during = yield* chatOnce(tool, `outage-during-${run}`)
        expect(String(during.result.error)).toMatch(/^EffectStoreError: EffectStore (get|claim) (failed|timed out) for /)
        expect(during.finished).toBe(true)
        expect(applications.applied.has(`outage-during-${run}`)).toBe(false)

        yield* Effect.promise(() => server().start())
        // The client reconnects on its own schedule; the first calls may still fail closed.
        let after = yield* chatOnce(tool, `outage-after-${run}`)
        for (let attempt = 0; after.result.error !== undefined && attempt < 100; attempt++) {
          yield* Effect.sleep("100 millis")
          after = yield* chatOnce(tool, `outage-after-${run}`)
        }
        expect(after.result).toEqual({ applied: 1 })
      }).pipe(Effect.provide(layer())), 60_000)
  })
}
