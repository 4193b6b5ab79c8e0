/**
 * Core's wire format, in one place: the AG-UI chunks and model messages of
 * `@tanstack/ai` 0.58 as this package reads and writes them. A bump of
 * `@tanstack/ai` checks this module against core's `stream-to-response.ts`,
 * `activities/chat` (its agent loop) and `types.ts`; the byte-for-byte
 * tests (ServerSentEvents, DurableAgent) hold the two together.
 *
 * - writing: a chunk as a server-sent event, core's `RUN_ERROR` event, the
 *   `TOOL_CALL_RESULT` and `CUSTOM` chunks of core's agent loop;
 * - reading: a model turn (text, tool calls, usage), the token usage of
 *   `RUN_FINISHED`, the error of `RUN_ERROR`, and the chunks that are the
 *   client's part of a run.
 */
import { type ModelMessage, modelMessagesToUIMessages, normalizeStreamChunk, type StreamChunk, uiMessagesToWire } from "@tanstack/ai"
import { Predicate } from "effect"

// ---------------------------------------------------------------------------
// Server-sent events
// ---------------------------------------------------------------------------

/**
 * One chunk as a server-sent event, `data: <json>\n\n`: the chunk normalized
 * by core (spec keys only, TanStack extras under `metadata.tanstack`, token
 * usage in the spec's shape), without the durability batch hint. Core's own
 * encoder is not exported; this one is built on the normalizer it uses.
 */
export const serverSentEvent = (chunk: StreamChunk): string => `data: ${JSON.stringify(wireChunk(chunk))}\n\n`

const wireChunk = (chunk: StreamChunk): StreamChunk => withoutBatchHint(normalizeStreamChunk(chunk)[0] ?? chunk)

/**
 * Core marks high-volume custom events for its durability log; the hint
 * never goes out. Core deletes it in place; this copies, keeping the order
 * of the keys that remain, so that the JSON is the same.
 */
const withoutBatchHint = (chunk: StreamChunk): StreamChunk => {
  const metadata: unknown = chunk.metadata
  if (!isRecord(metadata) || !isRecord(metadata.tanstack) || metadata.tanstack.batch !== true) return chunk
  const tanstack = without(metadata.tanstack, "batch")
  const kept = Object.keys(tanstack).length === 0 ? without(metadata, "tanstack") : { ...metadata, tanstack }
  // The chunk less an optional key is still a chunk of its type.
  return (Object.keys(kept).length === 0 ? without(chunk, "metadata") : { ...chunk, metadata: kept }) as StreamChunk
}

const without = <A extends object>(record: A, key: string): Partial<A> => {
  const { [key]: _dropped, ...rest } = record as Record<string, unknown>
  return rest as Partial<A>
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The `RUN_ERROR` event core writes when the stream it encodes fails: the
 * error's message and its code (or HTTP status), as core's run-error
 * payload reads them.
 */
export const runErrorEvent = (error: unknown): string => {
  const code = errorCode(error)
  return serverSentEvent({
    type: "RUN_ERROR",
    timestamp: Date.now(),
    message: errorMessage(error),
    ...(code === undefined ? {} : { code })
  } as StreamChunk)
}

const abortErrorNames = new Set(["AbortError", "APIUserAbortError", "RequestAbortedError"])

const fallbackMessage = "Unknown error occurred"

const errorMessage = (error: unknown): string => {
  if (isAbort(error)) return "Request aborted"
  if (typeof error === "string") return error.length > 0 ? error : fallbackMessage
  if (typeof error !== "object" || error === null) return fallbackMessage
  const message = (error as { readonly message?: unknown }).message
  return typeof message === "string" && message.length > 0 ? message : fallbackMessage
}

const errorCode = (error: unknown): string | undefined => {
  if (isAbort(error)) return "aborted"
  if (typeof error !== "object" || error === null) return undefined
  const { code, status } = error as { readonly code?: unknown; readonly status?: unknown }
  if (typeof code === "string") return code
  if (typeof code === "number" && Number.isFinite(code)) return String(code)
  return typeof status === "number" && Number.isFinite(status) ? String(status) : undefined
}

const isAbort = (error: unknown): boolean =>
  typeof error === "object" && error !== null && abortErrorNames.has((error as { readonly name?: unknown }).name as string)

// ---------------------------------------------------------------------------
// Reading chunks
// ---------------------------------------------------------------------------

/** Token counts, summed over the turns of a run. */
export interface Usage {
  input: number
  output: number
}

/** Adds the usage a `RUN_FINISHED` chunk reports (core's form, or AG-UI's list) to `total`. */
export const addUsage = (total: Usage, chunk: StreamChunk): void => {
  if (chunk.type === "RUN_FINISHED") addReportedUsage(total, chunk.usage)
}

/** Adds usage as an adapter reports it: one object, or AG-UI's list of them. */
export const addReportedUsage = (total: Usage, reported: unknown): void => {
  for (const usage of Array.isArray(reported) ? reported : [reported]) {
    if (!Predicate.isObject(usage)) continue
    total.input += numberAt(usage, "promptTokens") + numberAt(usage, "inputTokens")
    total.output += numberAt(usage, "completionTokens") + numberAt(usage, "outputTokens")
  }
}

const numberAt = (usage: object, key: string): number =>
  Predicate.hasProperty(usage, key) && Predicate.isNumber(usage[key]) ? usage[key] : 0

/** The error a `RUN_ERROR` chunk reports (AG-UI's fields, or core's `error` object), or undefined for other chunks. */
export const runErrorOf = (chunk: StreamChunk): { readonly message: string; readonly code: unknown } | undefined =>
  chunk.type === "RUN_ERROR"
    ? { message: chunk.message ?? chunk.error?.message ?? "The run failed", code: chunk.code ?? chunk.error?.code }
    : undefined

/**
 * What core sends when the model calls a tool it does not run itself: the
 * client's part of the run (a snapshot, the input of a client tool, a
 * request for approval).
 */
export const isClientToolNotice = (chunk: StreamChunk): boolean =>
  chunk.type === "MESSAGES_SNAPSHOT" ||
  (chunk.type === "CUSTOM" && (chunk.name === "tool-input-available" || chunk.name === "approval-requested"))

/**
 * A turn's `RUN_FINISHED` as a run that executes its tools itself ends it:
 * core's interrupt outcome keeps the approvals it asks of the client, and
 * loses the client-tool executions core adds when it hands the turn's tool
 * calls to the client (which would show the client a tool of its own to
 * run). Other chunks are returned as they are.
 */
export const withoutClientToolInterrupts = (chunk: StreamChunk): StreamChunk => {
  if (chunk.type !== "RUN_FINISHED" || chunk.outcome?.type !== "interrupt") return chunk
  const { outcome, ...finished } = chunk
  const approvals = outcome.interrupts.filter((interrupt) => interrupt.metadata?.["kind"] === "approval")
  return approvals.length === 0 ? finished : { ...finished, outcome: { ...outcome, interrupts: approvals } }
}

/** A tool call the model made in a turn, with its arguments' raw text. */
export interface TurnToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** What a model turn answered. */
export interface Turn {
  readonly text: string
  readonly toolCalls: ReadonlyArray<TurnToolCall>
  readonly usage: Usage
}

/** Reads a turn from the chunks core streams for it. */
export const makeTurnReader = () => {
  let text = ""
  const calls = new Map<string, { name: string; arguments: string }>()
  const usage: Usage = { input: 0, output: 0 }
  return {
    add: (chunk: StreamChunk): void => {
      switch (chunk.type) {
        case "TEXT_MESSAGE_CONTENT":
          text += chunk.delta
          break
        case "TOOL_CALL_START":
          calls.set(chunk.toolCallId, { name: chunk.toolCallName, arguments: "" })
          break
        case "TOOL_CALL_ARGS": {
          const call = calls.get(chunk.toolCallId)
          if (call !== undefined) call.arguments += chunk.delta
          break
        }
        default:
          addUsage(usage, chunk)
      }
    },
    turn: (): Turn => ({
      text,
      toolCalls: Array.from(calls, ([id, call]) => ({ id, name: call.name, arguments: call.arguments })),
      usage: { ...usage }
    })
  }
}

// ---------------------------------------------------------------------------
// Writing messages and chunks as core's agent loop does
// ---------------------------------------------------------------------------

/** The assistant message of a turn, as core writes it into the conversation. */
export const assistantMessage = (turn: Turn): ModelMessage => ({
  role: "assistant",
  content: turn.text === "" ? null : turn.text,
  ...(turn.toolCalls.length === 0 ? {} : {
    toolCalls: turn.toolCalls.map((call) => ({
      id: call.id,
      type: "function" as const,
      function: { name: call.name, arguments: call.arguments }
    }))
  })
})

/** A tool call's result as the model reads it, and whether it is an error. */
export interface ToolOutcome {
  readonly content: string
  readonly error: boolean
}

/** A failed call's result, `{"error": message}`, as core writes it. */
export const failedOutcome = (message: string): ToolOutcome => ({ content: JSON.stringify({ error: message }), error: true })

/** Core's result of a call the user declined. */
export const declinedOutcome: ToolOutcome = failedOutcome("User declined tool execution")

/** A string that holds JSON is that JSON, as core reads a tool's string result and a call's arguments. */
export const parsedIfJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** The chunk that tells the client a tool call's result, as core's agent loop sends it. */
export const toolResultChunk = (call: TurnToolCall, outcome: ToolOutcome): StreamChunk =>
  // Core's chunk type, written as core's agent loop writes it.
  ({
    type: "TOOL_CALL_RESULT",
    toolCallId: call.id,
    messageId: `result-${call.id}`,
    role: "tool",
    content: outcome.content,
    timestamp: Date.now(),
    ...(outcome.error ? { metadata: { tanstack: { state: "output-error" } } } : {})
  }) as StreamChunk

/** A CUSTOM chunk, as core writes the events of its agent loop. */
export const customChunk = (name: string, value: Record<string, unknown>): StreamChunk =>
  // Core's chunk type, written as core writes it.
  ({ type: "CUSTOM", name, value, timestamp: Date.now() }) as StreamChunk

/** Core's `RUN_ERROR` chunk, written as core's `runErrorChunk` writes it (AG-UI's fields and core's `error` object). */
export const runErrorChunk = (message: string, code: string): StreamChunk =>
  // Core's chunk type, written as core writes it.
  ({ type: "RUN_ERROR", timestamp: Date.now(), message, code, error: { message, code } }) as StreamChunk

/**
 * A `MESSAGES_SNAPSHOT` of a conversation, as core's agent loop builds one
 * from its model messages: the client's `StreamProcessor` replaces its
 * transcript with it, dropping whatever partial turn it showed.
 */
export const messagesSnapshotChunk = (messages: ReadonlyArray<ModelMessage>, idPrefix: string): StreamChunk =>
  // Core's chunk type, written as core writes it.
  ({
    type: "MESSAGES_SNAPSHOT",
    timestamp: Date.now(),
    messages: uiMessagesToWire(modelMessagesToUIMessages(messages.map((message, index) => ({ ...message, id: `${idPrefix}_${index}` }))), {
      includeSnapshotStructuredOutput: true
    })
  }) as StreamChunk

/** The chunk that asks the client to approve a tool call (core's `approval-requested`). */
export const approvalRequestedChunk = (call: TurnToolCall): StreamChunk =>
  customChunk("approval-requested", {
    toolCallId: call.id,
    toolName: call.name,
    input: parsedIfJson(call.arguments),
    approval: { id: `approval_${call.id}`, needsApproval: true }
  })

/**
 * The chunks of a finished run, re-derived from the messages it produced:
 * for each model turn `RUN_STARTED`, its text, its tool calls and
 * `RUN_FINISHED`, then a `TOOL_CALL_RESULT` for each tool message. For a
 * client that asks for a run after it ended; what the live run sent besides
 * (progress, deltas one by one) is not kept.
 */
export const replayedChunks = (
  run: { readonly runId: string; readonly threadId: string },
  produced: ReadonlyArray<ModelMessage>
): Array<StreamChunk> => {
  const chunks: Array<StreamChunk> = []
  const timestamp = Date.now()
  // Core's chunk types, written as core writes them.
  const push = (chunk: Record<string, unknown>) => chunks.push({ timestamp, ...chunk } as StreamChunk)
  produced.forEach((message, index) => {
    if (message.role === "tool") {
      push({
        type: "TOOL_CALL_RESULT",
        toolCallId: message.toolCallId,
        messageId: `result-${message.toolCallId}`,
        role: "tool",
        content: typeof message.content === "string" ? message.content : JSON.stringify(message.content)
      })
      return
    }
    if (message.role !== "assistant") return
    const messageId = `${run.runId}-replay-${index}`
    push({ type: "RUN_STARTED", runId: run.runId, threadId: run.threadId })
    if (typeof message.content === "string" && message.content !== "") {
      push({ type: "TEXT_MESSAGE_START", messageId, role: "assistant" })
      push({ type: "TEXT_MESSAGE_CONTENT", messageId, delta: message.content })
      push({ type: "TEXT_MESSAGE_END", messageId })
    }
    for (const call of message.toolCalls ?? []) {
      push({ type: "TOOL_CALL_START", toolCallId: call.id, toolCallName: call.function.name, toolName: call.function.name, parentMessageId: messageId })
      push({ type: "TOOL_CALL_ARGS", toolCallId: call.id, delta: call.function.arguments })
      push({ type: "TOOL_CALL_END", toolCallId: call.id })
    }
    push({
      type: "RUN_FINISHED",
      runId: run.runId,
      threadId: run.threadId,
      finishReason: (message.toolCalls ?? []).length > 0 ? "tool_calls" : "stop"
    })
  })
  return chunks
}
