/**
 * Server tools written as Effects.
 *
 * `serverTool` pairs a core TanStack AI tool definition with a function that
 * returns an `Effect` (or a `Stream`). The function's services stay in the
 * tool's type and become requirements of the `AI.chat` stream, where a Layer
 * supplies them. A typed failure or a defect of the Effect becomes a tool
 * error the model reads, and the run goes on.
 *
 * @since 0.1.0
 */
import type { InferSchemaType, ServerTool as CoreServerTool, ToolDefinitionInstance, ToolExecutionContext } from "@tanstack/ai"
import type { Scope } from "effect"
import { Cause, Context, Effect, Exit, FiberSet, Option, Predicate, Redacted, References, Schema, Stream, Tracer } from "effect"
import { notJson } from "./internal/json.ts"
import { RunContext } from "./RunContext.ts"
import { assertObjectRoot, isToolSchema } from "./ToolSchema.ts"

const TypeId = "~@tanstack/ai-effect/ServerTool"

/**
 * What a tool function learns about the call it serves.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCall {
  /** The model's id of this call. */
  readonly toolCallId: string
  /** The name of the tool that was called. */
  readonly toolName: string
  /**
   * Sends a progress value to the client now, as a `CUSTOM` event named
   * {@link toolProgressEvent}. A tool that returns a Stream does this for
   * every element.
   */
  readonly progress: (progress: unknown) => Effect.Effect<void>
  /** Sends a `CUSTOM` event named `name` to the client now; core adds the `toolCallId`. */
  readonly emit: (name: string, value: Record<string, unknown>) => Effect.Effect<void>
}

/**
 * The implementation of a tool: from the decoded input to an Effect of the
 * output, or to a Stream whose last element is the output.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolHandler<Input, Output, E, R, Call = ToolCall> = (
  input: Input,
  call: Call
) => Effect.Effect<Output, E, R> | Stream.Stream<Output, E, R>

/**
 * A tool whose implementation is an Effect program. `E` is the typed failure
 * of that program and `R` the services it needs; `AI.chat` adds `R` to the
 * requirements of its stream.
 *
 * @example
 * ```ts
 * import { toolDefinition } from "@tanstack/ai"
 * import * as AI from "@tanstack/ai-effect"
 * import { Effect, Schema } from "effect"
 *
 * const echo: AI.ServerTool<"echo", { text: string }, { text: string }, never, never> = AI.serverTool(
 *   toolDefinition({
 *     name: "echo",
 *     description: "Echo the text",
 *     inputSchema: AI.toolSchema(Schema.Struct({ text: Schema.String })),
 *     outputSchema: AI.toolSchema(Schema.Struct({ text: Schema.String }))
 *   }),
 *   ({ text }) => Effect.succeed({ text })
 * )
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ServerTool<
  out Name extends string,
  in out Input,
  out Output,
  out E,
  out R,
  out Definition = ServerTool.AnyDefinition<Name>
> {
  readonly [TypeId]: {
    readonly _E: (_: never) => E
    readonly _R: (_: never) => R
  }
  readonly name: Name
  /** The core tool definition (name, description, schemas, approval), with its types. */
  readonly definition: Definition
  /** Runs one call. */
  readonly handler: ToolHandler<Input, Output, E, R>
  /**
   * What the model reads when a call fails; see {@link ServerToolOptions}.
   * It only ever receives this tool's causes.
   */
  readonly toModelError: ((cause: Cause.Cause<unknown>) => string) | undefined
}

/**
 * Options of {@link serverTool}.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServerToolOptions<E> {
  /**
   * The text the model (and the client) reads when a call fails. By default
   * it is `Tag: message` for a tagged failure, or `Tag: {fields}` as JSON for
   * a tagged failure without a message (fields holding a `Redacted` value
   * are left out), and `Name: message` for an Error or a defect. Return
   * something shorter when a failure carries what the model must not read.
   */
  readonly toModelError?: ((cause: Cause.Cause<E>) => string) | undefined
}

/**
 * Helpers on the type level for {@link ServerTool}.
 *
 * @since 0.1.0
 * @category models
 */
export declare namespace ServerTool {
  /** Any server tool. */
  export type Any = ServerTool<string, any, any, any, any, any>
  /**
   * Any core tool definition of a tool named `Name`. Its `execute` takes any
   * arguments, so that a definition with typed arguments is one too.
   */
  export type AnyDefinition<Name extends string = string> =
    & Omit<ToolDefinitionInstance<any, any, Name, any, boolean, any>, "execute">
    & { readonly execute?: ((args: any, context?: any) => unknown) | undefined }
  /** The input a definition's input schema decodes to. */
  export type InputOf<Definition extends AnyDefinition> = InferSchemaType<Definition["inputSchema"]>
  /** The output a definition's output schema describes. */
  export type OutputOf<Definition extends AnyDefinition> = InferSchemaType<Definition["outputSchema"]>
  /** The services a tool (or a union of tools) needs. */
  export type Requirements<T> = T extends ServerTool<string, any, any, any, infer R, any> ? R : never
  /** The typed failures of a tool (or a union of tools). */
  export type Error<T> = T extends ServerTool<string, any, any, infer E, any, any> ? E : never
}

/**
 * The name of the `CUSTOM` event that carries progress of a tool: every
 * element of a streaming tool's Stream is sent as `{ toolName, progress }`
 * as soon as it is produced (the last is also the result), and so is every
 * value a tool passes to `call.progress`. Core adds the `toolCallId`.
 *
 * @example
 * ```ts
 * import type { StreamChunk } from "@tanstack/ai"
 * import * as AI from "@tanstack/ai-effect"
 *
 * const isProgress = (chunk: StreamChunk) => chunk.type === "CUSTOM" && chunk.name === AI.toolProgressEvent
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const toolProgressEvent = "tool-progress"

/**
 * The error a model receives when a server tool fails: the failure's tag and
 * message, for a typed failure and for a defect alike.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.ToolCallError({ toolName: "get_order", message: "OrderNotFound: {\"id\":\"B-200\"}" })
 * error.message // "OrderNotFound: {"id":"B-200"}"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolCallError extends Schema.TaggedError<ToolCallError>()("ToolCallError", {
  toolName: Schema.String,
  message: Schema.String
}) {}

/**
 * Makes a tool from a core tool definition and a function that returns an
 * Effect of the output. The function gets the decoded input. It may return a
 * Stream instead: every element is sent as a progress event
 * ({@link toolProgressEvent}) as soon as it is produced, and the last is the
 * result. A result must be JSON: without an Effect output schema, a result
 * that JSON cannot carry (a BigInt, a cycle, a Map) is a tool error.
 *
 * Throws a `ToolSchemaError` when the input schema, made with
 * `AI.toolSchema`, is not an object: providers take parameters as one.
 *
 * @example
 * ```ts
 * import { toolDefinition } from "@tanstack/ai"
 * import * as AI from "@tanstack/ai-effect"
 * import { Context, Effect, Schema } from "effect"
 *
 * class Db extends Context.Service<Db, {
 *   readonly findOrder: (id: string) => Effect.Effect<{ status: string }>
 * }>()("Db") {}
 *
 * export const getOrder = AI.serverTool(
 *   toolDefinition({
 *     name: "get_order",
 *     description: "Get the status of an order",
 *     inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
 *     outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String }))
 *   }),
 *   ({ id }) => Effect.flatMap(Effect.service(Db), (db) => db.findOrder(id))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
// The constraint's name is `any`, not `string`: a definition written inline
// would otherwise be inferred from the constraint and lose its name literal.
export const serverTool = <const Definition extends ServerTool.AnyDefinition<any>, E = never, R = never>(
  definition: Definition,
  handler: ToolHandler<ServerTool.InputOf<Definition>, ServerTool.OutputOf<Definition>, E, R>,
  options?: ServerToolOptions<E>
): ServerTool<Definition["name"], ServerTool.InputOf<Definition>, ServerTool.OutputOf<Definition>, E, R, Definition> => {
  if (isToolSchema(definition.inputSchema)) assertObjectRoot(definition.inputSchema, `The parameters of the tool ${definition.name}`)
  return {
    [TypeId]: variance,
    name: definition.name,
    definition,
    handler,
    // Only this tool's causes reach it; the field is typed loosely to keep E covariant.
    toModelError: options?.toModelError as ((cause: Cause.Cause<unknown>) => string) | undefined
  }
}

const variance = { _E: (_: never) => _, _R: (_: never) => _ }

/**
 * Whether a value is an {@link ServerTool}.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * AI.isServerTool({ name: "plain" }) // false
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const isServerTool = (u: unknown): u is ServerTool.Any => Predicate.hasProperty(u, TypeId)

/**
 * Turns the server tools of a list into the core server tools that core
 * `chat()` executes, for one run; other tools pass through unchanged. The
 * tools run with the services of this Effect, and in fibers that belong to its
 * scope: closing the scope interrupts a running tool and waits for its
 * finalizers. `AI.chat` does this for you; use it for a custom loop or a test
 * that calls core `chat()` itself.
 *
 * @example
 * ```ts
 * import { chat } from "@tanstack/ai"
 * import * as AI from "@tanstack/ai-effect"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Effect } from "effect"
 *
 * declare const tools: ReadonlyArray<AI.ServerTool<string, any, any, never, AI.EffectStore>>
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const coreTools = yield* AI.wrapToolsForRun(tools)
 *   const stream = chat({ adapter: scriptedText([{ text: "hi" }]), messages: [], tools: coreTools })
 *   return yield* Effect.promise(() => Array.fromAsync(stream))
 * })).pipe(
 *   Effect.provide(AI.EffectStore.layerMemory()),
 *   Effect.provide(AI.RunContext.layer({ runId: "run-1", threadId: "t-1", agent: "test", trigger: "test" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category run
 */
export const wrapToolsForRun = <const Tools extends ReadonlyArray<unknown>>(
  tools: Tools
): Effect.Effect<
  Array<Exclude<Tools[number], ServerTool.Any> | CoreServerTool<any, any, string, unknown, boolean, any>>,
  never,
  Scope.Scope | RunContext | ServerTool.Requirements<Tools[number]>
> => Effect.gen(() => wrapTools(tools))

/** The body of {@link wrapToolsForRun}: a generator function made once, not once per run. */
function* wrapTools<const Tools extends ReadonlyArray<unknown>>(tools: Tools) {
  type Passed = Exclude<Tools[number], ServerTool.Any>
  // A run without server tools needs no fibers of its own.
  if (!tools.some(isServerTool)) return [...tools] as Array<Passed>
  const set = yield* FiberSet.make()
  // The run's context already holds its RunContext, span and log annotations:
  // each call adds only its own span, stack frame and annotations.
  const context = yield* Effect.context<ServerTool.Requirements<Tools[number]>>()
  const runFork = Effect.runForkWith(context)
  const runFrame = Context.get(context, References.CurrentStackFrame)
  const runAnnotations = Context.get(context, References.CurrentLogAnnotations)
  const runTool: RunTool = (effect, span, annotations) => {
    // A run that already stopped starts nothing.
    if (set.state._tag === "Closed") return Promise.reject(Cause.squash(Cause.interrupt()))
    // The fork runs the fiber at once, up to its first asynchronous step, so
    // the fiber adds itself to the set as its first step: the set holds it
    // before the tool's code runs, without a turn of the event loop, and a
    // run stopped by the tool's own synchronous code still interrupts it.
    const fiber = runFork(Effect.withFiber((fiber) => {
      FiberSet.addUnsafe(set, fiber)
      // The tool's span, stack frame and log annotations in one change of the fiber's context.
      return Effect.useSpan(span.name, span.options, (current) =>
        Effect.updateContext(effect, (context: Context.Context<never>) =>
          context.pipe(
            Context.add(Tracer.ParentSpan, current),
            Context.add(References.CurrentStackFrame, { name: span.name, stack: noStack, parent: runFrame }),
            Context.add(References.CurrentLogAnnotations, { ...runAnnotations, ...annotations })
          )))
    }))
    // A tool that finished synchronously needs no observer.
    const exit = fiber.pollUnsafe()
    return exit !== undefined ? settle(exit) : new Promise((resolve, reject) => {
      fiber.addObserver((exit) => Exit.isSuccess(exit) ? resolve(exit.value) : reject(Cause.squash(exit.cause)))
    })
  }
  return tools.map((tool) => isServerTool(tool) ? toCoreTool(tool, runTool) : tool as Passed)
}

const noStack = () => undefined

const settle = <A>(exit: Exit.Exit<A, unknown>): Promise<A> =>
  Exit.isSuccess(exit) ? Promise.resolve(exit.value) : Promise.reject(Cause.squash(exit.cause))

/** Runs a tool's Effect to a Promise, in a fiber of the run, in its own span and with log annotations. */
type RunTool = <A, E>(
  effect: Effect.Effect<A, E, any>,
  span: { readonly name: string; readonly options: Tracer.SpanOptionsNoTrace },
  annotations: Record<string, unknown>
) => Promise<A>

const toCoreTool = (
  tool: ServerTool.Any,
  runTool: RunTool
): CoreServerTool<any, any, string, unknown, boolean, any> => {
  const { definition } = tool
  const outputSchema = definition.outputSchema
  const encode = isToolSchema(outputSchema) ? Schema.encodeUnknownEffect(outputSchema.codec) : checkJson
  const encodeOutput = (output: unknown) =>
    Effect.mapError(encode(output), (error) => new ToolCallError({ toolName: tool.name, message: `Invalid tool output: ${error.message}` }))
  const describe = tool.toModelError ?? describeCause
  const toModel = (cause: Cause.Cause<unknown>): Effect.Effect<never, unknown> => {
    const failed = Cause.hasInterruptsOnly(cause)
      ? Effect.failCause(cause)
      : Effect.fail(new ToolCallError({ toolName: tool.name, message: modelErrorOf(cause, describe) }))
    // A defect does not fail the stream, so it is logged here or nowhere.
    return Cause.hasDies(cause) ? Effect.andThen(Effect.logError("The tool died", cause), failed) : failed
  }
  const spanName = `AI.tool ${tool.name}`
  return {
    ...definition,
    __toolSide: "server",
    // The result is already encoded by the output schema, so core must not
    // decode it again; it keeps the JSON Schema for adapters that read it.
    outputSchema: isToolSchema(outputSchema)
      ? { "~standard": { ...outputSchema["~standard"], validate: (value: unknown) => ({ value }) } }
      : outputSchema,
    execute: (input: unknown, context?: ToolExecutionContext) => {
      const toolCallId = context?.toolCallId ?? ""
      const emit = (name: string, value: Record<string, unknown>) => Effect.sync(() => context?.emitCustomEvent(name, value))
      const call: ToolCall = {
        toolCallId,
        toolName: tool.name,
        progress: (progress) => emit(toolProgressEvent, { toolName: tool.name, progress }),
        emit
      }
      return runTool(
        Effect.catchCause(Effect.flatMap(runCall(tool, input, call), encodeOutput), toModel),
        {
          name: spanName,
          options: {
            attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool.name, "gen_ai.tool.call.id": toolCallId }
          }
        },
        { tool: tool.name, toolCallId }
      )
    }
  }
}

/** A result without an Effect output schema goes to the model as it is, so it must be JSON. */
const checkJson = (output: unknown): Effect.Effect<unknown, { readonly message: string }> => {
  const problem = notJson(output)
  return problem === undefined ? Effect.succeed(output) : Effect.fail({ message: problem })
}

const runCall = (tool: ServerTool.Any, input: unknown, call: ToolCall): Effect.Effect<unknown, unknown, unknown> =>
  Effect.suspend(() => {
    const result: ReturnType<ToolHandler<unknown, unknown, unknown, unknown>> = tool.handler(input, call)
    return Stream.isStream(result) ? lastWithProgress(result, call) : result
  })

/**
 * Runs a tool's Stream: every element is sent as progress when it is
 * produced, and the last is the result.
 *
 * @internal
 */
export const lastWithProgress = <A, E, R>(
  stream: Stream.Stream<A, E, R>,
  call: Pick<ToolCall, "progress" | "toolName">
): Effect.Effect<A, E | ToolCallError, R> =>
  Effect.flatMap(
    Stream.runFoldEffect(stream, Option.none<A>, (_, element) => Effect.as(call.progress(element), Option.some(element))),
    Option.match({
      onNone: () => Effect.fail(new ToolCallError({ toolName: call.toolName, message: "The tool's stream ended without a result" })),
      onSome: Effect.succeed
    })
  )

/** The model's text for a failed call; a `toModelError` that throws falls back to the default. */
const modelErrorOf = (cause: Cause.Cause<unknown>, describe: (cause: Cause.Cause<unknown>) => string): string => {
  const failure = cause.reasons.find(Cause.isFailReason)
  // Our own errors (an invalid output, a stream without a result) already say what the model should read.
  if (failure !== undefined && Predicate.isTagged(failure.error, "ToolCallError")) return describeCause(cause)
  try {
    return describe(cause)
  } catch {
    return describeCause(cause)
  }
}

/**
 * The text the model reads for a failed tool: `Tag: message` for a tagged
 * failure (its fields when it has no message), `Name: message` for an Error.
 */
const describeCause = (cause: Cause.Cause<unknown>): string => {
  const failure = cause.reasons.find(Cause.isFailReason)
  if (failure !== undefined) return describeError(failure.error)
  const defect = cause.reasons.find(Cause.isDieReason)
  return defect === undefined ? "The tool call was interrupted" : describeError(defect.defect)
}

const describeError = (error: unknown): string => {
  if (Predicate.isTagged(error, "ToolCallError") && Predicate.hasProperty(error, "message")) return String(error.message)
  const message = Predicate.hasProperty(error, "message") && Predicate.isString(error.message) ? error.message : ""
  if (Predicate.hasProperty(error, "_tag") && Predicate.isString(error._tag)) {
    return `${error._tag}: ${message === "" ? fieldsOf(error) : message}`
  }
  if (error instanceof Error) return `${error.name}: ${error.message}`
  return Predicate.isString(error) ? error : safeJson(error)
}

const fieldsOf = (error: object): string =>
  safeJson(Object.fromEntries(Object.entries(error).filter(([key]) => key !== "_tag" && key !== "stack")))

/** JSON without the values a `Redacted` hides: those never reach the model. */
const safeJson = (value: unknown): string => {
  try {
    // The replacer sees a value after its toJSON; the holder still has the Redacted itself.
    return JSON.stringify(value, function(this: Record<string, unknown>, key, field) {
      return Redacted.isRedacted(this[key]) ? undefined : field
    }) ?? String(value)
  } catch {
    return String(value)
  }
}
