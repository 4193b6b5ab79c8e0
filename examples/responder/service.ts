/**
 * The responder as it is deployed: an HTTP service on `effect/http` that
 * the tracker calls with a webhook when an issue is opened. Each issue
 * starts a durable run of the responder agent on PostgreSQL whose run id is
 * the issue's, so that a redelivered webhook joins that run instead of
 * answering twice, and a run whose process died is finished by the next
 * process that starts. Its comment is an effect tool's, kept in the same
 * database: one comment per issue, across crashes.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import { createServer } from 'node:http'
import type { AnyTextAdapter } from '@tanstack/ai'
import { NodeHttpServer } from '@effect/platform-node'
import { PgClient } from '@effect/sql-pg'
import { DurableAgent, DurableEngine } from '@tanstack/ai-effect/durable'
import { layerSql } from '@tanstack/ai-effect/sql'
import { Effect, Layer, Redacted, Schema } from 'effect'
import { HttpRouter, HttpServer, HttpServerResponse } from 'effect/http'
import { CommentPosted, makeResponder, Markers } from './responder.ts'
import { Tracker } from './Tracker.ts'

export interface ResponderServiceOptions {
  readonly adapter: AnyTextAdapter
  readonly databaseUrl: Redacted.Redacted<string>
  readonly tracker: { readonly url: string; readonly token: string }
  /** The secret the tracker signs its webhooks with. */
  readonly webhookSecret: Redacted.Redacted<string>
  /** The secret of the effect markers in the responder's comments. */
  readonly markerSecret: Redacted.Redacted<string>
  readonly port: number
  readonly host: string
}

const IssueOpened = Schema.Struct({
  action: Schema.Literal('opened'),
  issue: Schema.Struct({ number: Schema.Int, title: Schema.String, body: Schema.String }),
})

const decodeIssueOpened = Schema.decodeUnknownEffect(Schema.fromJsonString(IssueOpened))

/** Whether the tracker signed this body with the shared secret. */
const signedBy = (secret: Redacted.Redacted<string>, body: string, signature: string | undefined): boolean => {
  const expected = Buffer.from(`sha256=${createHmac('sha256', Redacted.value(secret)).update(body).digest('hex')}`)
  const given = Buffer.from(signature ?? '')
  return given.length === expected.length && timingSafeEqual(given, expected)
}

const Webhooks = (options: ResponderServiceOptions, responder: ReturnType<typeof durableResponder>) =>
  HttpRouter.use((router) =>
    router.add('POST', '/webhooks/tracker', (request) =>
      Effect.gen(function* () {
        const body = yield* request.text
        if (!signedBy(options.webhookSecret, body, request.headers['x-tracker-signature'])) {
          return HttpServerResponse.text('Bad signature', { status: 401 })
        }
        const { issue } = yield* decodeIssueOpened(body)
        // The issue's run id is the idempotency key: a redelivery joins the run it started.
        const runId = `issue-${issue.number}`
        yield* responder.start({
          runId,
          trigger: 'webhook',
          messages: [{ role: 'user', content: `Issue #${issue.number}: ${issue.title}\n\n${issue.body}` }],
        })
        // A redelivery for a run that failed (the model was down) tries it again, keeping what it finished.
        yield* responder.retry(runId)
        return HttpServerResponse.jsonUnsafe({ runId }, { status: 202 })
      }).pipe(
        Effect.catchTag('SchemaError', (error) => Effect.succeed(HttpServerResponse.text(error.message, { status: 400 }))),
        // The issue was edited before the redelivery: its run answers the first text.
        Effect.catchTag('DurableRunInputMismatch', (error) => Effect.succeed(HttpServerResponse.text(error.message, { status: 409 }))),
        Effect.catchTags({
          DurableRunNotFound: (error) => Effect.succeed(HttpServerResponse.text(error.message, { status: 503 })),
          DurableRunStoreError: (error) => Effect.succeed(HttpServerResponse.text(error.message, { status: 503 })),
        }),
        Effect.catchTag('HttpServerError', () => Effect.succeed(HttpServerResponse.text('Unreadable body', { status: 400 }))),
      ),
    ),
  )

const durableResponder = (adapter: AnyTextAdapter) => DurableAgent.make(makeResponder(adapter))

const announce = Layer.effectDiscard(
  Effect.gen(function* () {
    const server = yield* HttpServer.HttpServer
    yield* Effect.logInfo(`The responder is listening on ${HttpServer.formatAddress(server.address)}`)
  }),
)

/** The whole service as a Layer: launch it, or build it in a test's scope. */
export const ResponderService = (options: ResponderServiceOptions) => {
  const responder = durableResponder(options.adapter)
  const database = PgClient.layer({ url: options.databaseUrl })
  // The run's body, on the engine, with every service its tools need.
  const runs = responder.layer.pipe(
    Layer.provideMerge(DurableEngine.layerSingleRunner()),
    Layer.provide(CommentPosted.layer),
    Layer.provideMerge(Layer.mergeAll(
      Tracker.layer(options.tracker),
      Markers.layer(options.markerSecret),
      layerSql(),
    )),
    Layer.provide(database),
  )
  return HttpRouter.serve(Webhooks(options, responder), { disableListenLog: true }).pipe(
    Layer.merge(announce),
    Layer.provide(runs),
    Layer.provide(NodeHttpServer.layer(createServer, { port: options.port, host: options.host })),
  )
}
