import * as AI from '@tanstack/ai-effect'
import { DurableEngine } from '@tanstack/ai-effect/durable'
import { startFakeOpenAI } from '@tanstack/ai-effect/testing'
import { Effect, Layer, ManagedRuntime, Stream } from 'effect'
import { pgClient } from '../test/support/backends.ts'
import { startPostgres } from '../test/support/services.ts'
import { messages, ordersAgent } from './durable.ts'
import { createOpenaiChat } from '@tanstack/ai-openai'
import type { ResponsesRequest } from '@tanstack/ai-effect/testing'
import { getOrderDef } from '../test/support/tools.ts'

const N = Number(process.env.N ?? 200)
const pg = await startPostgres()
const server = await startFakeOpenAI((request: ResponsesRequest) =>
  request.input.some((item) => item.type === 'function_call_output') ? { text: 'Shipped.' } : { toolCalls: [{ name: 'get_order', args: { id: 'A-100' } }] })
const durable = ordersAgent(server.baseURL)
const runtime = ManagedRuntime.make(durable.layer.pipe(Layer.provideMerge(DurableEngine.layerSingleRunner().pipe(Layer.provide(pgClient(pg.url))))))
const getOrder = AI.serverTool(getOrderDef, ({ id }) => Effect.succeed({ status: `shipped ${id}` }))
const agent = AI.defineAgent({ name: 'orders', adapter: createOpenaiChat('gpt-5.2', 'k', { baseURL: server.baseURL, maxRetries: 0 }), instructions: 'x', tools: [getOrder] })
let i = 0
const one = () => process.env.MODE === 'plain' ? Effect.runPromise(Stream.runDrain(AI.runAgent(agent, { messages }))) : runtime.runPromise(durable.run({ runId: `r-${Date.now()}-${i++}`, messages }))
for (let k = 0; k < 40; k++) await one()
const c0 = process.cpuUsage(); const t0 = performance.now()
for (let k = 0; k < N; k++) await one()
const t = (performance.now() - t0) / N; const c = process.cpuUsage(c0)
console.log(JSON.stringify({ mode: process.env.MODE ?? 'durable', msPerRun: t.toFixed(2), cpuMsPerRun: ((c.user + c.system) / 1000 / N).toFixed(2) }))
await runtime.dispose(); await server.close(); await pg.dispose()
process.exit(0)
