/**
 * The claims of `DurableRunStore`'s steps, on a pair of stores that two
 * processes use (one memory store shared by both, or two connections to one
 * database): a step is recorded once, the first record wins, and each
 * generation of a run has its own steps.
 */
import { describe, expect, it } from "@effect/vitest"
import { DurableRunStore } from "@tanstack/ai-effect/durable"
import { Context, Effect, Layer, type Scope } from "effect"

/** A store built in the current scope. */
export const buildRunStore = (layer: Layer.Layer<DurableRunStore.DurableRunStore, unknown>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, DurableRunStore.DurableRunStore))

export const describeRunSteps = (
  name: string,
  stores: () => Effect.Effect<readonly [DurableRunStore.Service, DurableRunStore.Service], unknown, Scope.Scope>
) =>
  describe(`DurableRunStore's steps on ${name}`, () => {
    const runId = () => `run-${crypto.randomUUID()}`

    it.live("a step is recorded once: recording it again answers the first result, and another generation of the run has its own steps", () =>
      Effect.gen(function*() {
        const [runs] = yield* stores()
        const run = runId()
        expect(yield* runs.steps(run, 0)).toEqual(new Map())
        expect(yield* runs.record(run, 0, "turn-0", "first")).toBe("first")
        expect(yield* runs.record(run, 0, "turn-0", "second")).toBe("first")
        expect(yield* runs.record(run, 0, "tool-call_1", "{}")).toBe("{}")
        expect(yield* runs.steps(run, 0)).toEqual(new Map([["turn-0", "first"], ["tool-call_1", "{}"]]))
        expect(yield* runs.steps(run, 1)).toEqual(new Map())
        expect(yield* runs.record(run, 1, "turn-0", "retried")).toBe("retried")
      }).pipe(Effect.scoped))

    it.live("two processes that record the same step at once go on with one result, the one the store keeps", () =>
      Effect.gen(function*() {
        const [a, b] = yield* stores()
        const run = runId()
        const answers = yield* Effect.all([a.record(run, 0, "turn-0", "from a"), b.record(run, 0, "turn-0", "from b")], { concurrency: 2 })
        expect(answers[0]).toBe(answers[1])
        expect(yield* a.steps(run, 0)).toEqual(new Map([["turn-0", answers[0]]]))
        expect(yield* b.steps(run, 0)).toEqual(new Map([["turn-0", answers[0]]]))
      }).pipe(Effect.scoped))
  })
