/**
 * One tool call run the way core's agent loop (`@tanstack/ai` 0.58) runs a
 * server tool: what a durable run records for each call.
 */
import { isStandardSchema, parseWithStandardSchema, type Tool } from "@tanstack/ai"
import { failedOutcome as failed, parsedIfJson, type ToolOutcome, type TurnToolCall } from "./agui.ts"

const messageOf = (error: unknown): string => error instanceof Error ? error.message : "Unknown error"

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
