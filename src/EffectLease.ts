/**
 * The lease on an effect key: the protocol by which one owner at a time
 * applies an effect, as a client of any `EffectStore`.
 *
 * An owner {@link acquire}s the key: the store answers its record, or a
 * claim with a fence. While it applies the effect, {@link keep} renews the
 * lease. It then {@link record}s the result with its fence, or gives the key
 * back: {@link release} when nothing happened, {@link abandon} when the
 * effect may have happened, so that the next owner treats it as in doubt.
 * `AI.effectTool` runs every call this way; use this module for an effect
 * that is applied outside a tool, such as a webhook's.
 *
 * @since 0.1.0
 */
import { Cause, Clock, Duration, Effect } from "effect"
import { ClaimLost, type EffectId, type EffectStore, type Recorded } from "./EffectStore.ts"
import { EffectInProgress, EffectTakenOver } from "./EffectToolError.ts"
import { withDeadline } from "./internal/deadline.ts"
import { causeForLogs } from "./internal/keys.ts"

/**
 * How long a lease holds, and how long {@link acquire} waits for another
 * owner of the key.
 *
 * @since 0.1.0
 * @category models
 */
export interface LeaseOptions {
  /** How long a claim holds the key without renewal; {@link keep} renews it every third of this. */
  readonly lease: Duration.Duration
  /** How long to wait for another owner of the key before failing with `EffectInProgress`. */
  readonly waitFor: Duration.Duration
}

/**
 * What {@link acquire} answers: the key's record, or a claim on it taken at
 * `claimedAt` (the caller's clock, read before the claim was sent).
 *
 * @since 0.1.0
 * @category models
 */
export type Acquired =
  | { readonly _tag: "Recorded"; readonly recorded: Recorded }
  | { readonly _tag: "Claimed"; readonly fence: number; readonly takenOver: boolean; readonly claimedAt: number }

/**
 * Claims the key, or answers its record. While another owner holds it, waits
 * with backoff (10 ms doubling to 500 ms, never past that owner's lease)
 * until `waitFor` has passed, then fails with `EffectInProgress`.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Duration, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* AI.EffectStore
 *   const acquired = yield* AI.EffectLease.acquire(store, { tool: "webhook", key: "delivery-42" }, {
 *     lease: Duration.seconds(30),
 *     waitFor: Duration.seconds(10)
 *   })
 *   return acquired._tag // "Claimed" the first time, "Recorded" once recorded
 * })
 * ```
 *
 * @since 0.1.0
 * @category lease
 */
export const acquire = Effect.fnUntraced(function*(store: EffectStore["Service"], id: EffectId, options: LeaseOptions) {
  const owner = ownerId()
  const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(options.waitFor)
  let backoff = 10
  for (;;) {
    // Taken before the claim is sent: the lease runs at least from then.
    const claimedAt = yield* Clock.currentTimeMillis
    const claim = yield* store.claim(id, { owner, ttl: options.lease })
    if (claim._tag === "Recorded") return { _tag: "Recorded", recorded: claim.recorded } satisfies Acquired
    if (claim._tag === "Claimed") return { _tag: "Claimed", fence: claim.fence, takenOver: claim.takenOver, claimedAt } satisfies Acquired
    const now = yield* Clock.currentTimeMillis
    if (now >= deadline) return yield* new EffectInProgress({ ...id, owner: claim.owner })
    yield* Effect.sleep(Math.min(backoff, deadline - now, Math.max(1, claim.expiresAt - now)))
    backoff = Math.min(backoff * 2, 500)
  }
})

/**
 * Renews the lease of the claim with `fence` every third of `lease`, from
 * `claimedAt` on, and never succeeds: race it against the work the claim
 * covers. Fails with `ClaimLost` once another owner holds the key, and also
 * once no renewal has landed for two thirds of the lease (the store is down,
 * or slow to answer): the lease may then lapse before another renewal could,
 * and another owner take the key, so this owner stops acting on it while a
 * third of the lease is left for what it already sent to land.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Duration, Effect } from "effect"
 *
 * declare const store: AI.EffectStore["Service"]
 * declare const deliver: Effect.Effect<{ delivered: true }>
 *
 * const id = { tool: "webhook", key: "delivery-42" }
 * const held = (fence: number, claimedAt: number) =>
 *   Effect.raceFirst(deliver, AI.EffectLease.keep(store, id, { fence, claimedAt }, Duration.seconds(30)))
 * ```
 *
 * @since 0.1.0
 * @category lease
 */
export const keep = (
  store: EffectStore["Service"],
  id: EffectId,
  claim: { readonly fence: number; readonly claimedAt: number },
  lease: Duration.Duration
): Effect.Effect<never, ClaimLost> => {
  const leaseMillis = Duration.toMillis(lease)
  const renewEvery = Duration.divideUnsafe(lease, 3)
  const renewEveryMillis = Duration.toMillis(renewEvery)
  const { fence } = claim
  let heldUntil = claim.claimedAt + leaseMillis
  // Made only when the lease is lost: an error captures a stack trace, which costs more than the rest of a call.
  const lost = () => new ClaimLost({ ...id, fence })
  const renew = Effect.gen(function*() {
    const sentAt = yield* Clock.currentTimeMillis
    const stopAt = heldUntil - renewEveryMillis
    if (sentAt >= stopAt) return yield* lost()
    const renewed = yield* withDeadline(store.renew(id, { fence, ttl: lease }), stopAt - sentAt, () => Effect.fail(lost())).pipe(
      Effect.as(true),
      Effect.catchTag("EffectStoreError", (error) =>
        Effect.as(Effect.logWarning(`The lease could not be renewed (${error.message}); trying again while it holds`), false))
    )
    if (renewed) heldUntil = sentAt + leaseMillis
  })
  return Effect.sleep(renewEvery).pipe(Effect.andThen(renew), Effect.forever)
}

/**
 * Records a result with the claim's fence, which ends the claim. A store
 * failure is logged, never raised: the effect already happened. The lease
 * then ends at once, so that the next owner takes over and reconciles
 * instead of waiting for a record that will not come. A record refused
 * because another owner took the claim over fails with `EffectTakenOver`:
 * the effect happened, and that owner is about to reconcile it.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * declare const store: AI.EffectStore["Service"]
 *
 * const recorded = AI.EffectLease.record(store, { tool: "webhook", key: "delivery-42" }, 1, {
 *   output: { delivered: true },
 *   outcome: "applied",
 *   recordedAt: Date.now()
 * })
 * ```
 *
 * @since 0.1.0
 * @category lease
 */
export const record = (
  store: EffectStore["Service"],
  id: EffectId,
  fence: number,
  recorded: Recorded
): Effect.Effect<void, EffectTakenOver> =>
  store.put(id, recorded, { fence }).pipe(
    Effect.catchCause((cause) =>
      isClaimLost(cause)
        ? Effect.fail(new EffectTakenOver({ ...id, fence }))
        : Effect.andThen(
          Effect.logWarning(
            `The effect was applied but its record could not be written (${causeForLogs(cause)}); alreadyApplied guards a retry`
          ),
          abandon(store, id, fence)
        )
    )
  )

/**
 * Gives the key back after nothing happened: the next owner claims it
 * afresh. A store that cannot answer lets the lease end by itself.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * declare const store: AI.EffectStore["Service"]
 *
 * const released = AI.EffectLease.release(store, { tool: "webhook", key: "delivery-42" }, 1)
 * ```
 *
 * @since 0.1.0
 * @category lease
 */
export const release = (store: EffectStore["Service"], id: EffectId, fence: number): Effect.Effect<void> =>
  Effect.ignore(store.release(id, { fence }))

/**
 * Ends a claim's lease now but keeps its owner, as a crash would leave it:
 * the next owner takes it over and treats the effect as in doubt. For work
 * that may have applied the effect and ended without a result. A store that
 * cannot answer lets the lease end by itself.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * declare const store: AI.EffectStore["Service"]
 *
 * const abandoned = AI.EffectLease.abandon(store, { tool: "webhook", key: "delivery-42" }, 1)
 * ```
 *
 * @since 0.1.0
 * @category lease
 */
export const abandon = (store: EffectStore["Service"], id: EffectId, fence: number): Effect.Effect<void> =>
  Effect.ignore(store.renew(id, { fence, ttl: Duration.zero }))

/**
 * Whether a cause holds a `ClaimLost`: the claim passed to another owner.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Cause } from "effect"
 *
 * AI.EffectLease.isClaimLost(Cause.fail(new AI.ClaimLost({ tool: "webhook", key: "delivery-42", fence: 1 }))) // true
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const isClaimLost = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) => Cause.isFailReason(reason) && reason.error instanceof ClaimLost)

/** A claim owner that names this process, for the `Busy` answers other callers read. */
const ownerId = (): string => `${processName}/${crypto.randomUUID()}`

const processName = globalThis.process === undefined ? "runtime" : `pid-${globalThis.process.pid}`
