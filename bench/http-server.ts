/**
 * A server process of the HTTP benchmark (`bench/http.ts`), one of:
 *
 * - `model`: the offline demo model, a fake OpenAI Responses API;
 * - `effect <port> <model URL>`: the Effect Chat server (`effect/http`, its
 *   real `/api/chat` route, the SQLite store, the app's tools) with plain
 *   runs (`CHAT_RUNS=plain`);
 * - `effect-durable <port> <model URL>`: the same server with its default
 *   durable runs, on the engine in its SQLite file;
 * - `core <port> <model URL>`: a route on node:http with core `chat()` and
 *   core server tools of the app's four definitions (so that each model
 *   request declares the same tools), against the same model;
 * - `core-on-effect-http <port> <model URL>`: the same core route served by
 *   `effect/http` through web `Request`/`Response` conversions, the way
 *   Effect Chat served its own before `ChatRoute`, for comparison;
 * - `route`, `route-log-memory`, `route-log`, `route-log-thread` `<port>
 *   <model URL>`: Effect Chat's plain route built up one part at a time, on
 *   the app's services and tools, so that the table can say what each part
 *   of a kept conversation costs: `ChatRoute.handler` alone; served through
 *   a delivery log in memory (core's durable encoder and the log's path);
 *   through the app's SQLite log (its appends' commits); and with the
 *   thread kept on SQLite (`AI.ThreadStore.persist`). The lock is what
 *   `effect` adds to the last.
 *
 * It prints `ready <base URL>` once it listens.
 */
import { createServer } from 'node:http'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chat, chatParamsFromRequest, toServerSentEventsResponse } from '@tanstack/ai'
import { NodeHttpServer, NodeRuntime } from '@effect/platform-node'
import * as AI from '@tanstack/ai-effect'
import { ChatRoute } from '@tanstack/ai-effect/http'
import { startFakeOpenAI } from '@tanstack/ai-effect/testing'
import { createOpenaiChat } from '@tanstack/ai-openai'
import { Effect, Layer } from 'effect'
import { HttpRouter, HttpServerRequest, HttpServerResponse } from 'effect/http'
import { demoModel } from '../examples/chat-app/demo-model.ts'
import { ChatApp, plainRouteOptions, services, tools } from '../examples/chat-app/server.ts'
import { notifyDef, refundDef, trackShipmentDef } from '../examples/chat-app/tools.ts'
import { getOrderDef } from '../examples/orders/tools.ts'

const [kind, portText, modelURL] = process.argv.slice(2)

/** Core's route: `chat()` with core server tools of the app's `get_order`, `notify`, `track_shipment` and `refund`. */
function coreRoute() {
  const adapter = createOpenaiChat('gpt-5.2', 'offline', { baseURL: modelURL! })
  const getOrder = getOrderDef.server(async ({ id }) => {
    if (id !== 'A-100') throw new Error(`OrderNotFound: ${id}`)
    return { status: 'shipped' }
  })
  let sent = 0
  const notify = notifyDef.server(async () => ({ messageId: ++sent }))
  const trackShipment = trackShipmentDef.server(async ({ id }) => ({ id, status: 'arrived' }))
  const refund = refundDef.server(async ({ id }) => ({ id, messageId: ++sent }))
  return async (request: Request): Promise<Response> => {
    const params = await chatParamsFromRequest(request)
    return toServerSentEventsResponse(chat({ adapter, ...params, tools: [getOrder, notify, trackShipment, refund] }))
  }
}
const port = Number(portText)
const host = '127.0.0.1'

if (kind === 'model') {
  const model = await startFakeOpenAI(demoModel)
  console.log(`ready ${model.baseURL}`)
} else if (kind === 'effect' || kind === 'effect-durable') {
  const directory = mkdtempSync(join(tmpdir(), 'ai-effect-bench-http-'))
  NodeRuntime.runMain(
    Layer.launch(
      ChatApp({
        adapter: createOpenaiChat('gpt-5.2', 'offline', { baseURL: modelURL! }),
        modelLabel: 'offline demo model',
        offline: true,
        effectsDb: join(directory, 'effects.db'),
        webRoot: directory,
        runs: kind === 'effect' ? 'plain' : 'durable',
        port,
        host,
        accessLog: false,
      }),
    ),
    { disableErrorReporting: false },
  )
  // Ready once it answers: the server listens only after its services (the durable engine among them) are up.
  while (!(await fetch(`http://${host}:${port}/api/info`).then((response) => response.ok, () => false))) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  console.log(`ready http://${host}:${port}`)
} else if (kind === 'route' || kind === 'route-log-memory' || kind === 'route-log' || kind === 'route-log-thread') {
  const directory = mkdtempSync(join(tmpdir(), 'ai-effect-bench-http-'))
  const adapter = createOpenaiChat('gpt-5.2', 'offline', { baseURL: modelURL! })
  const run = (params: AI.ChatRequestParams) => AI.chat({ adapter, ...params, tools: [...tools] })
  const chat =
    kind === 'route'
      ? ChatRoute.handler(run)
      : kind === 'route-log-thread'
        ? ChatRoute.resumableHandler((params) => run(params).pipe(AI.ThreadStore.persist(params)), plainRouteOptions)
        : ChatRoute.resumableHandler(run, plainRouteOptions)
  const Api = HttpRouter.use((router) => router.add('POST', '/api/chat', chat))
  NodeRuntime.runMain(
    Layer.launch(
      HttpRouter.serve(Api, { disableListenLog: true, disableLogger: true }).pipe(
        Layer.provide(kind === 'route-log-memory' ? AI.StreamLog.layerMemory() : Layer.empty),
        Layer.provide(NodeHttpServer.layer(createServer, { port, host })),
        Layer.provide(services({ effectsDb: join(directory, 'effects.db') })),
        Layer.merge(Layer.effectDiscard(Effect.sync(() => console.log(`ready http://${host}:${port}`)))),
      ),
    ),
  )
} else if (kind === 'core-on-effect-http') {
  const route = coreRoute()
  const Api = HttpRouter.use((router) =>
    router.add('POST', '/api/chat', (request) =>
      Effect.map(
        Effect.flatMap(HttpServerRequest.toWeb(request), (web) => Effect.promise(() => route(web))),
        HttpServerResponse.fromWeb,
      )))
  NodeRuntime.runMain(
    Layer.launch(
      HttpRouter.serve(Api, { disableListenLog: true, disableLogger: true }).pipe(
        Layer.provide(NodeHttpServer.layer(createServer, { port, host })),
        Layer.merge(Layer.effectDiscard(Effect.sync(() => console.log(`ready http://${host}:${port}`)))),
      ),
    ),
  )
} else if (kind === 'core') {
  const route = coreRoute()
  const server = createServer(async (req, res) => {
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const request = new Request(`http://${host}:${port}${req.url}`, {
      method: req.method!,
      headers: req.headers as Record<string, string>,
      body: Buffer.concat(chunks),
    })
    try {
      const response = await route(request)
      res.writeHead(response.status, Object.fromEntries(response.headers))
      for await (const chunk of response.body!) res.write(chunk)
      res.end()
    } catch (error) {
      res.writeHead(error instanceof Response ? error.status : 500).end(String(error))
    }
  })
  server.listen(port, host, () => console.log(`ready http://${host}:${port}`))
} else {
  console.error(`Unknown server kind: ${kind}`)
  process.exit(2)
}
