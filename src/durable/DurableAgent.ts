/**
 * Durable agent runs on Effect's workflow engine: a run of an agent survives
 * the crash of the process that runs it.
 *
 * A run is a `Workflow` whose execution id comes from the run id. Each model
 * turn is an `Activity` whose recorded result is that turn's assistant
 * message (its text, its tool calls, its token usage); each tool call is an
 * `Activity` keyed by its tool call id whose recorded result is what the
 * model reads. The engine records every finished activity; a run resumed by
 * another process replays them from storage and goes on from the first
 * unfinished one. So a finished model turn is never requested again, and an
 * effect tool keeps its own claim and record inside its activity, so that
 * the re-run of an activity that was in flight does not apply its effect
 * twice. The turn in flight and plain tools run at least once.
 *
 * The engine is yours to choose: `WorkflowEngine.layerMemory` for tests and
 * one process, or `ClusterWorkflowEngine` on PostgreSQL
 * (`DurableEngine.layerSingleRunner`, `DurableEngine.layerSocketRunner`).
 *
 * @since 0.1.0
 */
import type { AnyTextAdapter, ModelMessage, StreamChunk } from "@tanstack/ai"
import { Context, Effect, Exit, Layer, Option, PubSub, Schema, type Scope, Stream } from "effect"
import { Activity, DurableDeferred, Workflow, type WorkflowEngine } from "effect/workflow"
import type { Agent } from "../Agent.ts"
import { AiError, failOnProviderError } from "../AiError.ts"
import { chat, type ChatRequirements, type CoreTool } from "../Chat.ts"
import {
  approvalRequestedChunk,
  assistantMessage,
  customChunk,
  declinedOutcome,
  isClientToolNotice,
  makeTurnReader,
  toolResultChunk,
  type Turn
} from "../internal/agui.ts"
import { runToolCall } from "../internal/toolCall.ts"
import { RunContext } from "../RunContext.ts"
import { type ServerTool, isServerTool, wrapToolsForRun } from "../ServerTool.ts"

/**
 * Messages as the engine stores them: core's model messages, encoded as JSON.
 */
const StoredMessages = Schema.Array(Schema.Unknown)

const TurnSchema = Schema.Struct({
  text: Schema.String,
  toolCalls: Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String, arguments: Schema.String })),
  usage: Schema.Struct({ input: Schema.Number, output: Schema.Number })
})

const ToolOutcomeSchema = Schema.Struct({ content: Schema.String, error: Schema.Boolean })

/** What a run in this process tells its streams: a chunk, or its end. */
type RunEvent =
  | { readonly _tag: "Chunk"; readonly runId: string; readonly chunk: StreamChunk }
  | { readonly _tag: "End"; readonly runId: string; readonly error: AiError | undefined }

/**
 * The chunks of the durable runs that run in this process, for
 * {@link DurableAgent.stream} to read: each model turn's chunks as they
 * arrive, each tool call's result, each approval asked for, and each run's
 * end. Every durable agent's `layer` provides it.
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
  readonly publish: (event: RunEvent) => Effect.Effect<void>
  /** The events of one run from now on, until its end. */
  readonly subscribe: (runId: string) => Effect.Effect<Stream.Stream<RunEvent>, never, Scope.Scope>
}>()("@tanstack/ai-effect/durable/RunChunks") {
  static readonly layer: Layer.Layer<RunChunks> = Layer.effect(RunChunks)(Effect.gen(function*() {
    const events = yield* PubSub.unbounded<RunEvent>()
    return RunChunks.of({
      publish: (event) => Effect.asVoid(PubSub.publish(events, event)),
      subscribe: (runId) =>
        Effect.map(PubSub.subscribe(events), (subscription) =>
          Stream.fromSubscription(subscription).pipe(
            Stream.filter((event) => event.runId === runId),
            Stream.takeUntil((event) => event._tag === "End")
          ))
    })
  }))
}

/** The approval of one tool call: `true` runs the tool, `false` declines it. */
const approvalOf = (toolCallId: string) => DurableDeferred.make(`approval-${toolCallId}`, { success: Schema.Boolean })

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
  usage: Schema.Struct({ input: Schema.Number, output: Schema.Number })
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
 * An agent whose runs are durable.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableAgent<Tools extends ReadonlyArray<unknown>> {
  readonly name: string
  /** The run's workflow, for the engine's own API (`interrupt`, `resume`). */
  readonly workflow: Workflow.Workflow<
    `AgentRun/${string}`,
    typeof Payload,
    typeof DurableRunResult,
    typeof AiError
  >
  /**
   * Registers the run's body with the engine. Provide it with the tools'
   * services (an effect tool's `EffectStore` among them) in every process
   * that may run or resume the agent's runs.
   */
  readonly layer: Layer.Layer<RunChunks, never, WorkflowEngine.WorkflowEngine | ChatRequirements<Tools>>
  /**
   * Starts a run (or joins the run of that id) and streams its chunks while
   * it runs in this process: each model turn's chunks as `AI.chat` gives
   * them, a tool's progress events live, a `TOOL_CALL_RESULT` for each tool
   * call, an `approval-requested` event for each call that waits for approval. The stream ends with the
   * run, and fails with the run's `AiError`. Turns a resumed run replays
   * from storage send nothing again.
   */
  readonly stream: (input: DurableRunInput) => Stream.Stream<StreamChunk, AiError, WorkflowEngine.WorkflowEngine | RunChunks>
  /** Starts a run, or joins the run of that id, and waits for its result. */
  readonly run: (input: DurableRunInput) => Effect.Effect<DurableRunResult, AiError, WorkflowEngine.WorkflowEngine>
  /** Starts a run, or finds the run of that id, without waiting: its execution id. */
  readonly start: (input: DurableRunInput) => Effect.Effect<string, never, WorkflowEngine.WorkflowEngine>
  /**
   * Approves (`true`) or declines (`false`) a tool call that waits for
   * approval, from any process on the same engine: the run goes on, and an
   * approved tool runs once.
   */
  readonly approve: (runId: string, toolCallId: string, approved: boolean) => Effect.Effect<void, never, WorkflowEngine.WorkflowEngine>
  /** The result of a run, once it finished; from any process on the same engine. */
  readonly poll: (runId: string) => Effect.Effect<
    Option.Option<Exit.Exit<DurableRunResult, AiError>>,
    never,
    WorkflowEngine.WorkflowEngine
  >
}

const Payload = Schema.Struct({
  runId: Schema.String,
  threadId: Schema.String,
  trigger: Schema.String,
  messages: StoredMessages
})

/**
 * Makes an agent's runs durable.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { DurableAgent } from "@tanstack/ai-effect/durable"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Effect, Layer } from "effect"
 * import { WorkflowEngine } from "effect/workflow"
 *
 * const greeter = DurableAgent.make(AI.defineAgent({
 *   name: "greeter",
 *   adapter: scriptedText([{ text: "Hello!" }]),
 *   instructions: "Greet the user.",
 *   tools: []
 * }))
 *
 * const result = greeter.run({ runId: "run-1", messages: [{ role: "user", content: "Hi" }] }).pipe(
 *   Effect.provide(greeter.layer.pipe(Layer.provideMerge(WorkflowEngine.layerMemory)))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <TAdapter extends AnyTextAdapter, const Tools extends ReadonlyArray<CoreTool<TAdapter> | ServerTool.Any>>(
  agent: Agent<TAdapter, Tools>
): DurableAgent<Tools> => {
  const workflow = Workflow.make(`AgentRun/${agent.name}`, {
    payload: Payload,
    idempotencyKey: ({ runId }) => runId,
    success: DurableRunResult,
    error: AiError
  })

  const body = Effect.fnUntraced(function*(payload: typeof Payload.Type) {
    const chunks = yield* RunChunks
    const publish = (chunk: StreamChunk) => chunks.publish({ _tag: "Chunk", runId: payload.runId, chunk })
    const run = RunContext.of({ runId: payload.runId, threadId: payload.threadId, agent: agent.name, trigger: payload.trigger })
    const tools = typeof agent.tools === "function" ? agent.tools({ run }) : agent.tools
    // The model is told about every tool but runs none: each call is an activity of its own.
    const declared = tools.map((tool): CoreTool => isServerTool(tool) ? tool.definition : { ...tool, execute: undefined })
    const needsApproval = new Set(declared.flatMap((tool) => "needsApproval" in tool && tool.needsApproval === true ? [tool.name] : []))
    // Core's model messages, as the engine stored them.
    const messages = [...payload.messages] as Array<ModelMessage>
    const usage = { input: 0, output: 0 }
    for (let index = 0;; index++) {
      const turn: Turn = yield* Activity.make({
        name: `turn-${index}`,
        success: TurnSchema,
        error: AiError,
        // The conversation so far, as this turn sends it (later turns push onto `messages`).
        execute: modelTurn(agent, declared, [...messages], run, publish)
      })
      usage.input += turn.usage.input
      usage.output += turn.usage.output
      messages.push(assistantMessage(turn))
      if (turn.toolCalls.length === 0) {
        return new DurableRunResult({ messages, text: turn.text, turns: index + 1, usage })
      }
      for (const call of turn.toolCalls) {
        // Only what runs is published: a resumed run replays its activities silently.
        const asks = needsApproval.has(call.name)
        if (asks) {
          yield* Activity.make({ name: `ask-${call.id}`, execute: publish(approvalRequestedChunk(call)) })
        }
        // The run suspends here until `approve` answers, in this process or another.
        const approved = asks ? yield* DurableDeferred.await(approvalOf(call.id)) : true
        const outcome = yield* Activity.make({
          name: `tool-${call.id}`,
          success: ToolOutcomeSchema,
          execute: Effect.scoped(Effect.gen(function*() {
            if (!approved) return declinedOutcome
            const runnable = yield* wrapToolsForRun(tools)
            const tool = runnable.find((tool) => tool.name === call.name)
            // A tool's progress goes out live, as core sends it: a CUSTOM chunk with the call's id.
            const progress = (name: string, value: Record<string, unknown>) =>
              Effect.runSync(publish(customChunk(name, { ...value, toolCallId: call.id })))
            return yield* Effect.promise(() => runToolCall(tool, call, progress))
          })).pipe(
            Effect.tap((outcome) => publish(toolResultChunk(call, outcome))),
            Effect.provideService(RunContext, run)
          )
        })
        messages.push({ role: "tool", toolCallId: call.id, content: outcome.content })
      }
    }
  }, (effect, payload) =>
    // A run that suspends (for an approval) is interrupted, and has not ended.
    Effect.onExit(effect, (exit) =>
      Exit.hasInterrupts(exit) ? Effect.void : Effect.flatMap(RunChunks, (chunks) =>
        chunks.publish({
          _tag: "End",
          runId: payload.runId,
          error: Exit.isFailure(exit) ? Option.getOrUndefined(Exit.findErrorOption(exit)) : undefined
        }))))

  const payloadOf = (input: DurableRunInput) => ({
    runId: input.runId,
    threadId: input.threadId ?? input.runId,
    trigger: input.trigger ?? "durable",
    messages: input.messages
  })

  // The execution id depends on the run id alone (the idempotency key).
  const executionIdOf = (runId: string) => workflow.executionId(payloadOf({ runId, messages: [] }))

  return {
    name: agent.name,
    workflow,
    layer: workflow.toLayer(body).pipe(Layer.provideMerge(RunChunks.layer)),
    stream: (input) =>
      Stream.unwrap(Effect.gen(function*() {
        const chunks = yield* RunChunks
        // Subscribed before the run starts, so that no chunk goes out unseen.
        const events = yield* chunks.subscribe(input.runId)
        yield* workflow.execute(payloadOf(input), { discard: true })
        return events.pipe(
          Stream.mapEffect((event) =>
            event._tag === "Chunk" ? Effect.succeed([event.chunk]) : event.error === undefined ? Effect.succeed([]) : Effect.fail(event.error)
          ),
          Stream.flattenIterable
        )
      })),
    run: (input) => workflow.execute(payloadOf(input)),
    start: (input) => workflow.execute(payloadOf(input), { discard: true }),
    approve: (runId, toolCallId, approved) =>
      Effect.flatMap(executionIdOf(runId), (executionId) => {
        const approval = approvalOf(toolCallId)
        return DurableDeferred.succeed(approval, {
          token: DurableDeferred.tokenFromExecutionId(approval, { workflow, executionId }),
          value: approved
        })
      }),
    poll: (runId) =>
      Effect.flatMap(executionIdOf(runId), (id) => workflow.poll(id)).pipe(
        Effect.map(Option.flatMap((result) => result._tag === "Complete" ? Option.some(result.exit) : Option.none()))
      )
  }
}

/** One model turn: the agent's model asked once, with the conversation so far. */
const modelTurn = (
  agent: Agent<AnyTextAdapter, ReadonlyArray<unknown>>,
  tools: ReadonlyArray<CoreTool>,
  messages: ReadonlyArray<ModelMessage>,
  run: RunContext["Service"],
  publish: (chunk: StreamChunk) => Effect.Effect<void>
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
      Stream.runForEach((chunk) => {
        reader.add(chunk)
        // The tools are declared without `execute`, so core hands their calls to the client: not here.
        return isClientToolNotice(chunk) ? Effect.void : publish(chunk)
      }),
      Effect.catchTag("ChatError", (error) => Effect.fail(new AiError({ activity: "chat", reason: "provider", message: error.message, cause: error }))),
      Effect.map(() => reader.turn())
    )
  })
