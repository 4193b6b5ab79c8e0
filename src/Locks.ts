/**
 * Locks on this package's stores: core's `LockStore` (`withLock(key, fn)`,
 * for `withLocks` and the middleware that read it), and the same as an
 * Effect, on any `EffectStore`.
 *
 * A lock is a claim on the key `@lock/<key>` in the store, with the claim's
 * lease and fence: one holder at a time across every process that shares
 * the store, the lease timed by the store's own clock on PostgreSQL and
 * Redis. The holder's lease is renewed while it holds the lock; once it
 * cannot be (another holder took the key after the lease ran out, or the
 * store stopped answering for two thirds of it), the holder's signal aborts
 * and the Effect is interrupted, so that it stops acting as the holder. A
 * holder that crashes leaves the key to the next one when its lease ends.
 *
 * @since 0.1.0
 */
import type { LockStore } from "@tanstack/ai/locks"
import { Cause, Context, Duration, Effect, Exit, Layer, Schema, type Scope } from "effect"
import * as EffectLease from "./EffectLease.ts"
import { EffectStore, type EffectStoreError } from "./EffectStore.ts"
import type { EffectInProgress } from "./EffectToolError.ts"
import { keyForDisplay } from "./internal/keys.ts"

/**
 * The lock was held by another holder for the whole of `waitFor`. The body
 * did not run.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.LockTimeout({ key: "thread-1", holder: "pid-7/…" })
 * error.message // "The lock thread-1 is held by pid-7/…; it was not released in time"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class LockTimeout extends Schema.TaggedError<LockTimeout>()("LockTimeout", {
  key: Schema.String,
  holder: Schema.String
}) {
  override get message(): string {
    return `The lock ${keyForDisplay(this.key)} is held by ${this.holder}; it was not released in time`
  }
}

/**
 * The holder lost the lock while its body ran: its lease could not be
 * renewed, and another holder may have the key now. The body was
 * interrupted.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.LockLost({ key: "thread-1" })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class LockLost extends Schema.TaggedError<LockLost>()("LockLost", {
  key: Schema.String
}) {
  override get message(): string {
    return `The lock ${keyForDisplay(this.key)} was lost while it was held: another holder may have it now`
  }
}

/**
 * Options of {@link Locks.layer}.
 *
 * @since 0.1.0
 * @category models
 */
export interface LocksOptions {
  /** How long a lock holds without renewal; renewed every third of it. Default 30 seconds. */
  readonly lease?: Duration.Input | undefined
  /** How long a caller waits for a held lock before `LockTimeout`. Default 30 seconds. */
  readonly waitFor?: Duration.Input | undefined
}

/**
 * Locks on the `EffectStore` in context.
 *
 * @example
 * ```ts
 * import { withLocks } from "@tanstack/ai/locks"
 * import * as AI from "@tanstack/ai-effect"
 * import { Effect, Layer } from "effect"
 *
 * // One run per thread at a time, across every process that shares the store.
 * const oneAtATime = Effect.gen(function*() {
 *   const locks = yield* AI.Locks
 *   return yield* locks.withLock("thread-1", Effect.log("this process has the thread"))
 * })
 *
 * // Core's LockStore, for withLocks middleware.
 * const middleware = Effect.map(Effect.service(AI.Locks), (locks) => withLocks(locks.lockStore))
 *
 * const LocksLive = AI.Locks.layer().pipe(Layer.provide(AI.EffectStore.layerMemory()))
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export class Locks extends Context.Service<Locks, Locks.Service>()("@tanstack/ai-effect/Locks") {
  /**
   * Locks on the `EffectStore` of the layer's context: memory, SQLite,
   * PostgreSQL or Redis.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   * import { layerSqlite } from "@tanstack/ai-effect/sqlite"
   * import { Layer } from "effect"
   *
   * export const LocksLive = AI.Locks.layer({ lease: "10 seconds" }).pipe(Layer.provide(layerSqlite({ filename: ".data/app.db" })))
   * ```
   */
  static readonly layer = (options?: LocksOptions): Layer.Layer<Locks, never, EffectStore> =>
    Layer.effect(
      Locks,
      Effect.map(Effect.context<EffectStore>(), (context) => makeLocks(Context.get(context, EffectStore), context, options))
    )
}

/**
 * The shape of {@link Locks}.
 *
 * @since 0.1.0
 * @category models
 */
export declare namespace Locks {
  export interface Service {
    /**
     * Runs `body` holding the lock `key`: waits (up to `waitFor`) while
     * another holder has it, and releases it when `body` ends however it
     * ends. When the lock is lost meanwhile, `body` is interrupted and the
     * call fails with `LockLost`.
     */
    readonly withLock: <A, E, R>(
      key: string,
      body: Effect.Effect<A, E, R>
    ) => Effect.Effect<A, E | LockTimeout | LockLost | EffectStoreError, R>
    /**
     * Takes the lock `key` for the life of the scope (waiting up to
     * `waitFor`), for a holder that outlives one Effect, such as a Stream.
     * Answers the effect that keeps the lock's lease: run it beside the
     * work; it fails with `LockLost` once the lock is lost.
     */
    readonly acquire: (key: string) => Effect.Effect<Effect.Effect<never, LockLost>, LockTimeout | EffectStoreError, Scope.Scope>
    /** Core's `LockStore`: `fn`'s signal aborts once the lock is lost. */
    readonly lockStore: LockStore
  }
}

const makeLocks = (store: EffectStore["Service"], context: Context.Context<never>, options: LocksOptions | undefined): Locks.Service => {
  const lease = Duration.fromInputUnsafe(options?.lease ?? "30 seconds")
  const waitFor = Duration.fromInputUnsafe(options?.waitFor ?? "30 seconds")
  const idOf = (key: string) => ({ tool: "@lock", key })

  const acquire = (key: string) =>
    Effect.gen(function*() {
      const id = idOf(key)
      const acquired = yield* Effect.acquireRelease(
        EffectLease.acquire(store, id, { lease, waitFor }).pipe(
          Effect.catchTag("EffectInProgress", (busy: EffectInProgress) => Effect.fail(new LockTimeout({ key, holder: busy.owner })))
        ),
        (acquired) => acquired._tag === "Claimed" ? EffectLease.release(store, id, acquired.fence) : Effect.void
      )
      // Nothing records under a lock's key; a record there is another writer's, and the lock is not to be had.
      if (acquired._tag === "Recorded") return yield* Effect.die(new Error(`The store holds a record under the lock key ${id.key}`))
      return EffectLease.keep(store, id, acquired, lease).pipe(Effect.mapError(() => new LockLost({ key })))
    })

  /** Holds the lock around `use`, which gets the effect that fails once the lock is lost. */
  const held = <A, E, R>(key: string, use: (lost: Effect.Effect<never, LockLost>) => Effect.Effect<A, E, R>) =>
    Effect.scoped(Effect.flatMap(acquire(key), use))

  return {
    acquire,
    withLock: (key, body) => held(key, (lost) => Effect.raceFirst(body, lost)),
    lockStore: {
      withLock: (key, fn) =>
        Effect.runPromiseWith(context)(
          held(key, (lost) =>
            Effect.scoped(Effect.gen(function*() {
              const controller = new AbortController()
              // The signal aborts once the lock is lost; the callback is core's, and must stop on it.
              yield* Effect.forkScoped(Effect.catchCause(lost, (cause) => Effect.sync(() => controller.abort(Cause.squash(cause)))))
              return yield* Effect.promise(() => Promise.resolve().then(() => fn(controller.signal)).then(Exit.succeed, Exit.die))
            }))
          ).pipe(Effect.flatten)
        )
    }
  }
}
