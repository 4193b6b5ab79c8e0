/**
 * Reads an async iterable into a Stream in batches: every element that is
 * ready by the next turn of the event loop goes out in one chunk.
 *
 * `Stream.fromAsyncIterable` resumes the pulling fiber once per element; for
 * a model's stream of thousands of text deltas that resumption is most of
 * the cost. A batch ends when the next element is not ready within one
 * `setImmediate`, so an element that is ready is never held back for a later
 * one: a slow stream is delivered element by element, as it arrives.
 */
import { Cause, Channel, Effect, Scope, Stream } from "effect"
import type * as Arr from "effect/Array"

const notReady = Symbol()

const nextTurn = (): Promise<typeof notReady> => new Promise((resolve) => setImmediate(() => resolve(notReady)))

/** At most this many elements per chunk, so that a chunk stays small for the consumer. */
const maxBatch = 1024

export const fromAsyncIterableBatched = <A, E>(
  iterable: AsyncIterable<A>,
  onError: (error: unknown) => E,
  /** Sees every batch before it goes out, without a stage of its own. */
  onBatch?: (batch: Arr.NonEmptyReadonlyArray<A>) => void,
  /** Called once the iterable has ended (not when it failed, nor when the stream stopped before). */
  onEnd?: () => void
): Stream.Stream<A, E> =>
  Stream.fromChannel(Channel.fromTransform((_, scope) =>
    Effect.gen(function*() {
      const iterator = iterable[Symbol.asyncIterator]()
      // The `next()` asked for and not settled yet: awaited by a pull, or kept
      // for the next pull when it was not ready in time. The finalizer must see
      // every one: a tool runs inside core's `next()`, and a stop from inside
      // the tool must not await a `return()` that waits for that tool.
      let pending: Promise<IteratorResult<A>> | undefined
      let finished = false
      if (iterator.return) {
        // `return()` may not settle until a pending `next()` does, so only await it when idle.
        yield* Scope.addFinalizer(
          scope,
          Effect.suspend(() =>
            pending === undefined
              ? Effect.promise(() => iterator.return!())
              : Effect.sync(() => void iterator.return!().catch(() => undefined))
          )
        )
      }
      const readBatch = async (): Promise<Arr.NonEmptyReadonlyArray<A> | undefined> => {
        const first = await (pending ??= iterator.next())
        pending = undefined
        if (first.done === true) {
          onEnd?.()
          return undefined
        }
        const batch: [A, ...Array<A>] = [first.value]
        const turn = nextTurn()
        while (batch.length < maxBatch) {
          const next = pending = iterator.next()
          const result = await Promise.race([next, turn])
          if (result === notReady) break
          pending = undefined
          if (result.done === true) {
            finished = true
            onEnd?.()
            break
          }
          batch.push(result.value)
        }
        onBatch?.(batch)
        return batch
      }
      return Effect.flatMap(
        Effect.tryPromise({ try: () => finished ? Promise.resolve(undefined) : readBatch(), catch: onError }),
        (batch) => batch === undefined ? Cause.done() : Effect.succeed(batch)
      )
    })
  ))
