/**
 * Reads an async iterable into a Stream in batches: every element that is
 * ready by the next turn of the event loop goes out in one chunk.
 *
 * `Stream.fromAsyncIterable` resumes the pulling fiber once per element; for
 * a model's stream of thousands of text deltas that resumption is most of
 * the cost. A batch ends when the next element is not ready within one
 * `setImmediate`, so an element that is ready is never held back for a later
 * one: a slow stream is delivered element by element, as it arrives.
 *
 * The reader is a pump: each settled `next()` pushes its element into the
 * batch and asks for the next one, at the cost of one `then` per element
 * (no race against the turn, no async function per element).
 *
 * The same batches serve a web stream of bytes (a response core encoded):
 * the parts of a batch are joined, so that a server writes them at once.
 */
import { Cause, Channel, Effect, identity, Scope, Stream } from "effect"
import * as Arr from "effect/Array"

/** At most this many elements per chunk, so that a chunk stays small for the consumer. */
const maxBatch = 1024

type Resume<A, E> = (effect: Effect.Effect<Arr.NonEmptyReadonlyArray<A>, E | Cause.Done>) => void

export const fromAsyncIterableBatched = <A, E>(
  iterable: AsyncIterable<A>,
  onError: (error: unknown) => E,
  /** Called once the iterable has ended (not when it failed, nor when the stream stopped before). */
  onEnd?: () => void
): Stream.Stream<A, E> =>
  Stream.fromChannel(Channel.fromTransform((_, scope) =>
    Effect.suspend(() => {
      const iterator = iterable[Symbol.asyncIterator]()
      // A `next()` asked for and not settled yet. The finalizer must know: a
      // tool runs inside core's `next()`, and a stop from inside the tool must
      // not await a `return()` that waits for that tool.
      let inFlight = false
      let finished = false
      let failure: { readonly error: unknown } | undefined
      // Elements read and not delivered yet.
      let batch: Array<A> = []
      // The pull waiting for a batch, and the turn that ends it.
      let waiting: Resume<A, E> | undefined
      let turn: ReturnType<typeof setImmediate> | undefined

      const deliver = () => {
        if (turn !== undefined) {
          clearImmediate(turn)
          turn = undefined
        }
        const resume = waiting!
        waiting = undefined
        const out = batch
        if (Arr.isArrayNonEmpty(out)) {
          batch = []
          resume(Effect.succeed(out))
        } else if (failure !== undefined) {
          resume(Effect.fail(onError(failure.error)))
        } else {
          resume(Cause.done())
        }
      }
      const onTurn = () => {
        turn = undefined
        if (waiting !== undefined && batch.length > 0) deliver()
      }
      const onResult = (result: IteratorResult<A>) => {
        inFlight = false
        if (result.done === true) {
          finished = true
          onEnd?.()
          if (waiting !== undefined) deliver()
          return
        }
        batch.push(result.value)
        // Without a waiting pull, the element waits for the next one.
        if (waiting === undefined) return
        if (batch.length >= maxBatch) return deliver()
        turn ??= setImmediate(onTurn)
        ask()
      }
      const onFailure = (error: unknown) => {
        inFlight = false
        failure = { error }
        if (waiting !== undefined) deliver()
      }
      const ask = () => {
        inFlight = true
        iterator.next().then(onResult, onFailure)
      }

      const pull = Effect.callback<Arr.NonEmptyReadonlyArray<A>, E | Cause.Done>((resume) => {
        waiting = resume
        if (batch.length >= maxBatch || finished || failure !== undefined) return deliver()
        if (batch.length > 0) turn ??= setImmediate(onTurn)
        if (!inFlight) ask()
        // Interrupted while waiting: the element in flight stays for the finalizer.
        return Effect.sync(() => {
          waiting = undefined
          if (turn !== undefined) clearImmediate(turn)
          turn = undefined
        })
      })

      if (iterator.return === undefined) return Effect.succeed(pull)
      // `return()` may not settle until the `next()` in flight does, so only await it when idle.
      return Effect.as(
        Scope.addFinalizer(
          scope,
          Effect.suspend(() =>
            inFlight
              ? Effect.sync(() => void iterator.return!().catch(() => undefined))
              : Effect.promise(() => iterator.return!())
          )
        ),
        pull
      )
    })
  ))

/**
 * A web stream of bytes as a Stream whose every element joins the parts
 * that were ready together: a server then writes them with one call, where
 * a Stream of the web stream's own parts writes each (a server-sent event
 * per part, and a socket write per event). Ending the Stream early cancels
 * the web stream at once, a read in flight included, as `getReader()`'s
 * `cancel` does; its async iterator would wait for that read to settle.
 */
export const fromReadableStreamJoined = (body: ReadableStream<Uint8Array>): Stream.Stream<Uint8Array, unknown> =>
  fromAsyncIterableBatched<Uint8Array, unknown>({
    [Symbol.asyncIterator]: () => {
      const reader = body.getReader()
      return {
        // A read's result is an iterator result: `{ done, value }`.
        next: () => reader.read() as Promise<IteratorResult<Uint8Array>>,
        return: () => reader.cancel().then(() => ({ done: true, value: undefined }))
      }
    }
  }, identity).pipe(Stream.mapArray((parts) => [joined(parts)]))

const joined = (parts: Arr.NonEmptyReadonlyArray<Uint8Array>): Uint8Array => {
  if (parts.length === 1) return parts[0]
  let length = 0
  for (const part of parts) length += part.length
  const bytes = new Uint8Array(length)
  let offset = 0
  for (const part of parts) {
    bytes.set(part, offset)
    offset += part.length
  }
  return bytes
}
