/**
 * The store across processes: SQLite (one file), PostgreSQL and Redis shared
 * by worker processes; a worker killed in the crash window; a server that
 * goes away during a run; and a restart that replays from the SQLite file.
 */
import { spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { NodeRedis } from "@effect/platform-node"
import * as AI from "@tanstack/ai-effect"
import { layerRedis } from "@tanstack/ai-effect/redis"
import { layerSql } from "@tanstack/ai-effect/sql"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { Effect, Layer, Stream } from "effect"
import { makeRemote, noteDef, pgClient } from "./support/backends.ts"
import { missing, startPostgres, startRedis, type TestServer } from "./support/services.ts"
import type { WorkerConfig, WorkerReport } from "./support/worker.ts"

const noPostgres = missing("postgres")
const noRedis = missing("redis")
let postgres: TestServer | undefined
let redis: TestServer | undefined
let remote: { readonly url: string; readonly server: Server; readonly applied: Map<string, number> }

beforeAll(async () => {
  ;[postgres, redis] = await Promise.all([
    noPostgres === undefined ? startPostgres() : undefined,
    noRedis === undefined ? startRedis() : undefined
  ])
  // The remote system the workers apply effects to: it counts applications per key.
  const applied = new Map<string, number>()
  const server = createServer((req, res) => {
    const [, action, key = ""] = req.url!.split("/")
    if (req.method === "POST" && action === "apply") applied.set(key, (applied.get(key) ?? 0) + 1)
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify({ applied: applied.get(key) ?? 0 }))
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  remote = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, applied }
}, 60_000)

afterAll(async () => {
  remote.server.closeAllConnections()
  remote.server.close()
  await Promise.all([postgres?.dispose(), redis?.dispose()])
})

interface WorkerExit {
  readonly report: WorkerReport | undefined
  readonly signal: NodeJS.Signals | null
}

/** Runs one worker process to its end. */
const runWorker = async (config: Omit<WorkerConfig, "remote">): Promise<WorkerExit> => {
  const child = spawn(process.execPath, ["--conditions=@tanstack/ai-effect/source", join(import.meta.dirname, "support/worker.ts")], {
    env: { ...process.env, AI_EFFECT_WORKER: JSON.stringify({ ...config, remote: remote.url }) },
    stdio: ["ignore", "pipe", "inherit"]
  })
  let output = ""
  child.stdout.on("data", (part: Buffer) => (output += part.toString()))
  const [, signal] = (await once(child, "exit")) as [number | null, NodeJS.Signals | null]
  const line = output.trim().split("\n").at(-1)
  return { report: line ? JSON.parse(line) as WorkerReport : undefined, signal }
}

const appliedOf = (keys: ReadonlyArray<string>) => keys.reduce((sum, key) => sum + (remote.applied.get(key) ?? 0), 0)

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
const chatOnce = (tool: AI.EffectTool.Any, id: string) =>
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
