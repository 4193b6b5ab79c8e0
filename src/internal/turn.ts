/**
 * One model turn read from core's chunks, and one tool call run the way core
 * runs a server tool: what a durable run records for each.
 */
import {
  isStandardSchema,
  type ModelMessage,
  parseWithStandardSchema,
  type StreamChunk,
  type Tool
} from "@tanstack/ai"
import { addUsage, type Usage } from "./telemetry.ts"

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

const messageOf = (error: unknown): string => error instanceof Error ? error.message : "Unknown error"

const failed = (message: string): ToolOutcome => ({ content: JSON.stringify({ error: message }), error: true })

/** A string result that holds JSON is that JSON; core reads it so too. */
const parsedIfJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * Runs one tool call as core's agent loop runs a server tool: the arguments
 * parsed (an empty or non-object value read as `{}`) and validated by the
 * input schema, the result validated by the output schema, every failure a
 * `{ "error": message }` result with core's messages.
 */
export const runToolCall = async (
  tool: Tool | undefined,
  call: TurnToolCall,
  emitCustomEvent: (name: string, value: Record<string, unknown>) => void
): Promise<ToolOutcome> => {
  if (tool?.execute === undefined) return failed(`Tool ${call.name} has no execute() implementation`)
  const text = call.arguments.trim() || "{}"
  let input: unknown
  try {
    const parsed: unknown = JSON.parse(text)
    input = parsed !== null && typeof parsed === "object" ? parsed : {}
  } catch {
    return failed(`Failed to parse tool arguments as JSON: ${text}`)
  }
  if (tool.inputSchema !== undefined && isStandardSchema(tool.inputSchema)) {
    try {
      input = parseWithStandardSchema(tool.inputSchema, input)
    } catch (error) {
      return failed(`Input validation failed for tool ${tool.name}: ${messageOf(error)}`)
    }
  }
  try {
    let result: unknown = await tool.execute(input, { toolCallId: call.id, emitCustomEvent })
    if (tool.outputSchema !== undefined && isStandardSchema(tool.outputSchema)) {
      result = parseWithStandardSchema(tool.outputSchema, result)
    }
    return { content: JSON.stringify(typeof result === "string" ? parsedIfJson(result) : result ?? null), error: false }
  } catch (error) {
    return failed(messageOf(error))
  }
}
