/**
 * Whether a tool's result can go to the model and into a record as it is.
 */
import { Result } from "effect"
import { canonicalJson } from "../EffectKey.ts"

/** Why a value is not JSON (a BigInt, a cycle, a Map...), or undefined when it is. */
export const notJson = (value: unknown): string | undefined => {
  const json = canonicalJson(value)
  return Result.isSuccess(json) ? undefined : `the result is not JSON: ${json.failure.reason} at ${json.failure.path}`
}
