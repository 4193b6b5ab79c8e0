/**
 * A chat server under load: the Effect Chat server (its real route on
 * `effect/http`, the SQLite store, the app's tools; with plain runs, and
 * with its default durable runs on SQLite) against a core-only route
 * (node:http, core `chat()`, core server tools of the app's four tools, so
 * that every model request declares the same tools), and that core route
 * served by `effect/http` through web `Request`/`Response` conversions, all
 * answering from the same offline demo model. Between them, Effect Chat's
 * plain route is served again with one part of a kept conversation added at
 * a time (the route alone, a delivery log in memory, the log on SQLite, the
 * thread), so that the CPU each part adds per request is measured in the
 * same run. Each runs in a process of its own, and autocannon drives one at
 * a time with a bounded number of connections on 127.0.0.1, rounds
 * alternating: requests per second, p50 and p99 latency, and the server
 * process's CPU per request (user + system time from /proc), and the time
 * to the first chunk of an answer, one request at a time. The Effect Chat
 * server runs without its access log, since the core route writes none.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import autocannon from 'autocannon'
import { chatRequestBody } from '../test/support/agui.ts'
import { cpuMicros } from './cpu.ts'
import { inRoundOrder, median } from './stats.ts'
import { freePort } from '../test/support/services.ts'

export interface HttpRow {
  readonly case: string
  readonly server: Kind
  readonly requestsPerSecond: number
  readonly p50Millis: number
  readonly p99Millis: number
  readonly cpuMicrosPerRequest: number
  /** From the request to the first server-sent event, one request at a time (median). */
  readonly firstChunkMillis: number
  readonly errors: number
}

const cases = [
  { case: 'a text answer', question: 'Hello there' },
  { case: 'a turn with a tool call (get_order)', question: 'Where is order A-100?' },
] as const

/**
 * The servers, in the order of the table: core on node:http, core on
 * effect/http, Effect Chat's plain route built up one part at a time (see
 * bench/http-server.ts), Effect Chat with plain runs, with durable runs.
 */
const kinds = ['core', 'core-on-effect-http', 'route', 'route-log-memory', 'route-log', 'route-log-thread', 'effect', 'effect-durable'] as const
type Kind = (typeof kinds)[number]

interface Server {
  readonly url: string
  readonly child: ChildProcess
}

const start = (args: ReadonlyArray<string>): Promise<Server> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--conditions=@tanstack/ai-effect/source', join(import.meta.dirname, 'http-server.ts'), ...args],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    child.once('exit', (code) => reject(new Error(`The ${args[0]} server exited with ${code} before it was ready`)))
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('ready ')) resolve({ url: line.slice('ready '.length), child })
    })
  })

const stop = (server: Server) =>
  new Promise<void>((resolve) => {
    server.child.removeAllListeners('exit')
    server.child.once('exit', () => resolve())
    server.child.kill('SIGTERM')
  })

const load = (url: string, question: string, seconds: number, connections: number) =>
  autocannon({
    url: `${url}/api/chat`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    // A thread and a run of their own per request, in every case and round: Effect Chat keeps each run's
    // log and thread, refuses a second run of a thread that is answering, and a run id names one input.
    requests: [
      {
        setupRequest: (request) => {
          const id = crypto.randomUUID()
          return { ...request, body: chatRequestBody({ threadId: `bench-thread-${id}`, runId: `bench-run-${id}` }, question) }
        },
      },
    ],
    connections,
    duration: seconds,
  })

/** The median time to the first server-sent event of an answer, over `count` requests sent one at a time. */
const firstChunk = async (url: string, question: string, count: number) => {
  const millis: Array<number> = []
  for (let index = 0; index < count; index++) {
    const ids = { threadId: `first-chunk-thread-${crypto.randomUUID()}`, runId: `first-chunk-run-${crypto.randomUUID()}` }
    const started = performance.now()
    const response = await fetch(`${url}/api/chat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatRequestBody(ids, question) })
    const reader = response.body!.getReader()
    let text = ''
    while (!text.includes('data: ')) {
      const { done, value } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    millis.push(performance.now() - started)
    // The rest of the answer, so that the run has ended before the next one starts.
    while (!(await reader.read()).done);
  }
  return median(millis)
}

export const benchHttp = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<HttpRow>> => {
  const seconds = options.quick ? 2 : 5
  const rounds = options.quick ? 1 : 3
  const connections = 8
  const model = await start(['model'])
  const servers = {} as Record<Kind, Server>
  for (const kind of kinds) servers[kind] = await start([kind, String(await freePort()), model.url])
  const rows: Array<HttpRow> = []
  try {
    for (const { case: name, question } of cases) {
      type Sample = Omit<HttpRow, 'case' | 'server' | 'firstChunkMillis'>
      const samples = Object.fromEntries(kinds.map((kind) => [kind, [] as Array<Sample>])) as Record<Kind, Array<Sample>>
      // A short warm-up of each, then rounds that alternate their order.
      for (const kind of kinds) await load(servers[kind].url, question, 1, connections)
      for (let round = 0; round < rounds; round++) {
        for (const kind of inRoundOrder(round, kinds)) {
          const server = servers[kind]
          const cpuBefore = cpuMicros(server.child.pid!)
          const result = await load(server.url, question, seconds, connections)
          const cpu = cpuMicros(server.child.pid!) - cpuBefore
          const requests = result.requests.total
          samples[kind].push({
            requestsPerSecond: requests / seconds,
            p50Millis: result.latency.p50,
            p99Millis: result.latency.p99,
            cpuMicrosPerRequest: cpu / Math.max(1, requests),
            errors: result.errors + result.non2xx,
          })
        }
      }
      for (const kind of kinds) {
        const of = (pick: (sample: Sample) => number) => median(samples[kind].map(pick))
        const firstChunkMillis = await firstChunk(servers[kind].url, question, options.quick ? 5 : 20)
        rows.push({
          case: name,
          server: kind,
          requestsPerSecond: of((sample) => sample.requestsPerSecond),
          p50Millis: of((sample) => sample.p50Millis),
          p99Millis: of((sample) => sample.p99Millis),
          cpuMicrosPerRequest: of((sample) => sample.cpuMicrosPerRequest),
          firstChunkMillis,
          errors: samples[kind].reduce((sum, sample) => sum + sample.errors, 0),
        })
      }
    }
  } finally {
    await Promise.all([...kinds.map((kind) => stop(servers[kind])), stop(model)])
  }
  return rows
}
