/**
 * A chat stream as server-sent events, the body a TanStack AI client reads.
 *
 * `toServerSentEvents` writes the same bytes as core's
 * `toServerSentEventsResponse`, without its web `ReadableStream`: each batch
 * of chunks the run delivers becomes one `Uint8Array`, so a server writes a
 * batch with one call. Serve it with any server that takes a Stream of
 * bytes, or with the `effect/http` route of `@tanstack/ai-effect/http`.
 *
 * @since 0.1.0
 */
import type { StreamChunk } from "@tanstack/ai"
import { Cause, Effect, Stream } from "effect"
import { runErrorEvent, serverSentEvent } from "./internal/agui.ts"

const encoder = new TextEncoder()

/**
 * Encodes a chat stream as AG-UI server-sent events (`data: <json>\n\n` per
 * chunk, in core's wire form).
 *
 * When the stream fails or dies, the failure is logged and the body ends
 * with a `RUN_ERROR` event that carries its message, as core's encoder ends
 * it; the client reads a finished run, not a broken connection. An
 * interruption (the client went away) ends the body without one.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { scriptedText } from "@tanstack/ai-effect/testing"
 * import { Stream } from "effect"
 *
 * const body = AI.toServerSentEvents(
 *   AI.chat({ adapter: scriptedText([{ text: "Hello!" }]), messages: [{ role: "user", content: "Hi" }] })
 * )
 * // A web handler can answer with it too.
 * const response = new Response(Stream.toReadableStream(body), { headers: { "content-type": "text/event-stream" } })
 * ```
 *
 * @since 0.1.0
 * @category encoding
 */
export const toServerSentEvents = <E, R>(stream: Stream.Stream<StreamChunk, E, R>): Stream.Stream<Uint8Array, never, R> =>
  stream.pipe(
    Stream.mapArray((chunks) => [encoder.encode(chunks.map(serverSentEvent).join(""))]),
    Stream.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Stream.fromEffect(Effect.interrupt)
        : Stream.fromEffect(
          Effect.as(Effect.logError("The chat stream failed", cause), encoder.encode(runErrorEvent(Cause.squash(cause))))
        )
    )
  )
