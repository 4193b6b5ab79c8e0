/**
 * Locks on the memory store and on a SQLite file, and the signal of core's
 * `LockStore`, which aborts once the holder's lease cannot be renewed.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { layerSqlite } from "@tanstack/ai-effect/sqlite"
import { Effect, Layer, ManagedRuntime } from "effect"
import { describeLocks } from "./support/locks.ts"

describeLocks("one memory store", () => {
  const store = AI.EffectStore.layerMemory()
  return [store, store]
})

describeLocks("one SQLite file, two connections", () => {
  const filename = join(mkdtempSync(join(tmpdir(), "ai-effect-locks-")), "locks.db")
  return [layerSqlite({ filename }), layerSqlite({ filename })]
})

describe("core's LockStore signal", () => {
  it("aborts with LockLost once the lease cannot be renewed, while fn still runs", async () => {
    // A store whose renewals find the claim taken over.
    const losing = Layer.effect(
      AI.EffectStore,
      Effect.map(Effect.service(AI.EffectStore), (inner) => ({
        ...inner,
        renew: (id, options) => Effect.fail(new AI.ClaimLost({ ...id, fence: options.fence }))
      } satisfies AI.EffectStore["Service"]))
    ).pipe(Layer.provide(AI.EffectStore.layerMemory()))
    const runtime = ManagedRuntime.make(AI.Locks.layer({ lease: "150 millis" }).pipe(Layer.provide(losing)))
    const { lockStore } = await runtime.runPromise(Effect.service(AI.Locks))
    const reason = await lockStore.withLock("thread-1", (signal) =>
      new Promise((resolve) => signal.addEventListener("abort", () => resolve(signal.reason), { once: true })))
    expect(reason).toMatchObject({ _tag: "LockLost", key: "thread-1" })
    await runtime.dispose()
  })
})
