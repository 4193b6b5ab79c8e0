import { maxIterations, toolDefinition } from '@tanstack/ai'
import * as AI from '@tanstack/ai-effect'
import { scriptedText } from '@tanstack/ai-effect/testing'
import { Effect, Layer, ManagedRuntime, Schema, Stream } from 'effect'
const definition = toolDefinition({ name: 'get_order', description: 'x', inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })), outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String })) })
const effectTool = AI.effectTool(definition, ({ id }) => Effect.succeed({ status: `shipped ${id}` }))
const runtime = ManagedRuntime.make(AI.EffectStore.layerMemory({ capacity: 1_000_000 }))
const messages = [{ role: 'user' as const, content: 'hi' }]
const script = () => [...Array.from({ length: 20 }, (_, t) => ({ toolCalls: Array.from({ length: 10 }, (_, i) => ({ name: 'get_order', args: { id: `r-${t}-${i}` } })) })), { text: 'Done.' }]
const loop = maxIterations(25)
const once = () => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(script()), messages, runId: 'replay', tools: [effectTool], agentLoopStrategy: loop })))
await once()
const start = performance.now()
for (let i = 0; i < 30; i++) await once()
console.log(((performance.now() - start) / 30 / 200 * 1000).toFixed(0), 'µs per replayed call (incl. core)')
