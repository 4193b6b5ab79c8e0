/**
 * The claims of an `AI.ThreadStore` backend: a thread saved and loaded
 * whole, and the end-of-run save a compare-and-set on the active run.
 */
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { Effect, type Layer, Option } from "effect"

export const describeThreadStore = (name: string, layer: () => Layer.Layer<AI.ThreadStore, unknown>) =>
  describe(`AI.ThreadStore on ${name}`, () => {
    it.effect("a run's save at its end is a compare-and-set on the active run: a run that ended after a newer one started saves nothing", () =>
      Effect.gen(function*() {
        const threads = yield* AI.ThreadStore
        const threadId = `thread-${crypto.randomUUID()}`
        const thread = (runId: string | null, text: string): AI.Thread => ({
          messages: [{ id: text, role: "user", parts: [{ type: "text", content: text }] }],
          activeRun: runId === null ? null : { runId },
          interrupts: null
        })
        expect(yield* threads.load(threadId)).toEqual(Option.none())
        yield* threads.save(threadId, thread("run-1", "first"))
        yield* threads.save(threadId, thread("run-2", "second"))
        expect(yield* threads.save(threadId, thread(null, "late"), { whileRun: "run-1" })).toBe(false)
        expect(yield* threads.save(threadId, thread(null, "done"), { whileRun: "run-2" })).toBe(true)
        expect(yield* threads.load(threadId)).toEqual(Option.some(thread(null, "done")))
      }).pipe(Effect.provide(layer())))
  })
