/**
 * The model Effect Chat talks to, picked by the environment: the first of
 * `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` and `GEMINI_API_KEY` that is set
 * chooses its provider (`*_BASE_URL` for a gateway or a compatible server,
 * `*_MODEL` for the model). With none, the offline demo model answers, on
 * this machine.
 */
import type { AnyTextAdapter } from '@tanstack/ai'
import { createAnthropicChat } from '@tanstack/ai-anthropic'
import { startFakeOpenAI } from '@tanstack/ai-effect/testing'
import { createGeminiChat } from '@tanstack/ai-gemini'
import { createOpenaiChat } from '@tanstack/ai-openai'
import { demoModel } from './demo-model.ts'

export interface ChosenModel {
  readonly adapter: AnyTextAdapter
  /** What the page shows: the model's name, or the offline demo model. */
  readonly label: string
  readonly offline: boolean
}

type Env = Readonly<Record<string, string | undefined>>

const set = (value: string | undefined): value is string => value !== undefined && value !== ''

const baseURL = (value: string | undefined) => (set(value) ? { baseURL: value } : {})

// A gateway or a compatible server (Ollama, vLLM) serves models that the
// adapters' lists of model names do not hold: the casts let any name through.
type OpenAIModel = Parameters<typeof createOpenaiChat>[0]
type AnthropicModel = Parameters<typeof createAnthropicChat>[0]
type GeminiModel = Parameters<typeof createGeminiChat>[0]

export const chooseModel = async (env: Env): Promise<ChosenModel> => {
  if (set(env.OPENAI_API_KEY)) {
    const model = env.OPENAI_MODEL ?? 'gpt-5.2'
    return { adapter: createOpenaiChat(model as OpenAIModel, env.OPENAI_API_KEY, baseURL(env.OPENAI_BASE_URL)), label: model, offline: false }
  }
  if (set(env.ANTHROPIC_API_KEY)) {
    const model = env.ANTHROPIC_MODEL ?? 'claude-sonnet-4-5'
    return { adapter: createAnthropicChat(model as AnthropicModel, env.ANTHROPIC_API_KEY, baseURL(env.ANTHROPIC_BASE_URL)), label: model, offline: false }
  }
  if (set(env.GEMINI_API_KEY)) {
    const model = env.GEMINI_MODEL ?? 'gemini-2.5-flash'
    return { adapter: createGeminiChat(model as GeminiModel, env.GEMINI_API_KEY, baseURL(env.GEMINI_BASE_URL)), label: model, offline: false }
  }
  const demo = await startFakeOpenAI(demoModel)
  return { adapter: createOpenaiChat('gpt-5.2', 'offline', { baseURL: demo.baseURL }), label: 'offline demo model', offline: true }
}
