/**
 * OpenTelemetry GenAI attributes of a run: the span names and attribute
 * names of https://opentelemetry.io/docs/specs/semconv/gen-ai/, and the token
 * usage a run reports, summed over its model turns.
 */
import type { StreamChunk } from "@tanstack/ai"
import { Predicate } from "effect"

/** Token counts, summed over the turns of a run. */
export interface Usage {
  input: number
  output: number
}

/** Adds the usage a `RUN_FINISHED` chunk reports (core's form, or AG-UI's list) to `total`. */
export const addUsage = (total: Usage, chunk: StreamChunk): void => {
  if (chunk.type === "RUN_FINISHED") addReportedUsage(total, chunk.usage)
}

/** Adds usage as an adapter reports it: one object, or AG-UI's list of them. */
export const addReportedUsage = (total: Usage, reported: unknown): void => {
  for (const usage of Array.isArray(reported) ? reported : [reported]) {
    if (!Predicate.isObject(usage)) continue
    total.input += numberAt(usage, "promptTokens") + numberAt(usage, "inputTokens")
    total.output += numberAt(usage, "completionTokens") + numberAt(usage, "outputTokens")
  }
}

const numberAt = (usage: object, key: string): number =>
  Predicate.hasProperty(usage, key) && Predicate.isNumber(usage[key]) ? usage[key] : 0

/** The usage attributes of a span. */
export const usageAttributes = (usage: Usage) => ({
  "gen_ai.usage.input_tokens": usage.input,
  "gen_ai.usage.output_tokens": usage.output
})
