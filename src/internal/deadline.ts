/**
 * A deadline on an effect at the price of one fiber and one timer.
 *
 * `Effect.timeoutOrElse` races the effect against a sleep: two fibers, the
 * loser interrupted and awaited, on every call. On a store operation of
 * 80–150 µs that race was 15–20 µs (a Redis claim, measured in a scratch
 * run). Here the effect runs in one child fiber, started at once, and the
 * caller waits for it with a timer beside it: an effect that answers
 * before its first asynchronous step costs no timer at all.
 *
 * The timer is Node's, which is what Effect's own clock uses. Under any
 * other clock (a `TestClock`, which decides when time passes) the deadline
 * is `Effect.timeoutOrElse`, so that the clock keeps its word.
 */
import { Clock, Context, Effect, Fiber } from "effect"

/** Node runs a timer longer than this (about 24.8 days) at once. */
const maxTimerMillis = 2 ** 31 - 1

/** Effect's own clock: the `Clock` reference's default, which a fiber has unless something provides another. */
const effectClock = Context.getOrElse(Context.empty(), Clock.Clock, () => undefined)

/**
 * `effect`, or `onTimeout` once `millis` have passed without an answer (the
 * effect is then interrupted, and awaited, first). Interrupting the caller
 * interrupts the effect.
 */
export const withDeadline = <A, E, R, A2, E2, R2>(
  effect: Effect.Effect<A, E, R>,
  millis: number,
  onTimeout: () => Effect.Effect<A2, E2, R2>
): Effect.Effect<A | A2, E | E2, R | R2> =>
  Effect.withFiber((caller) => {
    if (caller.getRef(Clock.Clock) !== effectClock || millis > maxTimerMillis) {
      return Effect.timeoutOrElse(effect, { duration: millis, orElse: onTimeout })
    }
    return Effect.flatMap(Effect.forkChild(effect, { startImmediately: true }), (fiber) => {
      const answered = fiber.pollUnsafe()
      if (answered !== undefined) return answered
      return Effect.callback<A | A2, E | E2, R2>((resume) => {
        const stopObserving = fiber.addObserver((exit) => {
          clearTimeout(timer)
          resume(exit)
        })
        const timer = setTimeout(() => {
          stopObserving()
          resume(Effect.andThen(Fiber.interrupt(fiber), onTimeout()))
        }, millis)
        return Effect.suspend(() => {
          clearTimeout(timer)
          stopObserving()
          return Fiber.interrupt(fiber)
        })
      })
    })
  })
