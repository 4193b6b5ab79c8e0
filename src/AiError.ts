/**
 * The typed error of everything that asks a provider: the activities, and a
 * chat run that fails on provider errors ({@link failOnProviderError}).
 * `reason` classifies the failure the same way for every provider and
 * activity, from the provider's HTTP status where it answered one.
 *
 * @since 0.1.0
 */
import type { StreamChunk } from "@tanstack/ai"
import { Cause, Effect, Option, Predicate, Pull, Schema, Stream } from "effect"
import * as Arr from "effect/Array"
import { runErrorOf } from "./internal/agui.ts"

/**
 * Why an activity failed:
 *
 * - `rate-limited`: the provider answered 429; retry with backoff;
 * - `invalid-request`: the provider refused the request (400, 404, 422);
 * - `authentication`: the credentials were refused (401, 403);
 * - `provider`: the provider failed (5xx) or could not be reached;
 * - `decode`: the answer could not be read, or does not fit the schema;
 * - `aborted`: the request was aborted (the fiber was interrupted, or a
 *   signal of the caller's fired).
 *
 * @since 0.1.0
 * @category models
 */
export type AiErrorReason = "rate-limited" | "invalid-request" | "authentication" | "provider" | "decode" | "aborted"

/**
 * An activity failed. `reason` classifies the failure; `status` is the
 * provider's HTTP status when it answered one, and `message` its message.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Effect, Schedule } from "effect"
 *
 * declare const summary: Effect.Effect<{ summary: string }, AI.AiError>
 *
 * // Retry a rate-limited request with exponential backoff, at most 5 times.
 * export const patient = summary.pipe(
 *   Effect.retry({
 *     while: (error) => error.reason === "rate-limited",
 *     schedule: Schedule.exponential("200 millis"),
 *     times: 5
 *   })
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class AiError extends Schema.TaggedError<AiError>()("AiError", {
  activity: Schema.String,
  reason: Schema.Literals(["rate-limited", "invalid-request", "authentication", "provider", "decode", "aborted"]),
  status: Schema.optionalKey(Schema.Number),
  message: Schema.String,
  cause: Schema.Defect()
}) {}

/**
 * The provider's HTTP status: an SDK error's `status`, or the `code` core
 * keeps when it re-throws a failed run as a plain Error (structured output
 * does: `code: "429"`), looked for through `cause` too.
 */
const statusOf = (error: unknown): number | undefined => {
  if (Predicate.hasProperty(error, "status") && Predicate.isNumber(error.status)) return error.status
  if (Predicate.hasProperty(error, "code") && Predicate.isString(error.code) && /^[1-5]\d\d$/.test(error.code)) {
    return Number(error.code)
  }
  if (Predicate.hasProperty(error, "cause")) return statusOf(error.cause)
  return undefined
}

/**
 * Google's error body, `{"error":{"code":429,"message":...,"status":...}}`:
 * the Gemini SDK's error message is that body, and the Gemini adapter passes
 * on only the message (no status) when a chat turn or structured output fails.
 */
const decodeGoogleError = Schema.decodeUnknownOption(
  Schema.fromJsonString(Schema.Struct({ error: Schema.Struct({ code: Schema.Int, message: Schema.String }) }))
)

const isAbort = (error: unknown, signal: AbortSignal): boolean =>
  signal.aborted ||
  (Predicate.hasProperty(error, "name") && (error.name === "AbortError" || error.name === "APIUserAbortError"))

/**
 * The typed error of a failed activity, classified by the provider's status,
 * or by what failed.
 *
 * @internal
 */
export const toAiError = (activity: string, error: unknown, signal: AbortSignal): AiError => {
  const text = Predicate.hasProperty(error, "message") && Predicate.isString(error.message) ? error.message : String(error)
  const google = Option.getOrUndefined(decodeGoogleError(text))
  const status = statusOf(error) ?? google?.error.code
  const message = google?.error.message ?? text
  const reason: AiErrorReason = isAbort(error, signal)
    ? "aborted"
    : status === 429
    ? "rate-limited"
    : status === 401 || status === 403
    ? "authentication"
    : status !== undefined && status >= 400 && status < 500
    ? "invalid-request"
    : status !== undefined
    ? "provider"
    : error instanceof SyntaxError || isValidationFailure(error) || /json|decode|parse/i.test(message)
    ? "decode"
    : "provider"
  return new AiError({ activity, reason, message, cause: error, ...(status === undefined ? {} : { status }) })
}

/** Core's error when a structured answer does not fit its schema. */
const isValidationFailure = (error: unknown): boolean =>
  Predicate.hasProperty(error, "code") && Predicate.isString(error.code) && error.code.includes("validation")

/** The signal of a request that was not aborted: a chunk's error is the provider's. */
const notAborted = new AbortController().signal

/**
 * Fails a chat stream with `AiError` when the provider fails the run,
 * instead of passing the `RUN_ERROR` chunk on. The reason and status come
 * from the provider's answer, classified as for every activity.
 *
 * A `RUN_STARTED` at the very start is held back until the next chunk, so a
 * provider that refuses the request at once (429, 401, 5xx) fails the stream
 * before any chunk reached the client: a `Stream.retry` then starts over
 * cleanly. A failure later in the run comes after chunks the client already
 * has, and a retry starts the run again. Without this combinator the chunk
 * is the default: the client shows the error.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { openaiText } from "@tanstack/ai-openai"
 * import { Schedule, Stream } from "effect"
 *
 * // Up to 3 more attempts, 0.5 s, 1 s and 2 s apart, before the client saw anything.
 * export const patient = AI.chat({ adapter: openaiText("gpt-5.2"), messages: [{ role: "user", content: "Hi" }] }).pipe(
 *   AI.failOnProviderError,
 *   Stream.retry(Schedule.max([Schedule.exponential("500 millis"), Schedule.recurs(3)]))
 * )
 * ```
 *
 * @since 0.1.0
 * @category chat
 */
export const failOnProviderError = <E, R>(self: Stream.Stream<StreamChunk, E, R>): Stream.Stream<StreamChunk, E | AiError, R> =>
  // Batch by batch, as the chat reader delivers them: a stage per chunk would cost more than the run.
  Stream.transformPull(self, (pull) =>
    Effect.sync(() => {
      let first = true
      let heldStart: StreamChunk | undefined
      let ended = false
      // A failure that came after chunks of its batch: those go out first, and the next pull fails.
      let failure: AiError | undefined
      const onBatch = (batch: Arr.NonEmptyReadonlyArray<StreamChunk>) => {
        const out: Array<StreamChunk> = []
        for (const chunk of batch) {
          const runError = runErrorOf(chunk)
          if (runError !== undefined) {
            failure = toAiError("chat", runError, notAborted)
            break
          }
          if (first && chunk.type === "RUN_STARTED") {
            first = false
            heldStart = chunk
            continue
          }
          first = false
          if (heldStart !== undefined) {
            out.push(heldStart)
            heldStart = undefined
          }
          out.push(chunk)
        }
        if (Arr.isArrayNonEmpty(out)) return Effect.succeed(out)
        return failure === undefined ? next : Effect.fail(failure)
      }
      // A run that ends right after it started still sends its start.
      const onEnd = () => {
        ended = true
        const start = heldStart
        heldStart = undefined
        return start === undefined ? Cause.done() : Effect.succeed(Arr.of(start))
      }
      const next: Pull.Pull<Arr.NonEmptyReadonlyArray<StreamChunk>, E | AiError> = Effect.suspend(() => {
        if (failure !== undefined) return Effect.fail(failure)
        if (ended) return Cause.done()
        return pull.pipe(Effect.flatMap(onBatch), Pull.catchDone(onEnd))
      })
      return next
    }))
