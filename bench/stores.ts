/**
 * Effect tools per store backend: the replay path (a recorded key) and a first
 * application (claim, a no-op execute, the fenced put), each against the
 * backend's own raw operations through the same driver, measured in the same
 * run: one raw read for the replay, two raw conditional writes for the first
 * application. The requests each side sends are counted at the driver
 * (statements through `effect/sql`, commands and scripts through `Redis`).
 *
 * Rounds alternate which side is timed first; the table reports the median of
 * the rounds.
 */
import { DatabaseSync } from 'node:sqlite'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as AI from '@tanstack/ai-effect'
import { layerRedis } from '@tanstack/ai-effect/redis'
import { layerSql } from '@tanstack/ai-effect/sql'
import { layerSqlite } from '@tanstack/ai-effect/sqlite'
import { Duration, Effect, Exit, Layer, ManagedRuntime, Schema, Scope } from 'effect'
import { Redis } from 'effect/persistence/Redis'
import { SqlClient } from 'effect/sql/SqlClient'
import { noteDef, pgClient, redisClient } from '../test/support/backends.ts'
import { countRedisCommands, countStatements, type RoundTrips } from '../test/support/roundTrips.ts'
import { missing, startPostgres, startRedis, type TestServer } from '../test/support/services.ts'
import { runWorker, startRemote } from '../test/support/workers.ts'
import { inRoundOrder, median, microsPerCall } from './stats.ts'

export interface StoreRow {
  readonly backend: string
  readonly case: string
  readonly rawMicros: number
  readonly oursMicros: number
  readonly ratio: number
  /** Requests per call, counted at the driver: the raw path's and ours. */
  readonly rawRoundTrips?: number
  readonly oursRoundTrips?: number
  /**
   * For the replay: the store's claim of the recorded key alone, without the
   * tool around it. Ours minus this is the tool's path; this minus raw is
   * the store's own work (its clock, decoding the record, its deadline).
   */
  readonly storeMicros?: number
  readonly note?: string
}

interface Fixture {
  readonly name: string
  readonly layer: Layer.Layer<AI.EffectStore, unknown>
  /** Counts the requests of both paths (absent for the memory store, which sends none). */
  readonly roundTrips?: RoundTrips
  /** One raw read of a row that exists, and one raw conditional insert of a new key. */
  readonly raw: Effect.Effect<
    { readonly read: (i: number) => Effect.Effect<unknown, unknown>; readonly insert: (i: number) => Effect.Effect<unknown, unknown> },
    unknown,
    Scope.Scope
  >
  readonly dispose: () => Promise<void>
}

const Row = Schema.Struct({ v: Schema.String })

/** Provides a client built in the case's scope, so that it stays open for the whole case. */
const inScope = <ROut, E2>(layer: Layer.Layer<ROut, E2>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | E2, Exclude<R, ROut> | Scope.Scope> =>
    Effect.flatMap(Layer.build(layer), (context) => Effect.provideContext(effect, context))

const fixtures = async (): Promise<ReadonlyArray<Fixture | { readonly name: string; readonly skipped: string }>> => {
  const list: Array<Fixture | { readonly name: string; readonly skipped: string }> = []
  list.push({
    name: 'memory',
    layer: AI.EffectStore.layerMemory({ capacity: 1_000_000 }),
    raw: Effect.sync(() => {
      const map = new Map<string, string>([['row', 'x']])
      return {
        read: () => Effect.sync(() => map.get('row')),
        insert: (i: number) => Effect.sync(() => map.has(`k${i}`) || map.set(`k${i}`, 'x')),
      }
    }),
    dispose: async () => {},
  })
  const filename = join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-')), 'effects.db')
  const sqliteStatements = countStatements()
  list.push({
    name: 'sqlite',
    layer: Layer.merge(layerSqlite({ filename }), sqliteStatements.layer),
    roundTrips: sqliteStatements,
    raw: Effect.sync(() => {
      const db = new DatabaseSync(filename, { timeout: 50 })
      db.exec('PRAGMA journal_mode = WAL')
      db.exec('CREATE TABLE IF NOT EXISTS raw (k TEXT PRIMARY KEY, v TEXT)')
      db.exec("INSERT OR IGNORE INTO raw VALUES ('row', 'x')")
      const read = db.prepare('SELECT v FROM raw WHERE k = ?')
      const insert = db.prepare('INSERT INTO raw VALUES (?, ?) ON CONFLICT DO NOTHING')
      // node:sqlite directly, without effect/sql: its statements are counted here.
      const counted = <A>(run: () => A) => Effect.sync(() => {
        sqliteStatements.countRaw()
        return run()
      })
      return {
        read: () => counted(() => read.get('row')),
        insert: (i: number) => counted(() => insert.run(`k${Date.now()}-${i}`, 'x')),
      }
    }),
    dispose: async () => {},
  })
  const noPostgres = missing('postgres')
  if (noPostgres !== undefined) list.push({ name: 'postgres', skipped: noPostgres })
  else {
    const server: TestServer = await startPostgres()
    const statements = countStatements()
    list.push({
      name: 'postgres',
      layer: Layer.merge(layerSql().pipe(Layer.provide(pgClient(server.url))), statements.layer),
      roundTrips: statements,
      raw: Effect.gen(function* () {
        const sql = yield* SqlClient
        yield* sql`CREATE TABLE IF NOT EXISTS raw (k TEXT PRIMARY KEY, v TEXT)`
        yield* sql`INSERT INTO raw VALUES ('row', 'x') ON CONFLICT DO NOTHING`
        // Run with the case's context, so that the statement counter sees them.
        const context = yield* Effect.context<never>()
        return {
          read: () =>
            Effect.flatMap(sql`SELECT v FROM raw WHERE k = ${'row'}`, Schema.decodeUnknownEffect(Schema.Array(Row))).pipe(
              Effect.provideContext(context),
            ),
          insert: (i: number) =>
            sql`INSERT INTO raw VALUES (${`k${Date.now()}-${i}`}, 'x') ON CONFLICT DO NOTHING`.pipe(Effect.provideContext(context)),
        }
      }).pipe(inScope(Layer.merge(pgClient(server.url), statements.layer))),
      dispose: () => server.dispose(),
    })
  }
  const noRedis = missing('redis')
  if (noRedis !== undefined) list.push({ name: 'redis', skipped: noRedis })
  else {
    const server: TestServer = await startRedis()
    const commands = countRedisCommands()
    list.push({
      name: 'redis',
      layer: layerRedis().pipe(Layer.provide(commands.layer), Layer.provide(redisClient(server.url))),
      roundTrips: commands,
      raw: Effect.gen(function* () {
        const redis = yield* Redis
        yield* redis.send('SET', 'raw:row', 'x')
        return {
          read: () => redis.send('GET', 'raw:row'),
          insert: (i: number) => redis.send('SET', `raw:k${Date.now()}-${i}`, 'x', 'NX', 'PX', '60000'),
        }
      }).pipe(inScope(commands.layer.pipe(Layer.provide(redisClient(server.url))))),
      dispose: () => server.dispose(),
    })
  }
  return list
}

export const benchStores = async (options: { readonly rounds: number; readonly perRound: number }): Promise<ReadonlyArray<StoreRow>> => {
  const rows: Array<StoreRow> = []
  for (const fixture of await fixtures()) {
    if ('skipped' in fixture) {
      rows.push({ backend: fixture.name, case: 'all', rawMicros: NaN, oursMicros: NaN, ratio: NaN, note: `skipped: ${fixture.skipped}` })
      continue
    }
    const tool = AI.effectTool(noteDef, () => Effect.succeed({ applied: 1 }), { effectKey: ({ id }) => id })
    const runtime = ManagedRuntime.make(
      Layer.mergeAll(fixture.layer, AI.RunContext.layer({ runId: 'bench', threadId: 'bench', agent: 'bench', trigger: 'bench' })),
    )
    // The raw driver's connection and the tool fibers live for the whole case, like an app's.
    const scope = await Effect.runPromise(Scope.make())
    const raw = await Effect.runPromise(Scope.provide(fixture.raw, scope))
    const [core] = await runtime.runPromise(Scope.provide(AI.wrapToolsForRun([tool]), scope))
    const call = (id: string) => Promise.resolve(core!.execute!({ id }, { toolCallId: id, emitCustomEvent: () => {} }))
    let fresh = 0
    const prefix = `${fixture.name}-${Date.now()}`
    await call(`${prefix}-recorded`)
    // The key the tool recorded (its effect key is the input's id), claimed by the store alone.
    const store = await runtime.runPromise(AI.EffectStore)
    const recordedId = { tool: noteDef.name, key: `${prefix}-recorded` }
    const claimRecorded = () =>
      Effect.runPromise(Effect.flatMap(store.claim(recordedId, { owner: 'bench', ttl: Duration.seconds(10) }), (claim) =>
        claim._tag === 'Recorded' ? Effect.void : Effect.die(`the store answered ${claim._tag} for a recorded key`)))
    const storeAlone: Array<number> = []
    for (let i = 0; i < 200; i++) await call(`${prefix}-warm-${i}`)
    const replay = samples()
    const apply = samples()
    const counting = (into: Array<number>, operation: (i: number) => Promise<unknown>) => async (i: number) => {
      const before = fixture.roundTrips?.count() ?? 0
      await operation(i)
      into.push((fixture.roundTrips?.count() ?? 0) - before)
    }
    const timed = (into: Array<number>, operation: (i: number) => Promise<unknown>) => async () => {
      into.push(await microsPerCall(options.perRound, operation))
    }
    const replaySteps = [
      timed(replay.raw, counting(replay.rawTrips, (i) => Effect.runPromise(raw.read(i)))),
      timed(replay.ours, counting(replay.oursTrips, () => call(`${prefix}-recorded`))),
      timed(storeAlone, claimRecorded),
    ]
    const applySteps = [
      timed(apply.raw, counting(apply.rawTrips, (i) =>
        Effect.runPromise(Effect.all([raw.insert(i * 2), raw.insert(i * 2 + 1)], { discard: true })))),
      timed(apply.ours, counting(apply.oursTrips, () => call(`${prefix}-new-${fresh++}`))),
    ]
    // Odd rounds time ours first, so that neither side always runs right after the other's.
    for (let round = 0; round < options.rounds; round++) {
      for (const steps of [replaySteps, applySteps]) {
        for (const step of inRoundOrder(round, steps)) await step()
      }
    }
    rows.push({ ...row(fixture, 'replay (recorded key) vs 1 raw read', replay), storeMicros: median(storeAlone) })
    rows.push(row(fixture, 'first application vs 2 raw round trips', apply))
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await runtime.dispose()
    await fixture.dispose()
  }
  return rows
}

const samples = () => ({ raw: [] as Array<number>, ours: [] as Array<number>, rawTrips: [] as Array<number>, oursTrips: [] as Array<number> })

const mean = (values: ReadonlyArray<number>) => values.reduce((sum, value) => sum + value, 0) / values.length

const row = (fixture: Fixture, name: string, measured: ReturnType<typeof samples>): StoreRow => {
  const rawMicros = median(measured.raw)
  const oursMicros = median(measured.ours)
  return {
    backend: fixture.name,
    case: name,
    rawMicros,
    oursMicros,
    ratio: oursMicros / rawMicros,
    ...(fixture.roundTrips === undefined ? {} : { rawRoundTrips: mean(measured.rawTrips), oursRoundTrips: mean(measured.oursTrips) }),
  }
}

export interface ProcessesRow {
  readonly backend: string
  readonly processes: number
  /** Calls per process. */
  readonly calls: number
  readonly keys: number
  readonly applications: number
  readonly callsPerSecond: number
}

/**
 * 4 worker processes call one effect tool for the same keys at once (each
 * key `callsPerKey` times in every process), against
 * one shared store: how many applications the remote saw (must equal the
 * keys), and the calls per second across all processes, process start
 * included.
 */
export const benchProcesses = async (
  { keys: keyCount, callsPerKey }: { readonly keys: number; readonly callsPerKey: number }
): Promise<ReadonlyArray<ProcessesRow>> => {
  const remote = await startRemote()
  const rows: Array<ProcessesRow> = []
  const targets: Array<readonly ['sqlite' | 'postgres' | 'redis', () => Promise<{ readonly target: string; readonly dispose: () => Promise<void> }>]> = [
    ['sqlite', async () => ({ target: join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-procs-')), 'effects.db'), dispose: async () => {} })],
  ]
  if (missing('postgres') === undefined) targets.push(['postgres', async () => {
    const server = await startPostgres()
    return { target: server.url, dispose: server.dispose }
  }])
  if (missing('redis') === undefined) targets.push(['redis', async () => {
    const server = await startRedis()
    return { target: server.url, dispose: server.dispose }
  }])
  for (const [backend, start] of targets) {
    const { target, dispose } = await start()
    const keys = Array.from({ length: keyCount }, (_, i) => `bench-${backend}-${i}`)
    const config = { backend, target, remote: remote.url, keys, repeat: callsPerKey, mode: 'apply', reconcile: false, leaseMillis: 10_000 } as const
    const started = performance.now()
    await Promise.all([1, 2, 3, 4].map(() => runWorker(config)))
    const seconds = (performance.now() - started) / 1000
    const calls = keyCount * callsPerKey
    rows.push({ backend, processes: 4, calls, keys: keyCount, applications: remote.appliedOf(keys), callsPerSecond: (4 * calls) / seconds })
    await dispose()
  }
  remote.close()
  return rows
}
