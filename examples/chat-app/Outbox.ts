/**
 * The outbox: where the `notify` tool's messages land, a table in the app's
 * SQLite file. It is the visible side effect of the demo: one row per
 * notification actually sent.
 */
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { Context, Effect, Layer } from 'effect'

export interface OutboxMessage {
  readonly id: number
  readonly to: string
  readonly text: string
  readonly effectKey: string
  readonly sentAt: number
}

/** A recorded effect, as the store keeps it. */
export interface RecordedEffect {
  readonly tool: string
  readonly key: string
  readonly outcome: string
  readonly recordedAt: number
}

export class Outbox extends Context.Service<
  Outbox,
  {
    readonly send: (message: { readonly to: string; readonly text: string; readonly effectKey: string }) => Effect.Effect<OutboxMessage>
    readonly messages: Effect.Effect<ReadonlyArray<OutboxMessage>>
    /** The effects recorded in the store's table of the same file, newest first. */
    readonly recordedEffects: Effect.Effect<ReadonlyArray<RecordedEffect>>
  }
>()('examples/chat-app/Outbox') {
  /** The outbox in the SQLite file `filename`, beside the effect store's table. */
  static readonly layer = (filename: string) =>
    Layer.effect(
      Outbox,
      Effect.gen(function* () {
        const db = yield* Effect.acquireRelease(
          Effect.sync(() => {
            mkdirSync(dirname(filename), { recursive: true })
            return new DatabaseSync(filename, { timeout: 1_000 })
          }),
          (db) => Effect.sync(() => db.close()),
        )
        db.exec(`CREATE TABLE IF NOT EXISTS outbox (
          id INTEGER PRIMARY KEY AUTOINCREMENT, recipient TEXT NOT NULL, text TEXT NOT NULL, effect_key TEXT NOT NULL, sent_at INTEGER NOT NULL
        )`)
        const insert = db.prepare('INSERT INTO outbox (recipient, text, effect_key, sent_at) VALUES (?, ?, ?, ?) RETURNING id')
        const select = db.prepare('SELECT id, recipient AS "to", text, effect_key AS effectKey, sent_at AS sentAt FROM outbox ORDER BY id DESC')
        return Outbox.of({
          send: ({ to, text, effectKey }) =>
            Effect.sync(() => {
              const sentAt = Date.now()
              const { id } = insert.get(to, text, effectKey, sentAt) as { id: number }
              return { id, to, text, effectKey, sentAt }
            }),
          messages: Effect.sync(() => select.all() as unknown as ReadonlyArray<OutboxMessage>),
          recordedEffects: Effect.sync(() => {
            const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ai_effects'").get()
            if (exists === undefined) return []
            const rows = db
              .prepare('SELECT tool, effect_key AS key, record FROM ai_effects WHERE record IS NOT NULL ORDER BY expires_at DESC')
              .all() as Array<{ tool: string; key: string; record: string }>
            return rows.map(({ tool, key, record }) => {
              const { outcome, recordedAt } = JSON.parse(record) as { outcome: string; recordedAt: number }
              return { tool, key, outcome, recordedAt }
            })
          }),
        })
      }),
    )
}
