/**
 * `npm start`: Effect Chat on http://localhost:3000 (`PORT` and `HOST`
 * override). `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` or `GEMINI_API_KEY` picks
 * the provider (see model.ts); without one, the offline demo model answers,
 * on this machine. Conversations are kept in the SQLite file (`EFFECTS_DB`),
 * or on PostgreSQL or Redis with `CHAT_STORE` (see conversations.ts). Each
 * message is answered by a durable agent run, which survives a crash of the
 * server; `CHAT_RUNS=plain` answers it in the process that received it.
 */
import { NodeRuntime } from '@effect/platform-node'
import { Layer } from 'effect'
import { ensureBuilt, webRoot } from './build.ts'
import { chooseModel } from './model.ts'
import { conversationStoreFromEnv } from './conversations.ts'
import { ChatApp } from './server.ts'

await ensureBuilt()

const { adapter, label, offline } = await chooseModel(process.env)
console.log(
  offline
    ? 'No OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY is set: the offline demo model answers. Set one to talk to its provider.'
    : `Talking to ${label} (${adapter.name}).`,
)

const effectsDb = process.env.EFFECTS_DB ?? '.data/effects.db'
const conversations = conversationStoreFromEnv(process.env)
console.log(`Conversations are kept in ${conversations._tag === 'sqlite' ? effectsDb : conversations._tag}.`)

NodeRuntime.runMain(
  Layer.launch(
    ChatApp({
      adapter,
      modelLabel: label,
      offline,
      effectsDb,
      conversations,
      runs: process.env.CHAT_RUNS === 'plain' ? 'plain' : 'durable',
      webRoot,
      port: Number(process.env.PORT ?? 3000),
      host: process.env.HOST ?? '127.0.0.1',
    }),
  ),
)
