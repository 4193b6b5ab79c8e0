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
 * The lease protocol (claim or wait, keep the lease, record, release or
 * abandon) is `EffectLease`'s; this module is the tool around it. Its
 * failures are in `EffectToolError`.
 *
 * @since 0.1.0
 */
import { Cause, Clock, Context, Duration, Effect, Exit, Metric, Option, Result, Schema, Stream } from "effect"
import { canonicalJson, type KeyStrategy, sha256Hex } from "./EffectKey.ts"
import * as EffectLease from "./EffectLease.ts"
import { type ClaimLost, EffectStore, EffectStoreError, type EffectId, type Recorded } from "./EffectStore.ts"
import {
  EffectCheckTimeout,
  EffectInDoubt,
  EffectKeyError,
  EffectKeyReused,
  EffectTakenOver,
  type EffectToolError,
  ToolOutputError
} from "./EffectToolError.ts"
import { withDeadline } from "./internal/deadline.ts"
import { notJson } from "./internal/json.ts"
import { keyForDisplay, perRunKey } from "./internal/keys.ts"
import { isInMemory } from "./internal/store.ts"
import { RunContext } from "./RunContext.ts"
import {
  lastWithProgress,
  type ServerTool,
  serverTool,
  type ServerToolOptions,
  type ToolCall,
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
  /**
   * Whether the {@link effectOutcomeEvent} the client receives carries the
   * effect key itself. By default it carries `keyDigest` instead, the first
   * 16 hex digits of the key's SHA-256: enough to tell calls apart, without
   * sending the browser what the key was built from (a key made of the input
   * carries the input, and anything secret put into it). The key stays on
   * the server: in the store, the span and the logs.
   */
  readonly exposeKey?: boolean | undefined
}
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
 * answered: `{ toolName, keyDigest, outcome }` (`key` instead of `keyDigest`
 * with the tool's `exposeKey`), so that a client can show whether
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
  const Definition extends ServerTool.AnyDefinition<any>,
  E = never,
  R = never,
  E2 = never,
  R2 = never
>(
  definition: Definition,
  execute: ToolHandler<ServerTool.InputOf<Definition>, ServerTool.OutputOf<Definition>, E, R, EffectCall>,
  options?: EffectToolOptions<ServerTool.InputOf<Definition>, ServerTool.OutputOf<Definition>, E, E2, R2>
): ServerTool<
  Definition["name"],
  ServerTool.InputOf<Definition>,
  ServerTool.OutputOf<Definition>,
  E | E2 | EffectToolError,
  R | R2 | EffectStore | RunContext,
  Definition
> => {
  type Input = ServerTool.InputOf<Definition>
  type Output = ServerTool.OutputOf<Definition>
  interface Answer {
    readonly output: Output
    readonly outcome: Exclude<Outcome, "failed">
  }
  const tool = definition.name
  // The output schema's Type is the tool's Output; the guard only knows "some schema".
  const codec = isToolSchema(definition.outputSchema)
    ? definition.outputSchema.codec as Schema.Codec<Output, Schema.Json>
    : undefined
  const encodeOutput = codec === undefined ? undefined : Schema.encodeEffect(codec)
  const decodeRecordedOutput = codec === undefined ? undefined : Schema.decodeUnknownEffect(codec)
  const customKey = options?.effectKey
  const alreadyApplied = options?.alreadyApplied
  const failOnKeyReuse = options?.onKeyReuse === "fail"
  const reapplyInDoubt = options?.inDoubt === "reapply"
  const exposeKey = options?.exposeKey === true
  const lease = Duration.fromInputUnsafe(options?.lease ?? Duration.seconds(30))
  const checkTimeoutMillis = Duration.toMillis(Duration.fromInputUnsafe(options?.checkTimeout ?? Duration.seconds(10)))
  const leaseOptions: EffectLease.LeaseOptions = {
    lease,
    waitFor: Duration.fromInputUnsafe(options?.waitFor ?? Duration.seconds(30))
  }
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

  /** The remote check under its deadline; none without `alreadyApplied`, so that a call without one forks nothing for it. */
  const checkRemote = (id: EffectId, input: Input): Effect.Effect<Option.Option<Output>, E2 | EffectCheckTimeout, R2> | undefined => {
    if (alreadyApplied === undefined) return undefined
    const check = Context.isKey(alreadyApplied)
      ? Effect.flatMap(Effect.service(alreadyApplied), (remote) => remote.alreadyApplied(id.key, input))
      : alreadyApplied(id.key, input)
    return withDeadline(check, checkTimeoutMillis, () => Effect.fail(new EffectCheckTimeout({ ...id, timeoutMillis: checkTimeoutMillis })))
  }

  /** The record's JSON: the output schema's encoding, or the result itself when it is JSON. */
  const toStored = (output: Output): Effect.Effect<Schema.Json, ToolOutputError> => {
    if (encodeOutput !== undefined) {
      return Effect.mapError(encodeOutput(output), (error) => new ToolOutputError({ tool, message: error.message }))
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
    const output = decodeRecordedOutput === undefined
      ? Effect.succeed(recorded.output as Output)
      : Effect.mapError(
        decodeRecordedOutput(recorded.output),
        (cause) => new EffectStoreError({ operation: "get", ...id, reason: "corrupt", cause })
      )
    return Effect.map(output, (output) => ({ output, outcome: "recorded" }))
  }

  /** The record of a result, stamped with this process's clock as it is written. */
  const record = (
    store: EffectStore["Service"],
    id: EffectId,
    fence: number,
    output: Schema.Json,
    outcome: Recorded["outcome"],
    fingerprint: string | undefined
  ): Effect.Effect<void, EffectTakenOver> =>
    Effect.flatMap(Clock.currentTimeMillis, (recordedAt) =>
      EffectLease.record(store, id, fence, { output, outcome, recordedAt, ...(fingerprint === undefined ? {} : { fingerprint }) }))

  /**
   * A call from the remote check to the record, holding the claim with
   * `fence`: `held` runs an effect while the lease is kept, `restore` lets
   * it be interrupted, and `mayHaveHappened` says how far the call got.
   */
  interface Holding {
    readonly store: EffectStore["Service"]
    readonly id: EffectId
    readonly fence: number
    readonly takenOver: boolean
    readonly input: Input
    readonly call: EffectCall
    readonly fingerprint: string | undefined
    readonly held: <A, E1, R1>(effect: Effect.Effect<A, E1, R1>) => Effect.Effect<A, E1 | ClaimLost, R1>
    readonly restore: <A, E1, R1>(effect: Effect.Effect<A, E1, R1>) => Effect.Effect<A, E1, R1>
    mayHaveHappened: boolean
  }

  // Made once per tool, not per call, as callTool is.
  const applyHolding = Effect.fnUntraced(function*(holding: Holding) {
    const { store, id, fence, held, restore, fingerprint } = holding
    const checked = checkRemote(id, holding.input)
    const remote = checked === undefined ? Option.none<Output>() : yield* restore(held(checked))
    if (Option.isSome(remote)) {
      holding.mayHaveHappened = true
      const stored = yield* toStored(remote.value)
      yield* record(store, id, fence, stored, "reconciled", fingerprint)
      return { output: remote.value, outcome: "reconciled" } as const
    }
    if (holding.takenOver && alreadyApplied === undefined && !reapplyInDoubt) {
      holding.mayHaveHappened = true
      return yield* new EffectInDoubt(id)
    }
    const result = execute(holding.input, holding.call)
    const applying = Stream.isStream(result) ? lastWithProgress(result, holding.call) : result
    holding.mayHaveHappened = true
    const exit = yield* Effect.exit(restore(held(applying)))
    if (Exit.isFailure(exit)) {
      if (EffectLease.isClaimLost(exit.cause)) return yield* new EffectTakenOver({ ...id, fence })
      // A typed failure of execute says that nothing happened.
      if (!Cause.hasDies(exit.cause) && !Cause.hasInterrupts(exit.cause)) holding.mayHaveHappened = false
      return yield* Effect.failCause(exit.cause)
    }
    // Recorded even when the run stops now: the effect has happened.
    const stored = yield* toStored(exit.value)
    yield* record(store, id, fence, stored, "applied", fingerprint)
    return { output: exit.value, outcome: "applied" } as const
  })

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
    claim: { readonly fence: number; readonly takenOver: boolean; readonly claimedAt: number },
    input: Input,
    call: Omit<EffectCall, "fence">,
    fingerprint: string | undefined
  ): Effect.Effect<Answer, E | E2 | EffectToolError, R | R2> => {
    const { fence } = claim
    // One lease for both phases: the check and execute share its renewals.
    const leaseHeld = EffectLease.keep(store, id, claim, lease)
    return Effect.uninterruptibleMask((restore) => {
      const holding: Holding = {
        store,
        id,
        fence,
        takenOver: claim.takenOver,
        input,
        call: { ...call, fence },
        fingerprint,
        held: (effect) => Effect.raceFirst(effect, leaseHeld),
        restore,
        mayHaveHappened: false
      }
      return applyHolding(holding).pipe(
        Effect.onExit((exit) =>
          Exit.isSuccess(exit)
            ? Effect.void
            : holding.mayHaveHappened
            ? EffectLease.abandon(store, id, fence)
            : EffectLease.release(store, id, fence)
        )
      )
    })
  }

  /** Steps 2 to 4: the claim answers the record when the key has one, and the effect is applied otherwise. */
  const claimAndApply = (
    store: EffectStore["Service"],
    id: EffectId,
    input: Input,
    call: Omit<EffectCall, "fence">,
    fingerprint: string | undefined
  ) =>
    Effect.flatMap(EffectLease.acquire(store, id, leaseOptions), (acquired) =>
      acquired._tag === "Recorded"
        ? replay(id, acquired.recorded, fingerprint)
        : applyClaimed(store, id, acquired, input, call, fingerprint))

  // Made once per tool, not per call: on Node 24 a generator function made
  // per call costs about 1.5 µs (a scratch run).
  const callTool = Effect.fnUntraced(
    function*(input: Input, toolCall: ToolCall) {
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
      yield* Effect.annotateCurrentSpan({ "effect.key": keyForDisplay(key) })
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
      yield* toolCall.emit(
        effectOutcomeEvent,
        exposeKey ? { toolName: tool, key, outcome } : { toolName: tool, keyDigest: (yield* sha256Hex(key)).slice(0, 16), outcome }
      )
      return value.output
    },
    Effect.tapCause((cause) => {
      const outcome = isInDoubt(cause) ? "in-doubt" : "failed"
      return Effect.andThen(Effect.annotateCurrentSpan({ "effect.outcome": outcome }), Metric.update(counted[outcome], 1))
    })
  )
  return serverTool(definition, callTool, options)
}

/** Whether a call ended once its effect may have happened, without a record. */
const isInDoubt = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) =>
    Cause.isFailReason(reason) && (reason.error instanceof EffectTakenOver || reason.error instanceof EffectInDoubt)
  )
