/**
 * The Effect Chat server, on `effect/http`: the page (built by Vite), the
 * chat route, and a read-only view of the recorded effects. Every service
 * (the orders database, the outbox, the effect store on SQLite) comes from
 * one Layer, built once for the process.
 */
import { createServer } from 'node:http'
import type { AnyTextAdapter } from '@tanstack/ai'
import { NodeHttpServer } from '@effect/platform-node'
import * as AI from '@tanstack/ai-effect'
import { ChatRoute } from '@tanstack/ai-effect/http'
import { layerSqlite } from '@tanstack/ai-effect/sqlite'
import { Effect, Layer } from 'effect'
import { HttpRouter, HttpServer, HttpServerResponse, HttpStaticServer } from 'effect/http'
import { DbLive } from '../orders/db.ts'
import { Conversations, type ConversationStore } from './conversations.ts'
import { Outbox } from './Outbox.ts'
import { getOrder, notify, trackShipment } from './tools.ts'

export interface ChatAppOptions {
  readonly adapter: AnyTextAdapter
  /** What the page says about the model, for example "offline demo model". */
  readonly modelLabel: string
  readonly offline: boolean
  /** The SQLite file of the effect store and the outbox (and of the conversations, by default). */
  readonly effectsDb: string
  /** Where threads, delivery logs and thread locks live: the SQLite file unless configured. */
  readonly conversations?: ConversationStore
  /** The built page. */
  readonly webRoot: string
  readonly port: number
  readonly host: string
  /** A log line per request (the default); the load benchmark turns it off, as its core route has none. */
  readonly accessLog?: boolean
}

/** The app's services, built once for the process. */
const services = (options: ChatAppOptions) =>
  Layer.mergeAll(
    DbLive,
    Outbox.layer(options.effectsDb),
    layerSqlite({ filename: options.effectsDb }),
    Conversations(options.conversations ?? { _tag: 'sqlite', filename: options.effectsDb }),
  )

const Api = (options: ChatAppOptions) =>
  HttpRouter.use((router) =>
    Effect.gen(function* () {
      const outbox = yield* Outbox
      // Threads live on the server: a run is written to its delivery log as it
      // streams and goes on when its page reloads or its connection drops (the
      // page rejoins it); GET hydrates a thread, DELETE is the Stop button.
      const chat = ChatRoute.persistentHandler(
        (params) => AI.chat({ adapter: options.adapter, ...params, tools: [getOrder, notify, trackShipment] }),
        // A model streams a few words at a time: append them to the log (and so
        // to the page) in small batches rather than core's 32.
        { batch: 4 },
      )
      for (const method of ['POST', 'GET', 'DELETE'] as const) yield* router.add(method, '/api/chat', chat)
      yield* router.add(
        'GET',
        '/api/effects',
        Effect.map(Effect.all([outbox.messages, outbox.recordedEffects]), ([messages, effects]) =>
          HttpServerResponse.jsonUnsafe({ messages, effects }),
        ),
      )
      yield* router.add('GET', '/api/info', HttpServerResponse.jsonUnsafe({ model: options.modelLabel, offline: options.offline }))
    }),
  )

const announce = Layer.effectDiscard(
  Effect.gen(function* () {
    const server = yield* HttpServer.HttpServer
    yield* Effect.logInfo(`Effect Chat is listening on ${HttpServer.formatAddress(server.address)}`)
  }),
)

/** The whole server as a Layer: launch it, or build it in a test's scope. */
export const ChatApp = (options: ChatAppOptions) =>
  HttpRouter.serve(Layer.mergeAll(Api(options), HttpStaticServer.layer({ root: options.webRoot })), { disableListenLog: true, disableLogger: options.accessLog === false }).pipe(
    Layer.merge(announce),
    // The server listens once its services are up: a request it accepted earlier (a client reconnecting to a restarted process) would wait for a handler forever.
    Layer.provide(NodeHttpServer.layer(createServer, { port: options.port, host: options.host })),
    Layer.provide(services(options)),
  )
