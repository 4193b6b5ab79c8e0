import { chat as coreChat } from '@tanstack/ai'
import { scriptedText } from '@tanstack/ai-effect/testing'
import { Effect, Layer, ManagedRuntime, Option, Stream } from 'effect'
import { fromAsyncIterableBatched } from './src/internal/batched.ts'
import { guardArguments } from './src/internal/arguments.ts'
import { makeRun } from './src/internal/run.ts'
const runtime = ManagedRuntime.make(Layer.empty)
const messages = [{ role: 'user' as const, content: 'hi' }]
const time = async (name: string, f: () => Promise<unknown>) => {
  for (let i = 0; i < 500; i++) await f()
  const start = performance.now()
  for (let i = 0; i < 3000; i++) await f()
  console.log(((performance.now() - start) / 3000 * 1000).toFixed(0), 'µs', name)
}
const drain = async (it: AsyncIterable<unknown>) => { for await (const _ of it) {} }
const variant = (flags: { span?: boolean; annotate?: boolean; run?: boolean; guard?: boolean; mapArray?: boolean }) => () =>
  runtime.runPromise(Stream.runDrain(Stream.unwrap(Effect.gen(function*() {
    const run = flags.run ? yield* makeRun({}) : { runId: 'r', threadId: 't' }
    if (flags.annotate) yield* Effect.annotateCurrentSpan({ a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7 })
    const span = flags.annotate ? yield* Effect.option(Effect.currentSpan) : Option.none()
    const c = yield* Effect.acquireRelease(Effect.sync(() => new AbortController()), (c) => Effect.sync(() => c.abort(reason)))
    const adapter = flags.guard ? guardArguments(scriptedText([{ text: 'Done.' }])) : scriptedText([{ text: 'Done.' }])
    const it = yield* Effect.try({ try: () => coreChat({ adapter, messages, abortController: c, runId: run.runId, threadId: run.threadId }) as AsyncIterable<unknown>, catch: (e) => e })
    const s = fromAsyncIterableBatched(it, (e) => e)
    void span
    return flags.mapArray ? s.pipe(Stream.mapArray((b) => b)) : s
  })).pipe(flags.span ? Stream.withSpan('AI.chat', { captureStackTrace: false }) : (s) => s)))
const reason = new DOMException('x', 'AbortError')
await time('core', () => drain(coreChat({ adapter: scriptedText([{ text: 'Done.' }]), messages })))
await time('base', variant({}))
await time('+run', variant({ run: true }))
await time('+guard', variant({ guard: true }))
await time('+mapArray', variant({ mapArray: true }))
await time('+span', variant({ span: true }))
await time('+span+annotate', variant({ span: true, annotate: true }))
await time('all', variant({ span: true, annotate: true, run: true, guard: true, mapArray: true }))
await time('core', () => drain(coreChat({ adapter: scriptedText([{ text: 'Done.' }]), messages })))
