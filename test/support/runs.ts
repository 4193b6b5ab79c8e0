/**
 * A scripted chat run with one store, and the tool results the model read:
 * what the unit suites of server and effect tools drive their claims with.
 */
import * as AI from "@tanstack/ai-effect"
import { type ScriptedTextAdapter, scriptedText, type ScriptedTurn } from "@tanstack/ai-effect/testing"
import { Effect, type Layer, Stream } from "effect"

export const user = [{ role: "user" as const, content: "Go" }]

/** The tool results (parsed JSON) the model read in the given turn. */
export const toolResults = (adapter: ScriptedTextAdapter, turn: number) =>
  (adapter.turns[turn]?.messages ?? []).flatMap((message) => message.role === "tool" ? [JSON.parse(String(message.content))] : [])

/** One run of `run-1` in `thread-1` against the script, with `store`: its chunks, and the adapter to read back. */
export const runWith = (store: Layer.Layer<AI.EffectStore>, tools: ReadonlyArray<AI.ServerTool.Any>, script: ReadonlyArray<ScriptedTurn>) =>
  Effect.gen(function*() {
    const adapter = scriptedText(script)
    const chunks = yield* AI.chat({ adapter, messages: user, runId: "run-1", threadId: "thread-1", tools }).pipe(
      Stream.provide(store),
      Stream.runCollect
    )
    return { adapter, chunks }
  })
