/**
 * The run a tool call belongs to.
 *
 * `AI.chat` and `AI.runAgent` provide a `RunContext` to every server tool of a
 * run, so a tool can key its side effects by run, thread or agent.
 *
 * @since 0.1.0
 */
import { Context, Layer } from "effect"

/**
 * The identity of one run: its ids, the agent that runs it and what started it.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Effect } from "effect"
 *
 * const runId = Effect.map(Effect.service(AI.RunContext), (run) => run.runId)
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export class RunContext extends Context.Service<RunContext, {
  readonly runId: string
  readonly threadId: string
  /** The agent's name; `"chat"` for a plain `AI.chat` run. */
  readonly agent: string
  /** What started the run, for example `"http"` or `"schedule"`. */
  readonly trigger: string
}>()("@tanstack/ai-effect/RunContext") {
  /**
   * A layer for a fixed run, for tests and custom loops.
   *
   * @example
   * ```ts
   * import * as AI from "@tanstack/ai-effect"
   *
   * const layer = AI.RunContext.layer({ runId: "run-1", threadId: "thread-1", agent: "test", trigger: "test" })
   * ```
   */
  static readonly layer = (run: RunContext["Service"]): Layer.Layer<RunContext> => Layer.succeed(RunContext, run)
}
