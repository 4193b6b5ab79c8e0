/**
 * What a resumable chat costs next to the same chat without a delivery log:
 * one answer of 64 text deltas through core's `toServerSentEventsResponse`,
 * read whole, with and without `durability` on `AI.StreamLog` in memory, on
 * SQLite and on PostgreSQL. Besides the time per request, the statements
 * each appended batch cost, counted at the driver (a producer's claim and
 * its close are one more each per run).
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { toServerSentEventsResponse, type UpsertableStreamDurability } from '@tanstack/ai'
import * as AI from '@tanstack/ai-effect'
import { layerSqlStreamLog } from '@tanstack/ai-effect/sql'
import { layerSqliteStreamLog } from '@tanstack/ai-effect/sqlite'
import { scriptedText } from '@tanstack/ai-effect/testing'
import { Effect, Layer, ManagedRuntime, Stream } from 'effect'
import { pgClient } from '../test/support/backends.ts'
import { countStatements } from '../test/support/roundTrips.ts'
import { missing, startPostgres } from '../test/support/services.ts'
import { pair, type PairResult } from './chat.ts'

export interface ResumableRow extends PairResult {
  /** Statements per appended batch, counted at the driver (none for the memory log). */
  readonly statementsPerAppend: number | undefined
  readonly appendsPerRun: number
}

const deltas = Array.from({ length: 64 }, (_, index) => `word${index} `)

/** One request: the answer's chunks through core's encoder, read whole. */
const request = (durability: UpsertableStreamDurability | undefined) =>
  Effect.runPromise(Stream.toAsyncIterableEffect(AI.chat({ adapter: scriptedText([{ text: deltas }]), messages: [{ role: 'user', content: 'Hi' }] })))
    .then((chunks) => toServerSentEventsResponse(chunks, durability === undefined ? undefined : { durability: { adapter: durability } }).text())

const resumableCase = async (
  name: string,
  layer: Layer.Layer<AI.StreamLog, unknown>,
  statements: (() => number) | undefined,
  options: { readonly rounds: number; readonly iterations: number },
): Promise<ResumableRow> => {
  const runtime = ManagedRuntime.make(layer)
  let run = 0
  let appends = 0
  /** The log's adapter for a new run, its appends counted. */
  const durability = async () => {
    const adapter = await runtime.runPromise(
      Effect.flatMap(Effect.service(AI.StreamLog), (log) => log.durability({ runId: `bench-${Date.now()}-${run++}`, offset: null })),
    )
    return { ...adapter, append: (chunks: Parameters<typeof adapter.append>[0]) => (appends++, adapter.append(chunks)) }
  }
  try {
    const result = await pair(name, undefined, options, () => request(undefined), async () => request(await durability()))
    // One more run, counted alone: its claim, its appends and its close.
    appends = 0
    const before = statements?.()
    await request(await durability())
    const counted = statements === undefined || before === undefined ? undefined : statements() - before
    return {
      ...result,
      appendsPerRun: appends,
      // The claim and the close are one statement each; the rest are the appends.
      statementsPerAppend: counted === undefined ? undefined : (counted - 2) / appends,
    }
  } finally {
    await runtime.dispose()
  }
}

export const benchResumable = async (options: { readonly quick: boolean }): Promise<ReadonlyArray<ResumableRow>> => {
  const sizes = { rounds: options.quick ? 3 : 7, iterations: options.quick ? 20 : 100 }
  const label = (store: string) => `a chat answer of 64 deltas, with durability on ${store} vs without`
  const sqlite = countStatements()
  const rows = [
    await resumableCase(label('memory'), AI.StreamLog.layerMemory(), undefined, sizes),
    await resumableCase(
      label('SQLite'),
      layerSqliteStreamLog({ filename: join(mkdtempSync(join(tmpdir(), 'ai-effect-bench-')), 'chat.db') }).pipe(Layer.provide(sqlite.layer)),
      sqlite.count,
      sizes,
    ),
  ]
  if (missing('postgres') === undefined) {
    const postgres = await startPostgres()
    const counted = countStatements()
    try {
      rows.push(
        await resumableCase(
          label('PostgreSQL'),
          layerSqlStreamLog().pipe(Layer.provide(counted.layer), Layer.provide(pgClient(postgres.url))),
          counted.count,
          sizes,
        ),
      )
    } finally {
      await postgres.dispose()
    }
  }
  return rows
}
