/**
 * What the fake provider servers have in common: the scripted replies they
 * play, and what a test reads back from them.
 *
 * The fake OpenAI, Anthropic and Gemini servers play the same replies (text,
 * tool calls with their raw argument text, token usage, an HTTP failure, a
 * malformed body) in their provider's wire format, so one script drives the
 * real adapter of each. What each server received reads the same way too:
 * the tools it was sent and the tool results of every request.
 *
 * @since 0.1.0
 */
import type { ScriptedReply } from "./ScriptedText.ts"

/**
 * What the fake model answers in one turn.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeReply extends ScriptedReply {
  /** Milliseconds to wait before the response completes. */
  readonly delayMs?: number
  /**
   * Milliseconds between two text deltas of a streamed answer, as a model
   * streams it: long enough for a test to reload the page or drop the
   * connection mid-answer.
   */
  readonly deltaDelayMs?: number
  /** Answer with this HTTP error instead (a 429 rate limit, a 500). */
  readonly failure?: FakeFailure
  /** Answer 200 with a body that is not JSON. */
  readonly malformed?: boolean
  /** The tokens the turn reports; 10 in and 5 out by default. */
  readonly usage?: FakeUsage
}

/**
 * An HTTP error a fake answers with, in its provider's error shape.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeFailure {
  readonly status: number
  readonly message?: string
}

/**
 * The token usage a fake reports for a turn.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeUsage {
  readonly inputTokens: number
  readonly outputTokens: number
}

/**
 * One model turn of a fake: a reply, or a function of the turn's request
 * body, so that a reply can depend on what the model was sent.
 *
 * @since 0.1.0
 * @category models
 */
export type FakeProviderTurn<Request> = FakeReply | ((request: Request) => FakeReply)

/**
 * A fake's script: fixed turns played in order, or a model policy that
 * answers every request (its index counts from 0). A list of plain replies
 * drives every fake alike.
 *
 * @since 0.1.0
 * @category models
 */
export type FakeProviderScript<Request> =
  | ReadonlyArray<FakeProviderTurn<Request>>
  | ((request: Request, index: number) => FakeReply)

/**
 * A tool as a fake received it: its name and the JSON Schema of its
 * parameters, as the adapter sent them.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeToolDeclaration {
  readonly name: string
  readonly parameters: unknown
  /** OpenAI's `strict` flag, or Anthropic's; absent where the provider has none. */
  readonly strict?: boolean
}

/**
 * A tool result as a fake received it, in the request after the tool call.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeToolResult {
  readonly callId: string
  /** The result's text, as the model reads it. */
  readonly output: string
}

/**
 * A running fake provider server.
 *
 * @example
 * ```ts
 * import type { FakeProviderServer } from "@tanstack/ai-effect/testing"
 *
 * // What the model was told about the first tool call, whichever the provider.
 * const firstResult = <R>(server: FakeProviderServer<R>) => server.toolResults(1)[0]?.output
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeProviderServer<Request> {
  /** The base URL to give the provider's adapter (`baseURL`). */
  readonly baseURL: string
  /** The model requests received, in order. */
  readonly requests: ReadonlyArray<Request>
  /** The tools sent with the `index`-th model request. */
  readonly tools: (index: number) => ReadonlyArray<FakeToolDeclaration>
  /** The tool results sent with the `index`-th model request, in order. */
  readonly toolResults: (index: number) => ReadonlyArray<FakeToolResult>
  /** How many requests were aborted by the client before they completed. */
  readonly aborted: () => number
  readonly close: () => Promise<void>
}
