/**
 * The retry behind every SQLite statement, a durable run's store calls,
 * model turns and log writes, and the durable route's look for a run's log:
 * it sets its schedule up only after a failure, and must then try exactly
 * as `Effect.retry` would.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, Fiber, Schedule } from "effect"
import { TestClock } from "effect/testing"
import { retryOnFailure, type RetryOptions } from "../src/internal/retry.ts"

/** An effect that fails with its attempt's number `failures` times, then succeeds; and when each attempt ran. */
const failingTimes = (failures: number) => {
  const attempts: Array<number> = []
  const effect = Effect.flatMap(Clock.currentTimeMillis, (now) => {
    attempts.push(now)
    return attempts.length <= failures ? Effect.fail(attempts.length) : Effect.succeed("done")
  })
  return { attempts, effect }
}

/** The exit and the attempts' times of `retry` over an effect that fails `failures` times, under the test clock. */
const tried = (failures: number, retry: (effect: Effect.Effect<string, number>) => Effect.Effect<string, number>) =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const { attempts, effect } = failingTimes(failures)
    const fiber = yield* Effect.forkChild(retry(effect))
    yield* TestClock.adjust("1 minute")
    const exit = yield* Fiber.await(fiber)
    return { exit, attempts: attempts.map((at) => at - start) }
  })

const policies: Record<string, RetryOptions<number>> = {
  "three more tries, exponentially apart": { times: 3, schedule: Schedule.exponential("100 millis") },
  "while the failure says so (the first two)": { while: (attempt) => attempt < 3, schedule: Schedule.spaced("5 millis") },
  "as long as a capped schedule recurs": { schedule: Schedule.max([Schedule.spaced("10 millis"), Schedule.recurs(2)]) }
}

describe("retryOnFailure", () => {
  for (const [name, policy] of Object.entries(policies)) {
    it.effect(`tries as Effect.retry does, ${name}: the same attempts at the same times, and the same result`, () =>
      Effect.gen(function*() {
        for (const failures of [0, 1, 2, 3, 5]) {
          const ours = yield* tried(failures, (effect) => retryOnFailure(effect, policy))
          const effects = yield* tried(failures, (effect) => Effect.retry(effect, policy))
          expect(ours.attempts).toEqual(effects.attempts)
          expect(Exit.isSuccess(ours.exit) ? ours.exit.value : Exit.findErrorOption(ours.exit)).toEqual(
            Exit.isSuccess(effects.exit) ? effects.exit.value : Exit.findErrorOption(effects.exit)
          )
        }
      }))
  }
})
