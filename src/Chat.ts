/**
 * TanStack AI chat as an Effect `Stream`.
 *
 * `chat` takes the options of core `chat()` and returns a
 * `Stream<StreamChunk, ChatError, R>`, where `R` is the union of the services
 * its server tools need. The tools run in fibers that belong to the stream:
 * when the stream stops (the consumer returns the iterator, `Stream.take`
 * ends it, or its fiber is interrupted) the model request is aborted and the
 * running tool fiber is interrupted, and its finalizers have run before the
 * stream's finalization completes.
 *
 * A run is traced: `AI.chat` runs in the span `AI.chat` (`AI.agent <name>`
 * for an agent's run) with the OpenTelemetry GenAI attributes (operation,
 * model, provider, conversation id, agent, and the token usage the adapter
 * reports), and every server tool call runs in a child span `AI.tool <name>`.
 *
 * @since 0.1.0
 */
import { chat as coreChat } from "@tanstack/ai"
import type { AnyTextAdapter, StreamChunk } from "@tanstack/ai"
import type { TextActivityOptions } from "@tanstack/ai/adapters"
import { Effect, Schema, Stream, Tracer } from "effect"
import { scopedAbortController } from "./internal/abort.ts"
import { guardArguments } from "./internal/arguments.ts"
import { fromAsyncIterableBatched } from "./internal/batched.ts"
import { makeRun } from "./internal/run.ts"
import { unwrapScoped } from "./internal/scoped.ts"
import { addReportedUsage, type Usage } from "./internal/agui.ts"
import { usageAttributes } from "./internal/telemetry.ts"
import { RunContext } from "./RunContext.ts"
import { type ServerTool, wrapToolsForRun } from "./ServerTool.ts"

/**
 * A tool that core `chat()` accepts: a core server tool, a client tool or a
 * bare definition.
 *
 * @since 0.1.0
 * @category models
 */
export type CoreTool<TAdapter extends AnyTextAdapter = AnyTextAdapter> = NonNullable<
  TextActivityOptions<TAdapter, undefined, true>["tools"]
>[number]

/**
 * A message core `chat()` accepts: a model message or a UI message.
 *
 * @since 0.1.0
 * @category models
 */
export type ChatMessage<TAdapter extends AnyTextAdapter = AnyTextAdapter> = NonNullable<
  TextActivityOptions<TAdapter, undefined, true>["messages"]
>[number]

/**
 * The options of {@link chat}: those of core `chat()` for a streaming run,
 * with `tools` that may also hold server tools, and `messages` that may be a
 * readonly array (the run only reads them). The stream owns the abort
 * controller, so there is none to pass.
 *
 * @since 0.1.0
 * @category models
 */
export type ChatOptions<TAdapter extends AnyTextAdapter, Tools extends ReadonlyArray<unknown>> =
  & Omit<TextActivityOptions<TAdapter, undefined, true>, "tools" | "stream" | "outputSchema" | "abortController" | "messages">
  & {
    readonly messages?: ReadonlyArray<ChatMessage<TAdapter>>
    readonly tools?: Tools
    /** The agent's name, provided to tools through `RunContext`. */
    readonly agent?: string | undefined
    /** What started this run, provided to tools through `RunContext`. */
    readonly trigger?: string | undefined
  }

/**
 * The services a chat stream needs for its tools: those of every server tool,
 * less the `RunContext` that the stream provides itself.
 *
 * @since 0.1.0
 * @category models
 */
export type ChatRequirements<Tools extends ReadonlyArray<unknown>> = Exclude<
  ServerTool.Requirements<Tools[number]>,
  RunContext
>

/**
 * Core `chat()` failed outside the model's stream: it rejected its options
 * (for example two tools with one name) or its iterator threw. Provider
 * errors do not end up here; they arrive as `RUN_ERROR` chunks.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Effect, Stream } from "effect"
 *
 * declare const stream: Stream.Stream<unknown, AI.ChatError>
 * const safe = stream.pipe(Stream.catchTag("ChatError", (error) => Stream.make({ failed: error.message })))
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ChatError extends Schema.TaggedError<ChatError>()("ChatError", {
  cause: Schema.Defect()
}) {
  override get message(): string {
    return this.cause instanceof Error ? this.cause.message : String(this.cause)
  }
}

/**
 * Runs a TanStack AI chat as an Effect Stream of AG-UI chunks.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Effect, Stream } from "effect"
 *
 * const program = AI.chat({
 *   adapter: scriptedText([{ text: "Hello!" }]),
 *   messages: [{ role: "user", content: "Hi" }]
 * }).pipe(
 *   Stream.filter((chunk) => chunk.type === "TEXT_MESSAGE_CONTENT"),
 *   Stream.runCollect
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const chat = <
  TAdapter extends AnyTextAdapter,
  const Tools extends ReadonlyArray<CoreTool<TAdapter> | ServerTool.Any> = []
>(
  options: ChatOptions<TAdapter, Tools>
): Stream.Stream<StreamChunk, ChatError, ChatRequirements<Tools>> => unwrapScoped(Effect.gen(() => startRun(options)))

/**
 * The run behind {@link chat}'s stream: a generator function made once, since
 * Node pays about 2 µs to make one per run.
 */
function* startRun<
  TAdapter extends AnyTextAdapter,
  const Tools extends ReadonlyArray<CoreTool<TAdapter> | ServerTool.Any>
>(options: ChatOptions<TAdapter, Tools>) {
  const isAgent = options.agent !== undefined
  const run = yield* makeRun(options)
  // The run's span lives as long as the stream; tool spans are its
  // children, since the tool fibers start with it as their parent.
  const span = yield* Effect.makeSpanScoped(isAgent ? `AI.agent ${options.agent}` : "AI.chat", {
    attributes: {
      "gen_ai.operation.name": isAgent ? "invoke_agent" : "chat",
      "gen_ai.request.model": options.adapter.model,
      "gen_ai.provider.name": options.adapter.name,
      "gen_ai.conversation.id": run.threadId,
      "gen_ai.agent.name": run.agent,
      "ai.run.id": run.runId,
      "ai.run.trigger": run.trigger
    }
  })
  const { agent: _agent, trigger: _trigger, tools, ...coreOptions } = options
  // Acquired before the controller, so released after it: the model
  // request is aborted first, then the tool fibers are interrupted and
  // awaited.
  const coreTools = yield* wrapToolsForRun(tools ?? []).pipe(
    Effect.provideService(RunContext, run),
    Effect.provideService(Tracer.ParentSpan, span)
  )
  // The run's token usage, summed over its model turns, on the run's span;
  // the argument guard hands over each turn's RUN_FINISHED as the model
  // streams it.
  const usage: Usage = { input: 0, output: 0 }
  const countUsage = (runFinished: { readonly usage?: unknown }) => {
    addReportedUsage(usage, runFinished.usage)
    for (const [key, value] of Object.entries(usageAttributes(usage))) span.attribute(key, value)
  }
  // Aborted when the stream stops before core's stream ended.
  let ended = false
  const abortController = yield* scopedAbortController(() => ended)
  const iterable = yield* Effect.try({
    try: () =>
      coreChat({
        ...coreOptions,
        // A copy: core's option is a mutable array, and the caller's may be readonly.
        ...(coreOptions.messages === undefined ? {} : { messages: [...coreOptions.messages] }),
        adapter: guardArguments(coreOptions.adapter, countUsage),
        runId: run.runId,
        threadId: run.threadId,
        abortController,
        stream: true,
        tools: coreTools
        // Core's option type is generic over inferred tool tuples; this call
        // forwards the caller's already checked options.
      } as unknown as Parameters<typeof coreChat>[0]) as AsyncIterable<StreamChunk>,
    catch: (cause) => new ChatError({ cause })
  })
  return fromAsyncIterableBatched(iterable, (cause) => new ChatError({ cause }), () => {
    ended = true
  })
}

/**
 * What `chatParamsFromRequest` (core's reader of an AG-UI request body)
 * returns: the fields a chat run needs from the request.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChatRequestParams {
  readonly messages: NonNullable<ChatOptions<AnyTextAdapter, []>["messages"]>
  readonly threadId: string
  readonly runId: string
  readonly parentRunId?: string | undefined
  readonly state?: unknown
  readonly resume?: ChatOptions<AnyTextAdapter, []>["resume"]
}

/**
 * The options of a chat run taken from a request: its messages, ids, state,
 * and the `resume` and `parentRunId` that carry a client's answers to an
 * interrupt (a tool approval). Spread it into {@link chat}, so that nothing a
 * resumed run needs is dropped.
 *
 * @example
 * ```ts
 * import { chatParamsFromRequest, toServerSentEventsResponse } from "@tanstack/ai"
 * import * as AI from "@tanstack/ai-effect"
 * import { openaiText } from "@tanstack/ai-openai"
 * import { Stream } from "effect"
 *
 * export async function POST(request: Request) {
 *   const params = await chatParamsFromRequest(request)
 *   const stream = AI.chat({ adapter: openaiText("gpt-5.2"), ...AI.fromChatParams(params), tools: [] })
 *   return toServerSentEventsResponse(Stream.toAsyncIterable(stream))
 * }
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromChatParams = (params: ChatRequestParams): ChatRequestParams => ({
  messages: params.messages,
  threadId: params.threadId,
  runId: params.runId,
  ...(params.parentRunId === undefined ? {} : { parentRunId: params.parentRunId }),
  ...(params.state === undefined ? {} : { state: params.state }),
  ...(params.resume === undefined ? {} : { resume: params.resume })
})
