import { EventType, toServerSentEventsStream } from "@tanstack/ai"
import type { StreamChunk } from "@tanstack/ai"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { fakeOpenAI } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Cause, Effect, Fiber, Stream } from "effect"
import { getOrderDef, refundDef } from "./support/tools.ts"

/** Progress, a result, a tool error, and a tool that waits for approval: the events a run of this package emits. */
const tools = [
  AI.serverTool(getOrderDef, ({ id }) =>
    id === "A-100"
      ? Stream.make({ status: "looking up" }, { status: "shipped" })
      : Stream.fail(new Error(`OrderNotFound: ${id}`))),
  AI.serverTool(refundDef, () => Effect.succeed({ refunded: true }))
]

/**
 * Core's encoder, fed copies of the same chunks (it deletes the batch hint
 * in place) and, when given, the same failure at the end.
 */
const coreBytes = async (chunks: ReadonlyArray<StreamChunk>, failure?: unknown): Promise<string> => {
  async function* source() {
    yield* structuredClone(chunks)
    if (failure !== undefined) throw failure
  }
  return new Response(toServerSentEventsStream(source())).text()
}

const ourBytes = <E>(stream: Stream.Stream<StreamChunk, E>) => Stream.mkString(Stream.decodeText(AI.toServerSentEvents(stream)))

/** Timestamps are the only field that differs between two encodings of one failure. */
const withoutTimestamps = (text: string) => text.replaceAll(/"timestamp":\d+/g, `"timestamp":0`)

/** One chunk of every AG-UI event type, each with keys outside the spec, as adapters and middleware add them. */
const everyEventType: ReadonlyArray<StreamChunk> = Object.values(EventType).map((type, index) => ({
  type,
  timestamp: 1_000 + index,
  messageId: `m-${index}`,
  toolCallId: `call-${index}`,
  toolName: "get_order",
  delta: "x",
  model: "gpt-5.2",
  finishReason: "stop",
  providerExtra: { index },
  name: "event",
  value: { index },
  threadId: "t",
  runId: "r"
}) as unknown as StreamChunk)

const edgeCases: ReadonlyArray<StreamChunk> = [
  // Token usage in TanStack's shape is sent in the spec's, with its extra counts kept under metadata.
  {
    type: "RUN_FINISHED",
    runId: "r",
    threadId: "t",
    timestamp: 1,
    model: "gpt-5.2",
    finishReason: "stop",
    usage: { promptTokens: 10, completionTokens: 5, totalTokens: 15, promptTokensDetails: { cachedTokens: 3 } }
  },
  { type: "RUN_ERROR", timestamp: 2, error: { message: "Rate limited", code: "rate_limit" }, runId: "r", threadId: "t" },
  // Core's durability batch hint never goes out, alone or beside other metadata.
  { type: "CUSTOM", timestamp: 3, name: "process.stdout", value: "line", metadata: { tanstack: { batch: true } } },
  { type: "CUSTOM", timestamp: 4, name: "n", value: 1, metadata: { tanstack: { batch: true, model: "m" }, app: 1 } },
  { type: "CUSTOM", timestamp: 5, name: "n", value: 1, metadata: { other: true, tanstack: { batch: true } } },
  // A tool call's result rides on its end event; the result event is core's, not the wire's.
  { type: "TOOL_CALL_END", timestamp: 6, toolCallId: "c", toolName: "get_order", result: "{\"status\":\"shipped\"}" },
  { type: "TOOL_CALL_START", timestamp: 7, toolCallId: "c", toolName: "get_order", metadata: { thoughtSignature: "sig" } },
  { type: "TEXT_MESSAGE_CONTENT", timestamp: 8, messageId: "m", delta: "a", model: "gpt-5.2", content: "a" }
] as unknown as ReadonlyArray<StreamChunk>

describe("AI.toServerSentEvents", () => {
  it.live("writes the bytes core's encoder writes for a run's text, progress, tool results, tool errors, an approval's interrupt and usage", () =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([
        { text: ["Let me ", "check."], toolCalls: [{ name: "get_order", args: { id: "A-100" } }, { name: "get_order", args: { id: "B-200" } }] },
        { text: "A-100 shipped; B-200 is unknown.", toolCalls: [{ name: "refund", args: { id: "A-100" } }] }
      ])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL, maxRetries: 0 })
      const chunks = yield* Stream.runCollect(AI.chat({ adapter, messages: [{ role: "user", content: "Orders?" }], tools }))
      const types = new Set(chunks.map((chunk) => chunk.type === "CUSTOM" ? `CUSTOM ${chunk.name}` : chunk.type))
      expect([...types]).toEqual(expect.arrayContaining([
        "RUN_STARTED",
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        `CUSTOM ${AI.toolProgressEvent}`,
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED"
      ]))
      const ours = yield* ourBytes(Stream.fromIterable(chunks))
      expect(ours).toBe(yield* Effect.promise(() => coreBytes(chunks)))
    }).pipe(Effect.scoped))

  it.live("writes the bytes core's encoder writes for a provider's error", () =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([{ failure: { status: 429 } }])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL, maxRetries: 0 })
      const chunks = yield* Stream.runCollect(AI.chat({ adapter, messages: [{ role: "user", content: "Hi" }] }))
      expect(chunks.map((chunk) => chunk.type)).toContain("RUN_ERROR")
      expect(yield* ourBytes(Stream.fromIterable(chunks))).toBe(yield* Effect.promise(() => coreBytes(chunks)))
    }).pipe(Effect.scoped))

  it.effect("writes the bytes core's encoder writes for every AG-UI event type, usage, errors and batch hints", () =>
    Effect.gen(function*() {
      const chunks = [...everyEventType, ...edgeCases]
      const ours = yield* ourBytes(Stream.fromIterable(chunks))
      expect(ours).toBe(yield* Effect.promise(() => coreBytes(chunks)))
      expect(ours).not.toContain("batch")
      // The encoder copies; the run's own chunks are not changed.
      expect(edgeCases[2]).toMatchObject({ metadata: { tanstack: { batch: true } } })
    }))

  it.effect("one batch of chunks goes out as one piece of bytes", () =>
    Effect.gen(function*() {
      const pieces = yield* Stream.runCollect(AI.toServerSentEvents(Stream.fromIterable(everyEventType)))
      expect(pieces).toHaveLength(1)
    }))

  it.effect("a stream that fails ends with the RUN_ERROR event core writes for that error", () =>
    Effect.gen(function*() {
      const chunks = everyEventType.slice(0, 3)
      const failure = new AI.ChatError({ cause: Object.assign(new Error("two tools are named get_order"), { status: 400 }) })
      const ours = yield* ourBytes(Stream.concat(Stream.fromIterable(chunks), Stream.fail(failure)))
      const core = yield* Effect.promise(() => coreBytes(chunks, failure))
      expect(withoutTimestamps(ours)).toBe(withoutTimestamps(core))
      expect(ours).toContain(`"type":"RUN_ERROR"`)
      expect(ours).toContain("two tools are named get_order")
    }))

  it.effect("a stream that dies ends with a RUN_ERROR event that carries the defect's message and code", () =>
    Effect.gen(function*() {
      const defect = Object.assign(new RangeError("index out of range"), { code: "E_RANGE" })
      const ours = yield* ourBytes(Stream.die(defect))
      const core = yield* Effect.promise(() => coreBytes([], defect))
      expect(withoutTimestamps(ours)).toBe(withoutTimestamps(core))
      expect(JSON.parse(ours.slice("data: ".length))).toMatchObject({ type: "RUN_ERROR", message: "index out of range", code: "E_RANGE" })
    }))

  it.effect("an interrupted stream ends the body without a RUN_ERROR event", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(Stream.runCollect(AI.toServerSentEvents(Stream.never)))
      yield* Fiber.interrupt(fiber)
      const exit = yield* Fiber.await(fiber)
      expect(exit._tag === "Failure" && Cause.hasInterruptsOnly(exit.cause)).toBe(true)
    }))
})
