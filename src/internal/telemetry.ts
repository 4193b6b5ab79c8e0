/**
 * OpenTelemetry GenAI attributes of a run: the span names and attribute
 * names of https://opentelemetry.io/docs/specs/semconv/gen-ai/.
 */
import type { Usage } from "./agui.ts"

/** The usage attributes of a span. */
export const usageAttributes = (usage: Usage) => ({
  "gen_ai.usage.input_tokens": usage.input,
  "gen_ai.usage.output_tokens": usage.output
})
