/**
 * What a resumable chat costs next to the same chat without a delivery log:
 * one answer of 64 text deltas through core's `toServerSentEventsResponse`,
 * read whole, with and without `durability` on `AI.StreamLog` in memory, on
 * SQLite and on PostgreSQL. Besides the time per request, the statements
 * each appended batch cost, counted at the driver (a producer's claim and
 * its close are one more each per run). And many readers watching live
 * runs that another process writes, on SQLite, PostgreSQL and Redis, with
 * and without the writes announced: what their process asks of the store
 * while they wait, and how soon a chunk reaches its reader.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { toServerSentEventsResponse, type UpsertableStreamDurability } from '@tanstack/ai'
import * as AI from '@tanstack/ai-effect'
import { layerRedisStreamLog } from '@tanstack/ai-effect/redis'
import { layerSqlStreamLog } from '@tanstack/ai-effect/sql'
import { layerSqliteStreamLog } from '@tanstack/ai-effect/sqlite'
import { scriptedText } from '@tanstack/ai-effect/testing'
import { Effect, identity, Layer, ManagedRuntime, Stream } from 'effect'
import { pgClient, redisClient } from '../test/support/backends.ts'
import { maxRunsPerPoll } from '../src/internal/tailPoll.ts'
import { countRedisCommands, countStatements, type RoundTrips } from '../test/support/roundTrips.ts'
import { openLog, text } from '../test/support/streamLogs.ts'
import { missing, startRedis, withPostgres } from '../test/support/services.ts'
import { pair, type PairResult } from './chat.ts'
import { percentile } from './stats.ts'

export interface ResumableRow extends PairResult {
  /** Statements per appended batch, counted at the driver (none for the memory log). */
  readonly statementsPerAppend: number | undefined
  readonly appendsPerRun: number
}

const deltas = Array.from({ length: 64 }, (_, index) => `word${index} `)

/** One request: the answer's chunks through core's encoder, read whole. */
const request = (durability: UpsertableStreamDurability | undefined) =>
  Effect.runPromise(Stream.toAsyncIterableEffect(AI.chat({ adapter: scriptedText([{ text: deltas }]), messages: [{ role: 'user', content: 'Hi' }] })))
    .then((chunks) => toServerSentEventsResponse(chunks, durability === undefined ? undefined : { durability: { adapter: durability } }).text())

const resumableCase = async (
  name: string,
  layer: Layer.Layer<AI.StreamLog, unknown>,
  statements: (() => number) | undefined,
  options: { readonly rounds: number; readonly iterations: number },
): Promise<ResumableRow> => {
  const runtime = ManagedRuntime.make(layer)
  let run = 0
  let appends = 0
  /** The log's adapter for a new run, its appends counted. */
  const durability = async () => {
    const adapter = await runtime.runPromise(
      Effect.flatMap(Effect.service(AI.StreamLog), (log) => log.durability({ runId: `bench-${Date.now()}-${run++}`, offset: null })),
    )
    return { ...adapter, append: (chunks: Parameters<typeof adapter.append>[0]) => (appends++, adapter.append(chunks)) }
  }
  try {
    const result = await pair(name, undefined, options, () => request(undefined), async () => request(await durability()))
    // One more run, counted alone: its claim, its appends and its close.
    appends = 0
    const before = statements?.()
    await request(await durability())
    const counted = statements === undefined || before === undefined ? undefined : statements() - before
    return {
      ...result,
      appendsPerRun: appends,
      // The claim and the close are one statement each; the rest are the appends.
      statementsPerAppend: counted === undefined ? undefined : (counted - 2) / appends,
    }
  } finally {
    await runtime.dispose()
  }
}

export const benchResumable = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<ResumableRow>> => {
  const sizes = { rounds: options.quick ? 3 : 7, iterations: options.quick ? 20 : 100 }
  const label = (store: string) => `a chat answer of 64 deltas, with durability on ${store} vs without`
  const sqlite = countStatements()
  const rows = [
    await resumableCase(label('memory'), AI.StreamLog.layerMemory(), undefined, sizes),
    await resumableCase(
      label('SQLite'),
      layerSqliteStreamLog({ filename: join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-')), 'chat.db') }).pipe(Layer.provide(sqlite.layer)),
      sqlite.count,
      sizes,
    ),
  ]
  if (missing('postgres') === undefined) {
    const counted = countStatements()
    rows.push(
      await withPostgres((postgres) =>
        resumableCase(
          label('PostgreSQL'),
          layerSqlStreamLog().pipe(Layer.provide(counted.layer), Layer.provide(pgClient(postgres.url))),
          counted.count,
          sizes,
        )),
    )
  }
  return rows
}

/** Readers waiting in one process for runs that another process writes. */
export interface WatchersRow {
  readonly store: string
  /** How a waiting reader hears of a write: the shared poll alone, or the store's announcement before it. */
  readonly heard: string
  readonly readers: number
  readonly pollIntervalMillis: number
  /** The requests (statements, or Redis commands) the readers' process sent per second while every reader waited. */
  readonly requestsPerSecond: number
  /**
   * What that rate may be: the requests of one poll (a statement for every
   * `maxRunsPerPoll` waiting readers, or on Redis a command per reader), over
   * the polls that can start within the window (one per interval, and one
   * more at its edge).
   */
  readonly targetPerSecond: number
  /** From a chunk stored by the writer's process to its reader, one run at a time while the others wait. */
  readonly p50DeliveryMillis: number
  readonly p90DeliveryMillis: number
}

/** How long the readers' idle requests are counted. */
const idleWindowMillis = 1_000

/** The logs' default poll interval. */
const watchPollMillis = 50

/**
 * `readers` clients watching live runs that another process writes, as
 * when a durable run executes on one node and its watchers are served by
 * another: two log layers on one store, a writer and the readers' layer
 * (default poll interval), each reader tailing its own run through
 * `durability().read`. Counted at the readers' driver while every reader
 * waits; then one run at a time gets a chunk, at varying points of the
 * poll's cycle, and the time from its store to its reader is taken.
 */
const watchersCase = async (
  store: string,
  heard: string,
  writerLayer: Layer.Layer<AI.StreamLog, unknown>,
  /** The readers' log, with its requests counted. */
  readerLog: { readonly layer: Layer.Layer<AI.StreamLog, unknown>; readonly requests: RoundTrips },
  options: {
    readonly readers: number
    readonly deliveries: number
    /** How many requests one poll sends for the waiting readers: a statement per `maxRunsPerPoll` runs, or a Redis command per run. */
    readonly requestsPerPoll: (readers: number) => number
    /** How often the readers' poll looks while they wait; the logs' default poll interval unless said. */
    readonly pollMillis?: number
  },
): Promise<WatchersRow> => {
  const { readers } = options
  const requests = readerLog.requests
  const writer = ManagedRuntime.make(writerLayer)
  const reader = ManagedRuntime.make(readerLog.layer)
  try {
    const runIds = Array.from({ length: readers }, (_, index) => `watched-${Date.now()}-${index}`)
    const producers = await Promise.all(runIds.map((runId) => openLog(writer, runId, null)))
    await Promise.all(producers.map((producer) => producer.append([text('first')])))
    let waiting = 0
    const allWaiting = Promise.withResolvers<void>()
    // The run whose next chunk is awaited, and who hears of it.
    const expected = new Map<string, (at: number) => void>()
    const done = Promise.all(runIds.map(async (runId) => {
      const adapter = await openLog(reader, runId, '-1')
      let seen = 0
      for await (const _ of adapter.read('-1')) {
        if (++seen === 1 && ++waiting === readers) allWaiting.resolve()
        if (seen > 1) expected.get(runId)?.(performance.now())
      }
    }))
    await allWaiting.promise
    // A watch of the store looks again up to 1.4 s after the last write it heard (the setup's): not the idle cost.
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    const before = requests.count()
    await new Promise((resolve) => setTimeout(resolve, idleWindowMillis))
    const requestsPerSecond = (requests.count() - before) * 1000 / idleWindowMillis
    const delivery: Array<number> = []
    for (let sample = 0; sample < options.deliveries; sample++) {
      const index = (sample * 7919) % readers
      const received = new Promise<number>((resolve) => expected.set(runIds[index]!, resolve))
      await producers[index]!.append([text(`next ${sample}`)])
      const stored = performance.now()
      delivery.push(Math.max(0, (await received) - stored))
      expected.delete(runIds[index]!)
      // The next chunk lands at another point of the poll's cycle.
      await new Promise((resolve) => setTimeout(resolve, (sample % 10) * watchPollMillis / 10))
    }
    await Promise.all(producers.map((producer) => producer.close()))
    await done
    return {
      store,
      heard,
      readers,
      pollIntervalMillis: options.pollMillis ?? watchPollMillis,
      requestsPerSecond,
      targetPerSecond: options.requestsPerPoll(readers) * (Math.floor(idleWindowMillis / (options.pollMillis ?? watchPollMillis)) + 1) * 1000 / idleWindowMillis,
      p50DeliveryMillis: percentile(delivery, 0.5),
      p90DeliveryMillis: percentile(delivery, 0.9),
    }
  } finally {
    await reader.dispose()
    await writer.dispose()
  }
}

/** A SQL log's readers, their statements counted. */
const sqlReaders = <R>(
  layer: Layer.Layer<AI.StreamLog, unknown, R>,
  provide: (log: Layer.Layer<AI.StreamLog, unknown, R>) => Layer.Layer<AI.StreamLog, unknown>,
) => {
  const requests = countStatements()
  return { layer: provide(layer.pipe(Layer.provide(requests.layer))), requests }
}

export const benchWatchers = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<WatchersRow>> => {
  const shared = `one shared poll every ${watchPollMillis} ms`
  // While the layer hears the writes, its poll looks once a second (the layers' default): it only finds what was missed.
  const listeningPoll = 'one shared poll every second while it listens'
  const sizes = { readers: options.quick ? 200 : 1_000, deliveries: options.quick ? 20 : 50 }
  const sql = { ...sizes, requestsPerPoll: (readers: number) => Math.ceil(readers / maxRunsPerPoll) }
  const file = join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-watch-')), 'chat.db')
  const rows = [
    // The same file without the watch of its write-ahead log, in the same run: what the poll alone gives.
    await watchersCase('SQLite', shared, layerSqliteStreamLog({ filename: file }), sqlReaders(layerSqliteStreamLog({ filename: file, notify: false }), identity), sql),
    await watchersCase(
      'SQLite',
      `each commit heard (the file's write-ahead log watched, one statement per commit of another connection), and ${listeningPoll}`,
      layerSqliteStreamLog({ filename: file }),
      sqlReaders(layerSqliteStreamLog({ filename: file }), identity),
      { ...sql, pollMillis: 1_000 },
    ),
  ]
  if (missing('postgres') === undefined) {
    rows.push(
      ...await withPostgres(async (postgres) => {
        const onPostgres = Layer.provide(pgClient(postgres.url))
        return [
          // The same store without announcements, in the same run: what the poll alone gives.
          await watchersCase('PostgreSQL', shared, layerSqlStreamLog({ notify: false }).pipe(onPostgres), sqlReaders(layerSqlStreamLog({ notify: false }), onPostgres), sql),
          await watchersCase(
            'PostgreSQL',
            `each write announced (\`NOTIFY\`, one \`LISTEN\` per process), and ${listeningPoll}`,
            layerSqlStreamLog().pipe(onPostgres),
            sqlReaders(layerSqlStreamLog(), onPostgres),
            { ...sql, pollMillis: 1_000 },
          ),
        ]
      }),
    )
  }
  if (missing('redis') === undefined) {
    const server = await startRedis({ persistence: 'none' })
    try {
      const onRedis = Layer.provide(redisClient(server.url))
      const redisReaders = (notify: boolean) => {
        const requests = countRedisCommands()
        return { layer: layerRedisStreamLog({ notify }).pipe(Layer.provide(requests.layer), onRedis), requests }
      }
      // A run's keys have a slot of their own, so a poll sends a command per waiting run.
      const redis = { ...sizes, requestsPerPoll: (readers: number) => readers }
      rows.push(
        await watchersCase('Redis', shared, layerRedisStreamLog({ notify: false }).pipe(onRedis), redisReaders(false), redis),
        await watchersCase(
          'Redis',
          `each write announced (\`PUBLISH\`, one subscriber per process), and ${listeningPoll}`,
          layerRedisStreamLog().pipe(onRedis),
          redisReaders(true),
          { ...redis, pollMillis: 1_000 },
        ),
      )
    } finally {
      await server.dispose()
    }
  }
  return rows
}
