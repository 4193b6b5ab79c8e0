/**
 * What a durable run costs next to a plain one: the same agent run (a model
 * turn with a tool call, then an answer) through `AI.runAgent`, and through
 * `DurableAgent.run` on the memory engine, on SQLite and on PostgreSQL,
 * where each model turn and tool call is an activity the engine records.
 * Both ask the fake OpenAI server on 127.0.0.1 through the real adapter, as
 * a deployment asks its provider (minus the provider's own time). On SQL,
 * the statements a run sends are counted at the driver.
 */
import * as AI from '@tanstack/ai-effect'
import { DurableAgent, DurableEngine } from '@tanstack/ai-effect/durable'
import { type FakeReply, type ResponsesRequest, startFakeOpenAI } from '@tanstack/ai-effect/testing'
import { createOpenaiChat } from '@tanstack/ai-openai'
import { layerSqlite } from '@tanstack/ai-effect/sqlite'
import { Effect, Layer, ManagedRuntime, Stream } from 'effect'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pgClient } from '../test/support/backends.ts'
import { countStatements } from '../test/support/roundTrips.ts'
import { missing, startPostgres } from '../test/support/services.ts'
import { getOrderDef } from '../test/support/tools.ts'
import { pair, type PairResult } from './chat.ts'

const getOrder = AI.serverTool(getOrderDef, ({ id }) => Effect.succeed({ status: `shipped ${id}` }))

const messages = [{ role: 'user' as const, content: 'Where is A-100?' }]

/** The model: look the order up, then answer. A policy of the request, so that one server serves every run. */
const model = (request: ResponsesRequest): FakeReply =>
  request.input.some((item) => item.type === 'function_call_output')
    ? { text: 'Shipped.' }
    : { toolCalls: [{ name: 'get_order', args: { id: 'A-100' } }] }

/** A durable case's timing, and on SQL the statements one run sends (its engine's and its run store's). */
export interface DurableRow extends PairResult {
  readonly statementsPerRun?: number
}

/** The activities of the bench's run: two model turns, one tool call, and the run's end. */
export const activitiesPerRun = 4

const durableCase = async (
  name: string,
  engineOf: (counter: Layer.Layer<never>) => Layer.Layer<DurableAgent.DurableServices, unknown>,
  options: { readonly rounds: number; readonly iterations: number; readonly counted: boolean },
): Promise<DurableRow> => {
  const statements = countStatements()
  const engine = engineOf(statements.layer)
  const server = await startFakeOpenAI(model)
  const agent = AI.defineAgent({
    name: 'orders',
    adapter: createOpenaiChat('gpt-5.2', 'bench-key', { baseURL: server.baseURL, maxRetries: 0 }),
    instructions: 'Answer order questions.',
    tools: [getOrder],
  })
  const durable = DurableAgent.make(agent)
  const runtime = ManagedRuntime.make(durable.layer.pipe(Layer.provideMerge(engine)))
  let run = 0
  const durableRun = () => runtime.runPromise(durable.run({ runId: `bench-${Date.now()}-${run++}`, messages }))
  try {
    const timed = await pair(name, undefined, options, () => Effect.runPromise(Stream.runDrain(AI.runAgent(agent, { messages }))), durableRun)
    if (!options.counted) return timed
    // Counted apart from the timed runs, one run at a time, so that only its own statements count.
    const before = statements.count()
    const counted = 20
    for (let i = 0; i < counted; i++) await durableRun()
    return { ...timed, statementsPerRun: (statements.count() - before) / counted }
  } finally {
    await runtime.dispose()
    await server.close()
  }
}

export const benchDurable = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<DurableRow>> => {
  const sizes = { rounds: options.quick ? 3 : 7, iterations: options.quick ? 10 : 30 }
  const file = join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-durable-')), 'runs.db')
  const results = [
    await durableCase('a run of 2 model turns and 1 tool call: DurableAgent.run on the memory engine vs AI.runAgent', () => DurableEngine.layerMemory, {
      ...sizes,
      counted: false,
    }),
    await durableCase(
      'a run of 2 model turns and 1 tool call: DurableAgent.run on SQLite vs AI.runAgent',
      (counter) => DurableEngine.layerSqlite({ filename: file }).pipe(Layer.provide(layerSqlite({ filename: file })), Layer.provide(counter)),
      { ...sizes, counted: true },
    ),
  ]
  if (missing('postgres') === undefined) {
    const postgres = await startPostgres()
    try {
      results.push(
        await durableCase(
          'a run of 2 model turns and 1 tool call: DurableAgent.run on PostgreSQL vs AI.runAgent',
          (counter) => DurableEngine.layerSingleRunner().pipe(Layer.provide(pgClient(postgres.url)), Layer.provide(counter)),
          { ...sizes, counted: true },
        ),
      )
    } finally {
      await postgres.dispose()
    }
  }
  return results
}

/** Durable runs started at once on one runner: how fast they all finish, and what each cost. */
export interface DurableLoadRow {
  readonly engine: string
  readonly runs: number
  readonly modelDelayMillis: number
  readonly runsPerSecond: number
  readonly p50Millis: number
  readonly p99Millis: number
  readonly statementsPerRun: number
  /** Model requests per run: 2 when every finished turn was asked once. */
  readonly requestsPerRun: number
  readonly failed: number
}

const percentile = (values: ReadonlyArray<number>, p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!

const loadCase = async (
  engine: string,
  engineOf: (counter: Layer.Layer<never>) => Layer.Layer<DurableAgent.DurableServices, unknown>,
  runs: number,
  modelDelayMillis: number,
): Promise<DurableLoadRow> => {
  const statements = countStatements()
  const server = await startFakeOpenAI((request) => ({ ...model(request), delayMs: modelDelayMillis }))
  const durable = DurableAgent.make(AI.defineAgent({
    name: 'orders',
    adapter: createOpenaiChat('gpt-5.2', 'bench-key', { baseURL: server.baseURL, maxRetries: 0 }),
    instructions: 'Answer order questions.',
    tools: [getOrder],
  }))
  const runtime = ManagedRuntime.make(durable.layer.pipe(Layer.provideMerge(engineOf(statements.layer))))
  try {
    // One run first, so that the engine has started before the clock does.
    await runtime.runPromise(durable.run({ runId: `load-warm-${Date.now()}`, messages }))
    const requestsBefore = server.requests.length
    const statementsBefore = statements.count()
    const started = performance.now()
    const outcomes = await Promise.all(Array.from({ length: runs }, async (_, index) => {
      const begin = performance.now()
      const exit = await runtime.runPromiseExit(durable.run({ runId: `load-${started}-${index}`, messages }))
      return { millis: performance.now() - begin, failed: exit._tag === 'Failure' }
    }))
    const seconds = (performance.now() - started) / 1000
    const millis = outcomes.map((outcome) => outcome.millis)
    return {
      engine,
      runs,
      modelDelayMillis,
      runsPerSecond: runs / seconds,
      p50Millis: percentile(millis, 0.5),
      p99Millis: percentile(millis, 0.99),
      statementsPerRun: (statements.count() - statementsBefore) / runs,
      requestsPerRun: (server.requests.length - requestsBefore) / runs,
      failed: outcomes.filter((outcome) => outcome.failed).length,
    }
  } finally {
    await runtime.dispose()
    await server.close()
  }
}

/**
 * Durable runs under load: `runs` runs started at once on one runner, on
 * SQLite and on PostgreSQL, with the fake model answering at once and after
 * 200 ms. Every run must finish, each finished turn asked once.
 */
export const benchDurableLoad = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<DurableLoadRow>> => {
  const runs = options.quick ? 100 : 500
  const rows: Array<DurableLoadRow> = []
  for (const delay of [0, 200]) {
    const file = join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-durable-load-')), 'runs.db')
    rows.push(await loadCase('SQLite', (counter) => DurableEngine.layerSqlite({ filename: file }).pipe(Layer.provide(layerSqlite({ filename: file })), Layer.provide(counter)), runs, delay))
  }
  if (missing('postgres') === undefined) {
    for (const delay of [0, 200]) {
      const postgres = await startPostgres()
      try {
        rows.push(await loadCase('PostgreSQL', (counter) => DurableEngine.layerSingleRunner().pipe(Layer.provide(pgClient(postgres.url)), Layer.provide(counter)), runs, delay))
      } finally {
        await postgres.dispose()
      }
    }
  }
  return rows
}
