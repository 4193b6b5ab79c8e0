/**
 * Serves a fetch-style handler (`(request: Request) => Promise<Response>`, the
 * shape of a Next.js or TanStack Start route) from Node's HTTP server.
 *
 * When the client goes away before the response ends, the response body is
 * cancelled, which is what a browser closing the request does to a route in
 * any fetch-based server.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'

export type Handler = (request: Request) => Promise<Response>

export interface RunningServer {
  readonly url: string
  readonly close: () => Promise<void>
}

export async function serve(
  routes: Record<string, Handler>,
  options: { readonly port?: number; readonly host?: string } = {},
): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1'
  const server = createServer((req, res) => {
    const route = routes[`${req.method} ${new URL(req.url ?? '/', 'http://x').pathname}`]
    if (route === undefined) {
      res.writeHead(404).end('Not found')
      return
    }
    void respond(route, req, res)
  })
  server.listen(options.port ?? 0, host)
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      }),
  }
}

async function respond(handler: Handler, req: IncomingMessage, res: ServerResponse) {
  const controller = new AbortController()
  res.on('close', () => controller.abort())
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD'
  const request = new Request(new URL(req.url ?? '/', `http://${req.headers.host}`), {
    method: req.method ?? 'GET',
    headers: Object.entries(req.headers).flatMap(([name, value]) =>
      value === undefined ? [] : [[name, Array.isArray(value) ? value.join(', ') : value] as [string, string]],
    ),
    signal: controller.signal,
    ...(hasBody && { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: 'half' }),
  })
  let response: Response
  try {
    response = await handler(request)
  } catch (error) {
    res.writeHead(500, { 'content-type': 'text/plain' }).end(String(error))
    return
  }
  res.writeHead(response.status, Object.fromEntries(response.headers))
  if (response.body === null) {
    res.end()
    return
  }
  const reader = response.body.getReader()
  res.on('close', () => {
    if (!res.writableFinished) void reader.cancel('client closed the request')
  })
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    res.write(value)
  }
  res.end()
}
