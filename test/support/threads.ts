/**
 * The claims of an `AI.ThreadStore` backend: a thread saved and loaded
 * whole, the end-of-run save a compare-and-set on the active run, and a
 * thread kept for the retention from its last save.
 */
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { Effect, type Layer, Option } from "effect"
import { TestClock } from "effect/testing"

/** A thread of one user message, `text`, answering `runId` (or none). */
const thread = (runId: string | null, text: string): AI.Thread => ({
  messages: [{ id: text, role: "user", parts: [{ type: "text", content: text }] }],
  activeRun: runId === null ? null : { runId },
  interrupts: null
})

export const describeThreadStore = (name: string, layer: () => Layer.Layer<AI.ThreadStore, unknown>) =>
  describe(`AI.ThreadStore on ${name}`, () => {
    it.effect("a run's save at its end is a compare-and-set on the active run: a run that ended after a newer one started saves nothing", () =>
      Effect.gen(function*() {
        const threads = yield* AI.ThreadStore
        const threadId = `thread-${crypto.randomUUID()}`
        expect(yield* threads.load(threadId)).toEqual(Option.none())
        yield* threads.save(threadId, thread("run-1", "first"))
        yield* threads.save(threadId, thread("run-2", "second"))
        expect(yield* threads.save(threadId, thread(null, "late"), { whileRun: "run-1" })).toBe(false)
        expect(yield* threads.save(threadId, thread(null, "done"), { whileRun: "run-2" })).toBe(true)
        expect(yield* threads.load(threadId)).toEqual(Option.some(thread(null, "done")))
      }).pipe(Effect.provide(layer())))
  })

/**
 * The retention of a store that dates its threads by the process's clock
 * (`Clock`, so a test's clock moves it): memory and SQL. Redis dates them by
 * its server's clock (`PEXPIRE`).
 */
export const describeThreadRetention = (name: string, layer: () => Layer.Layer<AI.ThreadStore, unknown>) =>
  describe(`AI.ThreadStore on ${name}, by the process's clock`, () => {
    it.effect("a thread is kept for the retention from its last save: one saved again outlives one saved once beside it", () =>
      Effect.gen(function*() {
        const threads = yield* AI.ThreadStore
        const threadId = (name: string) => `thread-${name}-${crypto.randomUUID()}`
        const again = threadId("again")
        const once = threadId("once")
        const later = threadId("later")
        yield* threads.save(again, thread(null, "first"))
        yield* threads.save(once, thread(null, "once"))
        yield* TestClock.adjust("20 days")
        yield* threads.save(again, thread(null, "second"))
        // Past the retention (30 days) of the thread saved once, within that of the one saved again.
        yield* TestClock.adjust("15 days")
        yield* threads.save(later, thread(null, "later"))
        expect(yield* threads.load(again)).toEqual(Option.some(thread(null, "second")))
        expect(yield* threads.load(once)).toEqual(Option.none())
        expect(yield* threads.load(later)).toEqual(Option.some(thread(null, "later")))
      }).pipe(Effect.provide(layer())))
  })
