import { toolDefinition } from "@tanstack/ai"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { scriptedText } from "@tanstack/ai-effect/testing"
import { Effect, Schema, Stream } from "effect"

const whoDef = toolDefinition({
  name: "who",
  description: "The run this call belongs to",
  inputSchema: AI.toolSchema(Schema.Struct({})),
  outputSchema: AI.toolSchema(Schema.Struct({ fromTools: Schema.String, fromContext: Schema.String }))
})

describe("AI.runAgent", () => {
  it.effect("builds the tools for the run, with the ids, agent and trigger that RunContext gives its tools", () =>
    Effect.gen(function*() {
      const adapter = scriptedText([{ toolCalls: [{ name: "who", args: {} }] }, { text: "Done" }])
      const agent = AI.defineAgent({
        name: "responder",
        adapter,
        instructions: "Answer new issues.",
        tools: ({ run }) => [
          AI.serverTool(whoDef, () =>
            Effect.map(Effect.service(AI.RunContext), (context) => ({
              fromTools: `${run.runId} ${run.agent} ${run.trigger}`,
              fromContext: `${context.runId} ${context.agent} ${context.trigger}`
            })))
        ]
      })
      yield* AI.runAgent(agent, { messages: [{ role: "user", content: "go" }], runId: "run-3", trigger: "webhook" }).pipe(
        Stream.runDrain
      )
      const [result] = (adapter.turns[1]?.messages ?? []).filter((message) => message.role === "tool")
      expect(JSON.parse(String(result?.content))).toEqual({
        fromTools: "run-3 responder webhook",
        fromContext: "run-3 responder webhook"
      })
      expect(adapter.turns.map((turn) => turn.runId)).toEqual(["run-3", "run-3"])
      expect(adapter.turns[0]?.systemPrompts).toEqual(["Answer new issues."])
    }))

  it.effect("mints a run id and a thread id when none are given", () =>
    Effect.gen(function*() {
      const adapter = scriptedText([{ text: "Hello" }])
      const agent = AI.defineAgent({ name: "greeter", adapter, instructions: "Greet.", tools: [] })
      yield* AI.runAgent(agent, { messages: [{ role: "user", content: "Hi" }] }).pipe(Stream.runDrain)
      expect(adapter.turns[0]?.runId).toMatch(/^run-/)
      expect(adapter.turns[0]?.threadId).toMatch(/^thread-/)
    }))
})
