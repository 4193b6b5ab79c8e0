/**
 * What a durable run costs next to a plain one: the same agent run (a model
 * turn with a tool call, then an answer) through `AI.runAgent`, and through
 * `DurableAgent.run` on the memory engine, on SQLite and on PostgreSQL,
 * where each model turn and tool call is a step the run records; and on
 * PostgreSQL, a runner with one shard (a count a deployment can choose)
 * against one with effect's 300, in the same rounds.
 * Both ask the fake OpenAI server on 127.0.0.1 through the real adapter, as
 * a deployment asks its provider (minus the provider's own time). On SQL,
 * the statements a run sends are counted at the driver.
 */
import * as AI from '@tanstack/ai-effect'
import { DurableAgent, DurableEngine } from '@tanstack/ai-effect/durable'
import { type FakeReply, type ResponsesRequest, scriptedText, startFakeOpenAI } from '@tanstack/ai-effect/testing'
import { createOpenaiChat } from '@tanstack/ai-openai'
import { layerSqlStreamLog, layerSqlThreadStore } from '@tanstack/ai-effect/sql'
import { layerSqlite, layerSqliteStreamLog, layerSqliteThreadStore } from '@tanstack/ai-effect/sqlite'
import { Context, Effect, Layer, ManagedRuntime, Stream, Tracer } from 'effect'
import * as ShardingConfig from 'effect/cluster/ShardingConfig'
import { SqlClient } from 'effect/sql/SqlClient'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { pgClient } from '../test/support/backends.ts'
import { countStatements, requestsPerRun } from '../test/support/roundTrips.ts'
import { freePort, missing, type TestServer, withPostgres } from '../test/support/services.ts'
import { getOrderDef } from '../test/support/tools.ts'
import { inMemoryTracer } from '../test/support/tracing.ts'
import { pair, type PairResult } from './chat.ts'
import { treeCpuMicros } from './cpu.ts'
import type { RunnerConfig } from './durable-runner.ts'
import { percentile } from './stats.ts'

const getOrder = AI.serverTool(getOrderDef, ({ id }) => Effect.succeed({ status: `shipped ${id}` }))

/** The question of every run. */
export const messages = [{ role: 'user' as const, content: 'Where is A-100?' }]

/** The model: look the order up, then answer. A policy of the request, so that one server serves every run. */
const model = (request: ResponsesRequest): FakeReply =>
  request.input.some((item) => item.type === 'function_call_output')
    ? { text: 'Shipped.' }
    : { toolCalls: [{ name: 'get_order', args: { id: 'A-100' } }] }

/** The bench's agent, asking the fake model at `baseURL` through the real OpenAI adapter. */
const defineOrders = (baseURL: string) =>
  AI.defineAgent({
    name: 'orders',
    adapter: createOpenaiChat('gpt-5.2', 'bench-key', { baseURL, maxRetries: 0 }),
    instructions: 'Answer order questions.',
    tools: [getOrder],
  })

/** The bench's agent as a durable agent. */
export const ordersAgent = (baseURL: string) => DurableAgent.make(defineOrders(baseURL))

/**
 * A durable case's timing, and on SQL the statements one run sends (its
 * engine's and its run store's), and those it sends when it also writes a
 * chat's delivery log and thread (`durableHandler`'s runs).
 */
export interface DurableRow extends PairResult {
  readonly statementsPerRun?: number
  readonly statementsWithChatPerRun?: number
}

/** The bench's agent run durably on `services`: its runtime, and a run of the bench's question under an id of its own. */
const durableRuns = (durable: ReturnType<typeof ordersAgent>, services: Layer.Layer<DurableAgent.DurableServices, unknown>) => {
  const runtime = ManagedRuntime.make(durable.layer.pipe(Layer.provideMerge(services)))
  return { runtime, run: () => runtime.runPromise(durable.run({ runId: `bench-${crypto.randomUUID()}`, messages })) }
}

/** The steps of the bench's run: two model turns and one tool call (the run's end is no step). */
export const stepsPerRun = 3

const durableCase = async (
  name: string,
  engineOf: (counter: Layer.Layer<never>) => Layer.Layer<DurableAgent.DurableServices, unknown>,
  options: {
    readonly rounds: number
    readonly iterations: number
    /** The chat's log and thread store on the engine's database, to count a chat run's statements too. */
    readonly chatStores?: (counter: Layer.Layer<never>) => Layer.Layer<AI.StreamLog | AI.ThreadStore, unknown>
    /** The ratio to `AI.runAgent` the case is held to. */
    readonly target?: number
  },
): Promise<DurableRow> => {
  const server = await startFakeOpenAI(model)
  const agent = defineOrders(server.baseURL)
  const durable = DurableAgent.make(agent)
  try {
    const statements = countStatements()
    const plain = durableRuns(durable, engineOf(statements.layer))
    const measured = await (async () => {
      try {
        const timed = await pair(name, options.target, options, () => Effect.runPromise(Stream.runDrain(AI.runAgent(agent, { messages }))), plain.run)
        return options.chatStores === undefined ? timed : { ...timed, statementsPerRun: await requestsPerRun(statements, plain.run) }
      } finally {
        // One engine at a time: SQLite's engine lock admits one per file, and the counted chat runs come next.
        await plain.runtime.dispose()
      }
    })()
    if (options.chatStores === undefined) return measured
    const withChat = countStatements()
    const chat = durableRuns(durable, Layer.merge(engineOf(withChat.layer), options.chatStores(withChat.layer)))
    try {
      return { ...measured, statementsWithChatPerRun: await requestsPerRun(withChat, chat.run) }
    } finally {
      await chat.runtime.dispose()
    }
  } finally {
    await server.close()
  }
}

export const benchDurable = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<DurableRow>> => {
  const sizes = { rounds: options.quick ? 3 : 7, iterations: options.quick ? 10 : 30 }
  const file = join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-durable-')), 'runs.db')
  const results = [
    await durableCase('a run of 2 model turns and 1 tool call: DurableAgent.run on the memory engine vs AI.runAgent', () => DurableEngine.layerMemory, sizes),
    await durableCase(
      'a run of 2 model turns and 1 tool call: DurableAgent.run on SQLite vs AI.runAgent',
      (counter) => DurableEngine.layerSqlite({ filename: file }).pipe(Layer.provide(layerSqlite({ filename: file })), Layer.provide(counter)),
      {
        ...sizes,
        chatStores: (counter) =>
          Layer.merge(layerSqliteStreamLog({ filename: file }), layerSqliteThreadStore({ filename: file })).pipe(Layer.provide(counter)),
      },
    ),
  ]
  if (missing('postgres') === undefined) {
    results.push(
      await withPostgres((postgres) =>
        durableCase(
          'a run of 2 model turns and 1 tool call: DurableAgent.run on PostgreSQL vs AI.runAgent',
          (counter) => DurableEngine.layerSingleRunner().pipe(Layer.provide(pgClient(postgres.url)), Layer.provide(counter)),
          {
            ...sizes,
            chatStores: (counter) =>
              Layer.merge(layerSqlStreamLog(), layerSqlThreadStore()).pipe(Layer.provide(pgClient(postgres.url)), Layer.provide(counter)),
            target: 3,
          },
        )),
    )
  }
  return results
}

/** A database of its own on the server, for a second runner beside the first: its URL. */
export const secondDatabase = async (postgres: TestServer, name: string): Promise<string> => {
  await Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(pgClient(postgres.url)), (context) => Context.get(context, SqlClient)`CREATE DATABASE ${Context.get(context, SqlClient)(name)}`)))
  return postgres.url.replace(/\/postgres$/, `/${name}`)
}

/**
 * The bench's durable run on PostgreSQL with one shard (`shardsPerGroup: 1`,
 * a count a deployment chooses before its first run) against effect's 300,
 * in the same rounds, each runner on a database of its own: each read of
 * storage names every shard its runner holds.
 */
export const benchDurableShards = async (options: { readonly quick: boolean }): Promise<PairResult | undefined> => {
  if (missing('postgres') !== undefined) return undefined
  const sizes = { rounds: options.quick ? 3 : 7, iterations: options.quick ? 10 : 30 }
  const server = await startFakeOpenAI(model)
  const durable = ordersAgent(server.baseURL)
  try {
    return await withPostgres(async (postgres) => {
      const runnerOn = (url: string, shards: DurableEngine.SingleRunnerOptions) =>
        durableRuns(durable, DurableEngine.layerSingleRunner(shards).pipe(Layer.provide(pgClient(url))))
      const onEffects = runnerOn(postgres.url, {})
      const onOne = runnerOn(await secondDatabase(postgres, 'one_shard'), { shardingConfig: { shardsPerGroup: 1 } })
      try {
        return await pair('DurableAgent.run on PostgreSQL, one shard against effect\'s 300', undefined, sizes, onEffects.run, onOne.run)
      } finally {
        await onEffects.runtime.dispose()
        await onOne.runtime.dispose()
      }
    })
  } finally {
    await server.close()
  }
}

/** Durable runs streamed at once in one process: the time per run against one run streamed at a time. */
export interface StreamsAtOnceRow {
  readonly runs: number
  readonly deltas: number
  readonly aloneMicros: number
  readonly atOnceMicros: number
  /** The median of the rounds' ratios of the time per run at once to one at a time, and their spread. */
  readonly ratio: number
  readonly ratioMin: number
  readonly ratioMax: number
  readonly target: number
}

/**
 * `DurableAgent.stream` for many runs at once in one process, on the memory
 * engine with a scripted model (one turn of `deltas` text deltas per run):
 * the time per run when `runs` are streamed at once, against one run
 * streamed at a time, in alternating rounds. Each run's chunks go to its
 * own stream only, so the time per run does not grow with the runs at once.
 */
export const benchStreamsAtOnce = async (options: { readonly quick: boolean }): Promise<StreamsAtOnceRow> => {
  const runs = 500
  const deltas = 50
  const rounds = options.quick ? 3 : 7
  const alone = options.quick ? 50 : 200
  const text = Array.from({ length: deltas }, (_, index) => `w${index} `)
  // One model turn per run: the warm-up, then each round's runs one at a time and at once.
  const turns = alone + rounds * (alone + runs)
  const agent = DurableAgent.make(AI.defineAgent({
    name: 'streams',
    adapter: scriptedText(Array.from({ length: turns }, () => ({ text }))),
    instructions: 'Answer.',
    tools: [],
  }))
  const runtime = ManagedRuntime.make(agent.layer.pipe(Layer.provideMerge(DurableEngine.layerMemory)))
  let run = 0
  const streamed = () => runtime.runPromise(Stream.runDrain(agent.stream({ runId: `streams-${run++}`, messages })))
  const perRun = async (count: number, atOnce: boolean) => {
    const begin = performance.now()
    if (atOnce) await Promise.all(Array.from({ length: count }, streamed))
    else for (let index = 0; index < count; index++) await streamed()
    return (performance.now() - begin) * 1000 / count
  }
  try {
    await perRun(alone, false)
    const aloneMicros: Array<number> = []
    const atOnceMicros: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      aloneMicros.push(await perRun(alone, false))
      atOnceMicros.push(await perRun(runs, true))
    }
    const ratios = atOnceMicros.map((micros, round) => micros / aloneMicros[round]!)
    return {
      runs,
      deltas,
      aloneMicros: percentile(aloneMicros, 0.5),
      atOnceMicros: percentile(atOnceMicros, 0.5),
      ratio: percentile(ratios, 0.5),
      ratioMin: Math.min(...ratios),
      ratioMax: Math.max(...ratios),
      target: 1.2,
    }
  } finally {
    await runtime.dispose()
  }
}

/** Durable runs started at once: how fast they all finish, and what each cost. */
export interface DurableLoadRow {
  readonly engine: string
  readonly runners: number
  /** The second runner joined as the runs started, so that half the shards moved under the load. */
  readonly joining?: boolean
  readonly runs: number
  readonly modelDelayMillis: number
  readonly runsPerSecond: number
  readonly p50Millis: number
  readonly p99Millis: number
  /** A step's time (a model turn, a tool call, each with its record), over every step of every run. */
  readonly p50StepMillis: number
  readonly p99StepMillis: number
  readonly statementsPerRun: number
  /** Model requests per run: 2 when every finished turn was asked once. */
  readonly requestsPerRun: number
  /** PostgreSQL's CPU time (its backends' included) per run, and its share of one core while the runs ran. */
  readonly database?: { readonly cpuMillisPerRun: number; readonly coreShare: number }
  readonly failed: number
}

/** A step's span: a model turn (`turn-<n>`) or a tool call (`tool-<id>`) that a run executed, not one it replayed. */
const isStepSpan = (span: Tracer.NativeSpan) => /^(turn|tool)-/.test(span.name) && span.attributes.get('replayed') === false

/**
 * Times the steps of the runs in a runtime: a tracer that keeps the spans
 * of the steps, for their durations (the model's answer or the tool, and
 * the step's record).
 */
export const stepTimer = () => {
  const { spans, tracer } = inMemoryTracer()
  return {
    layer: Layer.succeed(Tracer.Tracer, tracer),
    /** Forgets the steps so far, so that the next read gives those that follow. */
    reset: () => spans.splice(0),
    /** The durations of the steps that ended since the last reset, in milliseconds. */
    millis: () =>
      spans.flatMap((span) => span.status._tag === 'Ended' && isStepSpan(span) ? [Number(span.status.endTime - span.status.startTime) / 1e6] : []),
  }
}

const modelAnswering = (delayMs: number) => startFakeOpenAI((request) => ({ ...model(request), delayMs }))

/** Starts `runs` runs of the bench's agent at once; each run's time, and whether it failed. */
export const runAtOnce = (
  runtime: ManagedRuntime.ManagedRuntime<DurableAgent.DurableServices, unknown>,
  durable: ReturnType<typeof ordersAgent>,
  prefix: string,
  runs: number,
) =>
  Promise.all(Array.from({ length: runs }, async (_, index) => {
    const begin = performance.now()
    const exit = await runtime.runPromiseExit(durable.run({ runId: `${prefix}-${index}`, messages }))
    return { millis: performance.now() - begin, failed: exit._tag === 'Failure' }
  }))

/** What a load case measured, into its row. */
const loadRow = (
  measured: Omit<DurableLoadRow, 'runsPerSecond' | 'p50Millis' | 'p99Millis' | 'p50StepMillis' | 'p99StepMillis' | 'failed' | 'database'> & {
    readonly seconds: number
    readonly millis: ReadonlyArray<number>
    readonly stepMillis: ReadonlyArray<number>
    readonly failed: number
    readonly databaseCpuMicros?: number
  },
): DurableLoadRow => ({
  engine: measured.engine,
  runners: measured.runners,
  ...(measured.joining === true ? { joining: true } : {}),
  runs: measured.runs,
  modelDelayMillis: measured.modelDelayMillis,
  runsPerSecond: measured.runs / measured.seconds,
  p50Millis: percentile(measured.millis, 0.5),
  p99Millis: percentile(measured.millis, 0.99),
  p50StepMillis: percentile(measured.stepMillis, 0.5),
  p99StepMillis: percentile(measured.stepMillis, 0.99),
  statementsPerRun: measured.statementsPerRun,
  requestsPerRun: measured.requestsPerRun,
  ...(measured.databaseCpuMicros === undefined ? {} : {
    database: { cpuMillisPerRun: measured.databaseCpuMicros / 1000 / measured.runs, coreShare: measured.databaseCpuMicros / 1e6 / measured.seconds },
  }),
  failed: measured.failed,
})

/** `runs` runs started at once in this process, on one runner. */
const oneRunnerCase = async (
  engine: 'SQLite' | 'PostgreSQL',
  engineOf: (counter: Layer.Layer<never>) => Layer.Layer<DurableAgent.DurableServices, unknown>,
  runs: number,
  modelDelayMillis: number,
  databasePid?: number,
): Promise<DurableLoadRow> => {
  const statements = countStatements()
  const steps = stepTimer()
  const server = await modelAnswering(modelDelayMillis)
  const durable = ordersAgent(server.baseURL)
  const runtime = ManagedRuntime.make(durable.layer.pipe(Layer.provideMerge(engineOf(statements.layer)), Layer.provide(steps.layer)))
  try {
    // One run first, so that the engine has started before the clock does.
    await runtime.runPromise(durable.run({ runId: `load-warm-${Date.now()}`, messages }))
    steps.reset()
    const requestsBefore = server.requests.length
    const statementsBefore = statements.count()
    const cpuBefore = databasePid === undefined ? 0 : treeCpuMicros(databasePid)
    const started = performance.now()
    const outcomes = await runAtOnce(runtime, durable, `load-${started}`, runs)
    return loadRow({
      engine,
      runners: 1,
      runs,
      modelDelayMillis,
      seconds: (performance.now() - started) / 1000,
      millis: outcomes.map((outcome) => outcome.millis),
      stepMillis: steps.millis(),
      statementsPerRun: (statements.count() - statementsBefore) / runs,
      requestsPerRun: (server.requests.length - requestsBefore) / runs,
      failed: outcomes.filter((outcome) => outcome.failed).length,
      ...(databasePid === undefined ? {} : { databaseCpuMicros: treeCpuMicros(databasePid) - cpuBefore }),
    })
  } finally {
    await runtime.dispose()
    await server.close()
  }
}

/** What starts a runner's answer on its stdout, where its engine logs too. */
export const answerPrefix = '@runner '

/** A runner process (durable-runner.ts), asked one command at a time. */
const startRunner = async (config: RunnerConfig) => {
  const child = spawn(process.execPath, ['--conditions=@tanstack/ai-effect/source', join(import.meta.dirname, 'durable-runner.ts')], {
    env: { ...process.env, AI_EFFECT_BENCH_RUNNER: JSON.stringify(config) },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  const next = async <A>(): Promise<A> => {
    for (;;) {
      const line = await lines.next()
      if (line.done === true) throw new Error(`runner ${config.name} exited`)
      if (line.value.startsWith(answerPrefix)) return JSON.parse(line.value.slice(answerPrefix.length)) as A
    }
  }
  await next<{ readonly ready: true }>()
  return {
    ask: <A>(command: 'warm' | 'shards' | 'go' | 'count'): Promise<A> => {
      child.stdin!.write(`${command}\n`)
      return next<A>()
    },
    stop: async () => {
      const exited = once(child, 'exit')
      child.stdin!.end('stop\n')
      await exited
    },
  }
}

type Runner = Awaited<ReturnType<typeof startRunner>>

// The runners keep effect's default shards.
const allShards = ShardingConfig.defaults.shardsPerGroup * ShardingConfig.defaults.availableShardGroups.length

/**
 * Waits until every shard is held by one runner and none is moving. A runner
 * that joins takes its share of the shards from the others a second or two
 * later: runs started meanwhile wait for their shard's handoff, which is
 * not the steady state the load case measures.
 */
const settled = async (runners: ReadonlyArray<Runner>) => {
  const deadline = performance.now() + 60_000
  while (performance.now() < deadline) {
    const shards = await Promise.all(runners.map((runner) => runner.ask<{ readonly held: number; readonly releasing: number }>('shards')))
    const held = shards.map((runner) => runner.held)
    const moving = shards.some((runner) => runner.releasing > 0)
    if (!moving && held.every((count) => count > 0) && held.reduce((sum, count) => sum + count, 0) === allShards) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`The shards did not settle between the ${runners.length} runners within 60 s`)
}

/**
 * `runs` runs on two socket runners (processes) sharing PostgreSQL, each
 * starting half of them: a run's shard decides which runner executes it, so
 * about half of each process's runs run on the other. Settled, the runs
 * start once each runner holds its share of the shards; `joining`, the
 * second runner has just started, so that it takes its share from the first
 * under the load (a deploy that adds a runner).
 */
const twoRunnersCase = async (
  postgres: TestServer,
  runs: number,
  modelDelayMillis: number,
  joining: boolean,
): Promise<DurableLoadRow> => {
  const server = await modelAnswering(modelDelayMillis)
  const runners: Array<Runner> = []
  try {
    const start = async (name: string) =>
      runners.push(await startRunner({ postgres: postgres.url, modelURL: server.baseURL, port: await freePort(), name, runs: runs / 2 }))
    // One after the other: the first makes the tables, and holds every shard until the second joins.
    await start('a')
    if (joining) await runners[0]!.ask('warm')
    await start('b')
    if (!joining) {
      await Promise.all(runners.map((runner) => runner.ask('warm')))
      await settled(runners)
    }
    const requestsBefore = server.requests.length
    const cpuBefore = treeCpuMicros(postgres.pid()!)
    const started = performance.now()
    const outcomes = await Promise.all(
      runners.map((runner) => runner.ask<{ readonly millis: ReadonlyArray<number>; readonly stepMillis: ReadonlyArray<number>; readonly failed: number }>('go')),
    )
    const seconds = (performance.now() - started) / 1000
    const databaseCpuMicros = treeCpuMicros(postgres.pid()!) - cpuBefore
    const counted = await Promise.all(runners.map((runner) => runner.ask<{ readonly statements: number }>('count')))
    return loadRow({
      engine: 'PostgreSQL',
      runners: 2,
      joining,
      runs,
      modelDelayMillis,
      seconds,
      millis: outcomes.flatMap((outcome) => outcome.millis),
      stepMillis: outcomes.flatMap((outcome) => outcome.stepMillis),
      statementsPerRun: counted.reduce((sum, count) => sum + count.statements, 0) / runs,
      requestsPerRun: (server.requests.length - requestsBefore) / runs,
      failed: outcomes.reduce((sum, outcome) => sum + outcome.failed, 0),
      databaseCpuMicros,
    })
  } finally {
    await Promise.all(runners.map((runner) => runner.stop()))
    await server.close()
  }
}

/**
 * Durable runs under load: `runs` runs started at once on one runner, on
 * SQLite and on PostgreSQL, then on two runners sharing PostgreSQL, with
 * the fake model answering at once and after 200 ms. Every run must
 * finish, each finished turn asked once.
 */
export const benchDurableLoad = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<DurableLoadRow>> => {
  const runs = options.quick ? 100 : 500
  const rows: Array<DurableLoadRow> = []
  for (const delay of [0, 200]) {
    const file = join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-durable-load-')), 'runs.db')
    rows.push(await oneRunnerCase('SQLite', (counter) => DurableEngine.layerSqlite({ filename: file }).pipe(Layer.provide(layerSqlite({ filename: file })), Layer.provide(counter)), runs, delay))
  }
  if (missing('postgres') === undefined) {
    for (const delay of [0, 200]) {
      rows.push(await withPostgres((postgres) =>
        oneRunnerCase('PostgreSQL', (counter) => DurableEngine.layerSingleRunner().pipe(Layer.provide(pgClient(postgres.url)), Layer.provide(counter)), runs, delay, postgres.pid())))
    }
    for (const [delay, joining] of [[0, false], [200, false], [0, true], [200, true]] as const) {
      rows.push(await withPostgres((postgres) => twoRunnersCase(postgres, runs, delay, joining)))
    }
  }
  return rows
}
