/**
 * The store of applied effects.
 *
 * An effect tool records the result of every effect it applies under the
 * effect's key, and replays that record instead of applying the effect again.
 * `EffectStore` is the service behind that record; this module has the
 * embedded in-memory store, and durable stores implement the same service.
 *
 * A store that cannot answer fails with `EffectStoreError`, and the tool then
 * fails closed: it does not apply an effect whose record it cannot check.
 *
 * @since 0.1.0
 */
import { Clock, Context, Duration, Effect, Layer, Option, Schema } from "effect"

/**
 * A recorded application: the tool's result as the model read it (JSON), how
 * it was obtained, and when.
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
  recordedAt: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export type Recorded = typeof Recorded.Type

/**
 * The store could not be read or written.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectStoreError({ operation: "get", key: "run-1:comment:42", cause: new Error("connection refused") })
 * error.message // "EffectStore get failed for run-1:comment:42: connection refused"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectStoreError extends Schema.TaggedError<EffectStoreError>()("EffectStoreError", {
  operation: Schema.Literals(["get", "put"]),
  key: Schema.String,
  cause: Schema.Defect()
}) {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `EffectStore ${this.operation} failed for ${this.key}: ${cause}`
  }
}

/**
 * Options of {@link EffectStore.layerMemory}.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryStoreOptions {
  /** The most records kept; the oldest go first. Default 10,000. */
  readonly capacity?: number | undefined
  /** How long a record is kept. Default: until the capacity evicts it. */
  readonly timeToLive?: Duration.Input | undefined
}

/**
 * The record of applied effects, by effect key.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Effect, Option } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* AI.EffectStore
 *   yield* store.put("run-1:comment:42", { output: { id: 1 }, outcome: "applied", recordedAt: 0 })
 *   return yield* store.get("run-1:comment:42") // Option.some({ output: { id: 1 }, ... })
 * }).pipe(Effect.provide(AI.EffectStore.layerMemory()))
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export class EffectStore extends Context.Service<EffectStore, {
  readonly get: (key: string) => Effect.Effect<Option.Option<Recorded>, EffectStoreError>
  readonly put: (key: string, recorded: Recorded) => Effect.Effect<void, EffectStoreError>
}>()("@tanstack/ai-effect/EffectStore") {
  /**
   * The embedded store: in memory, bounded, with an optional time to live.
   * Each build of the layer is a new, empty store, so build it once for the
   * process (a `ManagedRuntime`, or the layer of the whole app), not once per
   * request. It guards retries within one process; use a durable store when
   * retries can reach another process.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   *
   * const layer = AI.EffectStore.layerMemory({ capacity: 1_000, timeToLive: "1 day" })
   * ```
   */
  static readonly layerMemory = (options?: MemoryStoreOptions): Layer.Layer<EffectStore> =>
    Layer.sync(EffectStore, () => makeMemory(options))
}

const makeMemory = (options: MemoryStoreOptions | undefined): EffectStore["Service"] => {
  const capacity = options?.capacity ?? 10_000
  const ttl = options?.timeToLive === undefined ? undefined : Duration.toMillis(Duration.fromInputUnsafe(options.timeToLive))
  // A Map iterates in insertion order, so its first key is the oldest record.
  const records = new Map<string, { readonly recorded: Recorded; readonly expiresAt: number }>()
  return EffectStore.of({
    get: (key) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = records.get(key)
        if (entry === undefined) return Option.none()
        if (entry.expiresAt <= now) {
          records.delete(key)
          return Option.none()
        }
        return Option.some(entry.recorded)
      }),
    put: (key, recorded) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        records.delete(key)
        records.set(key, { recorded, expiresAt: ttl === undefined ? Infinity : now + ttl })
        for (const oldest of records.keys()) {
          if (records.size <= capacity) break
          records.delete(oldest)
        }
      })
  })
}
