/**
 * The issue tracker as an Effect service, over HTTP.
 */
import { Context, Effect, flow, Layer, Predicate, Schema } from 'effect'
import { FetchHttpClient, HttpClient, HttpClientRequest, HttpClientResponse } from 'effect/http'

export class Comment extends Schema.Class<Comment>('Comment')({
  id: Schema.Int,
  issue: Schema.Int,
  author: Schema.String,
  body: Schema.String,
}) {}

export class TrackerError extends Schema.TaggedError<TrackerError>()('TrackerError', {
  operation: Schema.String,
  cause: Schema.Defect(),
}) {
  override get message(): string {
    return `${this.operation} failed: ${Predicate.hasProperty(this.cause, 'message') ? String(this.cause.message) : 'no answer'}`
  }
}

export class Tracker extends Context.Service<
  Tracker,
  {
    /** The account the token posts as. */
    readonly account: string
    readonly listComments: (issue: number) => Effect.Effect<ReadonlyArray<Comment>, TrackerError>
    readonly postComment: (issue: number, body: string) => Effect.Effect<Comment, TrackerError>
  }
>()('examples/responder/Tracker') {
  static readonly layer = (options: { readonly url: string; readonly token: string }) =>
    Layer.effect(
      Tracker,
      Effect.gen(function* () {
        const client = (yield* HttpClient.HttpClient).pipe(
          HttpClient.mapRequest(
            flow(HttpClientRequest.prependUrl(options.url), HttpClientRequest.bearerToken(options.token), HttpClientRequest.acceptJson),
          ),
          HttpClient.filterStatusOk,
        )
        const failed = (operation: string) => (cause: unknown) => new TrackerError({ operation, cause })
        const account = yield* client.get('/user').pipe(
          Effect.flatMap(HttpClientResponse.schemaBodyJson(Schema.Struct({ login: Schema.String }))),
          Effect.map(({ login }) => login),
          Effect.mapError(failed('whoami')),
        )
        return Tracker.of({
          account,
          listComments: (issue) =>
            client.get(`/issues/${issue}/comments`).pipe(
              Effect.flatMap(HttpClientResponse.schemaBodyJson(Schema.Array(Comment))),
              Effect.mapError(failed('listComments')),
              Effect.withSpan('Tracker.listComments', { attributes: { issue } }),
            ),
          postComment: (issue, body) =>
            HttpClientRequest.post(`/issues/${issue}/comments`).pipe(
              HttpClientRequest.bodyJsonUnsafe({ body }),
              client.execute,
              Effect.flatMap(HttpClientResponse.schemaBodyJson(Comment)),
              Effect.mapError(failed('postComment')),
              Effect.withSpan('Tracker.postComment', { attributes: { issue } }),
            ),
        })
      }),
    ).pipe(Layer.provide(FetchHttpClient.layer))
}
