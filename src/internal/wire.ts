/**
 * The AG-UI wire form of a chunk, as core's server-sent events encoder
 * writes it: the chunk normalized by core (spec keys only, TanStack extras
 * under `metadata.tanstack`, token usage in the spec's shape), without the
 * durability batch hint. Core's own encoder is not exported; this one is
 * built on the normalizer it uses, and the tests hold the two byte for byte.
 */
import { normalizeStreamChunk } from "@tanstack/ai"
import type { StreamChunk } from "@tanstack/ai"

/** One chunk as a server-sent event: `data: <json>\n\n`. */
export const serverSentEvent = (chunk: StreamChunk): string => `data: ${JSON.stringify(wireChunk(chunk))}\n\n`

const wireChunk = (chunk: StreamChunk): StreamChunk => withoutBatchHint(normalizeStreamChunk(chunk)[0] ?? chunk)

/**
 * Core marks high-volume custom events for its durability log; the hint
 * never goes out. Core deletes it in place; this copies, keeping the order
 * of the keys that remain, so that the JSON is the same.
 */
const withoutBatchHint = (chunk: StreamChunk): StreamChunk => {
  const metadata: unknown = chunk.metadata
  if (!isRecord(metadata) || !isRecord(metadata.tanstack) || metadata.tanstack.batch !== true) return chunk
  const tanstack = without(metadata.tanstack, "batch")
  const kept = Object.keys(tanstack).length === 0 ? without(metadata, "tanstack") : { ...metadata, tanstack }
  return (Object.keys(kept).length === 0 ? without(chunk, "metadata") : { ...chunk, metadata: kept }) as StreamChunk
}

const without = <A extends object>(record: A, key: string): Partial<A> => {
  const { [key]: _dropped, ...rest } = record as Record<string, unknown>
  return rest as Partial<A>
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The `RUN_ERROR` event core writes when the stream it encodes fails: the
 * error's message and its code (or HTTP status), as core's run-error
 * payload reads them.
 */
export const runErrorEvent = (error: unknown): string => {
  const code = errorCode(error)
  return serverSentEvent({
    type: "RUN_ERROR",
    timestamp: Date.now(),
    message: errorMessage(error),
    ...(code === undefined ? {} : { code })
  } as StreamChunk)
}

const abortErrorNames = new Set(["AbortError", "APIUserAbortError", "RequestAbortedError"])

const fallbackMessage = "Unknown error occurred"

const errorMessage = (error: unknown): string => {
  if (isAbort(error)) return "Request aborted"
  if (typeof error === "string") return error.length > 0 ? error : fallbackMessage
  if (typeof error !== "object" || error === null) return fallbackMessage
  const message = (error as { readonly message?: unknown }).message
  return typeof message === "string" && message.length > 0 ? message : fallbackMessage
}

const errorCode = (error: unknown): string | undefined => {
  if (isAbort(error)) return "aborted"
  if (typeof error !== "object" || error === null) return undefined
  const { code, status } = error as { readonly code?: unknown; readonly status?: unknown }
  if (typeof code === "string") return code
  if (typeof code === "number" && Number.isFinite(code)) return String(code)
  return typeof status === "number" && Number.isFinite(status) ? String(status) : undefined
}

const isAbort = (error: unknown): boolean =>
  typeof error === "object" && error !== null && abortErrorNames.has((error as { readonly name?: unknown }).name as string)
