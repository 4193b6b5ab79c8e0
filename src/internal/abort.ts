/**
 * The abort controller of a run or an activity, aborted when its scope closes.
 */
import { Effect } from "effect"

/**
 * The reason the signal carries. Made once: `abort()` without a reason builds
 * a DOMException, stack trace included, on every run.
 */
const stopped = new DOMException("The run stopped", "AbortError")

export const scopedAbortController = Effect.acquireRelease(
  Effect.sync(() => new AbortController()),
  (controller) => Effect.sync(() => controller.abort(stopped))
)
