/**
 * The typed failures of a durable run's API: an unknown run, an approval
 * that cannot be given (never asked, answered before, or asked by a run that
 * was cancelled), a run id started again with another input, and a run store
 * that cannot answer.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * No run of this id was ever started on this engine.
 *
 * @example
 * ```ts
 * import { DurableRunError } from "@tanstack/ai-effect/durable"
 *
 * const error = new DurableRunError.DurableRunNotFound({ runId: "issue-42" })
 * error.message // "No durable run issue-42 was started"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class DurableRunNotFound extends Schema.TaggedError<DurableRunNotFound>()("DurableRunNotFound", {
  runId: Schema.String
}) {
  override get message(): string {
    return `No durable run ${this.runId} was started`
  }
}

/**
 * The run never asked to approve this tool call: the id is wrong, or the
 * call needs no approval. Nothing was recorded.
 *
 * @example
 * ```ts
 * import { DurableRunError } from "@tanstack/ai-effect/durable"
 *
 * const error = new DurableRunError.ApprovalNotFound({ runId: "issue-42", toolCallId: "call_9" })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ApprovalNotFound extends Schema.TaggedError<ApprovalNotFound>()("ApprovalNotFound", {
  runId: Schema.String,
  toolCallId: Schema.String
}) {
  override get message(): string {
    return `The durable run ${this.runId} did not ask to approve the tool call ${this.toolCallId}`
  }
}

/**
 * The tool call was answered before: the first answer stands (`approved`),
 * and the tool runs at most once.
 *
 * @example
 * ```ts
 * import { DurableRunError } from "@tanstack/ai-effect/durable"
 *
 * const error = new DurableRunError.ApprovalAlreadyAnswered({ runId: "issue-42", toolCallId: "call_1", approved: true })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ApprovalAlreadyAnswered extends Schema.TaggedError<ApprovalAlreadyAnswered>()("ApprovalAlreadyAnswered", {
  runId: Schema.String,
  toolCallId: Schema.String,
  approved: Schema.Boolean
}) {
  override get message(): string {
    return `The tool call ${this.toolCallId} of the durable run ${this.runId} was already ${this.approved ? "approved" : "declined"}`
  }
}

/**
 * The run was cancelled (`cancel`) while it waited for this approval: it
 * waits for no answer any more, and nothing was recorded. The tool never
 * runs.
 *
 * @example
 * ```ts
 * import { DurableRunError } from "@tanstack/ai-effect/durable"
 *
 * const error = new DurableRunError.DurableRunCancelled({ runId: "issue-42" })
 * error.message // "The durable run issue-42 was cancelled, and waits for no approval"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class DurableRunCancelled extends Schema.TaggedError<DurableRunCancelled>()("DurableRunCancelled", {
  runId: Schema.String
}) {
  override get message(): string {
    return `The durable run ${this.runId} was cancelled, and waits for no approval`
  }
}

/**
 * The run id was started before with another input (messages, thread or
 * trigger). The run id is the idempotency key: starting it again joins the
 * first run, so the new input would be ignored; nothing was started.
 *
 * @example
 * ```ts
 * import { DurableRunError } from "@tanstack/ai-effect/durable"
 *
 * const error = new DurableRunError.DurableRunInputMismatch({ runId: "issue-42" })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class DurableRunInputMismatch extends Schema.TaggedError<DurableRunInputMismatch>()("DurableRunInputMismatch", {
  runId: Schema.String
}) {
  override get message(): string {
    return `The durable run ${this.runId} was started with another input; a run id names one run, so use a new id for a new input`
  }
}

/**
 * The run store could not answer (its database is down, or a query failed).
 * Nothing was started or answered.
 *
 * @example
 * ```ts
 * import { DurableRunError } from "@tanstack/ai-effect/durable"
 *
 * const error = new DurableRunError.DurableRunStoreError({ operation: "begin", runId: "issue-42", cause: new Error("connection refused") })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class DurableRunStoreError extends Schema.TaggedError<DurableRunStoreError>()("DurableRunStoreError", {
  operation: Schema.String,
  runId: Schema.String,
  cause: Schema.Defect()
}) {
  override get message(): string {
    return `The durable run store could not ${this.operation} for ${this.runId}: ${
      this.cause instanceof Error ? this.cause.message : String(this.cause)
    }`
  }
}
