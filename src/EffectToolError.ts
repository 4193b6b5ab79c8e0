/**
 * The failures an effect tool adds to its own: what the at-most-once
 * protocol answers when a call cannot apply its effect, or cannot say
 * whether it was applied.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import type { ClaimLost, EffectStoreError } from "./EffectStore.ts"
import { keyForDisplay } from "./internal/keys.ts"
import type { ToolCallError } from "./ServerTool.ts"

/**
 * An input that no key can be made from: it holds a BigInt, a cycle, or a
 * value whose JSON form would lose what it holds (a `Map`, a `Set`, a class
 * instance with no enumerable state and no `toJSON`). Also raised for an
 * empty effect key.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Result } from "effect"
 *
 * const a: Record<string, unknown> = {}
 * a.self = a
 * const result = AI.EffectKey.canonicalJson(a)
 * if (Result.isFailure(result)) result.failure.path // "$.self"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectKeyError extends Schema.TaggedError<EffectKeyError>()("EffectKeyError", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `No effect key can be made from the input: ${this.reason} at ${this.path}`
  }
}

/**
 * A call's key is recorded for another input, and the tool was defined with
 * `onKeyReuse: "fail"`. Nothing ran.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectKeyReused({ tool: "comment", key: "run-1:comment:7" })
 * error.message // "The effect key run-1:comment:7 of tool comment is recorded for another input"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectKeyReused extends Schema.TaggedError<EffectKeyReused>()("EffectKeyReused", {
  tool: Schema.String,
  key: Schema.String
}) {
  override get message(): string {
    return `The effect key ${keyForDisplay(this.key)} of tool ${this.tool} is recorded for another input`
  }
}

/**
 * Another owner holds the claim on the key and did not record the effect
 * within the call's `waitFor`. Nothing ran; a later retry replays the record.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectInProgress({ tool: "comment", key: "run-1:comment:7", owner: "worker-2" })
 * error.message // "The effect run-1:comment:7 of tool comment is being applied by worker-2; try again later"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectInProgress extends Schema.TaggedError<EffectInProgress>()("EffectInProgress", {
  tool: Schema.String,
  key: Schema.String,
  owner: Schema.String
}) {
  override get message(): string {
    return `The effect ${keyForDisplay(this.key)} of tool ${this.tool} is being applied by ${this.owner}; try again later`
  }
}

/**
 * The call took over the expired claim of an owner that never recorded the
 * effect, and the tool has no `alreadyApplied` to find out whether it
 * happened. Nothing ran. This is the seed's crash window: give the tool an
 * `alreadyApplied`, or opt in to `inDoubt: "reapply"` where applying twice
 * is harmless.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectInDoubt({ tool: "comment", key: "run-1:comment:7" })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectInDoubt extends Schema.TaggedError<EffectInDoubt>()("EffectInDoubt", {
  tool: Schema.String,
  key: Schema.String
}) {
  override get message(): string {
    return `The effect ${keyForDisplay(this.key)} of tool ${this.tool} may have been applied by an owner that stopped before ` +
      `recording it; without alreadyApplied it is not applied again`
  }
}

/**
 * The call's effect may have been applied, but its claim was taken over by
 * another owner before the effect was recorded: the call was paused (a GC
 * pause, a frozen VM) or cut off from the store past its lease. The owner
 * that took over treats the effect as in doubt and reconciles it; this call
 * must not be read as "not applied". A remote that checks the call's
 * `fence` refuses such a late effect.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectTakenOver({ tool: "charge", key: "order-7", fence: 3 })
 * error.message // starts with "The effect order-7 of tool charge may have been applied"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectTakenOver extends Schema.TaggedError<EffectTakenOver>()("EffectTakenOver", {
  tool: Schema.String,
  key: Schema.String,
  fence: Schema.Number
}) {
  override get message(): string {
    return `The effect ${keyForDisplay(this.key)} of tool ${this.tool} may have been applied by this call (fence ${this.fence}), ` +
      `but another owner took its claim over before it was recorded; that owner reconciles it`
  }
}

/**
 * `alreadyApplied` did not answer within the tool's `checkTimeout`. Nothing
 * was applied and the claim was released; a retry checks again.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.EffectCheckTimeout({ tool: "comment", key: "run-1:comment:7", timeoutMillis: 10_000 })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectCheckTimeout extends Schema.TaggedError<EffectCheckTimeout>()("EffectCheckTimeout", {
  tool: Schema.String,
  key: Schema.String,
  timeoutMillis: Schema.Number
}) {
  override get message(): string {
    return `alreadyApplied did not answer within ${this.timeoutMillis} ms for the effect ${keyForDisplay(this.key)} of tool ${this.tool}; ` +
      `nothing was applied`
  }
}

/**
 * The result of `execute` (or `alreadyApplied`) cannot be recorded: the
 * output schema does not encode it, or, without one, it is not JSON. When
 * `execute` produced it, the effect happened, so the claim is left to expire
 * and the next caller treats the effect as in doubt.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const error = new AI.ToolOutputError({ tool: "comment", message: "the result is not JSON: a BigInt has no JSON form at $.id" })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolOutputError extends Schema.TaggedError<ToolOutputError>()("ToolOutputError", {
  tool: Schema.String,
  message: Schema.String
}) {}

/**
 * The failures the reconciliation itself adds to an effect tool's own.
 *
 * @since 0.1.0
 * @category errors
 */
export type EffectToolError =
  | EffectKeyError
  | EffectStoreError
  | EffectKeyReused
  | EffectInProgress
  | EffectInDoubt
  | EffectTakenOver
  | EffectCheckTimeout
  | ClaimLost
  | ToolOutputError
  | ToolCallError
