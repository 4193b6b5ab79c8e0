/**
 * The claims of `AI.Locks`, on a pair of stores that two holders use (one
 * memory store shared by both, or two connections to one database): one
 * holder at a time, a bounded wait, release on failure, and core's
 * `LockStore` with its signal.
 */
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { Deferred, Effect, Exit, Fiber, Layer, ManagedRuntime } from "effect"

/** A store that tells when it answered a claim with "held by another". */
const noticingBusy = (store: Layer.Layer<AI.EffectStore, unknown>, busy: Deferred.Deferred<void>) =>
  Layer.effect(
    AI.EffectStore,
    Effect.map(Effect.service(AI.EffectStore), (inner) => ({
      ...inner,
      claim: (id, options) => Effect.tap(inner.claim(id, options), (claim) => claim._tag === "Busy" ? Deferred.succeed(busy, undefined) : Effect.void)
    } satisfies AI.EffectStore["Service"]))
  ).pipe(Layer.provide(store))

export const describeLocks = (name: string, holders: () => readonly [Layer.Layer<AI.EffectStore, unknown>, Layer.Layer<AI.EffectStore, unknown>]) =>
  describe(`AI.Locks on ${name}`, () => {
    const key = () => `lock-${crypto.randomUUID()}`

    it.live("two holders of one key never overlap: the second enters once the first released", () =>
      Effect.gen(function*() {
        const [first, second] = holders()
        const busy = yield* Deferred.make<void>()
        const a = yield* Layer.build(AI.Locks.layer().pipe(Layer.provide(first)))
        const b = yield* Layer.build(AI.Locks.layer().pipe(Layer.provide(noticingBusy(second, busy))))
        const events: Array<string> = []
        const lock = key()
        const entered = yield* Deferred.make<void>()
        const leave = yield* Deferred.make<void>()
        const holderA = yield* Effect.forkChild(
          Effect.flatMap(Effect.service(AI.Locks), (locks) =>
            locks.withLock(lock, Effect.gen(function*() {
              events.push("a in")
              yield* Deferred.succeed(entered, undefined)
              yield* Deferred.await(leave)
              events.push("a out")
            }))).pipe(Effect.provideContext(a))
        )
        yield* Deferred.await(entered)
        const holderB = yield* Effect.forkChild(
          Effect.flatMap(Effect.service(AI.Locks), (locks) => locks.withLock(lock, Effect.sync(() => events.push("b in")))).pipe(Effect.provideContext(b))
        )
        // B asked and was told the lock is held; only then does A leave.
        yield* Deferred.await(busy)
        yield* Deferred.succeed(leave, undefined)
        yield* Fiber.join(holderA)
        yield* Fiber.join(holderB)
        expect(events).toEqual(["a in", "a out", "b in"])
      }).pipe(Effect.scoped))

    it.live("a lock held past a caller's waitFor fails that caller with LockTimeout, and its body never runs", () =>
      Effect.gen(function*() {
        const [first, second] = holders()
        const a = yield* Layer.build(AI.Locks.layer().pipe(Layer.provide(first)))
        const b = yield* Layer.build(AI.Locks.layer({ waitFor: "150 millis" }).pipe(Layer.provide(second)))
        const lock = key()
        const entered = yield* Deferred.make<void>()
        const holder = yield* Effect.forkChild(
          Effect.flatMap(Effect.service(AI.Locks), (locks) => locks.withLock(lock, Effect.andThen(Deferred.succeed(entered, undefined), Effect.never)))
            .pipe(Effect.provideContext(a))
        )
        yield* Deferred.await(entered)
        let ran = false
        const refused = yield* Effect.flip(
          Effect.flatMap(Effect.service(AI.Locks), (locks) => locks.withLock(lock, Effect.sync(() => ran = true))).pipe(Effect.provideContext(b))
        )
        expect(refused).toMatchObject({ _tag: "LockTimeout", key: lock })
        expect(ran).toBe(false)
        yield* Fiber.interrupt(holder)
      }).pipe(Effect.scoped))

    it.live("a body that fails releases the lock: the next holder gets it at its first ask", () =>
      Effect.gen(function*() {
        const [first, second] = holders()
        const a = yield* Layer.build(AI.Locks.layer().pipe(Layer.provide(first)))
        const b = yield* Layer.build(AI.Locks.layer({ waitFor: "0 millis" }).pipe(Layer.provide(second)))
        const lock = key()
        const failed = yield* Effect.exit(
          Effect.flatMap(Effect.service(AI.Locks), (locks) => locks.withLock(lock, Effect.fail("boom" as const))).pipe(Effect.provideContext(a))
        )
        expect(Exit.isFailure(failed)).toBe(true)
        const next = yield* Effect.flatMap(Effect.service(AI.Locks), (locks) => locks.withLock(lock, Effect.succeed("mine"))).pipe(Effect.provideContext(b))
        expect(next).toBe("mine")
      }).pipe(Effect.scoped))

    it("core's lockStore runs fn under the lock, returns its result, rethrows what it throws, and releases the lock either way", async () => {
      const [first] = holders()
      const runtime = ManagedRuntime.make(AI.Locks.layer({ waitFor: "0 millis" }).pipe(Layer.provide(first)))
      const { lockStore } = await runtime.runPromise(Effect.service(AI.Locks))
      const lock = key()
      expect(await lockStore.withLock(lock, async (signal) => signal.aborted ? "aborted" : "ran")).toBe("ran")
      await expect(lockStore.withLock(lock, async () => {
        throw new Error("the critical section failed")
      })).rejects.toThrow("the critical section failed")
      expect(await lockStore.withLock(lock, async () => "again")).toBe("again")
      await runtime.dispose()
    })
  })
