/**
 * A chat server under load: the Effect Chat server (its real route on
 * `effect/http`, the SQLite store, the app's tools) against a core-only route
 * (node:http, core `chat()`, core server tools of the app's three tools, so
 * that every model request declares the same tools), and that core route
 * served by `effect/http` through web `Request`/`Response` conversions, all
 * answering from the same offline demo model. Each runs in a process of its
 * own, and autocannon drives one at a time with a bounded number of
 * connections on 127.0.0.1, rounds alternating: requests per second, p50
 * and p99 latency, and the server process's CPU per request (user + system
 * time from /proc). The Effect Chat server runs without its access log,
 * since the core route writes none.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import autocannon from 'autocannon'
import { chatRequestBody } from '../test/support/agui.ts'
import { freePort } from '../test/support/services.ts'

export interface HttpRow {
  readonly case: string
  readonly server: Kind
  readonly requestsPerSecond: number
  readonly p50Millis: number
  readonly p99Millis: number
  readonly cpuMicrosPerRequest: number
  readonly errors: number
}

const cases = [
  { case: 'a text answer', question: 'Hello there' },
  { case: 'a turn with a tool call (get_order)', question: 'Where is order A-100?' },
] as const

/** The servers, in the order of the table: core on node:http, core on effect/http, Effect Chat. */
const kinds = ['core', 'core-on-effect-http', 'effect'] as const
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

/** The process's user and system time so far, in microseconds (Linux clock ticks of 10 ms). */
const cpuMicros = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10_000
}

const load = (url: string, question: string, seconds: number, connections: number) => {
  let sent = 0
  return autocannon({
    url: `${url}/api/chat`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    // A thread and a run of its own per request: Effect Chat keeps each run's log and
    // thread, and refuses a second run of a thread that is answering.
    requests: [
      {
        setupRequest: (request) => {
          sent++
          return { ...request, body: chatRequestBody({ threadId: `bench-thread-${sent}`, runId: `bench-run-${sent}` }, question) }
        },
      },
    ],
    connections,
    duration: seconds,
  })
}

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

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
      type Sample = Omit<HttpRow, 'case' | 'server'>
      const samples = Object.fromEntries(kinds.map((kind) => [kind, [] as Array<Sample>])) as Record<Kind, Array<Sample>>
      // A short warm-up of each, then rounds that alternate their order.
      for (const kind of kinds) await load(servers[kind].url, question, 1, connections)
      for (let round = 0; round < rounds; round++) {
        for (const kind of round % 2 === 0 ? kinds : [...kinds].reverse()) {
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
        rows.push({
          case: name,
          server: kind,
          requestsPerSecond: of((sample) => sample.requestsPerSecond),
          p50Millis: of((sample) => sample.p50Millis),
          p99Millis: of((sample) => sample.p99Millis),
          cpuMicrosPerRequest: of((sample) => sample.cpuMicrosPerRequest),
          errors: samples[kind].reduce((sum, sample) => sum + sample.errors, 0),
        })
      }
    }
  } finally {
    await Promise.all([...kinds.map((kind) => stop(servers[kind])), stop(model)])
  }
  return rows
}
