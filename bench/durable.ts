/**
 * What a durable run costs next to a plain one: the same agent run (a model
 * turn with a tool call, then an answer) through `AI.runAgent`, and through
 * `DurableAgent.run` on the memory engine and on PostgreSQL, where each model
 * turn and tool call is an activity the engine records. Both ask the fake
 * OpenAI server on 127.0.0.1 through the real adapter, as a deployment asks
 * its provider (minus the provider's own time).
 */
import * as AI from '@tanstack/ai-effect'
import { DurableAgent, DurableEngine } from '@tanstack/ai-effect/durable'
import { type FakeReply, type ResponsesRequest, startFakeOpenAI } from '@tanstack/ai-effect/testing'
import { createOpenaiChat } from '@tanstack/ai-openai'
import { Effect, Layer, ManagedRuntime, Stream } from 'effect'
import { pgClient } from '../test/support/backends.ts'
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

const durableCase = async (
  name: string,
  engine: Layer.Layer<DurableAgent.DurableServices, unknown>,
  options: { readonly rounds: number; readonly iterations: number },
): Promise<PairResult> => {
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
  try {
    return await pair(name, undefined, options,
      () => Effect.runPromise(Stream.runDrain(AI.runAgent(agent, { messages }))),
      () => runtime.runPromise(durable.run({ runId: `bench-${Date.now()}-${run++}`, messages })))
  } finally {
    await runtime.dispose()
    await server.close()
  }
}

export const benchDurable = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<PairResult>> => {
  const sizes = { rounds: options.quick ? 3 : 7, iterations: options.quick ? 10 : 30 }
  const results = [
    await durableCase('a run of 2 model turns and 1 tool call: DurableAgent.run on the memory engine vs AI.runAgent', DurableEngine.layerMemory, sizes),
  ]
  if (missing('postgres') === undefined) {
    const postgres = await startPostgres()
    try {
      results.push(
        await durableCase(
          'a run of 2 model turns and 1 tool call: DurableAgent.run on PostgreSQL vs AI.runAgent',
          DurableEngine.layerSingleRunner().pipe(Layer.provide(pgClient(postgres.url))),
          sizes,
        ),
      )
    } finally {
      await postgres.dispose()
    }
  }
  return results
}
