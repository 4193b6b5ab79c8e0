/**
 * `npm start`: Effect Chat on http://localhost:3000 (`PORT` and `HOST`
 * override). With `OPENAI_API_KEY` it talks to OpenAI (`OPENAI_BASE_URL` for
 * a compatible server such as Ollama or vLLM, `OPENAI_MODEL` for the model);
 * without one, the offline demo model answers, on this machine.
 */
import { NodeRuntime } from '@effect/platform-node'
import { startFakeOpenAI } from '@tanstack/ai-effect/testing'
import { createOpenaiChat } from '@tanstack/ai-openai'
import { Layer } from 'effect'
import { ensureBuilt, webRoot } from './build.ts'
import { demoModel } from './demo-model.ts'
import { ChatApp } from './server.ts'

await ensureBuilt()

const apiKey = process.env.OPENAI_API_KEY
const offline = apiKey === undefined || apiKey === ''
const demo = offline ? await startFakeOpenAI(demoModel) : undefined
// A compatible server (Ollama, vLLM) serves models that the adapter's list of OpenAI models does not name.
const model = (process.env.OPENAI_MODEL ?? 'gpt-5.2') as Parameters<typeof createOpenaiChat>[0]
const adapter = demo !== undefined
  ? createOpenaiChat(model, 'offline', { baseURL: demo.baseURL })
  : createOpenaiChat(model, apiKey!, process.env.OPENAI_BASE_URL ? { baseURL: process.env.OPENAI_BASE_URL } : {})
if (offline) console.log('No OPENAI_API_KEY is set: the offline demo model answers. Set one to talk to OpenAI.')

NodeRuntime.runMain(
  Layer.launch(
    ChatApp({
      adapter,
      modelLabel: offline ? 'offline demo model' : model,
      offline,
      effectsDb: process.env.EFFECTS_DB ?? '.data/effects.db',
      webRoot,
      port: Number(process.env.PORT ?? 3000),
      host: process.env.HOST ?? '127.0.0.1',
    }),
  ),
)
