/**
 * effect's cluster workflow engine alone, without this package: a workflow
 * that runs no activity, and one that runs three activities that do
 * nothing, on `SingleRunner` with SQL storage (PostgreSQL through
 * `@effect/sql-pg`; SQLite through this package's `node:sqlite` client,
 * since effect ships none). The difference is what the engine costs per
 * activity before the activity does anything: the floor under a durable
 * run's step, and a program small enough to take upstream. Statements are
 * counted at the driver, and the runner's CPU (this process's) per run.
 *
 * A third workflow records the same steps itself, one insert each into a
 * table of its own after one read of what it recorded before (what a
 * replay needs): what a durable step costs as one write, the anchor that
 * DBOS sets, next to what the engine's activity protocol costs.
 *
 * The empty workflow also runs on a runner with one shard, against effect's
 * 300 in the same rounds (each on storage of its own): each read of storage
 * names every shard the runner holds in its text, with the read's time, so
 * no driver keeps the statement prepared.
 */
import * as NodeCrypto from '@effect/platform-node/NodeCrypto'
import { layerSqliteClient } from '@tanstack/ai-effect/sqlite'
import { Effect, Layer, ManagedRuntime, Schema } from 'effect'
import { ClusterWorkflowEngine, SingleRunner } from 'effect/cluster'
import { SqlClient } from 'effect/sql/SqlClient'
import { Activity, Workflow, type WorkflowEngine } from 'effect/workflow'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pgClient } from '../test/support/backends.ts'
import { countStatements, requestsPerRun } from '../test/support/roundTrips.ts'
import { missing, withPostgres } from '../test/support/services.ts'
import { pair } from './chat.ts'
import { secondDatabase, stepsPerRun } from './durable.ts'

/** The steps of the bench's durable run, as activities that do nothing. */
const steps = stepsPerRun

const workflowOf = (activities: number) => {
  const workflow = Workflow.make(`Steps${activities}`, { payload: { id: Schema.String }, idempotencyKey: ({ id }) => id })
  const layer = workflow.toLayer(() =>
    Effect.forEach(Array.from({ length: activities }, (_, index) => index), (index) => Activity.make({ name: `step-${index}`, execute: Effect.void }), { discard: true }))
  return { workflow, layer }
}

/** Every workflow of this bench: a payload of one id, no result. */
type IdWorkflow = Workflow.Workflow<string, Schema.Struct<{ readonly id: Schema.String }>, Schema.Void, Schema.Never>

const journalTable = 'bench_engine_journal'

/** A workflow that records its steps itself: one read of its journal, then an insert per step not recorded yet. */
const journaledOf = (steps: number) => {
  const workflow = Workflow.make(`Journaled${steps}`, { payload: { id: Schema.String }, idempotencyKey: ({ id }) => id })
  const layer = workflow.toLayer(({ id }) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      const recorded = new Set((yield* sql<{ readonly step: unknown }>`SELECT step FROM ${sql(journalTable)} WHERE execution_id = ${id}`).map((row) => Number(row.step)))
      for (let step = 0; step < steps; step++) {
        if (recorded.has(step)) continue
        yield* sql`INSERT INTO ${sql(journalTable)} (execution_id, step, result) VALUES (${id}, ${step}, ${'{}'}) ON CONFLICT DO NOTHING`
      }
    }).pipe(Effect.orDie))
  return { workflow, layer }
}

/** The engine alone: a run's time with no activity, with the bench run's activities, and with as many steps it records itself. */
export interface EngineRow {
  readonly storage: string
  readonly runMicros: number
  readonly stepsMicros: number
  readonly journaledMicros: number
  /** What a step the workflow records itself adds to a run, against a run with no step in the same rounds. */
  readonly journaledStepMicros: number
  readonly statementsPerRun: number
  readonly statementsPerStepsRun: number
  readonly statementsPerJournaledRun: number
  /** A run with no activity on a runner with one shard, a run on effect's 300 in the same rounds, and their ratio. */
  readonly oneShardRunMicros: number
  readonly oneShardAgainstMicros: number
  readonly oneShardRatio: number
  /** This process's CPU (user and system) per run: the runner's, and on SQLite the database's too. */
  readonly runnerCpuPerRun: number
  readonly runnerCpuPerStepsRun: number
}

/** How many activities a timed run of the steps workflow runs. */
export const engineSteps = steps

/** Runs counted one at a time for their statements and CPU. */
const countedRunCount = 40

/** The workflows' layer on `SingleRunner` with SQL storage, with `shardsPerGroup` shards (effect's default where undefined). */
const engineOf = <Out>(workflows: Layer.Layer<Out, never, WorkflowEngine.WorkflowEngine | SqlClient>, client: Layer.Layer<SqlClient, unknown>, shardsPerGroup?: number) =>
  workflows.pipe(
    Layer.provideMerge(ClusterWorkflowEngine.layer),
    Layer.provide(SingleRunner.layer(shardsPerGroup === undefined ? undefined : { shardingConfig: { shardsPerGroup } })),
    Layer.provide(NodeCrypto.layerDigest),
    Layer.provideMerge(client),
  )

const engineCase = async (
  storage: string,
  client: Layer.Layer<SqlClient, unknown>,
  oneShardClient: Layer.Layer<SqlClient, unknown>,
  options: { readonly rounds: number; readonly iterations: number },
): Promise<EngineRow> => {
  const statements = countStatements()
  const empty = workflowOf(0)
  const stepped = workflowOf(steps)
  const journaled = journaledOf(steps)
  const runtime = ManagedRuntime.make(engineOf(Layer.mergeAll(empty.layer, stepped.layer, journaled.layer), client).pipe(Layer.provide(statements.layer)))
  let run = 0
  const runOf = (workflow: IdWorkflow, on: ManagedRuntime.ManagedRuntime<WorkflowEngine.WorkflowEngine, unknown> = runtime) => () =>
    on.runPromise(workflow.execute({ id: `${storage}-${run++}` }))
  /** The statements of one run, and this process's CPU per run over the same runs. */
  const countedRuns = async (workflow: IdWorkflow) => {
    const before = process.cpuUsage()
    const statementsPerRun = await requestsPerRun(statements, runOf(workflow), countedRunCount)
    const cpu = process.cpuUsage(before)
    return { statementsPerRun, cpuMicros: (cpu.user + cpu.system) / countedRunCount }
  }
  try {
    await runtime.runPromise(Effect.flatMap(Effect.service(SqlClient), (sql) =>
      sql`CREATE TABLE IF NOT EXISTS ${sql(journalTable)} (execution_id TEXT NOT NULL, step INTEGER NOT NULL, result TEXT NOT NULL, PRIMARY KEY (execution_id, step))`))
    // Up for its rounds only, so that its runner's own work stays out of the counted runs' CPU.
    const oneShard = ManagedRuntime.make(engineOf(empty.layer, oneShardClient, 1))
    const onOneShard = await pair(`effect's engine on ${storage}, one shard`, undefined, options, runOf(empty.workflow), runOf(empty.workflow, oneShard))
      .finally(() => oneShard.dispose())
    const timed = await pair(`effect's engine on ${storage}`, undefined, options, runOf(empty.workflow), runOf(stepped.workflow))
    const recordedItself = await pair(`effect's engine on ${storage}, steps the workflow records`, undefined, options, runOf(empty.workflow), runOf(journaled.workflow))
    const emptyRuns = await countedRuns(empty.workflow)
    const steppedRuns = await countedRuns(stepped.workflow)
    return {
      storage,
      runMicros: timed.rawMicros,
      stepsMicros: timed.oursMicros,
      journaledMicros: recordedItself.oursMicros,
      journaledStepMicros: (recordedItself.oursMicros - recordedItself.rawMicros) / steps,
      oneShardRunMicros: onOneShard.oursMicros,
      oneShardAgainstMicros: onOneShard.rawMicros,
      oneShardRatio: onOneShard.ratio,
      statementsPerRun: emptyRuns.statementsPerRun,
      statementsPerStepsRun: steppedRuns.statementsPerRun,
      statementsPerJournaledRun: (await countedRuns(journaled.workflow)).statementsPerRun,
      runnerCpuPerRun: emptyRuns.cpuMicros,
      runnerCpuPerStepsRun: steppedRuns.cpuMicros,
    }
  } finally {
    await runtime.dispose()
  }
}

export const benchEngine = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<EngineRow>> => {
  const sizes = { rounds: options.quick ? 3 : 7, iterations: options.quick ? 10 : 30 }
  const dir = mkdtempSync(join(tmpdir(), 'ai-effect-bench-engine-'))
  const rows = [await engineCase('SQLite', layerSqliteClient({ filename: join(dir, 'engine.db') }), layerSqliteClient({ filename: join(dir, 'one-shard.db') }), sizes)]
  if (missing('postgres') === undefined) {
    rows.push(await withPostgres(async (postgres) => {
      // The one-shard runner's storage: a database of its own on the same server.
      return engineCase('PostgreSQL', pgClient(postgres.url), pgClient(await secondDatabase(postgres, 'one_shard')), sizes)
    }))
  }
  return rows
}
