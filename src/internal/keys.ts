/**
 * Effect keys as the pipeline makes them, and keys and causes as its logs
 * and messages show them.
 */
import { Cause } from "effect"

/**
 * The default effect key, from a digest already computed: the pipeline
 * hashes an input once, for the key and the record's fingerprint alike.
 */
export const perRunKey = (context: { readonly run: { readonly runId: string }; readonly toolName: string }, digest: string): string =>
  `${context.run.runId}:${context.toolName}:${digest}`

/** A key as a log line or an error message shows it: whole when short, its start and length when long. */
export const keyForDisplay = (key: string): string => key.length <= 120 ? key : `${key.slice(0, 100)}… (${key.length} characters)`

/** A cause as a log line shows it: the message of what failed, without a stack trace. */
export const causeForLogs = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error)
}
