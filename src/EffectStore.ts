/**
 * The store of applied effects, and the claims that keep two callers from
 * applying one effect at once.
 *
 * An effect tool records the result of every effect it applies under the
 * tool's name and the effect's key, and replays that record instead of
 * applying the effect again. Before it applies an effect, it **claims** the
 * key: one atomic operation that either hands the caller a lease with a
 * fencing number, or answers with the record, or says who holds the key now.
 * Only the holder of the current fence can write the record.
 *
 * `EffectStore` is the service behind that protocol. This module has the
 * in-memory store; `@tanstack/ai-effect/sqlite`, `@tanstack/ai-effect/sql` and
 * `@tanstack/ai-effect/redis` have the durable, shared ones. Every store is
 * built with {@link EffectStore.make}, which gives each operation a deadline
 * and lets identical calls of one process share one application.
 *
 * A store that cannot answer fails with `EffectStoreError`, and the tool then
 * fails closed: it does not apply an effect whose record it cannot check.
 *
 * @since 0.1.0
 */
import { Cause, Clock, Context, Data, Deferred, Duration, Effect, Exit, Layer, Option, Schema } from "effect"
import { withDeadline } from "./internal/deadline.ts"
import { keyForDisplay } from "./internal/keys.ts"
import { idKey, markInMemory, retentionOf, timeoutOf } from "./internal/store.ts"

/**
 * A recorded application: the tool's result as the model read it (JSON), how
 * it was obtained, when, and the fingerprint of the input it was applied for.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const recorded: AI.Recorded = { output: { commentId: 12 }, outcome: "applied", recordedAt: 1_700_000_000_000 }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const Recorded = Schema.Struct({
  output: Schema.Json,
  outcome: Schema.Literals(["applied", "reconciled"]),
  recordedAt: Schema.Number,
  /** The SHA-256 of the canonical JSON input; absent when the input has none. */
  fingerprint: Schema.optionalKey(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export type Recorded = typeof Recorded.Type

/**
 * A record as a durable backend keeps it: {@link Recorded} as JSON text
 * (what `JSON.stringify` writes of it). Read it back with
 * {@link EffectStoreError.readRecord}, so that a record that does not decode
 * fails closed.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Schema } from "effect"
 *
 * const text = Schema.encodeSync(AI.RecordedJson)({ output: { id: 1 }, outcome: "applied", recordedAt: 0 })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const RecordedJson = Schema.fromJsonString(Recorded)

/**
 * Where an effect is recorded: the tool's name and the effect key. Records
 * are scoped by tool, so two tools whose keys happen to be equal never read
 * each other's records.
 *
 * @example
 * ```ts
 * import type * as AI from "@tanstack/ai-effect"
 *
 * const id: AI.EffectId = { tool: "comment", key: "run-1:comment:42" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface EffectId {
  readonly tool: string
  readonly key: string
}

/**
 * The answer to a claim:
 *
 * - `Claimed`: the caller holds the key until its lease ends. `fence` grows
 *   with every claim of the key; `takenOver` is `true` when the claim replaced
 *   an expired claim of another owner, whose effect is then in doubt.
 * - `Recorded`: the effect is recorded; here is its record.
 * - `Busy`: another owner holds the key until `expiresAt` (epoch ms).
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const describe = AI.Claim.$match({
 *   Claimed: ({ fence }) => `claimed with fence ${fence}`,
 *   Recorded: ({ recorded }) => `recorded ${recorded.outcome}`,
 *   Busy: ({ owner }) => `held by ${owner}`
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Claim = Data.TaggedEnum<{
  Claimed: { readonly fence: number; readonly takenOver: boolean }
  Recorded: { readonly recorded: Recorded }
  Busy: { readonly owner: string; readonly expiresAt: number }
}>

/**
 * Constructors and matchers of {@link Claim}.
 *
 * @since 0.1.0
 * @category models
 */
export const Claim = Data.taggedEnum<Claim>()

/**
 * A fenced write or a renewal found that the caller no longer holds the
 * claim: its lease ended and another owner claimed the key. Nothing was
 * written, so the newer owner's record stands.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.ClaimLost({ tool: "comment", key: "run-1:comment:42", fence: 3 })
 * error.message // "The claim on run-1:comment:42 (tool comment, fence 3) was lost to a newer owner"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ClaimLost extends Schema.TaggedError<ClaimLost>()("ClaimLost", {
  tool: Schema.String,
  key: Schema.String,
  fence: Schema.Number
}) {
  override get message(): string {
    return `The claim on ${keyForDisplay(this.key)} (tool ${this.tool}, fence ${this.fence}) was lost to a newer owner`
  }
}

/**
 * A store operation.
 *
 * @since 0.1.0
 * @category models
 */
export type StoreOperation = "get" | "claim" | "put" | "release" | "renew"

/**
 * The store could not answer: it is `unavailable` (a connection refused, a
 * query failed), it did not answer before its deadline (`timeout`), or it
 * holds a record that cannot be read (`corrupt`).
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectStoreError({
 *   operation: "get",
 *   tool: "comment",
 *   key: "run-1:comment:42",
 *   reason: "unavailable",
 *   cause: new Error("connection refused")
 * })
 * error.message // "EffectStore get failed for run-1:comment:42 (tool comment): connection refused"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectStoreError extends Schema.TaggedError<EffectStoreError>()("EffectStoreError", {
  operation: Schema.Literals(["get", "claim", "put", "release", "renew"]),
  tool: Schema.String,
  key: Schema.String,
  reason: Schema.Literals(["unavailable", "timeout", "corrupt"]),
  cause: Schema.Defect()
}) {
  /**
   * The error of a driver's failure during `operation`, for a backend's
   * `Effect.mapError`.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   * import { Effect } from "effect"
   *
   * declare const query: Effect.Effect<ReadonlyArray<{ record: string }>, Error>
   *
   * const id = { tool: "comment", key: "run-1:comment:42" }
   * const rows = query.pipe(Effect.mapError(AI.EffectStoreError.unavailable("get", id)))
   * ```
   */
  static readonly unavailable = (operation: StoreOperation, id: EffectId) => (cause: unknown): EffectStoreError =>
    new EffectStoreError({ operation, ...id, reason: "unavailable", cause })

  /**
   * Decodes a record a durable backend read ({@link RecordedJson}); text it
   * cannot decode fails `operation` as `corrupt`, so that the tool fails
   * closed instead of applying the effect again.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   *
   * const id = { tool: "comment", key: "run-1:comment:42" }
   * const recorded = AI.EffectStoreError.readRecord("get", id, '{"output":1,"outcome":"applied","recordedAt":0}')
   * ```
   */
  static readonly readRecord = (operation: StoreOperation, id: EffectId, text: string): Effect.Effect<Recorded, EffectStoreError> =>
    Effect.suspend(() => {
      const corrupt = (cause: unknown) => new EffectStoreError({ operation, ...id, reason: "corrupt", cause })
      // JSON.parse and then the struct: half the time of RecordedJson's decode, on every replay.
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch (cause) {
        return Effect.fail(corrupt(cause))
      }
      return Effect.mapError(decodeRecorded(parsed), corrupt)
    })

  override get message(): string {
    const where = `${keyForDisplay(this.key)} (tool ${this.tool})`
    if (this.reason === "timeout") return `EffectStore ${this.operation} timed out for ${where}: ${describe(this.cause)}`
    return `EffectStore ${this.operation} failed for ${where}: ${describe(this.cause)}`
  }
}

const decodeRecorded = Schema.decodeUnknownEffect(Recorded)

const describe = (cause: unknown): string => cause instanceof Error ? cause.message : String(cause)

/**
 * The operations a store backend implements. Each is one round trip to the
 * store, and `claim` is one atomic operation. Times are the caller's
 * `Clock` (epoch ms), so that every process compares leases on one scale.
 *
 * @since 0.1.0
 * @category models
 */
export interface EffectStoreBackend {
  /** The record of an effect, if one is kept and not expired. */
  readonly get: (id: EffectId) => Effect.Effect<Option.Option<Recorded>, EffectStoreError>
  /** Claims the key for `owner` until `ttl` from now, atomically. */
  readonly claim: (
    id: EffectId,
    options: { readonly owner: string; readonly ttl: Duration.Duration }
  ) => Effect.Effect<Claim, EffectStoreError>
  /** Records the effect while the caller still holds the claim with `fence`; ends the claim. */
  readonly put: (
    id: EffectId,
    recorded: Recorded,
    options: { readonly fence: number }
  ) => Effect.Effect<void, EffectStoreError | ClaimLost>
  /** Drops the claim with `fence` without a record, so that the next caller claims afresh. */
  readonly release: (id: EffectId, options: { readonly fence: number }) => Effect.Effect<void, EffectStoreError>
  /** Extends the lease of the claim with `fence` to `ttl` from now. */
  readonly renew: (
    id: EffectId,
    options: { readonly fence: number; readonly ttl: Duration.Duration }
  ) => Effect.Effect<void, EffectStoreError | ClaimLost>
}

/**
 * Options every store layer takes.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreOptions {
  /** How long a record is kept. Default 24 hours. */
  readonly retention?: Duration.Input | undefined
  /**
   * The deadline of every store operation. A store that does not answer in
   * time fails the call closed with `EffectStoreError` (reason `timeout`).
   * Default 5 seconds.
   */
  readonly timeout?: Duration.Input | undefined
}

/**
 * Options of {@link EffectStore.layerMemory}.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryStoreOptions extends Pick<StoreOptions, "retention"> {
  /** The most records kept; the oldest go first. A positive integer. Default 10,000. */
  readonly capacity?: number | undefined
}

/**
 * The record of applied effects and the claims on them.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Duration, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* AI.EffectStore
 *   const id = { tool: "comment", key: "run-1:comment:42" }
 *   const claim = yield* store.claim(id, { owner: "worker-1", ttl: Duration.seconds(30) })
 *   if (claim._tag === "Claimed") {
 *     yield* store.put(id, { output: { id: 1 }, outcome: "applied", recordedAt: 0 }, { fence: claim.fence })
 *   }
 *   return yield* store.get(id) // Option.some({ output: { id: 1 }, ... })
 * }).pipe(Effect.provide(AI.EffectStore.layerMemory()))
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export class EffectStore extends Context.Service<EffectStore, EffectStore.Service>()("@tanstack/ai-effect/EffectStore") {
  /**
   * Makes a store from a backend: every operation gets the deadline of
   * `options.timeout`, and {@link EffectStore.Service.share} lets identical
   * calls of this store instance share one application. Backends (and test
   * doubles) are built with it.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   * import { Effect, Layer } from "effect"
   *
   * declare const backend: AI.EffectStoreBackend
   * const layer = Layer.effect(AI.EffectStore, AI.EffectStore.make(backend, { timeout: "2 seconds" }))
   * ```
   */
  static readonly make = (
    backend: EffectStoreBackend,
    options?: Pick<StoreOptions, "timeout">
  ): Effect.Effect<EffectStore.Service> => Effect.sync(() => makeService(backend, deadlineOf(options)))

  /**
   * The embedded store: in memory, bounded, records kept for `retention`.
   * It guards retries within one process and forgets everything when the
   * process ends; use a durable store when a retry can reach another process
   * or come after a restart.
   *
   * The store is made when this function is called, and every build of the
   * returned Layer shares it, so a Layer value defined once (beside your
   * other layers) keeps its records across requests even when a route
   * provides it per request. A store made inside a request handler is new
   * for every request and de-duplicates nothing across them; the first
   * effect-tool call against such a store logs a warning. Its operations
   * answer at once, so it has no `timeout`.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   *
   * // once, at module level: every request shares this store
   * export const EffectStoreLive = AI.EffectStore.layerMemory({ capacity: 1_000, retention: "1 day" })
   * ```
   */
  static readonly layerMemory = (options?: MemoryStoreOptions): Layer.Layer<EffectStore> => {
    const capacity = options?.capacity ?? 10_000
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`EffectStore.layerMemory: capacity must be a positive integer, got ${capacity}`)
    }
    // Its operations answer synchronously: no deadline to race them against.
    return Layer.succeed(EffectStore, markInMemory(makeService(makeMemoryBackend(capacity, retentionOf(options)), undefined)))
  }
}

/**
 * The shape of {@link EffectStore}.
 *
 * @since 0.1.0
 * @category models
 */
export declare namespace EffectStore {
  /**
   * The service: the backend's operations with their deadlines, and the
   * sharing of identical calls in one process.
   */
  export interface Service extends EffectStoreBackend {
    /**
     * Runs `effect` for `id`, unless a call for the same id is already
     * running through this store instance: then it waits for that call and
     * returns its result (`shared: true`). If the running call is
     * interrupted, a waiting call runs `effect` itself.
     */
    readonly share: <A, E, R>(
      id: EffectId,
      effect: Effect.Effect<A, E, R>
    ) => Effect.Effect<{ readonly value: A; readonly shared: boolean }, E, R>
  }
}

/**
 * Fails `effect` closed with `EffectStoreError` (reason `timeout`) when it does not answer in time.
 *
 * @internal
 */
export type Deadline = <A, E>(operation: StoreOperation, id: EffectId, effect: Effect.Effect<A, E>) => Effect.Effect<A, E | EffectStoreError>

const deadlineOf = (options: Pick<StoreOptions, "timeout"> | undefined): Deadline => {
  const timeout = timeoutOf(options)
  const timeoutMillis = Duration.toMillis(timeout)
  return (operation, id, effect) =>
    withDeadline(effect, timeoutMillis, () =>
      Effect.fail(
        new EffectStoreError({
          operation,
          ...id,
          reason: "timeout",
          cause: new Error(`no answer within ${Duration.format(timeout)}`)
        })
      ))
}

/**
 * Makes the service of a backend that puts the deadline of `options.timeout`
 * on its waits itself: for an embedded store whose common answers come at
 * once, where racing a timer would cost more than the answer.
 *
 * @internal
 */
export const makeWithOwnDeadlines = (
  backend: (deadline: Deadline) => EffectStoreBackend,
  options: Pick<StoreOptions, "timeout"> | undefined
): EffectStore.Service => makeService(backend(deadlineOf(options)), undefined)

/** The service of `backend`, each operation under `deadline` (none: the backend answers at once or bounds its own waits). */
const makeService = (backend: EffectStoreBackend, deadline: Deadline | undefined): EffectStore.Service => {
  // The calls running through this store instance, by tool and key.
  const running = new Map<string, Deferred.Deferred<unknown, unknown>>()
  const share = <A, E, R>(
    id: EffectId,
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<{ readonly value: A; readonly shared: boolean }, E, R> =>
    Effect.suspend(() => {
      const slot = idKey(id)
      const current = running.get(slot) as Deferred.Deferred<A, E> | undefined
      if (current !== undefined) {
        return Effect.flatMap(Effect.exit(Deferred.await(current)), (exit) =>
          Exit.isSuccess(exit)
            ? Effect.succeed({ value: exit.value, shared: true })
            : Cause.hasInterruptsOnly(exit.cause)
            ? share(id, effect)
            : Effect.failCause(exit.cause))
      }
      const application = Deferred.makeUnsafe<A, E>()
      running.set(slot, application as Deferred.Deferred<unknown, unknown>)
      return effect.pipe(
        Effect.onExit((exit) => {
          running.delete(slot)
          return Deferred.done(application, exit)
        }),
        Effect.map((value) => ({ value, shared: false }))
      )
    })
  if (deadline === undefined) return { ...backend, share }
  return {
    get: (id) => deadline("get", id, backend.get(id)),
    claim: (id, claim) => deadline("claim", id, backend.claim(id, claim)),
    put: (id, recorded, put) => deadline("put", id, backend.put(id, recorded, put)),
    release: (id, release) => deadline("release", id, backend.release(id, release)),
    renew: (id, renew) => deadline("renew", id, backend.renew(id, renew)),
    share
  }
}

interface MemoryEntry {
  fence: number
  /** The holder of the claim; `undefined` once recorded or released. */
  owner: string | undefined
  leaseExpiresAt: number
  recorded: Recorded | undefined
  /** When the entry may be forgotten: a record's retention, or a claim's history. */
  expiresAt: number
}

const makeMemoryBackend = (capacity: number, retention: number): EffectStoreBackend => {
  // A Map iterates in insertion order, so its first key is the oldest entry.
  const entries = new Map<string, MemoryEntry>()
  // One long-lived iterator walks from the oldest entry on: a fresh iterator
  // per eviction would step over every deleted slot at the front again.
  let oldest = entries.keys()
  const touch = (slot: string, entry: MemoryEntry) => {
    entries.delete(slot)
    entries.set(slot, entry)
    while (entries.size > capacity) {
      let next = oldest.next()
      if (next.done === true) {
        oldest = entries.keys()
        next = oldest.next()
      }
      if (next.done !== true) entries.delete(next.value)
    }
  }
  const live = (slot: string, now: number): MemoryEntry | undefined => {
    const entry = entries.get(slot)
    if (entry === undefined) return undefined
    if (entry.expiresAt > now) return entry
    entries.delete(slot)
    return undefined
  }
  const held = (id: EffectId, fence: number, now: number): MemoryEntry | undefined => {
    const entry = live(idKey(id), now)
    return entry !== undefined && entry.fence === fence && entry.owner !== undefined && entry.recorded === undefined
      ? entry
      : undefined
  }
  return {
    get: (id) =>
      Effect.map(Clock.currentTimeMillis, (now) => Option.fromUndefinedOr(live(idKey(id), now)?.recorded)),
    claim: (id, { owner, ttl }) =>
      Effect.map(Clock.currentTimeMillis, (now): Claim => {
        const slot = idKey(id)
        const entry = live(slot, now)
        if (entry?.recorded !== undefined) return Claim.Recorded({ recorded: entry.recorded })
        if (entry?.owner !== undefined && entry.leaseExpiresAt > now) {
          return Claim.Busy({ owner: entry.owner, expiresAt: entry.leaseExpiresAt })
        }
        const leaseExpiresAt = now + Duration.toMillis(ttl)
        const fence = (entry?.fence ?? 0) + 1
        touch(slot, { fence, owner, leaseExpiresAt, recorded: undefined, expiresAt: leaseExpiresAt + retention })
        return Claim.Claimed({ fence, takenOver: entry?.owner !== undefined })
      }),
    put: (id, recorded, { fence }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const entry = held(id, fence, now)
        if (entry === undefined) return Effect.fail(new ClaimLost({ ...id, fence }))
        touch(idKey(id), { ...entry, owner: undefined, recorded, expiresAt: now + retention })
        return Effect.void
      }),
    release: (id, { fence }) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = held(id, fence, now)
        if (entry !== undefined) Object.assign(entry, { owner: undefined, leaseExpiresAt: now, expiresAt: now + retention })
      }),
    renew: (id, { fence, ttl }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const entry = held(id, fence, now)
        if (entry === undefined) return Effect.fail(new ClaimLost({ ...id, fence }))
        entry.leaseExpiresAt = now + Duration.toMillis(ttl)
        entry.expiresAt = entry.leaseExpiresAt + retention
        return Effect.void
      })
  }
}
