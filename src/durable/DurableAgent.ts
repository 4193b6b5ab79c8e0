/**
 * Durable agent runs on Effect's workflow engine: a run of an agent survives
 * the crash of the process that runs it.
 *
 * A run is a `Workflow` whose execution id comes from the run id. Its
 * steps are its model turns, each recorded as that turn's assistant message
 * (its text, its tool calls, its token usage), and its tool calls, each
 * keyed by its tool call id and recorded as what the model reads. The run
 * records each step itself in the run store (`DurableRunStore`), one write
 * when the step ends, rather than as an engine `Activity`, which costs the
 * engine's hand-over of a message per step (four statements on PostgreSQL,
 * eight on SQLite, and about 2 ms of the runner's work). A run resumed by
 * another process reads its recorded steps in one read and goes on from the
 * first unfinished one. So a finished model turn is never requested again,
 * and an effect tool keeps its own claim and record inside its step, so
 * that the re-run of a step that was in flight does not apply its effect
 * twice. The turn in flight and plain tools run at least once. The run's
 * end (its delivery log closed, its thread saved) is no step: both are
 * idempotent.
 *
 * The engine keeps the run itself: its start, its result, its suspension
 * while it waits for an approval (a `DurableDeferred`), and the interrupt of
 * a cancel, which a replay applies before any step the run did not finish.
 * Beside the steps, the run store keeps what every process reads about a
 * run: its input's fingerprint (a run id names one input), its generation
 * (a failed run tried again), and its approvals, so that any caller lists
 * and answers them. A turn that fails on a rate limit or a 5xx is tried
 * again inside its step.
 *
 * The engine is yours to choose: `DurableEngine.layerMemory` for tests and
 * one process, or `ClusterWorkflowEngine` on PostgreSQL
 * (`DurableEngine.layerSingleRunner`, `DurableEngine.layerSocketRunner`);
 * each provides the run store beside the engine.
 *
 * @since 0.1.0
 */
import type { AnyTextAdapter, ModelMessage, StreamChunk } from "@tanstack/ai"
import { Cause, Context, Effect, Exit, Fiber, Layer, Option, Queue, Schedule, Schema, type Scope, Semaphore, Stream } from "effect"
import { DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import type { Agent } from "../Agent.ts"
import { AiError, failOnProviderError } from "../AiError.ts"
import { chat, type ChatRequirements, type CoreTool } from "../Chat.ts"
import * as EffectKey from "../EffectKey.ts"
import {
  approvalRequestedChunk,
  assistantMessage,
  customChunk,
  declinedOutcome,
  isClientToolNotice,
  makeTurnReader,
  messagesSnapshotChunk,
  parsedIfJson,
  replayedChunks,
  runErrorChunk,
  toolResultChunk,
  type Turn,
  type TurnToolCall,
  withoutClientToolInterrupts
} from "../internal/agui.ts"
import { retryOnFailure } from "../internal/retry.ts"
import { runToolCall } from "../internal/toolCall.ts"
import { RunContext } from "../RunContext.ts"
import { isServerTool, type ServerTool, wrapToolsForRun } from "../ServerTool.ts"
import { StreamLog, type StreamLogError } from "../StreamLog.ts"
import { makeTranscript, ThreadStore } from "../ThreadStore.ts"
import * as DurableRunError from "./DurableRunError.ts"
import * as DurableRunStore from "./DurableRunStore.ts"

/**
 * Messages as the engine stores them: core's model messages, encoded as JSON.
 */
const StoredMessages = Schema.Array(Schema.Unknown)

const UsageSchema = Schema.Struct({ input: Schema.Number, output: Schema.Number })

const TurnSchema = Schema.Struct({
  text: Schema.String,
  toolCalls: Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String, arguments: Schema.String })),
  usage: UsageSchema
})

const ToolOutcomeSchema = Schema.Struct({ content: Schema.String, error: Schema.Boolean })

/** How a step's exit is recorded: its success or typed failure, as JSON text. */
const stepCodec = <A extends Schema.Top, E extends Schema.Top>(success: A, error: E) =>
  Schema.fromJsonString(Schema.toCodecJson(Schema.Exit(success, error, Schema.Defect())))

const turnStep = stepCodec(TurnSchema, AiError)
const toolStep = stepCodec(ToolOutcomeSchema, Schema.Never)
const askStep = stepCodec(Schema.Void, Schema.Never)

/** The record of a cancel, beside the steps: a replay of a cancelled run starts no new step. */
const cancelStep = "cancel"

/** A recorded step, as it ended; a record that does not decode fails the run closed. */
const decodeStep = <A, E>(codec: Schema.Codec<Exit.Exit<A, E>, string>, text: string) =>
  Effect.flatten(Effect.orDie(Schema.decodeEffect(codec)(text)))

const isInterruptOrDie = <E>(reason: Cause.Reason<E>): reason is Cause.Die | Cause.Interrupt => !Cause.isFailReason(reason)

/** The run store's reads and writes of steps ride out a short outage; a store that stays down fails the run closed. */
const storeRetry = <A, R>(effect: Effect.Effect<A, DurableRunError.DurableRunStoreError, R>) =>
  Effect.orDie(retryOnFailure(effect, storeOutage))

/** A short outage of the run store: three more tries, 100, 200 and 400 ms apart. */
const storeOutage = { times: 3, schedule: Schedule.exponential("100 millis") }

/**
 * The chunks of the durable runs that run in this process, for
 * {@link DurableAgent.stream} to read: each model turn's chunks as they
 * arrive, each tool call's result, each approval asked for, and each run's
 * end. Every durable agent's `layer` provides it.
 *
 * A chunk reaches the streams of its own run only, so that a process that
 * streams many runs at once does the same work per chunk as one that
 * streams one.
 *
 * @example
 * ```ts
 * import { DurableAgent } from "@tanstack/ai-effect/durable"
 *
 * // Provided by every durable agent's layer; one instance serves them all.
 * const layer = DurableAgent.RunChunks.layer
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export class RunChunks extends Context.Service<RunChunks, {
  /** Chunks of a run, in order, to the streams of that run in this process. */
  readonly publish: (runId: string, chunks: ReadonlyArray<StreamChunk>) => Effect.Effect<void>
  /** The end of a run: its streams end once they have every chunk before it, or fail with the run's error. */
  readonly end: (runId: string, error: AiError | undefined) => Effect.Effect<void>
  /** The chunks of one run from now on, until its end. */
  readonly subscribe: (runId: string) => Effect.Effect<Stream.Stream<StreamChunk, AiError>, never, Scope.Scope>
}>()("@tanstack/ai-effect/durable/RunChunks") {
  static readonly layer: Layer.Layer<RunChunks> = Layer.sync(RunChunks)(() => {
    // The streams of each run in this process.
    const streams = new Map<string, Set<Queue.Queue<StreamChunk, AiError | Cause.Done>>>()
    return RunChunks.of({
      publish: (runId, chunks) =>
        Effect.sync(() => {
          const ofRun = streams.get(runId)
          if (ofRun === undefined) return
          for (const queue of ofRun) Queue.offerAllUnsafe(queue, chunks)
        }),
      end: (runId, error) =>
        Effect.sync(() => {
          const ofRun = streams.get(runId)
          if (ofRun === undefined) return
          for (const queue of ofRun) {
            if (error === undefined) Queue.endUnsafe(queue)
            else Queue.failCauseUnsafe(queue, Cause.fail(error))
          }
        }),
      subscribe: (runId) =>
        Effect.acquireRelease(
          Effect.tap(Queue.unbounded<StreamChunk, AiError | Cause.Done>(), (queue) =>
            Effect.sync(() => {
              let ofRun = streams.get(runId)
              if (ofRun === undefined) streams.set(runId, ofRun = new Set())
              ofRun.add(queue)
            })),
          (queue) =>
            Effect.sync(() => {
              const ofRun = streams.get(runId)
              ofRun?.delete(queue)
              if (ofRun?.size === 0) streams.delete(runId)
            })
        ).pipe(Effect.map((queue) => Stream.fromQueue(queue)))
    })
  })
}

/**
 * The steps of durable runs that this process started, by run and
 * generation. The engine may cut an execution of a run off to
 * replay it (an approval that arrives once the run is past its wait wakes
 * it again): the step in flight goes on to its record in the background,
 * and the replay takes its result instead of running it again, also when
 * the step ended after the replay read the recorded steps. Only a cancel
 * stops a step in flight.
 */
class StepsInFlight extends Context.Service<StepsInFlight, {
  /** The fiber that runs the step to its record: the one this process started already, or `step` started now. */
  readonly run: <R>(run: string, name: string, step: Effect.Effect<string, never, R>) => Effect.Effect<Fiber.Fiber<string>, never, R>
  /** Forgets the steps of `run` that ended and that `recorded` holds, or all of them once the run ended (`recorded` undefined). */
  readonly forget: (run: string, recorded?: ReadonlyMap<string, string>) => Effect.Effect<void>
}>()("@tanstack/ai-effect/durable/StepsInFlight") {
  static readonly layer: Layer.Layer<StepsInFlight> = Layer.effect(StepsInFlight)(Effect.gen(function*() {
    // Steps outlive the execution that started them, not the layer.
    const scope = yield* Effect.scope
    const runs = new Map<string, Map<string, Fiber.Fiber<string>>>()
    return StepsInFlight.of({
      run: (run, name, step) =>
        Effect.suspend(() => {
          let steps = runs.get(run)
          const current = steps?.get(name)
          // A step that was stopped or died has no result: it runs again.
          const ended = current?.pollUnsafe()
          if (current !== undefined && (ended === undefined || Exit.isSuccess(ended))) return Effect.succeed(current)
          if (steps === undefined) runs.set(run, steps = new Map())
          const ofRun = steps
          // Started at once, not on the scheduler's next turn of the event loop: a run waits for each step.
          return Effect.tap(Effect.forkIn(step, scope, { startImmediately: true }), (fiber) => Effect.sync(() => ofRun.set(name, fiber)))
        }),
      forget: (run, recorded) =>
        Effect.sync(() => {
          const steps = runs.get(run)
          if (steps === undefined) return
          for (const [name, fiber] of steps) {
            if (recorded === undefined || (recorded.has(name) && fiber.pollUnsafe() !== undefined)) steps.delete(name)
          }
          if (steps.size === 0) runs.delete(run)
        })
    })
  }))
}

/** The approval of one tool call: `true` runs the tool, `false` declines it. */
const approvalOf = (toolCallId: string) => DurableDeferred.make(`approval-${toolCallId}`, { success: Approval })

/**
 * An answer to an approval: approved or not, and the delivery log the run
 * continues in (the client's run that sent the answer). A bare boolean is
 * an answer without a log.
 */
const Approval = Schema.Union([Schema.Boolean, Schema.Struct({ approved: Schema.Boolean, continueIn: Schema.String })])

/**
 * What a finished run answers: its whole conversation (the messages it
 * started with, then every assistant message and tool result), the last
 * assistant text, how many model turns it took and their token usage.
 *
 * @since 0.1.0
 * @category models
 */
export class DurableRunResult extends Schema.Class<DurableRunResult>("@tanstack/ai-effect/DurableRunResult")({
  messages: StoredMessages,
  text: Schema.String,
  turns: Schema.Int,
  usage: UsageSchema
}) {}

/**
 * How a durable run starts.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableRunInput {
  /** The run's id: the idempotency key, so that starting it again joins it. */
  readonly runId: string
  /** Defaults to the run id. */
  readonly threadId?: string | undefined
  readonly messages: ReadonlyArray<ModelMessage>
  /** What started the run, for example `"webhook"`. Default `"durable"`. */
  readonly trigger?: string | undefined
}

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableAgentOptions {
  /**
   * How a model turn is tried again inside its step when the provider
   * answers with a rate limit (429), a 5xx or no answer at all: the turn's
   * step ends only once the turn succeeded or this schedule gave up, so
   * a passing outage does not fail the run. Default: 4 more attempts,
   * exponential from 1 second (1, 2, 4, 8 s). Add to the adapter's own
   * retries (the SDKs' `maxRetries`).
   */
  readonly turnRetry?: Schedule.Schedule<unknown, AiError> | undefined
}

/**
 * Where a run stands, as any process on the engine reads it.
 *
 * - `Running`: started, not finished, waiting for nothing;
 * - `WaitingForApproval`: suspended until these tool calls are answered
 *   (see {@link DurableAgent.approve});
 * - `Finished`: its result, or the `AiError` it failed with ({@link DurableAgent.retry}
 *   tries a failed run again).
 *
 * @since 0.1.0
 * @category models
 */
export type DurableRunStatus =
  | { readonly _tag: "Running" }
  | { readonly _tag: "WaitingForApproval"; readonly approvals: ReadonlyArray<DurableRunStore.ApprovalRequest> }
  | { readonly _tag: "Finished"; readonly exit: Exit.Exit<DurableRunResult, AiError> }

/**
 * The services every operation of a durable agent needs: the engine and
 * the run store that `DurableEngine`'s layers provide together.
 *
 * @since 0.1.0
 * @category models
 */
export type DurableServices = WorkflowEngine.WorkflowEngine | DurableRunStore.DurableRunStore

/**
 * An agent whose runs are durable.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableAgent<Tools extends ReadonlyArray<unknown>> {
  readonly name: string
  /**
   * The run's workflow, for the engine's own API (`resume`, `poll`). The
   * engine's `interrupt` takes effect when the run next waits for an
   * approval or ends; `cancel` stops it at once.
   */
  readonly workflow: Workflow.Workflow<
    `AgentRun/${string}`,
    typeof Payload,
    typeof DurableRunResult,
    typeof RunFailed
  >
  /**
   * Registers the run's body with the engine. Provide it with the tools'
   * services (an effect tool's `EffectStore` among them) in every process
   * that may run or resume the agent's runs.
   */
  readonly layer: Layer.Layer<RunChunks, never, DurableServices | ChatRequirements<Tools>>
  /**
   * Starts a run (or joins the run of that id) and streams its chunks while
   * it runs in this process: each model turn's chunks as `AI.chat` gives
   * them, a tool's progress events live, a `TOOL_CALL_RESULT` for each tool
   * call, an `approval-requested` event for each call that waits for
   * approval (those it already waits for first). The stream ends with the
   * run, and fails with the run's `AiError`. Turns a resumed run replays
   * from storage send nothing again. A run that already finished is replayed
   * from its result (each turn's text, tool calls and results) and the
   * stream ends; one that failed fails at once.
   */
  readonly stream: (input: DurableRunInput) => Stream.Stream<
    StreamChunk,
    AiError | DurableRunError.DurableRunInputMismatch | DurableRunError.DurableRunStoreError,
    DurableServices | RunChunks
  >
  /** Starts a run, or joins the run of that id, and waits for its result. */
  readonly run: (
    input: DurableRunInput
  ) => Effect.Effect<DurableRunResult, AiError | DurableRunError.DurableRunInputMismatch | DurableRunError.DurableRunStoreError, DurableServices>
  /**
   * Starts a run, or finds the run of that id, without waiting: its
   * execution id. A run id started before with another input fails with
   * `DurableRunInputMismatch`, and nothing starts.
   */
  readonly start: (
    input: DurableRunInput
  ) => Effect.Effect<string, DurableRunError.DurableRunInputMismatch | DurableRunError.DurableRunStoreError, DurableServices>
  /**
   * Approves (`true`) or declines (`false`) a tool call that waits for
   * approval, from any process on the same engine: the run goes on, and an
   * approved tool runs once. An unknown run, a call the run did not ask
   * about, a call answered before (the first answer stands), and a run that
   * was cancelled are typed failures. With `continueIn`, the run's chunks
   * from now on go to that delivery log (the client's run that sent the
   * answer, as `ChatRoute.durableHandler` passes it); the run's own log
   * closed when it asked.
   */
  readonly approve: (runId: string, toolCallId: string, approved: boolean, options?: { readonly continueIn?: string | undefined }) => Effect.Effect<
    void,
    | DurableRunError.DurableRunNotFound
    | DurableRunError.ApprovalNotFound
    | DurableRunError.ApprovalAlreadyAnswered
    | DurableRunError.DurableRunCancelled
    | DurableRunError.DurableRunStoreError,
    DurableServices
  >
  /** The tool calls a run waits to have approved, from any process on the same engine; none once it was cancelled. */
  readonly pendingApprovals: (runId: string) => Effect.Effect<
    ReadonlyArray<DurableRunStore.ApprovalRequest>,
    DurableRunError.DurableRunNotFound | DurableRunError.DurableRunStoreError,
    DurableServices
  >
  /** Where a run stands, from any process on the same engine. */
  readonly status: (runId: string) => Effect.Effect<
    DurableRunStatus,
    DurableRunError.DurableRunNotFound | DurableRunError.DurableRunStoreError,
    DurableServices
  >
  /**
   * Tries a failed run again under its id: the turn that failed is asked
   * again, and everything the run finished before it (model turns, tool
   * calls, approvals) is kept, none of it requested or applied again. A run
   * that did not fail is left as it is. Returns at once; `run`, `stream`
   * and `poll` with the same id follow the new try.
   */
  readonly retry: (runId: string) => Effect.Effect<
    void,
    DurableRunError.DurableRunNotFound | DurableRunError.DurableRunStoreError,
    DurableServices
  >
  /**
   * Stops a run from any process: the engine interrupts it (the step in
   * flight is interrupted, its finalizers run, and nothing after it runs),
   * and its delivery log, when the layer has an `AI.StreamLog`, is closed
   * with core's `RUN_ERROR` of a cancel, so that every client reading it
   * ends. `false` when the run had already finished.
   */
  readonly cancel: (runId: string) => Effect.Effect<
    boolean,
    DurableRunError.DurableRunNotFound | DurableRunError.DurableRunStoreError | StreamLogError,
    DurableServices
  >
  /** The result of a run, once it finished; from any process on the same engine. */
  readonly poll: (runId: string) => Effect.Effect<
    Option.Option<Exit.Exit<DurableRunResult, AiError>>,
    DurableRunError.DurableRunStoreError,
    DurableServices
  >
}

/**
 * One try of a run. The first has generation 0 and the run's input; a
 * failed run tried again is a new execution, generation n + 1, whose
 * messages are the conversation the failed one finished, so that nothing it
 * finished is asked again.
 */
const Payload = Schema.Struct({
  runId: Schema.String,
  threadId: Schema.String,
  trigger: Schema.String,
  messages: StoredMessages,
  generation: Schema.Int,
  /** What earlier generations finished: their model turns and token usage. */
  turnsBefore: Schema.Int,
  usageBefore: UsageSchema
})

/**
 * How a try of a run failed, as the engine records it: the `AiError`, and
 * what the try finished before it (the conversation, the model turns and
 * their usage), for {@link DurableAgent.retry} to start the next try from.
 * The agent's own operations answer the `AiError` alone; this is what the
 * engine's API (`agent.workflow`) answers.
 *
 * @example
 * ```ts
 * import { DurableAgent } from "@tanstack/ai-effect/durable"
 *
 * const isRunFailed = (u: unknown): u is DurableAgent.RunFailed => u instanceof DurableAgent.RunFailed
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class RunFailed extends Schema.TaggedError<RunFailed>()("RunFailed", {
  error: AiError,
  threadId: Schema.String,
  trigger: Schema.String,
  messages: StoredMessages,
  turns: Schema.Int,
  usage: UsageSchema
}) {}

/** The default `turnRetry`: 4 more attempts, 1, 2, 4 and 8 seconds apart. */
const defaultTurnRetry: Schedule.Schedule<unknown, AiError> = Schedule.max([Schedule.exponential("1 second"), Schedule.recurs(4)])

/** A provider failure that may pass: a rate limit, a 5xx, or no answer at all. */
const isTransient = (error: AiError): boolean =>
  error.reason === "rate-limited" || (error.reason === "provider" && (error.status === undefined || error.status >= 500))

/**
 * Makes an agent's runs durable.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { DurableAgent, DurableEngine } from "@tanstack/ai-effect/durable"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Effect, Layer } from "effect"
 *
 * const greeter = DurableAgent.make(AI.defineAgent({
 *   name: "greeter",
 *   adapter: scriptedText([{ text: "Hello!" }]),
 *   instructions: "Greet the user.",
 *   tools: []
 * }))
 *
 * const result = greeter.run({ runId: "run-1", messages: [{ role: "user", content: "Hi" }] }).pipe(
 *   Effect.provide(greeter.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory)))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <TAdapter extends AnyTextAdapter, const Tools extends ReadonlyArray<CoreTool<TAdapter> | ServerTool.Any>>(
  agent: Agent<TAdapter, Tools>,
  options?: DurableAgentOptions
): DurableAgent<Tools> => {
  const turnRetries = { schedule: options?.turnRetry ?? defaultTurnRetry, while: isTransient }
  const workflow = Workflow.make(`AgentRun/${agent.name}`, {
    payload: Payload,
    // Generation 0 keeps the run id alone, as runs started before generations existed.
    idempotencyKey: ({ runId, generation }) => generation === 0 ? runId : `${runId}#${generation}`,
    success: DurableRunResult,
    error: RunFailed
  })

  /** Whether a generation of a run was cancelled: it starts no step, and waits for no approval. */
  const isCancelled = (runId: string, generation: number) =>
    Effect.flatMap(DurableRunStore.DurableRunStore, (runs) => runs.steps(runId, generation)).pipe(
      Effect.map((steps) => steps.has(cancelStep))
    )

  /** A generation of a run, among the steps this process runs. */
  const runKeyOf = (payload: typeof Payload.Type) => `${agent.name}/${payload.runId}#${payload.generation}`

  const body = Effect.fnUntraced(function*(payload: typeof Payload.Type) {
    const chunks = yield* RunChunks
    const runs = yield* DurableRunStore.DurableRunStore
    const instance = yield* WorkflowEngine.WorkflowInstance
    // What this generation recorded before, in one read: a replay answers those steps from it.
    const recorded = yield* storeRetry(runs.steps(payload.runId, payload.generation))
    const cancelled = recorded.has(cancelStep)
    const inFlight = yield* StepsInFlight
    const runKey = runKeyOf(payload)
    yield* inFlight.forget(runKey, recorded)
    /** Whether the run was cancelled since this execution started; a store that cannot say counts as a cancel. */
    const cancelledNow = isCancelled(payload.runId, payload.generation).pipe(Effect.orElseSucceed(() => true))
    /**
     * A step of the run, recorded in one write once it ends: its recorded
     * exit on a replay, without running it. A cancelled run starts no step
     * it did not record: it suspends, and the engine ends it with the
     * interrupt. Only a success or a typed failure is recorded. A step in
     * flight goes on to its record when the engine cuts this execution off,
     * and the replay takes its result ({@link StepsInFlight}); a cancel stops
     * it. A step that was stopped or died runs again on the replay. Once its
     * effect ended, its record is not cut off. Traced as an `Activity` is:
     * a span named after the step.
     */
    const step = <A, E, R>(name: string, codec: Schema.Codec<Exit.Exit<A, E>, string>, execute: Effect.Effect<A, E, R>) =>
      Effect.suspend(() => {
        const before = recorded.get(name)
        if (before !== undefined) return decodeStep(codec, before)
        if (cancelled) return Workflow.suspend(instance)
        // The exit this execution recorded, to answer without decoding it again.
        let own: { readonly encoded: string; readonly exit: Exit.Exit<A, E> } | undefined
        const toRecord = Effect.uninterruptibleMask((restore) =>
          Effect.gen(function*() {
            const exit = yield* Effect.exit(restore(execute))
            if (Exit.isFailure(exit) && (Cause.hasInterrupts(exit.cause) || Cause.hasDies(exit.cause))) {
              // Not recorded: the replay runs it again. Only a typed failure is a result.
              return yield* Effect.failCause(Cause.fromReasons<never>(exit.cause.reasons.filter(isInterruptOrDie)))
            }
            const encoded = yield* Effect.orDie(Schema.encodeEffect(codec)(exit))
            own = { encoded, exit }
            // A second process that ran the same step (a runner cut off from its shards) takes the first record.
            return yield* storeRetry(runs.record(payload.runId, payload.generation, name, encoded))
          })
        )
        return Effect.flatMap(inFlight.run(runKey, name, toRecord), (running) =>
          Fiber.join(running).pipe(
            // A cancel stops the step; the engine cutting this execution off to replay it does not.
            Effect.onInterrupt(() => Effect.flatMap(cancelledNow, (cancelled) => cancelled ? Fiber.interrupt(running) : Effect.void)),
            Effect.flatMap((kept) => own !== undefined && own.encoded === kept ? own.exit : decodeStep(codec, kept))
          ))
      }).pipe(
        Effect.withSpan(name, { attributes: { executionId: instance.executionId, replayed: recorded.has(name) } }, { captureStackTrace: false })
      )
    const run = RunContext.of({ runId: payload.runId, threadId: payload.threadId, agent: agent.name, trigger: payload.trigger })
    const tools = typeof agent.tools === "function" ? agent.tools({ run }) : agent.tools
    // The model is told about every tool but runs none: each call is a step of its own.
    const declared = tools.map((tool): CoreTool => isServerTool(tool) ? tool.definition : { ...tool, execute: undefined })
    const needsApproval = new Set(declared.flatMap((tool) => "needsApproval" in tool && tool.needsApproval === true ? [tool.name] : []))
    // Core's model messages, as the engine stored them.
    const messages = [...payload.messages] as Array<ModelMessage>
    const usage = { ...payload.usageBefore }
    // The delivery log the run writes: its own, then the one of each client run that answered an approval.
    let logId = payload.runId
    let log = yield* openRunLog(logId, () => messages)
    /** Chunks to this process's streams (`DurableAgent.stream`), in order. */
    const toStreams = (batch: ReadonlyArray<StreamChunk>) => chunks.publish(payload.runId, batch)
    /** A chunk to this process's streams, and to the run's log before the step that sends it ends. */
    const publish = (chunk: StreamChunk) => Effect.andThen(toStreams([chunk]), log.write(chunk))
    /** Chunks to this process's streams, and to the run's log without waiting for the store (the step flushes). */
    const publishSoon = (batch: ReadonlyArray<StreamChunk>) => Effect.andThen(toStreams(batch), Effect.sync(() => log.writeSoon(batch)))
    /**
     * Closes the run's log (with its failure) and saves its thread. Not a
     * step, which would cost a write: both are idempotent (a closed log
     * takes no producer, and the thread's save is a compare-and-set on its
     * active run), so that a body replayed after they ran does nothing
     * again. Uninterruptible, as the end of a step is, so that a stop does
     * not come between the two.
     */
    const end = (error: AiError | undefined) =>
      Effect.uninterruptible(Effect.andThen(log.end(error), saveThread(logId, payload.threadId)))
    /** Waits for a call's approval; an answer from a client's run moves the run's chunks to that run's log. */
    const approvalAnswer = Effect.fnUntraced(function*(call: TurnToolCall) {
      const answer = yield* DurableDeferred.await(approvalOf(call.id))
      if (typeof answer === "boolean") return answer
      if (answer.continueIn !== logId) {
        logId = answer.continueIn
        log = yield* openRunLog(logId, () => messages)
      }
      return answer.approved
    })
    for (let index = 0;; index++) {
      const turn: Turn = yield* step(
        `turn-${index}`,
        turnStep,
        // The conversation so far, as this turn sends it (later turns push onto `messages`).
        // Each chunk goes to the log as it comes, coalesced while an append is out; the turn ends once they are stored.
        modelTurn(agent, declared, [...messages], run, publishSoon).pipe(
          Effect.tapError(() => log.retrying),
          (turn) => retryOnFailure(turn, turnRetries),
          Effect.tap(() => log.flush)
        )
      ).pipe(
        Effect.tapError((error) => end(error)),
        Effect.mapError((error) =>
          new RunFailed({
            error,
            threadId: payload.threadId,
            trigger: payload.trigger,
            messages,
            turns: payload.turnsBefore + index,
            usage
          })
        )
      )
      usage.input += turn.usage.input
      usage.output += turn.usage.output
      messages.push(assistantMessage(turn))
      if (turn.toolCalls.length === 0) {
        yield* end(undefined)
        return new DurableRunResult({ messages, text: turn.text, turns: payload.turnsBefore + index + 1, usage })
      }
      const asked = turn.toolCalls.filter((call) => needsApproval.has(call.name))
      if (asked.length > 0) {
        yield* step(
          `ask-${index}`,
          askStep,
          // Recorded before anyone sees them, so that whoever sees a request can answer it. The turn's
          // RUN_FINISHED carried core's interrupts to the client, and its run ends here: the log closes,
          // and the thread keeps the interrupts for a client that hydrates it.
          Effect.gen(function*() {
            for (const call of asked) {
              yield* runs.request(payload.runId, { toolCallId: call.id, toolName: call.name, input: parsedIfJson(call.arguments) })
              yield* toStreams([approvalRequestedChunk(call)])
            }
            yield* log.end(undefined)
            yield* saveThread(logId, payload.threadId)
          }).pipe(Effect.orDie)
        )
      }
      for (const call of turn.toolCalls) {
        // The run suspends here until `approve` answers, in this process or another.
        const approved = needsApproval.has(call.name) ? yield* approvalAnswer(call) : true
        const outcome = yield* step(
          `tool-${call.id}`,
          toolStep,
          Effect.scoped(Effect.gen(function*() {
            if (!approved) return declinedOutcome
            const runnable = yield* wrapToolsForRun(tools)
            const tool = runnable.find((tool) => tool.name === call.name)
            // A tool's progress goes out live, as core sends it: a CUSTOM chunk with the call's id.
            const progress = (name: string, value: Record<string, unknown>) =>
              Effect.runSync(publishSoon([customChunk(name, { ...value, toolCallId: call.id })]))
            return yield* Effect.promise(() => runToolCall(tool, call, progress))
          })).pipe(
            Effect.tap((outcome) => publish(toolResultChunk(call, outcome))),
            Effect.provideService(RunContext, run)
          )
        )
        messages.push({ role: "tool", toolCallId: call.id, content: outcome.content })
      }
    }
  }, (effect, payload) =>
    // A run that suspends (for an approval) is interrupted, and has not ended.
    Effect.onExit(effect, (exit) =>
      Exit.hasInterrupts(exit) ? Effect.void : Effect.gen(function*() {
        yield* (yield* StepsInFlight).forget(runKeyOf(payload))
        yield* (yield* RunChunks).end(
          payload.runId,
          Exit.isFailure(exit) ? Option.getOrUndefined(Exit.findErrorOption(exit))?.error : undefined
        )
      })))

  const payloadOf = (input: DurableRunInput, generation = 0): typeof Payload.Type => ({
    runId: input.runId,
    threadId: input.threadId ?? input.runId,
    trigger: input.trigger ?? "durable",
    // As JSON, which is what the engine stores: a client's `createdAt` Date becomes its ISO string.
    messages: JSON.parse(JSON.stringify(input.messages)) as ReadonlyArray<unknown>,
    generation,
    turnsBefore: 0,
    usageBefore: { input: 0, output: 0 }
  })

  // The execution id of a generation depends on the run id alone (the idempotency key).
  const executionIdOf = (runId: string, generation: number) => workflow.executionId(payloadOf({ runId, messages: [] }, generation))

  /** The run store's record of a run, if it was ever started. */
  const find = (runId: string) => Effect.flatMap(Effect.service(DurableRunStore.DurableRunStore), (runs) => runs.find(runId))

  /** The record of a run, or `DurableRunNotFound`. */
  const known = (runId: string) =>
    find(runId).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new DurableRunError.DurableRunNotFound({ runId })),
        onSome: Effect.succeed
      }))
    )

  /**
   * Records the run's input at its first start, and refuses another input
   * under its id; answers the generation to join. Recorded before the run
   * is started: a caller whose start did not get through tries again, and
   * its retry starts the run (the same input passes the check).
   */
  const begin = (input: DurableRunInput) =>
    Effect.gen(function*() {
      const payload = payloadOf(input)
      const fingerprint = yield* EffectKey.fingerprint({ threadId: payload.threadId, trigger: payload.trigger, messages: payload.messages }).pipe(
        Effect.orDie
      )
      const record = yield* (yield* DurableRunStore.DurableRunStore).begin(input.runId, fingerprint)
      if (record.fingerprint !== fingerprint) return yield* new DurableRunError.DurableRunInputMismatch({ runId: input.runId })
      // A later generation was started with its own payload, and joining it ignores this one.
      return { ...payload, generation: record.generation }
    })

  /** The exit of a generation that finished, with the public error. */
  const pollGeneration = (runId: string, generation: number) =>
    Effect.flatMap(executionIdOf(runId, generation), (id) => workflow.poll(id)).pipe(
      Effect.map(Option.flatMap((result) =>
        result._tag === "Complete"
          ? Option.some(Exit.mapError(result.exit, (failed) => failed.error))
          : Option.none()
      ))
    )

  const poll = (runId: string) =>
    find(runId).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.succeedNone,
        onSome: (record) => pollGeneration(runId, record.generation)
      }))
    )

  const pendingApprovals = (runId: string) =>
    Effect.gen(function*() {
      const record = yield* known(runId)
      if (yield* isCancelled(runId, record.generation)) return []
      const approvals = yield* (yield* DurableRunStore.DurableRunStore).approvals(runId)
      return approvals.flatMap(({ state, ...request }) => state === "pending" ? [request] : [])
    })

  /** A finished run's chunks, re-derived from its result; a failed one's failure. */
  const replayed = (payload: typeof Payload.Type, exit: Exit.Exit<DurableRunResult, AiError>): Stream.Stream<StreamChunk, AiError> =>
    Exit.isFailure(exit)
      ? Stream.failCause(exit.cause)
      : Stream.fromIterable(replayedChunks(payload, producedMessages(exit.value)))

  return {
    name: agent.name,
    workflow,
    layer: workflow.toLayer(body).pipe(Layer.provideMerge(RunChunks.layer), Layer.provide(StepsInFlight.layer)),
    stream: (input) =>
      Stream.unwrap(Effect.gen(function*() {
        const payload = yield* begin(input)
        const chunks = yield* RunChunks
        // Subscribed before the run starts, so that no chunk goes out unseen.
        const live = yield* chunks.subscribe(input.runId)
        const finished = yield* pollGeneration(input.runId, payload.generation)
        if (Option.isSome(finished)) return replayed(payload, finished.value)
        yield* workflow.execute(payload, { discard: true })
        // What the run already waits for, then what it sends from now on; an approval asked for meanwhile comes once.
        const waiting = (yield* (yield* DurableRunStore.DurableRunStore).approvals(input.runId)).filter(({ state }) => state === "pending")
        const asked = new Set(waiting.map(({ toolCallId }) => toolCallId))
        return Stream.concat(
          Stream.fromIterable(waiting.map((approval) => approvalRequestedChunk({ id: approval.toolCallId, name: approval.toolName, arguments: JSON.stringify(approval.input) }))),
          Stream.filter(live, (chunk) => !(isApprovalRequest(chunk) && asked.has(chunk.value.toolCallId)))
        )
      })),
    run: (input) =>
      Effect.flatMap(begin(input), (payload) => workflow.execute(payload)).pipe(
        Effect.catchTag("RunFailed", (failed) => Effect.fail(failed.error))
      ),
    start: (input) => Effect.flatMap(begin(input), (payload) => workflow.execute(payload, { discard: true })),
    approve: (runId, toolCallId, approved, options) =>
      Effect.gen(function*() {
        const record = yield* known(runId)
        if (yield* isCancelled(runId, record.generation)) return yield* new DurableRunError.DurableRunCancelled({ runId })
        const answer = yield* (yield* DurableRunStore.DurableRunStore).answer(runId, toolCallId, approved)
        if (answer._tag === "UnknownCall") return yield* new DurableRunError.ApprovalNotFound({ runId, toolCallId })
        // The first answer is sent again: a caller that recorded it and stopped before sending it left the run waiting.
        const decision = answer._tag === "Answered" ? approved : answer.approved
        const executionId = yield* executionIdOf(runId, record.generation)
        const approval = approvalOf(toolCallId)
        yield* DurableDeferred.succeed(approval, {
          token: DurableDeferred.tokenFromExecutionId(approval, { workflow, executionId }),
          value: options?.continueIn === undefined ? decision : { approved: decision, continueIn: options.continueIn }
        })
        if (answer._tag === "AlreadyAnswered") {
          return yield* new DurableRunError.ApprovalAlreadyAnswered({ runId, toolCallId, approved: answer.approved })
        }
      }),
    pendingApprovals,
    cancel: (runId) =>
      Effect.gen(function*() {
        const record = yield* known(runId)
        if (Option.isSome(yield* pollGeneration(runId, record.generation))) return false
        // Recorded first, so that the replay that applies the interrupt starts no step the run did not finish.
        yield* (yield* DurableRunStore.DurableRunStore).record(runId, record.generation, cancelStep, "")
        // Not the engine's safe interrupt, which waits until the run would suspend: the step in flight stops now.
        const engine = yield* WorkflowEngine.WorkflowEngine
        yield* engine.interruptUnsafe(workflow, yield* executionIdOf(runId, record.generation))
        const log = yield* Effect.serviceOption(StreamLog)
        if (Option.isSome(log)) yield* log.value.cancel(runId).pipe(Effect.catchTag("UnknownRun", () => Effect.succeed(false)))
        return true
      }),
    status: (runId) =>
      Effect.gen(function*() {
        const approvals = yield* pendingApprovals(runId)
        const finished = yield* poll(runId)
        if (Option.isSome(finished)) return { _tag: "Finished", exit: finished.value } as const
        return approvals.length > 0 ? { _tag: "WaitingForApproval", approvals } as const : { _tag: "Running" } as const
      }),
    retry: (runId) =>
      Effect.gen(function*() {
        const runs = yield* DurableRunStore.DurableRunStore
        const record = yield* known(runId)
        const executionId = yield* executionIdOf(runId, record.generation)
        const result = yield* workflow.poll(executionId)
        if (Option.isNone(result) || result.value._tag !== "Complete" || Exit.isSuccess(result.value.exit)) return
        const failed = Option.getOrUndefined(Exit.findErrorOption(result.value.exit))
        // A defect has no progress to start from: the run is left as it ended.
        if (failed === undefined) return
        // Started before the record moves on, so that a generation on record always exists;
        // a second caller starts the same execution, and only one moves the record.
        yield* workflow.execute({
          runId,
          threadId: failed.threadId,
          trigger: failed.trigger,
          messages: failed.messages,
          generation: record.generation + 1,
          turnsBefore: failed.turns,
          usageBefore: failed.usage
        }, { discard: true })
        yield* runs.advance(runId, record.generation)
      }),
    poll
  }
}

/** One model turn: the agent's model asked once, with the conversation so far. */
const modelTurn = (
  agent: Agent<AnyTextAdapter, ReadonlyArray<unknown>>,
  tools: ReadonlyArray<CoreTool>,
  messages: ReadonlyArray<ModelMessage>,
  run: RunContext["Service"],
  publish: (chunks: ReadonlyArray<StreamChunk>) => Effect.Effect<void>
): Effect.Effect<Turn, AiError> =>
  Effect.suspend(() => {
    const reader = makeTurnReader()
    return chat({
      adapter: agent.adapter,
      systemPrompts: [agent.instructions],
      messages,
      tools,
      runId: run.runId,
      threadId: run.threadId,
      agent: run.agent,
      trigger: run.trigger
    }).pipe(
      failOnProviderError,
      // A batch of the chat reader at a time: a stage per chunk would cost more than the turn.
      Stream.runForEachArray((batch) => {
        const out: Array<StreamChunk> = []
        for (const chunk of batch) {
          reader.add(chunk)
          // The tools are declared without `execute`, so core hands their calls to the client: not here.
          if (!isClientToolNotice(chunk)) out.push(withoutClientToolInterrupts(chunk))
        }
        return out.length === 0 ? Effect.void : publish(out)
      }),
      Effect.catchTag("ChatError", (error) => Effect.fail(new AiError({ activity: "chat", reason: "provider", message: error.message, cause: error }))),
      Effect.map(() => reader.turn())
    )
  })

/** Whether a chunk asks the client to approve a tool call. */
const isApprovalRequest = (chunk: StreamChunk): chunk is StreamChunk & { readonly value: { readonly toolCallId: string } } =>
  chunk.type === "CUSTOM" && chunk.name === "approval-requested"

/**
 * The messages a run produced, without the ones it started with: from the
 * assistant message of its first turn on (it has one per turn).
 */
const producedMessages = (result: DurableRunResult): ReadonlyArray<ModelMessage> => {
  // Core's model messages, as the engine stored them.
  const messages = result.messages as ReadonlyArray<ModelMessage>
  let turns = 0
  for (let index = messages.length - 1; index >= 0; index--) {
    if (messages[index]!.role === "assistant" && ++turns === result.turns) return messages.slice(index)
  }
  return messages
}

/**
 * Where one execution of a run's body writes the run's chunks: the run's
 * delivery log, when the agent's layer has an `AI.StreamLog`. `write` has
 * the chunk stored when it completes (so that a step that ended has
 * its chunks in the log); `writeSoon` stores chunks after the chunks before
 * them, without waiting (a model turn's, a tool's progress from a callback).
 */
interface RunLog {
  readonly write: (chunk: StreamChunk) => Effect.Effect<void>
  readonly writeSoon: (chunks: ReadonlyArray<StreamChunk>) => void
  /** Completes once every chunk written so far is stored; a write that could not be stored fails it. */
  readonly flush: Effect.Effect<void>
  /** A model turn is asked again: the next write first puts back the recorded conversation, without the attempt that failed. */
  readonly retrying: Effect.Effect<void>
  /** Stores the run's failure, if it failed, and closes the log. */
  readonly end: (error: AiError | undefined) => Effect.Effect<void>
}

const noRunLog: RunLog = { write: () => Effect.void, writeSoon: () => {}, flush: Effect.void, retrying: Effect.void, end: () => Effect.void }

/**
 * How long a write to the log is tried while the store cannot answer: about
 * 30 seconds, then the run stops with a defect (a log that cannot store a
 * chunk fails closed, rather than go on unseen).
 */
const logRetry = Schedule.max([Schedule.min([Schedule.exponential("50 millis"), Schedule.spaced("2 seconds")]), Schedule.recurs(20)])

/** A log's store that cannot answer, for as long as {@link logRetry} tries again. */
const logOutage = { schedule: logRetry, while: (error: { readonly _tag: string }) => error._tag === "StreamLogError" }

const storing = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E | StreamLogError>) =>
  retryOnFailure(effect, logOutage).pipe(Effect.catchTag("StreamLogError", (error) => Effect.die(error)))

/**
 * Opens the run's log as its producer, for one execution of the run's body:
 * the first one, or one that resumes the run after a crash or an approval.
 * Each claims a new epoch, so that the execution before it (a runner that
 * died, or was only thought dead) is fenced: what it still sends is
 * refused. When the log already holds chunks, the first write is preceded
 * by a snapshot of the conversation the engine recorded (`conversation`):
 * the client replaces its transcript with it, so that the part of a turn
 * cut off by a crash disappears before that turn is sent again. A log that
 * was closed (the run ended, or was cancelled) is left as it is.
 */
const openRunLog = (runId: string, conversation: () => ReadonlyArray<ModelMessage>): Effect.Effect<RunLog> =>
  Effect.gen(function*() {
    const found = yield* Effect.serviceOption(StreamLog)
    if (Option.isNone(found)) return noRunLog
    const log = found.value
    const claimed = yield* storing(log.claim(runId)).pipe(
      Effect.map(Option.some),
      Effect.catchTag("ProducerFenced", () => Effect.succeedNone)
    )
    if (Option.isNone(claimed)) return noRunLog
    const epoch = claimed.value
    // The first producer of a log (epoch 1) finds it empty; a later one reads whether an earlier one wrote.
    let takingOver = epoch > 1 && (yield* storing(log.read(runId, 0, 1))).entries.length > 0
    let wrote = false
    let fenced = false
    // A write in the background that the store could not take: the step that made it fails with it.
    let lost: unknown = undefined
    const pending: Array<StreamChunk> = []
    const lock = Semaphore.makeUnsafe(1)
    // A background append runs with the run's services and references (its tracer, logger, SQL transformer).
    const runInBackground = Effect.runForkWith(yield* Effect.context<never>())
    // A background append that waits for the lock: it will take every chunk written until it starts.
    let drainQueued = false
    // Appends every chunk written so far, in order, in one round trip: chunks written while an append is out go in the next one.
    const drain = lock.withPermit(Effect.suspend(() => {
      drainQueued = false
      if (pending.length === 0 || fenced) return Effect.void
      const batch = pending.splice(0)
      if (takingOver) {
        takingOver = false
        batch.unshift(messagesSnapshotChunk(conversation(), `${runId}-snapshot`))
      }
      wrote = true
      return storing(log.append(runId, epoch, batch)).pipe(
        Effect.asVoid,
        Effect.catchTag("ProducerFenced", () => {
          fenced = true
          return Effect.logWarning(`Run ${runId} is written by another execution now; this one stops writing its log`)
        })
      )
    }))
    const flush = Effect.andThen(drain, Effect.suspend(() => lost === undefined ? Effect.void : Effect.die(lost)))
    return {
      write: (chunk) => Effect.suspend(() => {
        pending.push(chunk)
        return flush
      }),
      writeSoon: (chunks) => {
        pending.push(...chunks)
        if (drainQueued) return
        drainQueued = true
        runInBackground(Effect.catchCause(drain, (cause) => Effect.sync(() => lost ??= Cause.squash(cause))))
      },
      flush,
      retrying: Effect.andThen(drain, Effect.sync(() => {
        takingOver ||= wrote
      })),
      end: (error) =>
        Effect.gen(function*() {
          if (error !== undefined) pending.push(runErrorChunk(error.message, error.reason))
          yield* drain
          if (fenced) return
          yield* storing(log.close(runId, epoch)).pipe(Effect.catchTag("ProducerFenced", () => Effect.void))
        })
    }
  })

/**
 * Saves the run's thread when the run ended, if the agent's layer has an
 * `AI.ThreadStore` and the thread's active run is this one: the thread's
 * transcript with the run's log folded onto it, as the client folded it.
 * A compare-and-set on the active run, so that a second save is nothing.
 */
const saveThread = (runId: string, threadId: string): Effect.Effect<void> =>
  Effect.gen(function*() {
    const threads = yield* Effect.serviceOption(ThreadStore)
    const log = yield* Effect.serviceOption(StreamLog)
    if (Option.isNone(threads) || Option.isNone(log)) return
    const thread = yield* threads.value.load(threadId)
    if (Option.isNone(thread) || thread.value.activeRun?.runId !== runId) return
    const transcript = makeTranscript(thread.value.messages, runId)
    for (let after = 0;;) {
      const page = yield* storing(log.value.read(runId, after, 256))
      for (const entry of page.entries) transcript.add(entry.chunk)
      if (page.entries.length < 256) break
      after = page.entries.at(-1)!.seq
    }
    yield* threads.value.save(threadId, transcript.ended(), { whileRun: runId })
  }).pipe(
    // The answer is in the run's log and result; a thread that could not be saved keeps its question and active run.
    Effect.catchTag("ThreadStoreError", (error) => Effect.logWarning(`The thread of run ${runId} could not be saved: ${error.message}`))
  )
