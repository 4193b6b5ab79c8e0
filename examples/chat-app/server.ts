/**
 * The Effect Chat server, on `effect/http`: the page (built by Vite), the
 * chat route, and a read-only view of the recorded effects. Every service
 * (the orders database, the outbox, the effect store on SQLite, the durable
 * runs' engine) comes from one Layer, built once for the process.
 *
 * Each message is answered by a durable agent run by default: a crash of
 * the server does not lose the answer (the next process resumes the run and
 * the page rejoins it), a finished model turn is not asked again, and a
 * refund waits for a person's approval across restarts.
 */
import { createServer } from 'node:http'
import type { AnyTextAdapter } from '@tanstack/ai'
import { NodeHttpServer } from '@effect/platform-node'
import * as AI from '@tanstack/ai-effect'
import { DurableAgent } from '@tanstack/ai-effect/durable'
import { ChatRoute } from '@tanstack/ai-effect/http'
import { layerSql } from '@tanstack/ai-effect/sql'
import { layerSqliteClient } from '@tanstack/ai-effect/sqlite'
import { Effect, Layer } from 'effect'
import { HttpRouter, type HttpServerRequest, HttpServer, HttpServerResponse, HttpStaticServer } from 'effect/http'
import { DbLive } from '../orders/db.ts'
import { Conversations, type ConversationStore, DurableRuns } from './conversations.ts'
import { Outbox } from './Outbox.ts'
import { getOrder, notify, refund, trackShipment } from './tools.ts'

export interface ChatAppOptions {
  readonly adapter: AnyTextAdapter
  /** What the page says about the model, for example "offline demo model". */
  readonly modelLabel: string
  readonly offline: boolean
  /** The SQLite file of the effect store and the outbox (and of the conversations and the durable engine, by default). */
  readonly effectsDb: string
  /** Where threads, delivery logs and thread locks live: the SQLite file unless configured. */
  readonly conversations?: ConversationStore
  /** The built page. */
  readonly webRoot: string
  readonly port: number
  readonly host: string
  /** A log line per request (the default); the load benchmark turns it off, as its core route has none. */
  readonly accessLog?: boolean
  /**
   * How a message is answered: by a durable agent run (the default), or by
   * a plain chat run in the process that received it (`CHAT_RUNS=plain`).
   */
  readonly runs?: 'durable' | 'plain'
}

/**
 * The plain route's options. A model streams a few words at a time: append
 * them to the log (and so to the page) in small batches rather than core's 32.
 */
export const plainRouteOptions: ChatRoute.RouteOptions = { batch: 4 }

/** The app's tools, for a plain run and a durable one alike. */
export const tools = [getOrder, notify, trackShipment, refund] as const

/** The assistant whose runs are durable: the same model and tools as a plain run. */
const assistant = (options: ChatAppOptions) =>
  DurableAgent.make(
    AI.defineAgent({
      name: 'effect-chat',
      adapter: options.adapter,
      instructions: 'You answer questions about orders with the tools you have.',
      tools,
    }),
  )

const storeOf = (options: Pick<ChatAppOptions, 'conversations'>): ConversationStore => options.conversations ?? { _tag: 'sqlite' }

/**
 * The app's services, built once for the process. The effect store, and the
 * conversations when they are kept in the app's file, run on one connection
 * to the file: the writes of concurrent runs share its commits. The load
 * benchmark serves parts of the chat route on them, to measure each part.
 */
export const services = (options: Pick<ChatAppOptions, 'effectsDb' | 'conversations'>) => {
  const effects = layerSql()
  return Layer.mergeAll(DbLive, Outbox.layer(options.effectsDb), effects, Conversations(storeOf(options)).pipe(Layer.provide(effects))).pipe(
    Layer.provide(layerSqliteClient({ filename: options.effectsDb })),
  )
}

/** The routes, with the chat route `chat` on `/api/chat`. */
const Api = <R>(options: ChatAppOptions, chat: Effect.Effect<HttpServerResponse.HttpServerResponse, never, R | HttpServerRequest.HttpServerRequest>) =>
  HttpRouter.use((router) =>
    Effect.gen(function* () {
      const outbox = yield* Outbox
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

/** The page and the routes, served. */
const served = <R>(options: ChatAppOptions, routes: Layer.Layer<never, never, R>) =>
  HttpRouter.serve(Layer.mergeAll(routes, HttpStaticServer.layer({ root: options.webRoot })), {
    disableListenLog: true,
    disableLogger: options.accessLog === false,
  })

/** What Node's HTTP server layer provides: the server, its platform, files and paths. */
type NodeServer = Layer.Success<ReturnType<typeof NodeHttpServer.layer>>

/** The server on its port, once the services it needs are built. */
const listening = <R>(options: ChatAppOptions, app: Layer.Layer<never, unknown, R | NodeServer>, services: Layer.Layer<R, unknown>) =>
  app.pipe(
    Layer.merge(announce),
    // The server listens once its services are up: a request it accepted earlier (a client reconnecting to a restarted process) would wait for a handler forever.
    Layer.provide(NodeHttpServer.layer(createServer, { port: options.port, host: options.host })),
    Layer.provide(services),
  )

/**
 * The whole server as a Layer: launch it, or build it in a test's scope.
 * Threads live on the server: a run is written to its delivery log as it
 * streams and goes on when its page reloads or its connection drops (the
 * page rejoins it); GET hydrates a thread, DELETE is the Stop button.
 */
export const ChatApp = (options: ChatAppOptions): Layer.Layer<never, unknown> => {
  if (options.runs === 'plain') {
    const chat = ChatRoute.persistentHandler(
      (params) => AI.chat({ adapter: options.adapter, ...params, tools: [...tools] }),
      plainRouteOptions,
    )
    return listening(options, served(options, Api(options, chat)), services(options))
  }
  // A durable run: its runner writes each chunk to the log as it comes, and the next process resumes it after a crash.
  const agent = assistant(options)
  return listening(
    options,
    served(options, Api(options, ChatRoute.durableHandler(agent))),
    // The runs' body, with the tools' services and the conversations it writes, beside the engine.
    agent.layer.pipe(Layer.provideMerge(DurableRuns(storeOf(options), options.effectsDb)), Layer.provideMerge(services(options))),
  )
}
