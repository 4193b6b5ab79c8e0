/**
 * One conformance suite for every effect-store backend: memory, SQLite,
 * PostgreSQL and Redis. The claim protocol, fencing, retention, many
 * concurrent claims, values that round-trip, and a store that hangs.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { Cause, Clock, Duration, Effect, Exit, Layer, Logger, Option } from "effect"
import { TestClock } from "effect/testing"
import {
  type Backend,
  callTool,
  makeRemote,
  memoryBackend,
  noteDef,
  postgresBackend,
  redisBackend,
  redisClient,
  sqliteBackend
} from "../support/backends.ts"
import { Redis } from "effect/persistence/Redis"
import { layerRedis, RedisPersistenceError, type RedisStoreOptions } from "@tanstack/ai-effect/redis"
import { missing, startPostgres, startRedis, type TestServer } from "../support/services.ts"

const noPostgres = missing("postgres")
const noRedis = missing("redis")
let postgres: TestServer | undefined
let redis: TestServer | undefined

beforeAll(async () => {
  ;[postgres, redis] = await Promise.all([
    noPostgres === undefined ? startPostgres() : undefined,
    noRedis === undefined ? startRedis() : undefined
  ])
}, 60_000)

afterAll(async () => {
  await Promise.all([postgres?.dispose(), redis?.dispose()])
})

const ttl = Duration.seconds(10)
const recorded = (output: AI.Recorded["output"]): AI.Recorded => ({ output, outcome: "applied", recordedAt: 0 })
let counter = 0
/** A fresh effect id for each test, so that tests sharing a database never meet. */
const freshId = (): AI.EffectId => ({ tool: "note", key: `k-${process.pid}-${Date.now()}-${counter++}` })

/**
 * Whose clock decides a store's leases and retention: the caller's (`Clock`,
 * which a test moves with TestClock) or the server's own.
 */
type DecidingClock = "caller" | "server"

/**
 * Requests of a replay: one where the claim answers the record in one
 * statement or script; SQLite claims, then reads what it could not claim.
 */
/**
 * The requests of a first application and of a replay, per store: one each
 * way on the networked stores; SQLite reads what holds the key before it
 * claims (no network), so that a replay is that read alone.
 */
const requestsPerCall: Record<string, { readonly first: number; readonly replay: number; readonly label: string }> = {
  sqlite: { first: 3, replay: 1, label: "three requests (read, claim, put), and a replay one read" },
  postgres: { first: 2, replay: 1, label: "two requests to the store (claim, put), and a replay one" },
  redis: { first: 2, replay: 1, label: "two requests to the store (claim, put), and a replay one" }
}

const conformance = (name: string, clock: DecidingClock, backend: () => Backend, skip: string | undefined) =>
  describe.skipIf(skip !== undefined)(`EffectStore conformance: ${name}`, () => {
    const withStore = <A, E>(f: (store: AI.EffectStore["Service"]) => Effect.Effect<A, E>, options?: AI.StoreOptions) =>
      Effect.flatMap(Effect.service(AI.EffectStore), f).pipe(Effect.provide(backend().layer(options)))

    it.effect("get, claim, put, release and renew follow the protocol", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const id = freshId()
          expect(yield* store.get(id)).toEqual(Option.none())
          const first = yield* store.claim(id, { owner: "a", ttl })
          expect(first).toEqual(AI.Claim.Claimed({ fence: 1, takenOver: false }))
          expect(yield* store.claim(id, { owner: "b", ttl })).toMatchObject({ _tag: "Busy", owner: "a" })
          yield* store.renew(id, { fence: 1, ttl })
          yield* store.release(id, { fence: 1 })
          // A released claim is claimed afresh, with a greater fence, and nothing is in doubt.
          const second = yield* store.claim(id, { owner: "b", ttl })
          expect(second).toEqual(AI.Claim.Claimed({ fence: 2, takenOver: false }))
          yield* store.put(id, recorded({ done: true }), { fence: 2 })
          expect(yield* store.get(id)).toEqual(Option.some(recorded({ done: true })))
          expect(yield* store.claim(id, { owner: "c", ttl })).toEqual(AI.Claim.Recorded({ recorded: recorded({ done: true }) }))
        })
      ))

    // Time passes on the clock that decides: TestClock for a store on the
    // caller's clock; for a store on the server's clock, real time, with a
    // lease short enough to wait out.
    const lease = clock === "caller" ? ttl : Duration.millis(200)
    const pastTheLease = clock === "caller"
      ? TestClock.adjust(Duration.sum(lease, Duration.millis(1)))
      : Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, Duration.toMillis(lease) + 50)))

    it.effect("an expired claim is taken over, with takenOver set and a greater fence", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const id = freshId()
          yield* store.claim(id, { owner: "crashed", ttl: lease })
          yield* pastTheLease
          expect(yield* store.claim(id, { owner: "next", ttl })).toEqual(AI.Claim.Claimed({ fence: 2, takenOver: true }))
        })
      ))

    it.effect("fencing: a late owner's put and renew are refused with ClaimLost, and the newer record stays", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const id = freshId()
          yield* store.claim(id, { owner: "late", ttl: lease })
          yield* pastTheLease
          yield* store.claim(id, { owner: "newer", ttl })
          yield* store.put(id, recorded("newer"), { fence: 2 })
          const late = yield* Effect.exit(store.put(id, recorded("late"), { fence: 1 }))
          expect(late).toEqual(Exit.fail(new AI.ClaimLost({ ...id, fence: 1 })))
          expect(yield* Effect.flip(store.renew(id, { fence: 1, ttl }))).toMatchObject({ _tag: "ClaimLost" })
          expect(yield* store.get(id)).toEqual(Option.some(recorded("newer")))
        })
      ))

    const retention = clock === "caller"
      ? { retention: "1 hour", before: TestClock.adjust("59 minutes"), after: TestClock.adjust("2 minutes") } as const
      : {
        retention: "1 second",
        before: Effect.void,
        after: Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 1_100)))
      } as const

    it.effect("retention: a record is forgotten once its retention has passed, and the key can be claimed again", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const id = freshId()
          yield* store.claim(id, { owner: "a", ttl })
          yield* store.put(id, recorded(1), { fence: 1 })
          yield* retention.before
          expect(Option.isSome(yield* store.get(id))).toBe(true)
          yield* retention.after
          expect(yield* store.get(id)).toEqual(Option.none())
          expect(yield* store.claim(id, { owner: "b", ttl })).toMatchObject({ _tag: "Claimed", takenOver: false })
        }), { retention: retention.retention }))

    if (clock === "server") {
      /** The live clock, shifted: the caller's view of time on a machine whose clock is off. */
      const skewedBy = (offsetMillis: number) =>
        Effect.map(Effect.service(Clock.Clock), (live): Clock.Clock => ({
          ...live,
          currentTimeMillisUnsafe: () => live.currentTimeMillisUnsafe() + offsetMillis,
          currentTimeMillis: Effect.sync(() => live.currentTimeMillisUnsafe() + offsetMillis),
          currentTimeNanosUnsafe: () => live.currentTimeNanosUnsafe() + BigInt(offsetMillis) * 1_000_000n,
          currentTimeNanos: Effect.sync(() => live.currentTimeNanosUnsafe() + BigInt(offsetMillis) * 1_000_000n),
          sleep: (duration) => live.sleep(duration)
        }))

      it.live("leases follow the server's clock: a caller whose clock runs an hour ahead does not take a live claim", () =>
        withStore((store) =>
          Effect.gen(function*() {
            const id = freshId()
            yield* store.claim(id, { owner: "live", ttl })
            const ahead = yield* skewedBy(3_600_000)
            const claim = yield* store.claim(id, { owner: "ahead", ttl }).pipe(Effect.provideService(Clock.Clock, ahead))
            expect(claim).toMatchObject({ _tag: "Busy", owner: "live" })
          })
        ))

      it.live("leases follow the server's clock: a caller whose clock runs an hour behind takes an expired claim over", () =>
        withStore((store) =>
          Effect.gen(function*() {
            const id = freshId()
            yield* store.claim(id, { owner: "crashed", ttl: lease })
            yield* pastTheLease
            const behind = yield* skewedBy(-3_600_000)
            const claim = yield* store.claim(id, { owner: "behind", ttl }).pipe(Effect.provideService(Clock.Clock, behind))
            expect(claim).toEqual(AI.Claim.Claimed({ fence: 2, takenOver: true }))
            expect(yield* Effect.flip(store.renew(id, { fence: 1, ttl }))).toMatchObject({ _tag: "ClaimLost" })
          })
        ))
    }

    it.live("many concurrent claims of one key: exactly one wins", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const id = freshId()
          const claims = yield* Effect.all(
            Array.from({ length: 40 }, (_, i) => store.claim(id, { owner: `owner-${i}`, ttl })),
            { concurrency: "unbounded" }
          )
          expect(claims.filter((claim) => claim._tag === "Claimed")).toHaveLength(1)
          expect(claims.filter((claim) => claim._tag === "Busy")).toHaveLength(39)
        })
      ))

    // The memory store sends no requests.
    const expected = requestsPerCall[name]
    if (expected !== undefined) {
      it.live(`an effect tool's first application is ${expected.label}`, () =>
        Effect.gen(function*() {
          const store = backend().counted!()
          const tool = AI.effectTool(noteDef, () => Effect.succeed({ applied: 1 }), { effectKey: ({ id }) => id })
          const id = freshId().key
          const requestsOf = <R>(call: Effect.Effect<unknown, unknown, R>) =>
            Effect.gen(function*() {
              const before = store.count()
              yield* call
              return store.count() - before
            })
          const call = callTool(tool, { id })
          // Built once, as an app builds its store; the warm-up call loads scripts and prepares statements.
          const [first, replay, again] = yield* Effect.all([
            callTool(tool, { id: `${id}-warm-up` }),
            requestsOf(call),
            requestsOf(call),
            requestsOf(call)
          ]).pipe(Effect.map(([, ...counts]) => counts), Effect.provide(store.layer))
          expect({ first, replay, again }).toEqual({ first: expected.first, replay: expected.replay, again: expected.replay })
        }))
    }

    it.live("values round-trip: nested JSON, unicode and a 1 MB string", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const values: ReadonlyArray<AI.Recorded["output"]> = [
            { a: [1, 2.5, null, true, { b: "c" }], d: { e: { f: [] } } },
            { text: "Grüße, 世界 🌍 \u0000 \"quoted\" \\ back" },
            "x".repeat(1_000_000)
          ]
          for (const output of values) {
            const id = freshId()
            yield* store.claim(id, { owner: "a", ttl })
            const value: AI.Recorded = { output, outcome: "reconciled", recordedAt: 1_700_000_000_000, fingerprint: "f".repeat(64) }
            yield* store.put(id, value, { fence: 1 })
            expect(yield* store.get(id)).toEqual(Option.some(value))
          }
        })
      ))

    it.live("a store that hangs times out: the call fails closed with EffectStoreError (timeout) and execute does not run", () =>
      Effect.gen(function*() {
        const remote = makeRemote()
        const tool = AI.effectTool(noteDef, ({ id }) => remote.apply(id))
        const hanging = name === "memory"
          ? Layer.effect(
            AI.EffectStore,
            Effect.flatMap(Effect.service(AI.EffectStore), (memory) => AI.EffectStore.make({ ...memory, claim: () => Effect.never }, { timeout: "300 millis" }))
          ).pipe(Layer.provide(AI.EffectStore.layerMemory()))
          : backend().layer({ timeout: "300 millis" })
        const started = Date.now()
        const failure = yield* Effect.gen(function*() {
          // Build the store (and its table) before it starts to hang.
          yield* Effect.service(AI.EffectStore)
          if (name !== "memory") yield* backend().hang
          return yield* Effect.flip(callTool(tool, { id: "a" }))
        }).pipe(Effect.scoped, Effect.provide(hanging))
        expect(failure.message).toMatch(/^EffectStoreError: EffectStore (get|claim) timed out for /)
        expect(remote.total()).toBe(0)
        expect(Date.now() - started).toBeLessThan(5_000)
      }))

    if (name === "sqlite") {
      it.live("a replay is one read that another process's write lock does not hold up: the recorded output, nothing applied again", () =>
        Effect.gen(function*() {
          const remote = makeRemote()
          const tool = AI.effectTool(noteDef, ({ id }) => remote.apply(id))
          const store = backend().counted!()
          const { first, replay, reads } = yield* Effect.gen(function*() {
            const first = yield* callTool(tool, { id: "locked" })
            // Another connection holds the write lock for the rest of the test.
            yield* backend().hang
            const before = store.count()
            const replay = yield* callTool(tool, { id: "locked" })
            return { first, replay, reads: store.count() - before }
          }).pipe(Effect.scoped, Effect.provide(store.layer))
          expect({ replay, reads }).toEqual({ replay: first, reads: 1 })
          expect(remote.total()).toBe(1)
        }))
    }
  })

conformance("memory", "caller", () => memoryBackend, undefined)
const sqlite = sqliteBackend()
conformance("sqlite", "caller", () => sqlite, undefined)
conformance("postgres", "server", () => postgresBackend(postgres!), noPostgres)
conformance("redis", "server", () => redisBackend(redis!), noRedis)

describe.skipIf(noRedis !== undefined)("layerRedis on a Redis that forgot its scripts", () => {
  it.live("after SCRIPT FLUSH (as after a restart) each operation loads its script again and answers as before", () =>
    Effect.gen(function*() {
      const store = yield* AI.EffectStore
      const redis = yield* Redis
      const id = freshId()
      const claimed = yield* store.claim(id, { owner: "a", ttl })
      if (claimed._tag !== "Claimed") return expect.unreachable(`claimed ${claimed._tag}`)
      yield* redis.send("SCRIPT", "FLUSH")
      yield* store.renew(id, { fence: claimed.fence, ttl })
      yield* redis.send("SCRIPT", "FLUSH")
      yield* store.put(id, recorded("once"), { fence: claimed.fence })
      yield* redis.send("SCRIPT", "FLUSH")
      const replay = yield* store.claim(id, { owner: "b", ttl })
      expect(replay).toMatchObject({ _tag: "Recorded", recorded: { output: "once" } })
      const other = freshId()
      const next = yield* store.claim(other, { owner: "a", ttl })
      if (next._tag !== "Claimed") return expect.unreachable(`claimed ${next._tag}`)
      yield* redis.send("SCRIPT", "FLUSH")
      yield* store.release(other, { fence: next.fence })
      expect(yield* store.claim(other, { owner: "b", ttl })).toMatchObject({ _tag: "Claimed", fence: next.fence + 1, takenOver: false })
    }).pipe(Effect.provide(Layer.provideMerge(layerRedis(), redisClient(redis!.url)))))
})

describe.skipIf(noRedis !== undefined)("layerRedis checks that Redis persists", () => {
  const buildOn = (persistence: "none" | "hidden", options?: RedisStoreOptions) =>
    Effect.acquireUseRelease(
      Effect.promise(() => startRedis({ persistence })),
      (server) => {
        const logs: Array<string> = []
        const logger = Logger.make((entry) => logs.push(String(Logger.formatStructured.log(entry).message)))
        return Layer.build(layerRedis(options).pipe(Layer.provide(redisClient(server.url)))).pipe(
          Effect.scoped,
          Effect.exit,
          Effect.map((exit) => ({ exit, logs })),
          Effect.provide(Logger.layer([logger]))
        )
      },
      (server) => Effect.promise(() => server.dispose())
    )

  it.live("a Redis that persists nothing is refused with RedisPersistenceError, which says how to fix it", () =>
    Effect.gen(function*() {
      const { exit } = yield* buildOn("none")
      expect(exit).toMatchObject({ _tag: "Failure" })
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      expect(error).toBeInstanceOf(RedisPersistenceError)
      expect((error as RedisPersistenceError).message).toMatch(/appendonly yes, appendfsync always/)
    }))

  it.live("persistence: \"unchecked\" builds on it all the same, by the user's choice", () =>
    Effect.gen(function*() {
      const { exit } = yield* buildOn("none", { persistence: "unchecked" })
      expect(exit).toMatchObject({ _tag: "Success" })
    }))

  it.live("where CONFIG is refused (managed Redis), the layer starts and warns that it could not check", () =>
    Effect.gen(function*() {
      const { exit, logs } = yield* buildOn("hidden")
      expect(exit).toMatchObject({ _tag: "Success" })
      expect(logs.filter((message) => message.includes("could not read Redis's persistence settings"))).toHaveLength(1)
    }))
})
