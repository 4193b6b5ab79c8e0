/**
 * A stream made by an Effect whose resources live exactly as long as the
 * stream: they are released when it ends, fails or is interrupted, before
 * the finalizers of anything that wraps it (`Stream.ensuring` after it).
 * `Stream.unwrap` leaves them to the scope of the whole pipeline, which
 * closes after those finalizers.
 */
import { Channel, Effect, Scope, Stream } from "effect"

export const unwrapScoped = <A, E, R, E2, R2>(
  make: Effect.Effect<Stream.Stream<A, E2, R2>, E, R>
): Stream.Stream<A, E | E2, Exclude<R, Scope.Scope> | R2> =>
  Stream.fromChannel(
    Channel.fromTransformBracket((upstream, _, streamScope) =>
      Effect.flatMap(Scope.provide(make, streamScope), (stream) => Channel.toTransform(Stream.toChannel(stream))(upstream, streamScope))
    )
  )
