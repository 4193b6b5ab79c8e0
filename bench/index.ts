/**
 * `npm run bench`: what the Effect layer costs on top of core TanStack AI.
 *
 * Every case runs in process with the scripted adapter, so that the numbers
 * are the library's own work, not a network's:
 *
 * - decoding tool arguments with AI.toolSchema;
 * - one chat run with one tool call, the tool being a core server tool, an
 *   AI.serverTool, or an AI.effectTool (key, store lookup, record).
 *
 * Each case is warmed up, then timed over a fixed number of iterations; the
 * table shows the mean and the 95th percentile per operation.
 */
import { chat as coreChat, toolDefinition } from '@tanstack/ai'
import * as AI from '@tanstack/ai-effect'
import { scriptedText } from '@tanstack/ai-effect/testing'
import { Effect, Layer, ManagedRuntime, Schema, Stream } from 'effect'
import { benchProcesses, benchStores } from './stores.ts'

const quick = process.argv.includes('--quick')

interface Result {
  readonly name: string
  readonly iterations: number
  readonly meanMicros: number
  readonly p95Micros: number
}

async function measure(name: string, iterations: number, operation: (i: number) => unknown): Promise<Result> {
  for (let i = 0; i < Math.min(200, iterations); i++) await operation(i)
  const samples: Array<number> = []
  for (let i = 0; i < iterations; i++) {
    const start = performance.now()
    await operation(i)
    samples.push((performance.now() - start) * 1000)
  }
  samples.sort((a, b) => a - b)
  const mean = samples.reduce((sum, sample) => sum + sample, 0) / samples.length
  return { name, iterations, meanMicros: mean, p95Micros: samples[Math.floor(samples.length * 0.95)] ?? mean }
}

const Order = Schema.Struct({
  id: Schema.String,
  lines: Schema.Array(Schema.Struct({ sku: Schema.String, quantity: Schema.Int, note: Schema.optionalKey(Schema.String) })),
})
const orderSchema = AI.toolSchema(Order)
const orderArgs = { id: 'A-100', lines: Array.from({ length: 10 }, (_, i) => ({ sku: `SKU-${i}`, quantity: i + 1, note: null })) }

const definition = toolDefinition({
  name: 'get_order',
  description: 'Get the status of an order',
  inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String })),
})
const coreTool = definition.server(async ({ id }) => ({ status: `shipped ${id}` }))
const effectServerTool = AI.serverTool(definition, ({ id }) => Effect.succeed({ status: `shipped ${id}` }))
const effectTool = AI.effectTool(definition, ({ id }) => Effect.succeed({ status: `shipped ${id}` }))

const script = (i: number) => [{ toolCalls: [{ name: 'get_order', args: { id: `A-${i}` } }] }, { text: 'Done.' }]
const messages = [{ role: 'user' as const, content: 'Where is my order?' }]

// One store for the whole run, as an app would have.
const runtime = ManagedRuntime.make(Layer.mergeAll(AI.EffectStore.layerMemory({ capacity: 1_000_000 })))

const results = [
  await measure('AI.toolSchema: decode 10-line order', 20_000, () => orderSchema['~standard'].validate(orderArgs)),
  await measure('core chat(): one core server tool call', 2_000, async (i) => {
    for await (const _ of coreChat({ adapter: scriptedText(script(i)), messages, tools: [coreTool] })) {
      // drain
    }
  }),
  await measure('AI.chat: one AI.serverTool call', 2_000, (i) =>
    runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(script(i)), messages, tools: [effectServerTool] }))),
  ),
  await measure('AI.chat: one AI.effectTool call (applied)', 2_000, (i) =>
    runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(script(i)), messages, runId: `run-${i}`, tools: [effectTool] }))),
  ),
  await measure('AI.chat: one AI.effectTool call (recorded)', 2_000, () =>
    runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(script(0)), messages, runId: 'run-0', tools: [effectTool] }))),
  ),
]

await runtime.dispose()
console.log(`Node ${process.version}, ${new Date().toISOString()}`)
console.table(
  results.map((result) => ({
    case: result.name,
    iterations: result.iterations,
    'mean µs': result.meanMicros.toFixed(1),
    'p95 µs': result.p95Micros.toFixed(1),
  })),
)

const stores = await benchStores(quick ? { rounds: 3, perRound: 100 } : { rounds: 7, perRound: 500 })
console.log('\nEffect tools per store backend (medians of interleaved rounds, per call)')
console.table(
  stores.map((row) => ({
    backend: row.backend,
    case: row.case,
    'raw µs': row.rawMicros.toFixed(1),
    'ours µs': row.oursMicros.toFixed(1),
    ratio: row.ratio.toFixed(2),
    'calls/s': Number.isFinite(row.oursMicros) ? Math.round(1e6 / row.oursMicros) : '',
    note: row.note ?? '',
  })),
)
const processes = await benchProcesses(quick ? 100 : 1_000)
console.log('\n4 processes calling one effect tool for the same keys at once')
console.table(processes.map((row) => ({ ...row, callsPerSecond: Math.round(row.callsPerSecond) })))
