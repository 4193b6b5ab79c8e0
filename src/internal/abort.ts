/**
 * The abort controller of a run or an activity, aborted when its scope closes.
 */
import { Effect } from "effect"

/**
 * The reason the signal carries. Made once: `abort()` without a reason builds
 * a DOMException, stack trace included, on every run.
 */
const stopped = new DOMException("The run stopped", "AbortError")

/**
 * Aborted when its scope closes, unless `ended` says that the work it would
 * stop has already ended: aborting then only runs the signal's listeners.
 */
export const scopedAbortController = (ended: () => boolean = () => false) =>
  Effect.acquireRelease(
    Effect.sync(() => new AbortController()),
    (controller) => Effect.sync(() => ended() || controller.abort(stopped))
  )
