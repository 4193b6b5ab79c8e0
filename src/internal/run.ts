/**
 * Fills in the ids of a run that the caller left out.
 */
import { Effect } from "effect"
import { RunContext } from "../RunContext.ts"

export const makeRun = Effect.fnUntraced(function*(options: {
  readonly runId?: string | undefined
  readonly threadId?: string | undefined
  readonly agent?: string | undefined
  readonly trigger?: string | undefined
}) {
  return RunContext.of({
    runId: options.runId ?? (yield* Effect.sync(() => `run-${crypto.randomUUID()}`)),
    threadId: options.threadId ?? (yield* Effect.sync(() => `thread-${crypto.randomUUID()}`)),
    agent: options.agent ?? "chat",
    trigger: options.trigger ?? "chat"
  })
})
