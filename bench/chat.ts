/**
 * What `AI.chat` and its tools cost next to core `chat()`, measured side by
 * side in one process with the scripted adapter, so that the numbers are the
 * library's own work: interleaved rounds of the raw path and ours, the ratio
 * of each round, and the median and spread of the ratios.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { connect } from 'node:net'
import { chat as coreChat, maxIterations, toolDefinition } from '@tanstack/ai'
import type { StreamChunk } from '@tanstack/ai'
import * as AI from '@tanstack/ai-effect'
import { type ScriptedTurn, scriptedText } from '@tanstack/ai-effect/testing'
import { Duration, Effect, Exit, Layer, ManagedRuntime, Schema, Scope, Stream } from 'effect'
import { fromAsyncIterableBatched } from '../src/internal/batched.ts'
import { inRoundOrder, median, microsPerCall } from './stats.ts'

export interface PairResult {
  readonly case: string
  readonly target: number | undefined
  /** Median µs of one iteration of the raw path and of ours. */
  readonly rawMicros: number
  readonly oursMicros: number
  /** Median of the rounds' ratios, and their spread. */
  readonly ratio: number
  readonly ratioMin: number
  readonly ratioMax: number
  /** The third path of the case, with its median µs. */
  readonly split?: Omit<Split, 'run'> & { readonly micros: number }
}

/**
 * A third path measured in the same rounds, that has our run without the
 * part under test (`AI.chat` with core's tool, `AI.serverTool` in place of
 * `AI.effectTool`, the reader alone). It splits the gap in two: `first` names
 * what it costs over core, `second` what ours costs over it, each with the
 * guarantees it pays for; `calls` per run give the second part per call.
 */
export interface Split {
  readonly label: string
  readonly run: (i: number) => Promise<unknown>
  readonly first: string
  readonly second: string
  readonly calls: number
}

/** Warms both paths, then alternates them round by round. */
export const pair = async (
  name: string,
  target: number | undefined,
  options: { readonly rounds: number; readonly iterations: number },
  raw: (i: number) => Promise<unknown>,
  ours: (i: number) => Promise<unknown>,
  split?: Split,
): Promise<PairResult> => {
  const warmUp = Math.max(3, Math.ceil(options.iterations / 2))
  await microsPerCall(warmUp, raw)
  await microsPerCall(warmUp, ours)
  if (split !== undefined) await microsPerCall(warmUp, split.run)
  const raws: Array<number> = []
  const ourss: Array<number> = []
  const splits: Array<number> = []
  const ratios: Array<number> = []
  for (let round = 0; round < options.rounds; round++) {
    // Odd rounds time ours first, so that neither path always runs on the other's heels.
    const o0 = round % 2 === 1 ? await microsPerCall(options.iterations, ours) : undefined
    const r = await microsPerCall(options.iterations, raw)
    const o = o0 ?? await microsPerCall(options.iterations, ours)
    if (split !== undefined) splits.push(await microsPerCall(options.iterations, split.run))
    raws.push(r)
    ourss.push(o)
    ratios.push(o / r)
  }
  return {
    case: name,
    target,
    rawMicros: median(raws),
    oursMicros: median(ourss),
    ratio: median(ratios),
    ratioMin: Math.min(...ratios),
    ratioMax: Math.max(...ratios),
    ...(split === undefined ? {} : { split: { label: split.label, first: split.first, second: split.second, calls: split.calls, micros: median(splits) } }),
  }
}

const definition = toolDefinition({
  name: 'get_order',
  description: 'Get the status of an order',
  inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String })),
})
const coreTool = definition.server(async ({ id }) => ({ status: `shipped ${id}` }))
const serverTool = AI.serverTool(definition, ({ id }) => Effect.succeed({ status: `shipped ${id}` }))
const effectTool = AI.effectTool(definition, ({ id }) => Effect.succeed({ status: `shipped ${id}` }))

const messages = [{ role: 'user' as const, content: 'Where is my order?' }]

const drainCore = async (chunks: AsyncIterable<StreamChunk>) => {
  for await (const _ of chunks) {
    // drain
  }
}

/**
 * Lets core's devtools event client give up before anything is timed. Until
 * it has tried to reach a devtools bus 5 times, 300 ms apart, it keeps every
 * event a run emits (`@tanstack/devtools-event-client` 0.4: one per text
 * delta, with the text so far); a server is past that within 1.5 s of its
 * first run, but a loop of scripted runs never yields to timers, so the
 * chat cases, which run first, held every event of every run of both paths
 * (2 GB of heap by their end in a scratch run). The tries run on timers:
 * one run starts them, and a wait of real time lets them pass.
 */
export const settleCoreDevtools = async () => {
  await drainCore(coreChat({ adapter: scriptedText([{ text: 'settle' }]), messages }))
  await new Promise((resolve) => setTimeout(resolve, 2_000))
}

/** 20 turns of 10 tool calls each, then an answer. */
const toolCallScript = (prefix: string): ReadonlyArray<ScriptedTurn> => [
  ...Array.from({ length: 20 }, (_, turn) => ({
    toolCalls: Array.from({ length: 10 }, (_, i) => ({ name: 'get_order', args: { id: `${prefix}-${turn}-${i}` } })),
  })),
  { text: 'Done.' },
]

/** The two parts of a tool case's gap: the run around core's tool, and our tool path. */
const runAndToolPath = (calls: number) => ({
  first: 'the run (abort and interrupt on stop, span, argument guard)',
  second: 'the tool path (a fiber a stop interrupts, span, services)',
  calls,
})

const deltas = (count: number): ReadonlyArray<ScriptedTurn> => [{ text: Array.from({ length: count }, (_, i) => `w${i} `) }]

export const benchChat = async (options: { readonly quick: boolean }) => {
  // One store for the whole run, as an app would have.
  const runtime = ManagedRuntime.make(Layer.mergeAll(AI.EffectStore.layerMemory({ capacity: 1_000_000 })))
  const rounds = options.quick ? 5 : 11
  const loop = maxIterations(25)
  const results: Array<PairResult> = []

  results.push(
    await pair('one turn of 10,000 text deltas', 1.05, { rounds, iterations: options.quick ? 2 : 5 },
      () => drainCore(coreChat({ adapter: scriptedText(deltas(10_000)), messages })),
      () => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(deltas(10_000)), messages }))),
      {
        label: "AI.chat's reader alone",
        run: () => runtime.runPromise(Stream.runDrain(fromAsyncIterableBatched(coreChat({ adapter: scriptedText(deltas(10_000)), messages }), String))),
        first: 'the batched reader',
        second: 'the run (span, abort on stop, the argument guard on every chunk)',
        calls: 0,
      }),
  )
  const tenCalls = (i: number): ReadonlyArray<ScriptedTurn> => [
    { toolCalls: Array.from({ length: 10 }, (_, call) => ({ name: 'get_order', args: { id: `A-${i}-${call}` } })) },
    { text: 'Done.' },
  ]
  results.push(
    await pair('one turn of 10 tool calls (core server tool vs AI.serverTool)', 1.3, { rounds, iterations: options.quick ? 50 : 200 },
      (i) => drainCore(coreChat({ adapter: scriptedText(tenCalls(i)), messages, tools: [coreTool] })),
      (i) => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(tenCalls(i)), messages, tools: [serverTool] }))),
      { label: 'AI.chat, core tool', run: (i) => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(tenCalls(i)), messages, tools: [coreTool] }))), ...runAndToolPath(10) }),
  )
  results.push(
    await pair('200 tool calls in 20 turns (core server tools vs AI.serverTool)', 1.1, { rounds, iterations: options.quick ? 3 : 8 },
      () => drainCore(coreChat({ adapter: scriptedText(toolCallScript('x')), messages, tools: [coreTool], agentLoopStrategy: loop })),
      () => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(toolCallScript('x')), messages, tools: [serverTool], agentLoopStrategy: loop }))),
      { label: 'AI.chat, core tool', run: () => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(toolCallScript('x')), messages, tools: [coreTool], agentLoopStrategy: loop }))), ...runAndToolPath(200) }),
  )
  // Replay: every key of run "replay" is recorded before the timing starts.
  await runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(toolCallScript('r')), messages, runId: 'replay', tools: [effectTool], agentLoopStrategy: loop })))
  results.push(
    await pair('200 AI.effectTool calls, every key recorded (replay), memory store', 1.5, { rounds, iterations: options.quick ? 3 : 8 },
      () => drainCore(coreChat({ adapter: scriptedText(toolCallScript('r')), messages, tools: [coreTool], agentLoopStrategy: loop })),
      () => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(toolCallScript('r')), messages, runId: 'replay', tools: [effectTool], agentLoopStrategy: loop }))),
      {
        label: 'AI.serverTool',
        run: () => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(toolCallScript('r')), messages, tools: [serverTool], agentLoopStrategy: loop }))),
        first: 'the run and the tool path',
        second: 'at most once (key, fingerprint, the claim that finds the record, sharing)',
        calls: 200,
      }),
  )
  let run = 0
  results.push(
    await pair('200 AI.effectTool calls, every call applied, memory store', 2, { rounds, iterations: options.quick ? 3 : 8 },
      () => drainCore(coreChat({ adapter: scriptedText(toolCallScript('a')), messages, tools: [coreTool], agentLoopStrategy: loop })),
      () => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(toolCallScript('a')), messages, runId: `apply-${run++}`, tools: [effectTool], agentLoopStrategy: loop }))),
      {
        label: 'AI.serverTool',
        run: () => runtime.runPromise(Stream.runDrain(AI.chat({ adapter: scriptedText(toolCallScript('a')), messages, tools: [serverTool], agentLoopStrategy: loop }))),
        first: 'the run and the tool path',
        second: 'at most once (the claim and its lease, the fenced record, deadlines)',
        calls: 200,
      }),
  )
  await runtime.dispose()
  return results
}

/**
 * The at-most-once path alone, per replayed call: `AI.effectTool` against a
 * memory store whose record answers the claim, against `AI.serverTool` with
 * the same handler, both called through the run's tool wrapper as core calls
 * them, outside a chat (whose stream and collections are the noise of the
 * chat row). Rounds alternate the two; the medians are reported.
 *
 * The same two paths are timed again with each call made right after a
 * round trip to another process (a TCP echo), as a call on a networked
 * store runs once its answer wakes the process: the path then runs with
 * cold caches, which is why the store rows' tool path costs more than the
 * tight loop. The echo's own time cancels out of the difference.
 */
export const benchAtMostOncePath = async (options: { readonly quick: boolean }) => {
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(AI.EffectStore.layerMemory({ capacity: 1_000_000 }), AI.RunContext.layer({ runId: 'path', threadId: 't', agent: 'bench', trigger: 'bench' })),
  )
  const scope = await Effect.runPromise(Scope.make())
  const [server, effect] = await runtime.runPromise(Scope.provide(AI.wrapToolsForRun([serverTool, effectTool]), scope))
  const keys = 100
  const call = (tool: typeof server, i: number) =>
    Promise.resolve(tool!.execute!({ id: `P-${i % keys}` }, { toolCallId: `c${i}`, emitCustomEvent: () => {} }))
  // Every key recorded before the timing starts, and both paths warm.
  for (let i = 0; i < 5_000; i++) await call(effect, i)
  for (let i = 0; i < 5_000; i++) await call(server, i)
  const echo = await startEcho()
  const perRound = options.quick ? 2_000 : 10_000
  const timeRound = async (tool: typeof server, afterRoundTrip: boolean) => {
    const started = performance.now()
    for (let i = 0; i < perRound; i++) {
      if (afterRoundTrip) await echo.roundTrip()
      await call(tool, i)
    }
    return ((performance.now() - started) * 1000) / perRound
  }
  const rounds = () => ({ server: [] as Array<number>, effect: [] as Array<number> })
  const timed = { tight: rounds(), afterRoundTrip: rounds() }
  for (let round = 0; round < (options.quick ? 3 : 11); round++) {
    for (const [afterRoundTrip, into] of [[false, timed.tight], [true, timed.afterRoundTrip]] as const) {
      into.server.push(await timeRound(server, afterRoundTrip))
      into.effect.push(await timeRound(effect, afterRoundTrip))
    }
  }
  await echo.close()
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await runtime.dispose()
  const summary = ({ server, effect }: { readonly server: ReadonlyArray<number>; readonly effect: ReadonlyArray<number> }) => {
    const overServer = effect.map((micros, round) => micros - server[round]!)
    return {
      serverToolMicros: median(server),
      effectToolMicros: median(effect),
      overServerToolMicros: median(overServer),
      spread: [Math.min(...overServer), Math.max(...overServer)] as const,
    }
  }
  return { ...summary(timed.tight), afterRoundTrip: summary(timed.afterRoundTrip), target: 24 }
}

/** A TCP echo server in a process of its own, and one connection to it: `roundTrip` sends a byte and waits for it to come back. */
const startEcho = async () => {
  const child = spawn(process.execPath, ['-e', `
    const server = require('node:net').createServer((socket) => {
      socket.setNoDelay(true)
      socket.on('data', (data) => socket.write(data))
    })
    server.listen(0, '127.0.0.1', () => console.log(server.address().port))`], { stdio: ['ignore', 'pipe', 'inherit'] })
  const [port] = await once(child.stdout!, 'data')
  const socket = connect(Number(String(port).trim()), '127.0.0.1')
  socket.setNoDelay(true)
  await once(socket, 'connect')
  let answered: (() => void) | undefined
  socket.on('data', () => answered?.())
  return {
    roundTrip: () => new Promise<void>((resolve) => {
      answered = resolve
      socket.write('x')
    }),
    close: async () => {
      socket.destroy()
      child.kill()
      await once(child, 'exit')
    },
  }
}

/**
 * 1,000 concurrent identical calls of one effect tool in one process: how
 * many applied (must be 1), and the time until all have their result.
 */
export const benchSharing = async () => {
  let applied = 0
  const tool = AI.effectTool(definition, ({ id }) => Effect.sync(() => {
    applied++
    return { status: `shipped ${id}` }
  }).pipe(Effect.delay('5 millis')), { effectKey: () => 'one-key' })
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(AI.EffectStore.layerMemory(), AI.RunContext.layer({ runId: 'r', threadId: 't', agent: 'bench', trigger: 'bench' })),
  )
  const started = performance.now()
  await runtime.runPromise(
    Effect.scoped(Effect.gen(function* () {
      const [wrapped] = yield* AI.wrapToolsForRun([tool])
      yield* Effect.promise(() =>
        Promise.all(Array.from({ length: 1_000 }, (_, i) => wrapped!.execute!({ id: 'A-1' }, { toolCallId: `c${i}`, emitCustomEvent: () => {} }))),
      )
    })),
  )
  const millis = performance.now() - started
  await runtime.dispose()
  return { calls: 1_000, applied, millis }
}

/**
 * Memory: the heap per recorded key of the memory store at 1,000,000 keys,
 * and that its capacity bound holds; and the peak heap of a 10,000-delta
 * stream through AI.chat against core: the most it keeps alive while its
 * chunks arrive, each side's median over rounds that alternate which side
 * goes first (9, or 3 in a quick run), measured before the store is filled.
 */
export const benchMemory = async (options: { readonly quick: boolean }) => {
  const gc = (globalThis as { gc?: () => void }).gc
  // The peaks first, while the heap holds no store: a collection then took
  // about 20 ms, against about 300 ms with a million records (a scratch run).
  // The heap the stream keeps alive, collected and sampled as the chunks
  // arrive, every 1,024 of them (a batch of AI.chat's reader at most). Both
  // runs are chains of promises that never yield to a timer, so a sampling
  // interval would only see the heap once they ended; and the heap in use
  // between collections is mostly garbage, as much as the young generation
  // holds (31-67 MB for either run in scratch runs).
  const sampleEvery = 1024
  const peak = async (run: (sample: () => void) => Promise<unknown>) => {
    gc?.()
    const base = process.memoryUsage().heapUsed
    let max = base
    await run(() => {
      gc?.()
      max = Math.max(max, process.memoryUsage().heapUsed)
    })
    return max - base
  }
  const runtime = ManagedRuntime.make(Layer.empty)
  const rawRun = () =>
    peak(async (sample) => {
      let count = 0
      for await (const _ of coreChat({ adapter: scriptedText(deltas(10_000)), messages })) {
        if (++count % sampleEvery === 0) sample()
      }
    })
  const oursRun = () =>
    peak((sample) =>
      runtime.runPromise(
        Stream.runForEachArray(AI.chat({ adapter: scriptedText(deltas(10_000)), messages }), () => Effect.sync(sample)),
      ))
  // Rounds that alternate which goes first, and each side's median: one run's
  // peak moves with whatever else the process frees or keeps while it
  // streams (0.69-1.27 MB for core's, 0.70-1.30 MB for ours in three scratch
  // runs of 11 rounds), more than the two differ.
  const rawPeaks: Array<number> = []
  const oursPeaks: Array<number> = []
  const sides = [[rawRun, rawPeaks], [oursRun, oursPeaks]] as const
  for (let round = 0; round < (options.quick ? 3 : 9); round++) {
    for (const [run, into] of inRoundOrder(round, sides)) into.push(await run())
  }
  await runtime.dispose()

  const keys = options.quick ? 100_000 : 1_000_000
  gc?.()
  const before = process.memoryUsage().heapUsed
  const store = await Effect.runPromise(Effect.scoped(Effect.service(AI.EffectStore).pipe(Effect.provide(AI.EffectStore.layerMemory({ capacity: keys })))))
  for (let i = 0; i < keys; i++) {
    const id = { tool: 'note', key: `run-1:note:${i}` }
    await Effect.runPromise(Effect.flatMap(store.claim(id, { owner: 'bench', ttl: Duration.seconds(30) }), () =>
      store.put(id, { output: { applied: i }, outcome: 'applied', recordedAt: 0 }, { fence: 1 })))
  }
  gc?.()
  const heapPerKey = (process.memoryUsage().heapUsed - before) / keys
  // One more than the capacity: the oldest record goes.
  await Effect.runPromise(Effect.flatMap(store.claim({ tool: 'note', key: 'extra' }, { owner: 'bench', ttl: Duration.seconds(30) }), () =>
    store.put({ tool: 'note', key: 'extra' }, { output: 1, outcome: 'applied', recordedAt: 0 }, { fence: 1 })))
  const oldestGone = (await Effect.runPromise(store.get({ tool: 'note', key: 'run-1:note:0' })))._tag === 'None'
  return { keys, heapPerKey, oldestGone, rawPeak: median(rawPeaks), oursPeak: median(oursPeaks), peakRounds: rawPeaks.length, gcExposed: gc !== undefined }
}
