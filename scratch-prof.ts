import { toolDefinition } from '@tanstack/ai'
import * as AI from '@tanstack/ai-effect'
import { scriptedText } from '@tanstack/ai-effect/testing'
import { Effect, Layer, ManagedRuntime, Schema, Stream } from 'effect'
const definition = toolDefinition({ name: 'get_order', description: 'x', inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })), outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String })) })
const serverTool = AI.serverTool(definition, ({ id }) => Effect.succeed({ status: `shipped ${id}` }))
const runtime = ManagedRuntime.make(Layer.empty)
const messages = [{ role: 'user' as const, content: 'hi' }]
const start = performance.now()
for (let i = 0; i < 3000; i++) await runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText([{ toolCalls: [{ name: 'get_order', args: { id: `A-${i}` } }] }, { text: 'Done.' }]), messages, tools: [serverTool] })))
console.log(((performance.now() - start) / 3000 * 1000).toFixed(0), 'µs per run')
