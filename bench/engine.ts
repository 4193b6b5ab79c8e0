/**
 * effect's cluster workflow engine alone, without this package: a workflow
 * that runs no activity, and one that runs three activities that do
 * nothing, on `SingleRunner` with SQL storage (PostgreSQL through
 * `@effect/sql-pg`; SQLite through this package's `node:sqlite` client,
 * since effect ships none). The difference is what the engine costs per
 * activity before the activity does anything: the floor under a durable
 * run's step, and a program small enough to take upstream. Statements are
 * counted at the driver.
 */
import * as NodeCrypto from '@effect/platform-node/NodeCrypto'
import { layerSqliteClient } from '@tanstack/ai-effect/sqlite'
import { Effect, Layer, ManagedRuntime, Schema } from 'effect'
import { ClusterWorkflowEngine, SingleRunner } from 'effect/cluster'
import type { SqlClient } from 'effect/sql/SqlClient'
import { Activity, Workflow } from 'effect/workflow'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pgClient } from '../test/support/backends.ts'
import { countStatements, requestsPerRun } from '../test/support/roundTrips.ts'
import { missing, startPostgres } from '../test/support/services.ts'
import { pair } from './chat.ts'
import { activitiesPerRun } from './durable.ts'

/** The activities of the bench's durable run, as no-ops. */
const steps = activitiesPerRun

const workflowOf = (activities: number) => {
  const workflow = Workflow.make(`Steps${activities}`, { payload: { id: Schema.String }, idempotencyKey: ({ id }) => id })
  const layer = workflow.toLayer(() =>
    Effect.forEach(Array.from({ length: activities }, (_, index) => index), (index) => Activity.make({ name: `step-${index}`, execute: Effect.void }), { discard: true }))
  return { workflow, layer }
}

/** The engine alone: a run's time with no activity and with the bench run's activities, and the statements of each. */
export interface EngineRow {
  readonly storage: string
  readonly runMicros: number
  readonly stepsMicros: number
  readonly statementsPerRun: number
  readonly statementsPerStepsRun: number
}

/** How many activities a timed run of the steps workflow runs. */
export const engineSteps = steps

const engineCase = async (storage: string, client: Layer.Layer<SqlClient, unknown>, options: { readonly rounds: number; readonly iterations: number }): Promise<EngineRow> => {
  const statements = countStatements()
  const empty = workflowOf(0)
  const stepped = workflowOf(steps)
  const runtime = ManagedRuntime.make(Layer.mergeAll(empty.layer, stepped.layer).pipe(
    Layer.provideMerge(ClusterWorkflowEngine.layer),
    Layer.provide(SingleRunner.layer()),
    Layer.provide(NodeCrypto.layerDigest),
    Layer.provide(client),
    Layer.provide(statements.layer),
  ))
  let run = 0
  const runOf = (workflow: typeof empty.workflow) => () => runtime.runPromise(workflow.execute({ id: `${storage}-${run++}` }))
  try {
    const timed = await pair(`effect's engine on ${storage}`, undefined, options, runOf(empty.workflow), runOf(stepped.workflow))
    return {
      storage,
      runMicros: timed.rawMicros,
      stepsMicros: timed.oursMicros,
      statementsPerRun: await requestsPerRun(statements, runOf(empty.workflow)),
      statementsPerStepsRun: await requestsPerRun(statements, runOf(stepped.workflow)),
    }
  } finally {
    await runtime.dispose()
  }
}

export const benchEngine = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<EngineRow>> => {
  const sizes = { rounds: options.quick ? 3 : 7, iterations: options.quick ? 10 : 30 }
  const rows = [await engineCase('SQLite', layerSqliteClient({ filename: join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-engine-')), 'engine.db') }), sizes)]
  if (missing('postgres') === undefined) {
    const postgres = await startPostgres()
    try {
      rows.push(await engineCase('PostgreSQL', pgClient(postgres.url), sizes))
    } finally {
      await postgres.dispose()
    }
  }
  return rows
}
