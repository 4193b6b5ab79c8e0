/**
 * A run is traced: AI.chat and AI.runAgent run in a span with the
 * OpenTelemetry GenAI attributes and the token usage the adapter reports,
 * and the tool spans are its children.
 */
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { fakeOpenAI, scriptedText } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Effect, Option, Stream, type Tracer } from "effect"
import { getOrderDef } from "./support/tools.ts"
import { inMemoryTracer } from "./support/tracing.ts"

const getOrder = AI.serverTool(getOrderDef, () => Effect.succeed({ status: "shipped" }))

const parentOf = (span: Tracer.NativeSpan) => Option.getOrUndefined(span.parent)?.spanId

describe("run spans", () => {
  it.live("AI.chat runs in the span AI.chat with the GenAI attributes and the summed token usage; tool spans are its children", () =>
    Effect.gen(function*() {
      const { spans, tracer } = inMemoryTracer()
      const server = yield* fakeOpenAI([{ toolCalls: [{ name: "get_order", args: { id: "A-100" }, id: "call_1" }] }, { text: "Shipped." }])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL })
      yield* AI.chat({ adapter, messages: [{ role: "user", content: "Where is A-100?" }], runId: "run-1", threadId: "thread-1", tools: [getOrder] })
        .pipe(Stream.runDrain, Effect.withTracer(tracer))
      const run = spans.find((span) => span.name === "AI.chat")!
      expect(Object.fromEntries(run.attributes)).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-5.2",
        "gen_ai.provider.name": "openai",
        "gen_ai.conversation.id": "thread-1",
        "ai.run.id": "run-1",
        // The fake reports 10 input and 5 output tokens on each of the two turns.
        "gen_ai.usage.input_tokens": 20,
        "gen_ai.usage.output_tokens": 10
      })
      const tool = spans.find((span) => span.name === "AI.tool get_order")!
      expect(parentOf(tool)).toBe(run.spanId)
      expect(Object.fromEntries(tool.attributes)).toMatchObject({ "gen_ai.tool.name": "get_order", "gen_ai.tool.call.id": "call_1" })
      expect(run.status._tag).toBe("Ended")
    }).pipe(Effect.scoped))

  it.effect("AI.runAgent runs in the span AI.agent <name>, with the agent's name", () =>
    Effect.gen(function*() {
      const { spans, tracer } = inMemoryTracer()
      const agent = AI.defineAgent({
        name: "orders",
        adapter: scriptedText([{ toolCalls: [{ name: "get_order", args: { id: "A-100" } }] }, { text: "Shipped." }]),
        instructions: "Answer order questions.",
        tools: [getOrder]
      })
      yield* AI.runAgent(agent, { messages: [{ role: "user", content: "?" }], trigger: "test" }).pipe(Stream.runDrain, Effect.withTracer(tracer))
      const run = spans.find((span) => span.name === "AI.agent orders")!
      expect(Object.fromEntries(run.attributes)).toMatchObject({
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "orders",
        "gen_ai.provider.name": "scripted",
        "ai.run.trigger": "test"
      })
      expect(parentOf(spans.find((span) => span.name === "AI.tool get_order")!)).toBe(run.spanId)
    }))
})
