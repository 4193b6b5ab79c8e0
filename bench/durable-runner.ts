/**
 * One runner of the two-runner load case (bench/durable.ts): a process with
 * the bench's durable agent on a socket runner over the shared PostgreSQL.
 * It reads commands on stdin and answers each with a JSON line on stdout:
 * `warm` runs a few runs, `shards` reports the shards it holds and is
 * releasing, `go` starts its share of the runs at once and reports each
 * run's time and the time of each step it executed, `count` reports the
 * statements it sent since `go`, `stop` ends it.
 */
import { DurableEngine } from '@tanstack/ai-effect/durable'
import { Effect, Layer, ManagedRuntime, Metric } from 'effect'
import * as ClusterMetrics from 'effect/cluster/ClusterMetrics'
import { createInterface } from 'node:readline'
import { pgClient } from '../test/support/backends.ts'
import { countStatements } from '../test/support/roundTrips.ts'
import { answerPrefix, messages, ordersAgent, runAtOnce, stepTimer } from './durable.ts'

/** What the bench gives the runner, in AI_EFFECT_BENCH_RUNNER. */
export interface RunnerConfig {
  readonly postgres: string
  readonly modelURL: string
  readonly port: number
  readonly name: string
  readonly runs: number
}

const config = JSON.parse(process.env.AI_EFFECT_BENCH_RUNNER!) as RunnerConfig
const statements = countStatements()
const steps = stepTimer()
const durable = ordersAgent(config.modelURL)
const runtime = ManagedRuntime.make(durable.layer.pipe(
  Layer.provideMerge(
    DurableEngine.layerSocketRunner({ host: '127.0.0.1', port: config.port }).pipe(Layer.provide(pgClient(config.postgres)), Layer.provide(statements.layer)),
  ),
  Layer.provide(steps.layer),
))
/** An answer, on a line of its own behind `answerPrefix`: the engine logs to stdout too. */
const say = (message: object) => process.stdout.write(`${answerPrefix}${JSON.stringify(message)}\n`)

const runAll = (prefix: string, runs: number) => runAtOnce(runtime, durable, `${config.name}-${prefix}`, runs)

let statementsAtGo = 0
await runtime.runPromise(durable.run({ runId: `${config.name}-first`, messages }))
say({ ready: true })
for await (const command of createInterface({ input: process.stdin })) {
  if (command === 'warm') {
    await runAll('warm', 20)
    say({ warmed: true })
  } else if (command === 'shards') {
    const [held, releasing] = await runtime.runPromise(Effect.all([Metric.value(ClusterMetrics.shards), Metric.value(ClusterMetrics.shardsReleasing)]))
    say({ held: Number(held.value), releasing: Number(releasing.value) })
  } else if (command === 'go') {
    statementsAtGo = statements.count()
    steps.reset()
    const outcomes = await runAll('load', config.runs)
    say({ millis: outcomes.map((outcome) => outcome.millis), stepMillis: steps.millis(), failed: outcomes.filter((outcome) => outcome.failed).length })
  } else if (command === 'count') {
    say({ statements: statements.count() - statementsAtGo })
  } else if (command === 'stop') {
    break
  }
}
await runtime.dispose()
