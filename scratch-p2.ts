import { chat as coreChat } from '@tanstack/ai'
import * as AI from '@tanstack/ai-effect'
import { scriptedText } from '@tanstack/ai-effect/testing'
import { Effect, Layer, ManagedRuntime, Stream } from 'effect'
const runtime = ManagedRuntime.make(Layer.empty)
const messages = [{ role: 'user' as const, content: 'hi' }]
const time = async (name: string, f: () => Promise<unknown>) => {
  for (let i = 0; i < 500; i++) await f()
  const start = performance.now()
  for (let i = 0; i < 3000; i++) await f()
  console.log(((performance.now() - start) / 3000 * 1000).toFixed(0), 'µs', name)
}
const drain = async (it: AsyncIterable<unknown>) => { for await (const _ of it) {} }
await time('core text', () => drain(coreChat({ adapter: scriptedText([{ text: 'Done.' }]), messages })))
await time('AI.chat text', () => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText([{ text: 'Done.' }]), messages }))))
await time('runPromise void', () => runtime.runPromise(Effect.void))
await time('runDrain fromAsyncIterable core', () => runtime.runPromise(Stream.runDrain(Stream.fromAsyncIterable(coreChat({ adapter: scriptedText([{ text: 'Done.' }]), messages }) as AsyncIterable<unknown>, (e) => e))))
await time('Stream.toAsyncIterable AI.chat', () => drain(Stream.toAsyncIterable(AI.chat({ adapter: scriptedText([{ text: 'Done.' }]), messages }))))
const { fromAsyncIterableBatched } = await import('./src/internal/batched.ts')
const { guardArguments } = await import('./src/internal/arguments.ts')
await time('batched core', () => runtime.runPromise(Stream.runDrain(fromAsyncIterableBatched(coreChat({ adapter: scriptedText([{ text: 'Done.' }]), messages }) as AsyncIterable<unknown>, (e) => e))))
await time('guarded core', () => drain(coreChat({ adapter: guardArguments(scriptedText([{ text: 'Done.' }])), messages })))
await time('withSpan fromAsyncIterable core', () => runtime.runPromise(Stream.runDrain(Stream.fromAsyncIterable(coreChat({ adapter: scriptedText([{ text: 'Done.' }]), messages }) as AsyncIterable<unknown>, (e) => e).pipe(Stream.withSpan('x', { captureStackTrace: false })))))
await time('unwrap+acquireRelease core', () => runtime.runPromise(Stream.runDrain(Stream.unwrap(Effect.gen(function*() {
  const c = yield* Effect.acquireRelease(Effect.sync(() => new AbortController()), (c) => Effect.sync(() => c.abort()))
  return Stream.fromAsyncIterable(coreChat({ adapter: scriptedText([{ text: 'Done.' }]), messages, abortController: c }) as AsyncIterable<unknown>, (e) => e)
})))))
