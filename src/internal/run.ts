/**
 * Fills in the ids of a run that the caller left out.
 */
import { Effect } from "effect"

/** The run a stream provides to its tools (the shape of `RunContext`). */
export interface Run {
  readonly runId: string
  readonly threadId: string
  readonly agent: string
  readonly trigger: string
}

export const makeRun = Effect.fnUntraced(function*(options: {
  readonly runId?: string | undefined
  readonly threadId?: string | undefined
  readonly agent?: string | undefined
  readonly trigger?: string | undefined
}) {
  const run: Run = {
    runId: options.runId ?? (yield* Effect.sync(() => `run-${crypto.randomUUID()}`)),
    threadId: options.threadId ?? (yield* Effect.sync(() => `thread-${crypto.randomUUID()}`)),
    agent: options.agent ?? "chat",
    trigger: options.trigger ?? "chat"
  }
  return run
})
