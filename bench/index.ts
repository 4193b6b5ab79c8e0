/**
 * `npm run bench` (`-- --quick` for a short run): what the Effect layer costs
 * on top of core TanStack AI, and what the effect stores cost on top of their
 * drivers. Every case warms up, then alternates the raw path and ours in
 * rounds, and reports ratios measured side by side in this process. A full
 * run writes bench/results.json and the table of docs/benchmarks.md; a quick
 * one only prints.
 */
import { cpus } from 'node:os'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { benchAtMostOncePath, benchChat, benchMemory, benchSharing, type PairResult, settleCoreDevtools } from './chat.ts'
import { benchDurable, benchDurableLoad, benchDurableShards, benchStreamsAtOnce, stepsPerRun } from './durable.ts'
import { benchEngine, engineSteps } from './engine.ts'
import { benchResumable, benchWatchers } from './resumable.ts'
import { benchHttp, type HttpRow } from './http.ts'
import { benchProcesses, benchStores, type StoreRow } from './stores.ts'

const quick = process.argv.includes('--quick')
const date = new Date().toISOString()

await settleCoreDevtools()
const chat = await benchChat({ quick })
console.log(`Node ${process.version}, ${cpus().length} CPUs, ${date}${quick ? ' (quick)' : ''}`)
console.table(chat.map((row) => ({ case: row.case, 'raw µs': row.rawMicros.toFixed(0), 'ours µs': row.oursMicros.toFixed(0), ratio: row.ratio.toFixed(2), target: row.target })))

const durable = await benchDurable({ quick })
console.table(durable.map((row) => ({
  case: row.case,
  'plain µs': row.rawMicros.toFixed(0),
  'durable µs': row.oursMicros.toFixed(0),
  ratio: row.ratio.toFixed(2),
  'statements per run': row.statementsPerRun ?? '—',
  'with the chat log and thread': row.statementsWithChatPerRun ?? '—',
})))
const durableShards = await benchDurableShards({ quick })
if (durableShards !== undefined) {
  console.log(`${durableShards.case}: ${durableShards.oursMicros.toFixed(0)} µs against ${durableShards.rawMicros.toFixed(0)} µs (${durableShards.ratio.toFixed(2)}x)`)
}

const engine = await benchEngine({ quick })
console.table(engine.map((row) => ({
  storage: row.storage,
  'run, no activity µs': row.runMicros.toFixed(0),
  'the same, one shard against 300 µs': `${row.oneShardRunMicros.toFixed(0)} / ${row.oneShardAgainstMicros.toFixed(0)} (${row.oneShardRatio.toFixed(2)}x)`,
  [`run, ${engineSteps} activities µs`]: row.stepsMicros.toFixed(0),
  'per activity µs': ((row.stepsMicros - row.runMicros) / engineSteps).toFixed(0),
  [`run, ${engineSteps} steps it records µs`]: row.journaledMicros.toFixed(0),
  'statements, no activity': row.statementsPerRun,
  [`statements, ${engineSteps} activities`]: row.statementsPerStepsRun,
  [`statements, ${engineSteps} steps it records`]: row.statementsPerJournaledRun,
  'runner CPU per activity µs': ((row.runnerCpuPerStepsRun - row.runnerCpuPerRun) / engineSteps).toFixed(0),
})))

const durableLoad = await benchDurableLoad({ quick })
console.table(durableLoad.map((row) => ({
  engine: row.engine,
  runners: `${row.runners}${row.joining === true ? ', joining' : ''}`,
  runs: row.runs,
  'model delay ms': row.modelDelayMillis,
  'runs/s': row.runsPerSecond.toFixed(0),
  'p50 ms': row.p50Millis.toFixed(0),
  'p99 ms': row.p99Millis.toFixed(0),
  'p50 step ms': row.p50StepMillis.toFixed(1),
  'p99 step ms': row.p99StepMillis.toFixed(1),
  'statements per run': row.statementsPerRun.toFixed(1),
  'model requests per run': row.requestsPerRun,
  'database CPU ms per run': row.database?.cpuMillisPerRun.toFixed(2) ?? '—',
  failed: row.failed,
})))

const streamsAtOnce = await benchStreamsAtOnce({ quick })
console.log(
  `${streamsAtOnce.runs} durable runs streamed at once: ${streamsAtOnce.atOnceMicros.toFixed(0)} µs per run, one at a time ${streamsAtOnce.aloneMicros.toFixed(0)} µs (${streamsAtOnce.ratio.toFixed(2)}x)`,
)

const resumable = await benchResumable({ quick })
console.table(resumable.map((row) => ({
  case: row.case,
  'plain µs': row.rawMicros.toFixed(0),
  'durable µs': row.oursMicros.toFixed(0),
  ratio: row.ratio.toFixed(2),
  'requests/s plain': (1e6 / row.rawMicros).toFixed(0),
  'requests/s durable': (1e6 / row.oursMicros).toFixed(0),
  'appends per run': row.appendsPerRun,
  'statements per append': row.statementsPerAppend ?? '—',
})))

const watchers = await benchWatchers({ quick })
console.table(watchers.map((row) => ({
  store: row.store,
  readers: row.readers,
  'requests/s while they wait': row.requestsPerSecond.toFixed(0),
  'target ≤': row.targetPerSecond,
  'p50 delivery ms': row.p50DeliveryMillis.toFixed(1),
  'p90 delivery ms': row.p90DeliveryMillis.toFixed(1),
})))

const stores = await benchStores(quick ? { rounds: 3, perRound: 100 } : { rounds: 7, perRound: 500 })
const trips = (value: number | undefined) => value === undefined ? '—' : value.toFixed(value % 1 === 0 ? 0 : 2)
console.table(stores.map((row) => ({
  backend: row.backend,
  case: row.case,
  'raw requests': trips(row.rawRoundTrips),
  'raw µs': row.rawMicros.toFixed(1),
  'ours requests': trips(row.oursRoundTrips),
  'ours µs': row.oursMicros.toFixed(1),
  'store alone µs': row.storeMicros?.toFixed(1) ?? '',
  ratio: row.ratio.toFixed(2),
  note: row.note ?? '',
})))

const http = await benchHttp({ quick })
console.table(http.map((row) => ({
  case: row.case,
  server: row.server,
  'requests/s': row.requestsPerSecond.toFixed(0),
  'p50 ms': row.p50Millis,
  'p99 ms': row.p99Millis,
  'CPU µs/request': row.cpuMicrosPerRequest.toFixed(0),
  'first chunk ms': row.firstChunkMillis.toFixed(1),
  errors: row.errors,
})))

const atMostOnce = await benchAtMostOncePath({ quick })
console.log(`the at-most-once path per replayed call: ${atMostOnce.overServerToolMicros.toFixed(1)} µs over AI.serverTool (${atMostOnce.serverToolMicros.toFixed(1)} µs, ${atMostOnce.effectToolMicros.toFixed(1)} µs)`)
console.log(`the same, each call right after a round trip to another process: ${atMostOnce.afterRoundTrip.overServerToolMicros.toFixed(1)} µs over AI.serverTool`)

const sharing = await benchSharing()
console.log(`1,000 concurrent identical calls: ${sharing.applied} applied, all answered in ${sharing.millis.toFixed(1)} ms`)

const processes = await benchProcesses(quick ? { keys: 100, callsPerKey: 1 } : { keys: 100, callsPerKey: 10 })
console.table(processes.map((row) => ({ ...row, callsPerSecond: Math.round(row.callsPerSecond) })))

const memory = await benchMemory({ quick })
console.log(memory)

if (quick) {
  console.log('A quick run: bench/results.json and docs/benchmarks.md are left as they are.')
  process.exit(0)
}

const results = {
  date,
  quick,
  node: process.version,
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model,
  chat,
  atMostOnce,
  durable,
  durableShards,
  engine,
  durableLoad,
  streamsAtOnce,
  resumable,
  watchers,
  stores,
  http,
  sharing,
  processes,
  memory,
}
writeFileSync(join(import.meta.dirname, 'results.json'), `${JSON.stringify(results, null, 2)}\n`)

const met = (ratio: number, target: number | undefined) => target === undefined ? '' : ratio <= target ? 'met' : '**missed**'
const micros = (value: number) => `${value.toFixed(Math.abs(value) < 10 ? 1 : 0)} µs`
/** A part of a gap; medians of noisy paths can put a small part below zero. */
const part = (value: number, unit = '') => value <= 0 ? '≈ 0 (within the noise)' : `+${micros(value)}${unit}`
/** How a chat case's gap over core splits, by its third path: each part's cost and the guarantees it pays for. */
const gapOf = ({ split, rawMicros, oursMicros }: PairResult) => {
  if (split === undefined) return ''
  const first = split.micros - rawMicros
  const second = oursMicros - split.micros
  const perCall = split.calls === 0 || second <= 0 ? '' : ` (${micros(second / split.calls)} per call)`
  return `: ${split.first} ${part(first, ' per run')}, ${split.second} ${part(second)}${perCall}`
}
const chatRows = (rows: ReadonlyArray<PairResult>) =>
  rows.map((row) => {
    const split = row.split === undefined ? '' : `${row.split.label}: ${row.split.micros.toFixed(0)} µs`
    const verdict = met(row.ratio, row.target)
    return `| ${row.case} | ${row.rawMicros.toFixed(0)} µs | ${row.oursMicros.toFixed(0)} µs | ${row.ratio.toFixed(2)}x (${row.ratioMin.toFixed(2)}–${row.ratioMax.toFixed(2)}) | ${split} | ≤ ${row.target}x | ${verdict}${verdict === 'met' ? '' : gapOf(row)} |`
  })
const replayCase = 'replay (recorded key) vs 1 raw read'
const firstCase = 'first application vs 2 raw round trips'
/**
 * The targets of the store rows: through the tool on the stores whose
 * requests cross a network; on SQLite, which answers in-process, the store
 * alone for a replay and the tool for a first application.
 */
const storeTargets: Record<string, Record<string, { readonly ratio: number; readonly of: 'tool' | 'store' }>> = {
  postgres: { [replayCase]: { ratio: 1.5, of: 'tool' }, [firstCase]: { ratio: 1.2, of: 'tool' } },
  redis: { [replayCase]: { ratio: 1.5, of: 'tool' }, [firstCase]: { ratio: 1.2, of: 'tool' } },
  sqlite: { [replayCase]: { ratio: 2, of: 'store' }, [firstCase]: { ratio: 1.3, of: 'tool' } },
}
/** Where a store row's gap over the raw driver goes: the store's own request, then the tool around it. */
const storeGap = (row: StoreRow) =>
  row.storeMicros === undefined
    ? `: ${part(row.oursMicros - row.rawMicros)} for the claim's lease and fence, the record, the deadlines and the tool path`
    : `: the claim ${part(row.storeMicros - row.rawMicros)} (leases by the server's clock, a decoded record, a deadline), the tool path ${part(row.oursMicros - row.storeMicros)}`
const storeRows = (rows: ReadonlyArray<StoreRow>) =>
  rows.map((row) => {
    if (row.note !== undefined) return `| ${row.backend} | ${row.case} | | | | | | | ${row.note} |`
    const target = storeTargets[row.backend]?.[row.case]
    const ratio = target?.of === 'store' && row.storeMicros !== undefined ? row.storeMicros / row.rawMicros : row.ratio
    const verdict = target === undefined
      ? ''
      : `${met(ratio, target.ratio)} (${target.of === 'store' ? `the store alone ${ratio.toFixed(2)}x ` : ''}≤ ${target.ratio}x)${ratio > target.ratio ? storeGap(row) : ''}`
    return `| ${row.backend} | ${row.case} | ${trips(row.rawRoundTrips)} | ${row.rawMicros.toFixed(1)} µs | ${trips(row.oursRoundTrips)} | ${row.storeMicros === undefined ? '' : `${row.storeMicros.toFixed(1)} µs`} | ${row.oursMicros.toFixed(1)} µs | ${row.ratio.toFixed(2)}x | ${verdict} |`
  })

const serverNames: Record<HttpRow['server'], string> = {
  core: 'core route (node:http)',
  'core-on-effect-http': 'core route on effect/http',
  route: 'ChatRoute.handler alone, the app\'s tools (no conversation kept)',
  'route-log-memory': '+ a delivery log in memory (ChatRoute.resumableHandler)',
  'route-log': '+ the log on the app\'s SQLite file',
  'route-log-thread': '+ the thread on SQLite (AI.ThreadStore.persist)',
  effect: 'Effect Chat, plain runs (effect/http): + the thread\'s lock',
  'effect-durable': 'Effect Chat, durable runs on SQLite',
}
const httpRows = (rows: ReadonlyArray<HttpRow>) =>
  rows.map((row) => {
    const core = rows.find((other) => other.case === row.case && other.server === 'core')!
    const ratio = row.requestsPerSecond / core.requestsPerSecond
    const cpu = (server: HttpRow['server']) => rows.find((other) => other.case === row.case && other.server === server)?.cpuMicrosPerRequest ?? Number.NaN
    const added = (server: HttpRow['server'], before: HttpRow['server']) => part(cpu(server) - cpu(before))
    const verdict = row.server === 'route'
      ? `${ratio >= 0.9 ? 'met' : '**missed**'} (≥ 0.9x)`
      : row.server === 'effect'
      ? ratio >= 0.9 ? 'met (≥ 0.9x)' : `**missed** (≥ 0.9x); pays for keeping the conversation (14 writes on one connection to one SQLite file, sharing commits with concurrent runs), in CPU per request over the route alone: a delivery log's path ${added('route-log-memory', 'route')}, its claim, appends and close on SQLite ${added('route-log', 'route-log-memory')}, the thread saved twice ${added('route-log-thread', 'route-log')}, the lock taken and released ${added('effect', 'route-log-thread')}`
      : row.server === 'effect-durable'
      ? 'no target: each run also goes through the durable engine (the statements above) before its first chunk is written to the log'
      : ''
    return `| ${row.case} | ${serverNames[row.server]} | ${row.requestsPerSecond.toFixed(0)} | ${row.p50Millis} ms | ${row.p99Millis} ms | ${row.firstChunkMillis.toFixed(1)} ms | ${row.cpuMicrosPerRequest.toFixed(0)} µs | ${row.server === 'core' ? '' : `${ratio.toFixed(2)}x`} | ${verdict} |`
  })

const table = [
  `Measured ${date} on Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'})${quick ? ', quick run' : ''}.`,
  '',
  '| case | core | ours | ratio (spread) | our run without the part under test | target | |',
  '| --- | --- | --- | --- | --- | --- | --- |',
  ...chatRows(chat),
  '',
  '| the at-most-once path alone, per replayed call (memory store, the tool called as core calls it) | AI.serverTool | AI.effectTool, key recorded | over AI.serverTool (spread) | target |',
  '| --- | --- | --- | --- | --- |',
  `| key, fingerprint, the claim that finds the record, sharing, the outcome event | ${atMostOnce.serverToolMicros.toFixed(1)} µs | ${atMostOnce.effectToolMicros.toFixed(1)} µs | ${atMostOnce.overServerToolMicros.toFixed(1)} µs (${atMostOnce.spread[0].toFixed(1)}–${atMostOnce.spread[1].toFixed(1)}) | ≤ ${atMostOnce.target} µs: ${met(atMostOnce.overServerToolMicros, atMostOnce.target)} |`,
  `| the same, each call right after a round trip to another process (a TCP echo, whose time cancels out), as a call on a networked store runs once the answer wakes the process | ${atMostOnce.afterRoundTrip.serverToolMicros.toFixed(1)} µs | ${atMostOnce.afterRoundTrip.effectToolMicros.toFixed(1)} µs | ${atMostOnce.afterRoundTrip.overServerToolMicros.toFixed(1)} µs (${atMostOnce.afterRoundTrip.spread[0].toFixed(1)}–${atMostOnce.afterRoundTrip.spread[1].toFixed(1)}) | the row above has the target; this one is what the store rows' tool path pays |`,
  '',
  `| durable run | AI.runAgent | DurableAgent.run | ratio (spread) | statements per run (per step, of ${stepsPerRun}) | with a chat's log and thread (more per step) | target |`,
  '| --- | --- | --- | --- | --- | --- | --- |',
  ...durable.map((row) =>
    `| ${row.case} | ${row.rawMicros.toFixed(0)} µs | ${row.oursMicros.toFixed(0)} µs | ${row.ratio.toFixed(2)}x (${row.ratioMin.toFixed(2)}–${row.ratioMax.toFixed(2)}) | ${
      row.statementsPerRun === undefined ? '—' : `${row.statementsPerRun.toFixed(1)} (${(row.statementsPerRun / stepsPerRun).toFixed(1)})`
    } | ${
      row.statementsPerRun === undefined || row.statementsWithChatPerRun === undefined
        ? '—'
        : `${row.statementsWithChatPerRun.toFixed(1)} (+${((row.statementsWithChatPerRun - row.statementsPerRun) / stepsPerRun).toFixed(2)})`
    } | ${row.target === undefined ? '' : `≤ ${row.target}x: ${met(row.ratio, row.target)}`} |`),
  '',
  ...(durableShards === undefined ? [] : [
    '| the same run on PostgreSQL, each runner on a database of its own, in the same rounds | effect\'s 300 shards | one shard (`shardsPerGroup: 1`, chosen before the first run) | ratio (spread) |',
    '| --- | --- | --- | --- |',
    `| a run of 2 model turns and 1 tool call | ${durableShards.rawMicros.toFixed(0)} µs | ${durableShards.oursMicros.toFixed(0)} µs | ${durableShards.ratio.toFixed(2)}x (${durableShards.ratioMin.toFixed(2)}–${durableShards.ratioMax.toFixed(2)}) |`,
    '',
  ]),
  `| effect's cluster engine alone (SingleRunner), no package code | a run, no activity | the same on one shard, against effect's 300 in the same rounds (ratio) | a run of ${engineSteps} activities that do nothing | per activity | the runner's CPU per activity | statements: run, of ${engineSteps} activities (per activity) | a run that records ${engineSteps} steps itself (an insert each), per step | its statements |`,
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ...engine.map((row) =>
    `| ${row.storage} | ${row.runMicros.toFixed(0)} µs | ${row.oneShardRunMicros.toFixed(0)} µs, ${row.oneShardAgainstMicros.toFixed(0)} µs (${row.oneShardRatio.toFixed(2)}x) | ${row.stepsMicros.toFixed(0)} µs | ${((row.stepsMicros - row.runMicros) / engineSteps).toFixed(0)} µs | ${((row.runnerCpuPerStepsRun - row.runnerCpuPerRun) / engineSteps).toFixed(0)} µs | ${row.statementsPerRun}, ${row.statementsPerStepsRun} (${((row.statementsPerStepsRun - row.statementsPerRun) / engineSteps).toFixed(1)}) | ${row.journaledMicros.toFixed(0)} µs, ${row.journaledStepMicros.toFixed(0)} µs | ${row.statementsPerJournaledRun} |`),
  '',
  '| durable runs started at once | runners | runs | model answers after | runs/s | p50 per run | p99 per run | p50 per step | p99 per step | statements per run | model requests per run (2: each turn once) | database CPU per run (share of one core) | failed |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ...durableLoad.map((row) =>
    `| ${row.engine} | ${row.runners}${row.joining === true ? ' (the second joins as the runs start)' : ''} | ${row.runs} | ${row.modelDelayMillis} ms | ${row.runsPerSecond.toFixed(0)} | ${row.p50Millis.toFixed(0)} ms | ${row.p99Millis.toFixed(0)} ms | ${row.p50StepMillis.toFixed(1)} ms | ${row.p99StepMillis.toFixed(1)} ms | ${row.statementsPerRun.toFixed(1)} | ${row.requestsPerRun} | ${
      row.database === undefined ? '— (in the runner)' : `${row.database.cpuMillisPerRun.toFixed(2)} ms (${(row.database.coreShare * 100).toFixed(0)}%)`
    } | ${row.failed} |`),
  '',
  '| durable runs streamed at once in one process (memory engine, one turn of a scripted model) | runs at once | one at a time, per run | at once, per run | ratio (spread) | target |',
  '| --- | --- | --- | --- | --- | --- |',
  `| each run's chunks (${streamsAtOnce.deltas} text deltas) to its own \`DurableAgent.stream\` | ${streamsAtOnce.runs} | ${streamsAtOnce.aloneMicros.toFixed(0)} µs | ${streamsAtOnce.atOnceMicros.toFixed(0)} µs | ${streamsAtOnce.ratio.toFixed(2)}x (${streamsAtOnce.ratioMin.toFixed(2)}–${streamsAtOnce.ratioMax.toFixed(2)}) | ≤ ${streamsAtOnce.target}x: ${met(streamsAtOnce.ratio, streamsAtOnce.target)} |`,
  '',
  '| resumable chat, one client at a time | without durability | with durability | ratio (spread) | requests/s without, with | appends per run | statements per append |',
  '| --- | --- | --- | --- | --- | --- | --- |',
  ...resumable.map((row) =>
    `| ${row.case} | ${row.rawMicros.toFixed(0)} µs | ${row.oursMicros.toFixed(0)} µs | ${row.ratio.toFixed(2)}x (${row.ratioMin.toFixed(2)}–${row.ratioMax.toFixed(2)}) | ${(1e6 / row.rawMicros).toFixed(0)}, ${(1e6 / row.oursMicros).toFixed(0)} | ${row.appendsPerRun} | ${row.statementsPerAppend ?? '—'} |`),
  '',
  '| readers in one process, each watching a live run another process writes: how they hear of a write | store | readers | requests per second while they wait (statements; on Redis, commands) | target | a chunk to its reader, p50 | p90 |',
  '| --- | --- | --- | --- | --- | --- | --- |',
  ...watchers.map((row) =>
    `| ${row.heard} | ${row.store} | ${row.readers} | ${row.requestsPerSecond.toFixed(0)} | ≤ ${row.targetPerSecond}: ${row.requestsPerSecond <= row.targetPerSecond ? 'met' : '**missed**'} | ${row.p50DeliveryMillis.toFixed(1)} ms | ${row.p90DeliveryMillis.toFixed(1)} ms |`),
  '',
  '| store | case | raw requests | raw driver | our requests | the store alone | effect tool | ratio | target |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ...storeRows(stores),
  '',
  '| chat server under load (8 connections) | server | requests/s | p50 | p99 | first chunk, one at a time | CPU per request | ratio of requests/s | target |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ...httpRows(http),
  '',
  `- 1,000 concurrent identical calls in one process: **${sharing.applied}** applied, all answered in ${sharing.millis.toFixed(1)} ms.`,
  ...processes.map((row) =>
    `- ${row.processes} processes × ${row.calls} calls on the same ${row.keys} keys, ${row.backend}: **${row.applications}** applications, ${Math.round(row.callsPerSecond)} calls/s (process start included).`),
  `- Memory store, ${memory.keys.toLocaleString('en')} recorded keys: ${memory.heapPerKey.toFixed(0)} bytes of heap per key; the capacity bound ${memory.oldestGone ? 'holds (the oldest record went)' : '**does not hold**'}.`,
  `- Peak live heap of a 10,000-delta stream (collected every 1,024 chunks; the median of ${memory.peakRounds} alternating runs each): core ${(memory.rawPeak / 1e6).toFixed(1)} MB, AI.chat ${(memory.oursPeak / 1e6).toFixed(1)} MB (${(memory.oursPeak / memory.rawPeak).toFixed(2)}x, target ≤ 1.1x).`,
].join('\n')

const page = join(import.meta.dirname, '..', 'docs', 'benchmarks.md')
const text = readFileSync(page, 'utf8')
const start = '<!-- results:start -->'
const end = '<!-- results:end -->'
writeFileSync(page, `${text.slice(0, text.indexOf(start) + start.length)}\n${table}\n${text.slice(text.indexOf(end))}`)
console.log('Wrote bench/results.json and the table of docs/benchmarks.md.')
