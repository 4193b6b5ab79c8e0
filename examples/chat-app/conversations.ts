/**
 * Where Effect Chat keeps its conversations: each thread's transcript, each
 * run's delivery log (so that a reload or a dropped connection rejoins the
 * answer), the lock that keeps one run per thread, and the durable runs'
 * engine. By default they live in the app's SQLite file, on the app's one
 * connection to it beside the effect store, so that a run's writes to its
 * thread, its log and its tools' claims share commits (one app process per
 * file; the engine keeps a connection of its own); `CHAT_STORE=postgres` with
 * `DATABASE_URL` keeps them on a server that several app processes share,
 * each a runner of the durable runs. `CHAT_STORE=redis` with `REDIS_URL`
 * keeps threads, logs and locks on Redis, and the engine on the SQLite file.
 */
import { NodeRedis } from '@effect/platform-node'
import { PgClient } from '@effect/sql-pg'
import * as AI from '@tanstack/ai-effect'
import { type DurableAgent, DurableEngine } from '@tanstack/ai-effect/durable'
import { layerRedis, layerRedisStreamLog, layerRedisThreadStore } from '@tanstack/ai-effect/redis'
import { layerSql, layerSqlStreamLog, layerSqlThreadStore } from '@tanstack/ai-effect/sql'
import { Layer, Redacted } from 'effect'
import type { SqlClient } from 'effect/sql/SqlClient'

/** Where conversations are kept: `sqlite` is the app's own SQLite file. */
export type ConversationStore =
  | { readonly _tag: 'sqlite' }
  | { readonly _tag: 'postgres'; readonly url: string }
  | { readonly _tag: 'redis'; readonly url: string }

/** The store `CHAT_STORE` names, or the app's SQLite file. */
export const conversationStoreFromEnv = (env: Readonly<Record<string, string | undefined>>): ConversationStore => {
  const required = (name: string) => {
    const value = env[name]
    if (value === undefined || value === '') throw new Error(`CHAT_STORE=${env.CHAT_STORE} needs ${name}`)
    return value
  }
  switch (env.CHAT_STORE ?? 'sqlite') {
    case 'sqlite':
      return { _tag: 'sqlite' }
    case 'postgres':
      return { _tag: 'postgres', url: required('DATABASE_URL') }
    case 'redis':
      return { _tag: 'redis', url: required('REDIS_URL') }
    default:
      throw new Error(`CHAT_STORE is ${env.CHAT_STORE}: use sqlite (the default), postgres or redis`)
  }
}

/**
 * A message sent to a thread while it answers waits this long for the
 * answer to end, then is refused with a 409 that the page shows.
 */
const locks = AI.Locks.layer({ lease: '10 seconds', waitFor: '3 seconds' })

/**
 * The thread store, the delivery logs and the thread locks on `store`: on
 * SQLite, on the app's connection to its file (`SqlClient`) and the locks on
 * its effect store.
 */
export const Conversations = (
  store: ConversationStore,
): Layer.Layer<AI.ThreadStore | AI.StreamLog | AI.Locks, unknown, SqlClient | AI.EffectStore> => {
  switch (store._tag) {
    case 'sqlite':
      return Layer.mergeAll(layerSqlThreadStore(), layerSqlStreamLog(), locks)
    case 'postgres': {
      const client = PgClient.layer({ url: Redacted.make(store.url) })
      return Layer.mergeAll(layerSqlThreadStore(), layerSqlStreamLog(), locks.pipe(Layer.provide(layerSql()))).pipe(Layer.provide(client))
    }
    case 'redis': {
      const client = NodeRedis.layer({ url: store.url })
      return Layer.mergeAll(layerRedisThreadStore(), layerRedisStreamLog(), locks.pipe(Layer.provide(layerRedis()))).pipe(Layer.provide(client))
    }
  }
}

/**
 * The durable runs' engine and run store: on PostgreSQL when the
 * conversations are there (every app process a runner, with a pool of its
 * own for the engine's polling), on the SQLite file `engineFile` otherwise
 * (one app process per file).
 */
export const DurableRuns = (store: ConversationStore, engineFile: string): Layer.Layer<DurableAgent.DurableServices, unknown> =>
  store._tag === 'postgres'
    ? DurableEngine.layerSingleRunner().pipe(Layer.provide(PgClient.layer({ url: Redacted.make(store.url) })))
    : DurableEngine.layerSqlite({ filename: engineFile })
