/**
 * Effect tools: tools whose side effect applies at most once per effect key.
 *
 * For each call, `effectTool` computes the effect key and then:
 *
 * 1. **Recorded result.** If the `EffectStore` holds a result for the tool
 *    and key, it returns that result and runs nothing.
 * 2. **Claim.** Otherwise it claims the key, atomically. If another caller
 *    holds it, this call waits (bounded) for that caller's record; if the
 *    record arrived meanwhile, it is returned. Steps 1 and 2 are one request
 *    to the store: the claim answers the record when there is one.
 * 3. **Remote check.** With the claim, if the tool has `alreadyApplied`, it
 *    asks whether the effect already exists remotely. `Some(result)` is
 *    recorded and returned.
 * 4. **Execute.** Otherwise it runs `execute`, keeping its lease alive, and
 *    records the result with the claim's fence.
 *
 * A failing or interrupted `execute` or `alreadyApplied` records nothing and
 * releases the claim, so a later retry can still apply the effect. Identical
 * calls of one process share one application. A store that cannot answer
 * fails the call closed: nothing is executed whose record could not be
 * checked. A store that cannot be written after the effect happened does not
 * fail the call; the failure is logged, and the claim is left to expire, so
 * that the next caller treats the effect as in doubt.
 *
 * @since 0.1.0
 */
import { Cause, Clock, Context, Duration, Effect, Exit, Metric, Option, Result, Schema, Stream } from "effect"
import { canonicalJson, EffectKeyError, type KeyStrategy, sha256Hex } from "./EffectKey.ts"
import { ClaimLost, EffectStore, EffectStoreError, type EffectId, type Recorded } from "./EffectStore.ts"
import { notJson } from "./internal/json.ts"
import { causeForLogs, keyForDisplay, perRunKey } from "./internal/keys.ts"
import { isInMemory } from "./internal/store.ts"
import { RunContext } from "./RunContext.ts"
import {
  type EffectTool,
  lastWithProgress,
  serverTool,
  type ServerToolOptions,
  type ToolCall,
  type ToolCallError,
  type ToolHandler
} from "./ServerTool.ts"
import { isToolSchema } from "./ToolSchema.ts"

/**
 * What `execute` learns about the call it applies.
 *
 * @since 0.1.0
 * @category models
 */
export interface EffectCall extends ToolCall {
  /** The effect key of this call: embed it (see `effectMarker`) where the effect lands. */
  readonly key: string
  readonly run: RunContext["Service"]
  /**
   * The fence of this call's claim on the key: greater for every later owner.
   * Send it with the effect to a remote that keeps the highest fence per key
   * (or as part of an idempotency key), so that the remote itself can refuse
   * the effect of an owner whose claim was taken over while it was paused.
   */
  readonly fence: number
}

/**
 * The shape of a remote reconciler: finds an effect that an earlier attempt
 * applied but did not record.
 *
 * @since 0.1.0
 * @category models
 */
export interface RemoteReconciler<in Input, out Output, out E = never> {
  readonly alreadyApplied: (key: string, input: Input) => Effect.Effect<Option.Option<Output>, E>
}

/**
 * Defines a remote reconciler as a service, so that a Layer supplies it and a
 * test replaces it.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Effect, Layer, Option } from "effect"
 *
 * class CommentExists extends AI.Remote<CommentExists, { issue: number }, { commentId: number }>()("CommentExists") {}
 *
 * const CommentExistsTest = Layer.succeed(CommentExists, {
 *   alreadyApplied: () => Effect.succeed(Option.none())
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const Remote = <Self, Input, Output, E = never>() => <const Id extends string>(id: Id) =>
  Context.Service<Self, RemoteReconciler<Input, Output, E>>()(id)

/**
 * How an effect tool finds an effect that already exists remotely: a function,
 * or a Remote reconciler service (see {@link Remote}).
 *
 * @since 0.1.0
 * @category models
 */
export type AlreadyApplied<Input, Output, E, R> =
  | ((key: string, input: Input) => Effect.Effect<Option.Option<Output>, E, R>)
  | Context.Key<R, RemoteReconciler<Input, Output, E>>

/**
 * Options of {@link effectTool}.
 *
 * @since 0.1.0
 * @category models
 */
export interface EffectToolOptions<Input, Output, E, E2, R2> extends ServerToolOptions<E | E2 | EffectToolError> {
  /** The effect key of a call. Default: {@link EffectKey.perRun}. Must not be empty. */
  readonly effectKey?: KeyStrategy<Input> | undefined
  /** Finds an effect that an earlier, crashed attempt applied. */
  readonly alreadyApplied?: AlreadyApplied<Input, Output, E2, R2> | undefined
  /**
   * What a call does when its key is recorded for another input (its
   * fingerprint differs): `"replay"` (the default) returns the record, as a
   * custom key that means "one comment per issue, whatever the body says"
   * wants; `"fail"` fails with `EffectKeyReused` and runs nothing.
   */
  readonly onKeyReuse?: "replay" | "fail" | undefined
  /**
   * What a call does when it takes over the expired claim of an owner that
   * never recorded (it crashed, or its record could not be written), so that
   * the effect may have happened. With `alreadyApplied` the call reconciles
   * first, whatever this says. Without it, `"fail"` (the default) fails the
   * call with `EffectInDoubt`; `"reapply"` runs `execute` again.
   */
  readonly inDoubt?: "fail" | "reapply" | undefined
  /**
   * How long a claim holds the key without renewal. The claim is renewed
   * every third of this from the moment it is taken until the effect is
   * recorded: during `alreadyApplied` and `execute` alike. Default 30 seconds.
   */
  readonly lease?: Duration.Input | undefined
  /**
   * How long `alreadyApplied` may take. Past it the call fails closed with
   * `EffectCheckTimeout`, releases its claim, and applies nothing.
   * Default 10 seconds.
   */
  readonly checkTimeout?: Duration.Input | undefined
  /**
   * How long a call waits for another owner of its key to record the
   * effect, before it fails with `EffectInProgress`. Default 30 seconds.
   */
  readonly waitFor?: Duration.Input | undefined
}

/**
 * A call's key is recorded for another input, and the tool was defined with
 * `onKeyReuse: "fail"`. Nothing ran.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectKeyReused({ tool: "comment", key: "run-1:comment:7" })
 * error.message // "The effect key run-1:comment:7 of tool comment is recorded for another input"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectKeyReused extends Schema.TaggedError<EffectKeyReused>()("EffectKeyReused", {
  tool: Schema.String,
  key: Schema.String
}) {
  override get message(): string {
    return `The effect key ${keyForDisplay(this.key)} of tool ${this.tool} is recorded for another input`
  }
}

/**
 * Another owner holds the claim on the key and did not record the effect
 * within the call's `waitFor`. Nothing ran; a later retry replays the record.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectInProgress({ tool: "comment", key: "run-1:comment:7", owner: "worker-2" })
 * error.message // "The effect run-1:comment:7 of tool comment is being applied by worker-2; try again later"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectInProgress extends Schema.TaggedError<EffectInProgress>()("EffectInProgress", {
  tool: Schema.String,
  key: Schema.String,
  owner: Schema.String
}) {
  override get message(): string {
    return `The effect ${keyForDisplay(this.key)} of tool ${this.tool} is being applied by ${this.owner}; try again later`
  }
}

/**
 * The call took over the expired claim of an owner that never recorded the
 * effect, and the tool has no `alreadyApplied` to find out whether it
 * happened. Nothing ran. This is the seed's crash window: give the tool an
 * `alreadyApplied`, or opt in to `inDoubt: "reapply"` where applying twice
 * is harmless.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectInDoubt({ tool: "comment", key: "run-1:comment:7" })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectInDoubt extends Schema.TaggedError<EffectInDoubt>()("EffectInDoubt", {
  tool: Schema.String,
  key: Schema.String
}) {
  override get message(): string {
    return `The effect ${keyForDisplay(this.key)} of tool ${this.tool} may have been applied by an owner that stopped before ` +
      `recording it; without alreadyApplied it is not applied again`
  }
}

/**
 * The call's effect may have been applied, but its claim was taken over by
 * another owner before the effect was recorded: the call was paused (a GC
 * pause, a frozen VM) or cut off from the store past its lease. The owner
 * that took over treats the effect as in doubt and reconciles it; this call
 * must not be read as "not applied". A remote that checks the call's
 * `fence` refuses such a late effect.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectTakenOver({ tool: "charge", key: "order-7", fence: 3 })
 * error.message // starts with "The effect order-7 of tool charge may have been applied"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectTakenOver extends Schema.TaggedError<EffectTakenOver>()("EffectTakenOver", {
  tool: Schema.String,
  key: Schema.String,
  fence: Schema.Number
}) {
  override get message(): string {
    return `The effect ${keyForDisplay(this.key)} of tool ${this.tool} may have been applied by this call (fence ${this.fence}), ` +
      `but another owner took its claim over before it was recorded; that owner reconciles it`
  }
}

/**
 * `alreadyApplied` did not answer within the tool's `checkTimeout`. Nothing
 * was applied and the claim was released; a retry checks again.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectCheckTimeout({ tool: "comment", key: "run-1:comment:7", timeoutMillis: 10_000 })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectCheckTimeout extends Schema.TaggedError<EffectCheckTimeout>()("EffectCheckTimeout", {
  tool: Schema.String,
  key: Schema.String,
  timeoutMillis: Schema.Number
}) {
  override get message(): string {
    return `alreadyApplied did not answer within ${this.timeoutMillis} ms for the effect ${keyForDisplay(this.key)} of tool ${this.tool}; ` +
      `nothing was applied`
  }
}

/**
 * The result of `execute` (or `alreadyApplied`) cannot be recorded: the
 * output schema does not encode it, or, without one, it is not JSON. When
 * `execute` produced it, the effect happened, so the claim is left to expire
 * and the next caller treats the effect as in doubt.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.ToolOutputError({ tool: "comment", message: "the result is not JSON: a BigInt has no JSON form at $.id" })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolOutputError extends Schema.TaggedError<ToolOutputError>()("ToolOutputError", {
  tool: Schema.String,
  message: Schema.String
}) {}

/**
 * The failures the reconciliation itself adds to an effect tool's own.
 *
 * @since 0.1.0
 * @category errors
 */
export type EffectToolError =
  | EffectKeyError
  | EffectStoreError
  | EffectKeyReused
  | EffectInProgress
  | EffectInDoubt
  | EffectTakenOver
  | EffectCheckTimeout
  | ClaimLost
  | ToolOutputError
  | ToolCallError

/**
 * How a call was answered; the `effect.outcome` attribute of its span and
 * the `outcome` attribute of the `ai_effect_tool_calls` counter.
 *
 * - `recorded`: the store held the result (or an identical call of this
 *   process, or another owner, applied it meanwhile), nothing ran;
 * - `reconciled`: `alreadyApplied` found the effect;
 * - `applied`: `execute` ran;
 * - `in-doubt`: the call ended without a record once its effect may have
 *   happened (`execute` interrupted or dead, `EffectTakenOver`, or
 *   `EffectInDoubt`): the next owner of the key reconciles;
 * - `failed`: the call failed, and nothing was applied.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = "recorded" | "reconciled" | "applied" | "in-doubt" | "failed"

/**
 * The name of the `CUSTOM` event an effect tool sends when a call is
 * answered: `{ toolName, key, outcome }`, so that a client can show whether
 * the effect was applied, replayed or reconciled. Core adds the `toolCallId`.
 *
 * @example
 * ```ts
 * import type { StreamChunk } from "@tanstack/ai"
 * import * as AI from "@tanstack/ai-effect"
 *
 * const isOutcome = (chunk: StreamChunk) => chunk.type === "CUSTOM" && chunk.name === AI.effectOutcomeEvent
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const effectOutcomeEvent = "effect-outcome"

/**
 * The counter of effect-tool calls, by `tool` and `outcome`.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Effect, Metric } from "effect"
 *
 * const applied = Metric.value(Metric.withAttributes(AI.effectToolCalls, { tool: "comment", outcome: "applied" }))
 * ```
 *
 * @since 0.1.0
 * @category observability
 */
export const effectToolCalls = Metric.counter("ai_effect_tool_calls", {
  description: "Effect-tool calls by tool and outcome",
  incremental: true
})

/**
 * Makes an effect tool: a server tool whose side effect applies at most once
 * per effect key. `execute` returns an Effect of the result, or a Stream whose
 * last element is the result (every element is sent as progress). The tool
 * needs the `EffectStore` (and the Remote reconciler, when one is given).
 *
 * @example
 * ```ts
 * import { toolDefinition } from "@tanstack/ai"
 * import * as AI from "@tanstack/ai-effect"
 * import { Effect, Option, Schema } from "effect"
 *
 * declare const postComment: (issue: number, body: string) => Effect.Effect<{ commentId: number }>
 * declare const findComment: (issue: number, marker: string) => Effect.Effect<Option.Option<{ commentId: number }>>
 *
 * const keyOf = (run: AI.RunContext["Service"], issue: number) => `${run.runId}:comment:${issue}`
 *
 * export const comment = AI.effectTool(
 *   toolDefinition({
 *     name: "comment",
 *     description: "Posts a comment on the issue.",
 *     inputSchema: AI.toolSchema(Schema.Struct({ issue: Schema.Int, body: Schema.String })),
 *     outputSchema: AI.toolSchema(Schema.Struct({ commentId: Schema.Int }))
 *   }),
 *   ({ issue, body }, { key }) => postComment(issue, `${body}\n${AI.effectMarker(key)}`),
 *   {
 *     // one comment per run and issue, whatever the body says
 *     effectKey: ({ issue }, { run }) => keyOf(run, issue),
 *     alreadyApplied: (key, { issue }) => findComment(issue, AI.effectMarker(key))
 *   }
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const effectTool = <
  // `any` keeps the name literal of an inline definition (see serverTool).
  const Definition extends EffectTool.AnyDefinition<any>,
  E = never,
  R = never,
  E2 = never,
  R2 = never
>(
  definition: Definition,
  execute: ToolHandler<EffectTool.InputOf<Definition>, EffectTool.OutputOf<Definition>, E, R, EffectCall>,
  options?: EffectToolOptions<EffectTool.InputOf<Definition>, EffectTool.OutputOf<Definition>, E, E2, R2>
): EffectTool<
  Definition["name"],
  EffectTool.InputOf<Definition>,
  EffectTool.OutputOf<Definition>,
  E | E2 | EffectToolError,
  R | R2 | EffectStore | RunContext,
  Definition
> => {
  type Input = EffectTool.InputOf<Definition>
  type Output = EffectTool.OutputOf<Definition>
  interface Answer {
    readonly output: Output
    readonly outcome: Exclude<Outcome, "failed">
  }
  const tool = definition.name
  // The output schema's Type is the tool's Output; the guard only knows "some schema".
  const codec = isToolSchema(definition.outputSchema)
    ? definition.outputSchema.codec as Schema.Codec<Output, Schema.Json>
    : undefined
  const customKey = options?.effectKey
  const alreadyApplied = options?.alreadyApplied
  const failOnKeyReuse = options?.onKeyReuse === "fail"
  const reapplyInDoubt = options?.inDoubt === "reapply"
  const lease = Duration.fromInputUnsafe(options?.lease ?? Duration.seconds(30))
  const leaseMillis = Duration.toMillis(lease)
  const renewEvery = Duration.divideUnsafe(lease, 3)
  const renewEveryMillis = Duration.toMillis(renewEvery)
  const checkTimeout = Duration.fromInputUnsafe(options?.checkTimeout ?? Duration.seconds(10))
  const waitFor = Duration.toMillis(Duration.fromInputUnsafe(options?.waitFor ?? Duration.seconds(30)))
  // The memory stores this tool ran against; a second one is the per-request pitfall.
  const memoryStoresSeen = new WeakSet<EffectStore["Service"]>()
  let memoryStores = 0
  const counted = {
    recorded: Metric.withAttributes(effectToolCalls, { tool, outcome: "recorded" }),
    reconciled: Metric.withAttributes(effectToolCalls, { tool, outcome: "reconciled" }),
    applied: Metric.withAttributes(effectToolCalls, { tool, outcome: "applied" }),
    "in-doubt": Metric.withAttributes(effectToolCalls, { tool, outcome: "in-doubt" }),
    failed: Metric.withAttributes(effectToolCalls, { tool, outcome: "failed" })
  }

  const checkRemote = (key: string, input: Input): Effect.Effect<Option.Option<Output>, E2, R2> => {
    if (alreadyApplied === undefined) return Effect.succeedNone
    return Context.isKey(alreadyApplied)
      ? Effect.flatMap(Effect.service(alreadyApplied), (remote) => remote.alreadyApplied(key, input))
      : alreadyApplied(key, input)
  }

  /** The record's JSON: the output schema's encoding, or the result itself when it is JSON. */
  const toStored = (output: Output): Effect.Effect<Schema.Json, ToolOutputError> => {
    if (codec !== undefined) {
      return Effect.mapError(Schema.encodeEffect(codec)(output), (error) => new ToolOutputError({ tool, message: error.message }))
    }
    const problem = notJson(output)
    return problem === undefined
      // notJson accepted it, so it is JSON.
      ? Effect.succeed(output as Schema.Json)
      : Effect.fail(new ToolOutputError({ tool, message: problem }))
  }

  /** A record the output schema cannot decode is a record that cannot be read: the call fails closed. */
  const replay = (id: EffectId, recorded: Recorded, fingerprint: string | undefined): Effect.Effect<Answer, EffectStoreError | EffectKeyReused> => {
    if (failOnKeyReuse && recorded.fingerprint !== undefined && recorded.fingerprint !== fingerprint) {
      return Effect.fail(new EffectKeyReused(id))
    }
    const output = codec === undefined
      ? Effect.succeed(recorded.output as Output)
      : Effect.mapError(
        Schema.decodeUnknownEffect(codec)(recorded.output),
        (cause) => new EffectStoreError({ operation: "get", ...id, reason: "corrupt", cause })
      )
    return Effect.map(output, (output) => ({ output, outcome: "recorded" }))
  }

  /** Claims the key; while another owner holds it, waits with backoff until `waitFor` has passed. */
  const claimOrWait = Effect.fnUntraced(function*(store: EffectStore["Service"], id: EffectId) {
    const owner = ownerId()
    const deadline = (yield* Clock.currentTimeMillis) + waitFor
    let backoff = 10
    for (;;) {
      // Taken before the claim is sent: the lease runs at least from then.
      const claimedAt = yield* Clock.currentTimeMillis
      const claim = yield* store.claim(id, { owner, ttl: lease })
      if (claim._tag !== "Busy") return { claim, claimedAt }
      const now = yield* Clock.currentTimeMillis
      if (now >= deadline) return yield* new EffectInProgress({ ...id, owner: claim.owner })
      yield* Effect.sleep(Math.min(backoff, deadline - now, Math.max(1, claim.expiresAt - now)))
      backoff = Math.min(backoff * 2, 500)
    }
  })

  /**
   * Renews the lease every third of it, from `claimedAt` on. Fails with
   * `ClaimLost` once another owner holds the key, and also once no renewal
   * has landed for two thirds of the lease (the store is down, or slow to
   * answer): the lease may then lapse before another renewal could, and
   * another owner take the key, so this one stops acting on it while a third
   * of the lease is left for what it already sent to land.
   */
  const keepLease = (store: EffectStore["Service"], id: EffectId, fence: number, claimedAt: number): Effect.Effect<never, ClaimLost> => {
    let heldUntil = claimedAt + leaseMillis
    // Made only when the lease is lost: an error captures a stack trace, which costs more than the rest of a call.
    const lost = () => new ClaimLost({ ...id, fence })
    const renew = Effect.gen(function*() {
      const sentAt = yield* Clock.currentTimeMillis
      const stopAt = heldUntil - renewEveryMillis
      if (sentAt >= stopAt) return yield* lost()
      const renewed = yield* store.renew(id, { fence, ttl: lease }).pipe(
        Effect.timeoutOrElse({ duration: Duration.millis(stopAt - sentAt), orElse: () => Effect.fail(lost()) }),
        Effect.as(true),
        Effect.catchTag("EffectStoreError", (error) =>
          Effect.as(Effect.logWarning(`The lease could not be renewed (${error.message}); trying again while it holds`), false))
      )
      if (renewed) heldUntil = sentAt + leaseMillis
    })
    return Effect.sleep(renewEvery).pipe(Effect.andThen(renew), Effect.forever)
  }

  /**
   * Records a result. A store failure is logged, never raised: the effect
   * already happened. The claim's lease then ends at once, so that the next
   * caller takes over and reconciles instead of waiting for a record that
   * will not come. A record refused because another owner took the claim
   * over is `EffectTakenOver`: the effect happened, and that owner is about
   * to reconcile it.
   */
  const record = (
    store: EffectStore["Service"],
    id: EffectId,
    fence: number,
    output: Schema.Json,
    outcome: Recorded["outcome"],
    fingerprint: string | undefined
  ): Effect.Effect<void, EffectTakenOver> =>
    Clock.currentTimeMillis.pipe(
      Effect.flatMap((recordedAt) =>
        store.put(id, { output, outcome, recordedAt, ...(fingerprint === undefined ? {} : { fingerprint }) }, { fence })
      ),
      Effect.catchCause((cause) =>
        isClaimLost(cause)
          ? Effect.fail(new EffectTakenOver({ ...id, fence }))
          : Effect.andThen(warnUnrecorded(cause), abandon(store, id, fence))
      )
    )

  /**
   * Steps 3 and 4, holding the claim with `fence` from the remote check to
   * the record. How the claim ends depends on how far the call got: before
   * `execute` starts, or when `execute` fails with a typed failure (the tool
   * says nothing happened), it is released for the next caller; once
   * `execute` has started and ends any other way (interrupted, a defect, the
   * claim taken over), the effect may have happened, so the claim is
   * abandoned as a crash would leave it and the next owner reconciles.
   */
  const applyClaimed = (
    store: EffectStore["Service"],
    id: EffectId,
    claim: { readonly fence: number; readonly takenOver: boolean },
    claimedAt: number,
    input: Input,
    call: Omit<EffectCall, "fence">,
    fingerprint: string | undefined
  ): Effect.Effect<Answer, E | E2 | EffectToolError, R | R2> => {
    const { fence } = claim
    let mayHaveHappened = false
    // One lease for both phases: the check and execute share its renewals.
    const leaseHeld = keepLease(store, id, fence, claimedAt)
    const held = <A, E1, R1>(effect: Effect.Effect<A, E1, R1>) => Effect.raceFirst(effect, leaseHeld)
    const checked = checkRemote(id.key, input).pipe(
      Effect.timeoutOrElse({
        duration: checkTimeout,
        orElse: () => Effect.fail(new EffectCheckTimeout({ ...id, timeoutMillis: Duration.toMillis(checkTimeout) }))
      })
    )
    return Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const remote = yield* restore(held(checked))
        if (Option.isSome(remote)) {
          mayHaveHappened = true
          const stored = yield* toStored(remote.value)
          yield* record(store, id, fence, stored, "reconciled", fingerprint)
          return { output: remote.value, outcome: "reconciled" } as const
        }
        if (claim.takenOver && alreadyApplied === undefined && !reapplyInDoubt) {
          mayHaveHappened = true
          return yield* new EffectInDoubt(id)
        }
        const result = execute(input, { ...call, fence })
        const applying = Stream.isStream(result) ? lastWithProgress(result, call) : result
        mayHaveHappened = true
        const exit = yield* Effect.exit(restore(held(applying)))
        if (Exit.isFailure(exit)) {
          if (isClaimLost(exit.cause)) return yield* new EffectTakenOver({ ...id, fence })
          // A typed failure of execute says that nothing happened.
          if (!Cause.hasDies(exit.cause) && !Cause.hasInterrupts(exit.cause)) mayHaveHappened = false
          return yield* Effect.failCause(exit.cause)
        }
        // Recorded even when the run stops now: the effect has happened.
        const stored = yield* toStored(exit.value)
        yield* record(store, id, fence, stored, "applied", fingerprint)
        return { output: exit.value, outcome: "applied" } as const
      })
    ).pipe(
      Effect.onExit((exit) =>
        Exit.isSuccess(exit) ? Effect.void : mayHaveHappened ? abandon(store, id, fence) : Effect.ignore(store.release(id, { fence }))
      )
    )
  }

  /** Steps 2 to 4: the claim answers the record when the key has one, and the effect is applied otherwise. */
  const claimAndApply = (
    store: EffectStore["Service"],
    id: EffectId,
    input: Input,
    call: Omit<EffectCall, "fence">,
    fingerprint: string | undefined
  ) =>
    Effect.flatMap(claimOrWait(store, id), ({ claim, claimedAt }) =>
      claim._tag === "Recorded"
        ? replay(id, claim.recorded, fingerprint)
        : applyClaimed(store, id, claim, claimedAt, input, call, fingerprint))

  return serverTool(definition, (input, toolCall) =>
    Effect.gen(function*() {
      const run = yield* RunContext
      const store = yield* EffectStore
      if (isInMemory(store) && !memoryStoresSeen.has(store)) {
        memoryStoresSeen.add(store)
        if (++memoryStores === 2) {
          yield* Effect.logWarning(
            `The effect tool ${tool} has now run against a second EffectStore.layerMemory store in this process. ` +
              "Each memory store de-duplicates only its own calls: if every request builds its own (layerMemory() " +
              "called per request), nothing is de-duplicated across requests. Define the store's Layer once, at module " +
              "level or in a ManagedRuntime. (A test suite that gives each test a fresh store sees this once.)"
          )
        }
      }
      // Hashed once: the record's fingerprint is also the digest of the default key.
      const json = canonicalJson(input)
      if (Result.isFailure(json) && (failOnKeyReuse || customKey === undefined)) return yield* json.failure
      const fingerprint = Result.isSuccess(json) ? yield* sha256Hex(json.success) : undefined
      const context = { run, toolName: tool, toolCallId: toolCall.toolCallId }
      const keyed = customKey !== undefined
        ? customKey(input, context)
        : fingerprint !== undefined
        ? perRunKey(context, fingerprint)
        : ""
      const key = Effect.isEffect(keyed) ? yield* keyed : keyed
      if (key === "") return yield* new EffectKeyError({ path: "$", reason: "the effect key is empty" })
      yield* Effect.annotateCurrentSpan({ "effect.key": key })
      const id = { tool, key }
      const call = { ...toolCall, key, run }
      // No read before the claim: the claim answers the record when there is
      // one, so that a replay is one round trip and a first application two.
      const { value, shared } = yield* store.share(id, claimAndApply(store, id, input, call, fingerprint)).pipe(
        Effect.annotateLogs({ effectKey: keyForDisplay(key) })
      )
      const outcome = shared ? "recorded" : value.outcome
      yield* Effect.annotateCurrentSpan({ "effect.outcome": outcome })
      yield* Metric.update(counted[outcome], 1)
      yield* toolCall.emit(effectOutcomeEvent, { toolName: tool, key, outcome })
      return value.output
    }).pipe(
      Effect.tapCause((cause) => {
        const outcome = isInDoubt(cause) ? "in-doubt" : "failed"
        return Effect.andThen(Effect.annotateCurrentSpan({ "effect.outcome": outcome }), Metric.update(counted[outcome], 1))
      })
    ), options)
}

const isClaimLost = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) => Cause.isFailReason(reason) && reason.error instanceof ClaimLost)

/** Whether a call ended once its effect may have happened, without a record. */
const isInDoubt = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) =>
    Cause.isFailReason(reason) && (reason.error instanceof EffectTakenOver || reason.error instanceof EffectInDoubt)
  )

/** A claim owner that names this process, for the `Busy` answers other callers read. */
const ownerId = (): string => `${processName}/${crypto.randomUUID()}`

const processName = globalThis.process === undefined ? "runtime" : `pid-${globalThis.process.pid}`

/**
 * Ends a claim's lease now but keeps its owner, so that the next caller takes
 * it over and treats the effect as in doubt. A store that cannot answer lets
 * the lease end by itself.
 */
const abandon = (store: EffectStore["Service"], id: EffectId, fence: number): Effect.Effect<void> =>
  Effect.ignore(store.renew(id, { fence, ttl: Duration.zero }))

const warnUnrecorded = (cause: Cause.Cause<unknown>) =>
  Effect.logWarning(
    `The effect was applied but its record could not be written (${causeForLogs(cause)}); alreadyApplied guards a retry`
  )
