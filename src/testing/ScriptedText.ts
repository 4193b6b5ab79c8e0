/**
 * A text adapter that plays a script instead of calling a model.
 *
 * Each call of the adapter (one model turn) plays the next turn of the
 * script: text deltas, then tool calls. A turn with tool calls finishes with
 * `finishReason: "tool_calls"`, so core runs the tools and calls the adapter
 * again. The adapter records the messages and tools it received each turn,
 * which is what a test asserts the model saw.
 *
 * @since 0.1.0
 */
import type { ModelMessage, StreamChunk, TextOptions } from "@tanstack/ai"
import { BaseTextAdapter } from "@tanstack/ai/adapters"
import { argumentsText, textDeltas } from "./internal.ts"
import type { StructuredOutputOptions, StructuredOutputResult } from "@tanstack/ai/adapters"

/**
 * A tool call the scripted model makes.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedToolCall {
  readonly name: string
  /** The arguments as the model would send them (encoded to JSON). */
  readonly args?: unknown
  /**
   * The arguments' text exactly as the model sends it, in place of `args`:
   * invalid JSON, or JSON nested deeper than anything `args` could hold.
   */
  readonly rawArgs?: string
  /** Defaults to `call_<turn>_<index>`. */
  readonly id?: string
}

/**
 * What the model answers in one turn: text (one string or its deltas), then
 * tool calls. The fake OpenAI server plays the same replies.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedReply {
  readonly text?: string | ReadonlyArray<string>
  readonly toolCalls?: ReadonlyArray<ScriptedToolCall>
}

/**
 * One model turn of the script. A function receives the messages of the
 * turn, so a reply can depend on a tool result.
 *
 * @since 0.1.0
 * @category models
 */
export type ScriptedTurn = ScriptedReply | ((messages: ReadonlyArray<ModelMessage>) => ScriptedReply)

/**
 * What the adapter received in one turn.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedTurn {
  readonly messages: ReadonlyArray<ModelMessage>
  readonly systemPrompts: ReadonlyArray<string>
  readonly toolNames: ReadonlyArray<string>
  readonly runId: string | undefined
  readonly threadId: string | undefined
}

/**
 * The scripted adapter: a core text adapter with the turns it received.
 *
 * @example
 * ```ts
 * import { ScriptedTextAdapter } from "@tanstack/ai-effect/testing"
 *
 * const adapter = new ScriptedTextAdapter([{ text: "Hi!" }])
 * adapter.turns // filled in as core calls the adapter, one entry a turn
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class ScriptedTextAdapter extends BaseTextAdapter<"scripted", Record<string, never>, readonly ["text"], any> {
  readonly name = "scripted"
  /** The turns played so far, in order. */
  readonly turns: Array<RecordedTurn> = []
  readonly #script: ReadonlyArray<ScriptedTurn>

  constructor(script: ReadonlyArray<ScriptedTurn>) {
    super({}, "scripted")
    this.#script = script
  }

  async *chatStream(options: TextOptions<Record<string, never>>): AsyncIterable<StreamChunk> {
    const index = this.turns.length
    this.turns.push({
      messages: structuredClone(options.messages),
      systemPrompts: (options.systemPrompts ?? []).map((prompt) => typeof prompt === "string" ? prompt : prompt.content),
      toolNames: (options.tools ?? []).map((tool) => tool.name),
      runId: options.runId,
      threadId: options.threadId
    })
    const step = this.#script[index]
    if (step === undefined) {
      throw new Error(`The script has ${this.#script.length} turns; turn ${index + 1} was requested`)
    }
    const turn = typeof step === "function" ? step(options.messages) : step
    const base = { model: this.model, timestamp: Date.now() }
    const runId = options.runId ?? `scripted-run-${index}`
    const threadId = options.threadId ?? "scripted-thread"
    const messageId = `msg_${index}`
    yield { type: "RUN_STARTED", runId, threadId, ...base } as StreamChunk
    const deltas = textDeltas(turn)
    if (deltas.length > 0) {
      yield { type: "TEXT_MESSAGE_START", messageId, role: "assistant", ...base } as StreamChunk
      let content = ""
      for (const delta of deltas) {
        content += delta
        yield { type: "TEXT_MESSAGE_CONTENT", messageId, delta, content, ...base } as StreamChunk
      }
      yield { type: "TEXT_MESSAGE_END", messageId, ...base } as StreamChunk
    }
    const toolCalls = turn.toolCalls ?? []
    for (const [i, call] of toolCalls.entries()) {
      const toolCallId = call.id ?? `call_${index}_${i}`
      const args = argumentsText(call)
      yield { type: "TOOL_CALL_START", toolCallId, toolCallName: call.name, toolName: call.name, index: i, ...base } as StreamChunk
      yield { type: "TOOL_CALL_ARGS", toolCallId, delta: args, ...base } as StreamChunk
      yield { type: "TOOL_CALL_END", toolCallId, toolCallName: call.name, toolName: call.name, ...base } as StreamChunk
    }
    yield {
      type: "RUN_FINISHED",
      runId,
      threadId,
      finishReason: toolCalls.length > 0 ? "tool_calls" : "stop",
      ...base
    } as StreamChunk
  }

  /**
   * Structured output: the next turn's text is the model's answer, parsed
   * as JSON (so a script can also send JSON that does not fit the schema).
   */
  structuredOutput(options: StructuredOutputOptions<Record<string, never>>): Promise<StructuredOutputResult<unknown>> {
    const { chatOptions } = options
    const index = this.turns.length
    this.turns.push({
      messages: structuredClone(chatOptions.messages),
      systemPrompts: (chatOptions.systemPrompts ?? []).map((prompt) => typeof prompt === "string" ? prompt : prompt.content),
      toolNames: [],
      runId: chatOptions.runId,
      threadId: chatOptions.threadId
    })
    const step = this.#script[index]
    if (step === undefined) {
      return Promise.reject(new Error(`The script has ${this.#script.length} turns; turn ${index + 1} was requested`))
    }
    const rawText = textDeltas(typeof step === "function" ? step(chatOptions.messages) : step).join("")
    return Promise.resolve().then(() => ({ data: JSON.parse(rawText), rawText }))
  }
}

/**
 * Makes a scripted text adapter.
 *
 * @example
 * ```ts
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 *
 * const adapter = scriptedText([
 *   { toolCalls: [{ name: "get_order", args: { id: "A-100" } }] },
 *   { text: "Order A-100 has shipped." }
 * ])
 * // after a run: adapter.turns[1].messages holds the tool result the model saw
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedText = (script: ReadonlyArray<ScriptedTurn>): ScriptedTextAdapter => new ScriptedTextAdapter(script)
