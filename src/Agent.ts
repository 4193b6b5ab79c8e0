/**
 * Agents: a name, a model, instructions and tools, run as a chat stream.
 *
 * An agent's tools may depend on the run (`({ run }) => tools`), so that a
 * tool can key its effects by the run id before the run starts, as the
 * seed's responder does. `runAgent` mints the run's ids, builds the tools for
 * that run and returns the same Stream as `AI.chat`.
 *
 * @since 0.1.0
 */
import type { AnyTextAdapter, StreamChunk } from "@tanstack/ai"
import { Effect, Stream } from "effect"
import { chat, type ChatError, type ChatOptions, type ChatRequirements, type CoreTool } from "./Chat.ts"
import { makeRun } from "./internal/run.ts"
import type { RunContext } from "./RunContext.ts"
import type { ServerTool } from "./ServerTool.ts"

/**
 * The tools of an agent: a list, or a function of the run that makes one.
 *
 * @since 0.1.0
 * @category models
 */
export type AgentTools<Tools extends ReadonlyArray<unknown>> =
  | Tools
  | ((context: { readonly run: RunContext["Service"] }) => Tools)

/**
 * An agent definition.
 *
 * @since 0.1.0
 * @category models
 */
export interface Agent<TAdapter extends AnyTextAdapter, Tools extends ReadonlyArray<unknown>> {
  readonly name: string
  readonly adapter: TAdapter
  /** The system prompt of every run. */
  readonly instructions: string
  readonly tools: AgentTools<Tools>
}

/**
 * Defines an agent.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 *
 * const greeter = AI.defineAgent({
 *   name: "greeter",
 *   adapter: scriptedText([{ text: "Hello!" }]),
 *   instructions: "Greet the user.",
 *   tools: []
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const defineAgent = <
  TAdapter extends AnyTextAdapter,
  const Tools extends ReadonlyArray<CoreTool<TAdapter> | ServerTool.Any> = []
>(agent: Agent<TAdapter, Tools>): Agent<TAdapter, Tools> => agent

/**
 * Options of {@link runAgent}.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunAgentOptions<TAdapter extends AnyTextAdapter> {
  readonly messages: NonNullable<ChatOptions<TAdapter, []>["messages"]>
  /** Generated when left out. */
  readonly runId?: string | undefined
  /** Generated when left out. */
  readonly threadId?: string | undefined
  /** What started the run, for example `"webhook"`. Default `"agent"`. */
  readonly trigger?: string | undefined
}

/**
 * Runs an agent: the chat stream of one run, with the agent's instructions and
 * the tools made for that run.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Stream } from "effect"
 *
 * const greeter = AI.defineAgent({ name: "greeter", adapter: scriptedText([{ text: "Hello!" }]), instructions: "Greet.", tools: [] })
 * const chunks = AI.runAgent(greeter, { messages: [{ role: "user", content: "Hi" }], trigger: "cli" }).pipe(Stream.runCollect)
 * ```
 *
 * @since 0.1.0
 * @category run
 */
export const runAgent = <TAdapter extends AnyTextAdapter, const Tools extends ReadonlyArray<CoreTool<TAdapter> | ServerTool.Any>>(
  agent: Agent<TAdapter, Tools>,
  options: RunAgentOptions<TAdapter>
): Stream.Stream<StreamChunk, ChatError, ChatRequirements<Tools>> =>
  Stream.unwrap(
    Effect.map(
      makeRun({ ...options, agent: agent.name, trigger: options.trigger ?? "agent" }),
      (run) =>
        chat<TAdapter, Tools>({
          adapter: agent.adapter,
          systemPrompts: [agent.instructions],
          messages: options.messages,
          runId: run.runId,
          threadId: run.threadId,
          agent: run.agent,
          trigger: run.trigger,
          tools: typeof agent.tools === "function" ? agent.tools({ run }) : agent.tools
        })
    )
  )
