/**
 * Effect tools: tools whose side effect applies at most once per effect key.
 *
 * For each call, `effectTool` computes the effect key and then:
 *
 * 1. **Recorded result.** If the `EffectStore` holds a result for the key, it
 *    returns that result and runs nothing.
 * 2. **Remote check.** Otherwise, if the tool has `alreadyApplied`, it asks
 *    whether the effect already exists remotely. `Some(result)` is recorded
 *    and returned.
 * 3. **Execute.** Otherwise it runs `execute` and records the result.
 *
 * A failing or interrupted `execute` or `alreadyApplied` records nothing, so a
 * later retry can still apply the effect. Concurrent identical calls share one
 * application. A store that cannot be read fails the call closed: nothing is
 * executed whose record could not be checked. A store that cannot be written
 * after the effect happened does not fail the call; the failure is logged and
 * `alreadyApplied` guards the next retry.
 *
 * @since 0.1.0
 */
import type { InferSchemaType, SchemaInput, ToolDefinitionInstance } from "@tanstack/ai"
import { Cause, Clock, Context, Deferred, Effect, Exit, Metric, Option, Ref, Schema, Stream } from "effect"
import { type EffectKeyError, type KeyStrategy, perRun } from "./EffectKey.ts"
import { EffectStore, EffectStoreError, type Recorded } from "./EffectStore.ts"
import { RunContext } from "./RunContext.ts"
import { type EffectTool, serverTool, type ToolCall, type ToolHandler } from "./ServerTool.ts"
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
export interface EffectToolOptions<Input, Output, E, R> {
  /** The effect key of a call. Default: {@link EffectKey.perRun}. */
  readonly effectKey?: KeyStrategy<Input> | undefined
  /** Finds an effect that an earlier, crashed attempt applied. */
  readonly alreadyApplied?: AlreadyApplied<Input, Output, E, R> | undefined
}

/**
 * How a call was answered; the `effect.outcome` attribute of its span and
 * the `outcome` attribute of the `ai_effect_tool_calls` counter.
 *
 * - `recorded`: the store held the result (or a concurrent identical call
 *   applied it), nothing ran;
 * - `reconciled`: `alreadyApplied` found the effect;
 * - `applied`: `execute` ran;
 * - `failed`: the call failed or was interrupted.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = "recorded" | "reconciled" | "applied" | "failed"

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
 * last element is the result (the others are progress). The tool needs the
 * `EffectStore` (and the Remote reconciler, when one is given).
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
  TInput extends SchemaInput | undefined,
  TOutput extends SchemaInput | undefined,
  const Name extends string,
  E = never,
  R = never,
  E2 = never,
  R2 = never
>(
  definition: ToolDefinitionInstance<TInput, TOutput, Name, any, boolean, any>,
  execute: ToolHandler<InferSchemaType<TInput>, InferSchemaType<TOutput>, E, R, EffectCall>,
  options?: EffectToolOptions<InferSchemaType<TInput>, InferSchemaType<TOutput>, E2, R2>
): EffectTool<
  Name,
  InferSchemaType<TInput>,
  InferSchemaType<TOutput>,
  E | E2 | EffectKeyError | EffectStoreError,
  R | R2 | EffectStore | RunContext
> => {
  type Input = InferSchemaType<TInput>
  type Output = InferSchemaType<TOutput>
  const toolName = definition.name
  // The output schema's Type is the tool's Output; the guard only knows "some schema".
  const codec = isToolSchema(definition.outputSchema)
    ? definition.outputSchema.codec as Schema.Codec<Output, Schema.Json>
    : undefined
  const keyOf = options?.effectKey ?? perRun
  const alreadyApplied = options?.alreadyApplied

  const checkRemote = (key: string, input: Input): Effect.Effect<Option.Option<Output>, E2, R2> => {
    if (alreadyApplied === undefined) return Effect.succeedNone
    return Context.isKey(alreadyApplied)
      ? Effect.flatMap(Effect.service(alreadyApplied), (remote) => remote.alreadyApplied(key, input))
      : alreadyApplied(key, input)
  }

  const toStored = (output: Output): Effect.Effect<Schema.Json, Schema.SchemaError> =>
    codec === undefined
      // Without an Effect output schema the result is what the model reads as JSON.
      ? Effect.succeed(output as Schema.Json)
      : Schema.encodeEffect(codec)(output)

  /** A record the output schema cannot decode is a record that cannot be read. */
  const fromStored = (key: string, recorded: Recorded): Effect.Effect<Output, EffectStoreError> =>
    codec === undefined
      ? Effect.succeed(recorded.output as Output)
      : Effect.mapError(
        Schema.decodeUnknownEffect(codec)(recorded.output),
        (cause) => new EffectStoreError({ operation: "get", key, cause })
      )

  /** Records a result; a failure is logged, never raised: the effect already happened. */
  const record = (store: EffectStore["Service"], key: string, output: Output, outcome: Recorded["outcome"]) =>
    Effect.gen(function*() {
      const stored = yield* toStored(output)
      yield* store.put(key, { output: stored, outcome, recordedAt: yield* Clock.currentTimeMillis })
    }).pipe(
      Effect.catch(warnUnrecorded),
      Effect.catchDefect(warnUnrecorded),
      Effect.annotateLogs({ tool: toolName, effectKey: key })
    )

  /** The three steps for one key, as a Stream whose last element is the result. */
  type Results = Stream.Stream<Output, E | EffectStoreError, R>
  const apply = (store: EffectStore["Service"], key: string, input: Input, call: EffectCall, outcome: Ref.Ref<Outcome>) =>
    Stream.unwrap(Effect.gen(function*() {
      const recorded = yield* store.get(key)
      if (Option.isSome(recorded)) {
        yield* Ref.set(outcome, "recorded")
        const replayed: Results = Stream.fromEffect(fromStored(key, recorded.value))
        return replayed
      }
      const remote = yield* checkRemote(key, input)
      if (Option.isSome(remote)) {
        yield* record(store, key, remote.value, "reconciled")
        yield* Ref.set(outcome, "reconciled")
        const reconciled: Results = Stream.make(remote.value)
        return reconciled
      }
      const result = execute(input, call)
      const results: Stream.Stream<Output, E, R> = Stream.isStream(result) ? result : Stream.fromEffect(result)
      // Recorded as the stream ends, in its finalizer: once the effect has
      // happened, a run that stops now still waits for its record.
      const applied: Results = onEnd(results, (exit, last) =>
        Exit.isSuccess(exit) && Option.isSome(last)
          ? Effect.andThen(record(store, key, last.value, "applied"), Ref.set(outcome, "applied"))
          : Effect.void)
      return applied
    }))

  return serverTool(definition, (input, { toolCallId }) =>
    Stream.unwrap(Effect.gen(function*() {
      const run = yield* RunContext
      const store = yield* EffectStore
      const outcome = yield* Ref.make<Outcome>("failed")
      const keyed = keyOf(input, { run, toolName, toolCallId })
      const key = Effect.isEffect(keyed) ? yield* keyed : keyed
      yield* Effect.annotateCurrentSpan({ "effect.key": key })
      const call: EffectCall = { key, run, toolCallId, toolName }
      return shared(store, key, () => apply(store, key, input, call, outcome), outcome).pipe(
        Stream.onExit((exit) =>
          Effect.gen(function*() {
            const final = Exit.isSuccess(exit) ? yield* Ref.get(outcome) : "failed"
            yield* Effect.annotateCurrentSpan({ "effect.outcome": final })
            yield* Metric.update(Metric.withAttributes(effectToolCalls, { tool: toolName, outcome: final }), 1)
          })
        )
      )
    })))
}

const warnUnrecorded = (cause: unknown) =>
  Effect.logWarning("The effect was applied but its record could not be written; alreadyApplied guards a retry", cause)

/** Calls `f` with the stream's exit and its last element when the stream ends. */
const onEnd = <A, E, R, R2>(
  stream: Stream.Stream<A, E, R>,
  f: (exit: Exit.Exit<unknown, E>, last: Option.Option<A>) => Effect.Effect<void, never, R2>
): Stream.Stream<A, E, R | R2> =>
  Stream.unwrap(Effect.map(Ref.make(Option.none<A>()), (last) =>
    stream.pipe(
      Stream.tap((element) => Ref.set(last, Option.some(element))),
      Stream.onExit((exit) => Effect.flatMap(Ref.get(last), (element) => f(exit, element)))
    )))

// Calls in flight, by store and key: identical concurrent calls of one process
// share one application. Keyed by the store instance, since one store is one
// record of what was applied.
const inFlight = new WeakMap<object, Map<string, Deferred.Deferred<unknown, unknown>>>()

/**
 * The first call for a key applies it; a concurrent call for the same key
 * waits for that application and gets its result. If the first call is
 * interrupted, a waiting call applies the key itself.
 */
const shared = <A, E, R>(
  store: object,
  key: string,
  apply: () => Stream.Stream<A, E, R>,
  outcome: Ref.Ref<Outcome>
): Stream.Stream<A, E, R> =>
  Stream.unwrap(Effect.sync(() => {
    let calls = inFlight.get(store)
    if (calls === undefined) inFlight.set(store, calls = new Map())
    const running = calls.get(key) as Deferred.Deferred<A, E> | undefined
    if (running !== undefined) {
      return Stream.unwrap(Effect.map(Effect.exit(Deferred.await(running)), (exit): Stream.Stream<A, E, R> =>
        Exit.isSuccess(exit)
          ? Stream.fromEffect(Effect.as(Ref.set(outcome, "recorded"), exit.value))
          : Cause.hasInterruptsOnly(exit.cause)
          ? shared(store, key, apply, outcome)
          : Stream.failCause(exit.cause)))
    }
    const application = Deferred.makeUnsafe<A, E>()
    calls.set(key, application as Deferred.Deferred<unknown, unknown>)
    return onEnd(apply(), (exit, result) => {
      calls.delete(key)
      return Exit.isSuccess(exit) && Option.isSome(result)
        ? Deferred.succeed(application, result.value)
        : Deferred.failCause(application, Exit.isFailure(exit) ? exit.cause : Cause.interrupt())
    })
  }))
