/**
 * One conformance suite for every effect-store backend: memory, SQLite,
 * PostgreSQL and Redis. The claim protocol, fencing, retention, many
 * concurrent claims, values that round-trip, and a store that hangs.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { Duration, Effect, Exit, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import {
  type Backend,
  callTool,
  makeRemote,
  memoryBackend,
  noteDef,
  postgresBackend,
  redisBackend,
  sqliteBackend
} from "./support/backends.ts"
import { missing, startPostgres, startRedis, type TestServer } from "./support/services.ts"

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

const conformance = (name: string, backend: () => Backend, skip: string | undefined) =>
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

    it.effect("an expired claim is taken over, with takenOver set and a greater fence", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const id = freshId()
          yield* store.claim(id, { owner: "crashed", ttl })
          yield* TestClock.adjust(Duration.sum(ttl, Duration.millis(1)))
          expect(yield* store.claim(id, { owner: "next", ttl })).toEqual(AI.Claim.Claimed({ fence: 2, takenOver: true }))
        })
      ))

    it.effect("fencing: a late owner's put and renew are refused with ClaimLost, and the newer record stays", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const id = freshId()
          yield* store.claim(id, { owner: "late", ttl })
          yield* TestClock.adjust(Duration.sum(ttl, Duration.millis(1)))
          yield* store.claim(id, { owner: "newer", ttl })
          yield* store.put(id, recorded("newer"), { fence: 2 })
          const late = yield* Effect.exit(store.put(id, recorded("late"), { fence: 1 }))
          expect(late).toEqual(Exit.fail(new AI.ClaimLost({ ...id, fence: 1 })))
          expect(yield* Effect.flip(store.renew(id, { fence: 1, ttl }))).toMatchObject({ _tag: "ClaimLost" })
          expect(yield* store.get(id)).toEqual(Option.some(recorded("newer")))
        })
      ))

    it.effect("retention: a record is forgotten once its retention has passed, and the key can be claimed again", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const id = freshId()
          yield* store.claim(id, { owner: "a", ttl })
          yield* store.put(id, recorded(1), { fence: 1 })
          yield* TestClock.adjust("59 minutes")
          expect(Option.isSome(yield* store.get(id))).toBe(true)
          yield* TestClock.adjust("2 minutes")
          expect(yield* store.get(id)).toEqual(Option.none())
          expect(yield* store.claim(id, { owner: "b", ttl })).toMatchObject({ _tag: "Claimed", takenOver: false })
        }), { retention: "1 hour" }))

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
  })

conformance("memory", () => memoryBackend, undefined)
const sqlite = sqliteBackend()
conformance("sqlite", () => sqlite, undefined)
conformance("postgres", () => postgresBackend(postgres!), noPostgres)
conformance("redis", () => redisBackend(redis!), noRedis)
