/**
 * Helpers shared by the scripted adapter and the fake provider servers.
 */
import { once } from "node:events"
import { createServer, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, type Scope } from "effect"

/** The text deltas of a reply (`ScriptedReply`), in order. */
export const textDeltas = (reply: { readonly text?: string | ReadonlyArray<string> | undefined }): ReadonlyArray<string> =>
  reply.text === undefined ? [] : typeof reply.text === "string" ? [reply.text] : reply.text

/** The arguments' text a model sends for a call (`ScriptedToolCall`): the raw text when the script gives one. */
export const argumentsText = (call: { readonly rawArgs?: string | undefined; readonly args?: unknown }): string => call.rawArgs ?? JSON.stringify(call.args ?? {})

/** The tokens a fake reports for a turn whose reply gives none (`FakeUsage`). */
export const defaultUsage = { inputTokens: 10, outputTokens: 5 } as const

/** A script's turn: a reply, or a function of the request that gives one. */
type Turn<Request, Reply> = Reply | ((request: Request) => Reply)

const isReplyOf = <Request, Reply>(turn: Turn<Request, Reply>): turn is (request: Request) => Reply => typeof turn === "function"

/**
 * The reply a script gives to its `index`-th request (counted from 0):
 * `undefined` when a fixed script has no such turn.
 */
export const replyAt = <Request, Reply>(
  script: ReadonlyArray<Turn<Request, Reply>> | ((request: Request, index: number) => Reply),
  request: Request,
  index: number
): Reply | undefined => {
  const turn = typeof script === "function" ? script(request, index) : script[index]
  return turn === undefined || !isReplyOf(turn) ? turn : turn(request)
}

/** Answers now, or after `delayMs` unless the client went away meanwhile. */
export const afterDelay = (res: ServerResponse, delayMs: number | undefined, answer: () => void): void => {
  if (delayMs === undefined) answer()
  else setTimeout(() => res.destroyed || answer(), delayMs)
}

/** Resolves after `delayMs` (at once when there is none). */
export const sleep = (delayMs: number | undefined): Promise<void> =>
  delayMs === undefined ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, delayMs))

/** Answers with a JSON body. */
export const sendJson = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify(body))
}

/** Answers 200 with a JSON content type and a body that is not JSON. */
export const sendMalformedJson = (res: ServerResponse): void => {
  res.writeHead(200, { "content-type": "application/json" })
  res.end("{ this is not json")
}

/** Starts a server-sent event stream and gives its writer: `event:` (when named) and `data:` lines. */
export const eventStream = (res: ServerResponse): (data: unknown, event?: string) => void => {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
  return (data, event) => {
    res.write(`${event === undefined ? "" : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`)
  }
}

/** Answers a request from its JSON body (`routeOf` saw its method and path). */
export type Route = (body: Record<string, unknown>, res: ServerResponse) => void

/** A fake provider's HTTP server on 127.0.0.1. */
export interface FakeHttp {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string
  /** How many responses the client aborted before they completed. */
  readonly aborted: () => number
  readonly close: () => Promise<void>
}

/**
 * Starts an HTTP server on a free port of 127.0.0.1 that parses each
 * request's JSON body and hands it to the route `routeOf` picks for its
 * method and path; `refuse` answers what no route takes, and a body that is
 * not JSON, in the provider's error shape.
 */
export const startFakeHttp = async (
  routeOf: (method: string, path: string) => Route | undefined,
  refuse: (res: ServerResponse, status: number, message: string) => void
): Promise<FakeHttp> => {
  let aborted = 0
  const server = createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0] ?? ""
    const route = routeOf(req.method ?? "", path)
    if (route === undefined) return refuse(res, 404, `No route ${req.method} ${req.url}`)
    let text = ""
    req.setEncoding("utf8")
    req.on("data", (part: string) => (text += part))
    req.on("end", () => {
      res.on("close", () => {
        if (!res.writableFinished) aborted++
      })
      let body: Record<string, unknown>
      try {
        body = JSON.parse(text) as Record<string, unknown>
      } catch {
        return refuse(res, 400, "The request body is not JSON")
      }
      route(body, res)
    })
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const { port } = server.address() as AddressInfo
  return {
    origin: `http://127.0.0.1:${port}`,
    aborted: () => aborted,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      })
  }
}

/** A server as a scoped resource: started on acquire, closed with the scope. */
export const scopedServer = <Server extends { readonly close: () => Promise<void> }>(
  start: () => Promise<Server>
): Effect.Effect<Server, never, Scope.Scope> =>
  Effect.acquireRelease(Effect.promise(start), (server) => Effect.promise(() => server.close()))
