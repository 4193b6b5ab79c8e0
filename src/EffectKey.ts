/**
 * Effect keys: what makes two tool calls "the same effect".
 *
 * An effect tool applies its side effect at most once per effect key. The
 * default key, {@link perRun}, is `<runId>:<toolName>:<sha256 of the canonical
 * JSON input>`: the same call with the same input in the same run is applied
 * once. {@link perToolCall} keys by thread and tool call instead, for calls
 * that come back in a later request with a new run id.
 *
 * `effectMarker` embeds a key in what a tool creates (a comment body, a pull
 * request description) as a hidden HTML comment, and `findEffectMarker` reads
 * it back, so that a reconciler can find an effect an earlier attempt applied.
 *
 * @since 0.1.0
 */
import { Effect, Predicate, Result, Schema } from "effect"
import { WebCrypto } from "effect/crypto"
import { Hex } from "effect/encoding"
import type { RunContext } from "./RunContext.ts"

/**
 * An input that no key can be made from: it holds a BigInt or a cycle.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Result } from "effect"
 *
 * const a: Record<string, unknown> = {}
 * a.self = a
 * const result = AI.canonicalJson(a)
 * if (Result.isFailure(result)) result.failure.path // "$.self"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EffectKeyError extends Schema.TaggedError<EffectKeyError>()("EffectKeyError", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `No effect key can be made from the input: ${this.reason} at ${this.path}`
  }
}

/**
 * The canonical JSON of a value: object keys sorted, `undefined` dropped,
 * `toJSON` honoured (a Date serializes through it). Equal inputs give equal
 * text whatever the order of their keys. A BigInt or a cycle fails with an
 * `EffectKeyError` naming its path.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Result } from "effect"
 *
 * AI.canonicalJson({ b: 1, a: [true, undefined], c: undefined }) // Result.succeed('{"a":[true,null],"b":1}')
 * ```
 *
 * @since 0.1.0
 * @category keys
 */
export const canonicalJson = (value: unknown): Result.Result<string, EffectKeyError> => {
  try {
    return Result.succeed(write(value, "$", []) ?? "null")
  } catch (error) {
    if (error instanceof EffectKeyError) return Result.fail(error)
    throw error
  }
}

/** `undefined` where JSON leaves the value out (undefined, functions, symbols). */
const write = (value: unknown, path: string, ancestors: Array<unknown>): string | undefined => {
  if (Predicate.isObject(value) && Predicate.hasProperty(value, "toJSON") && Predicate.isFunction(value.toJSON)) {
    return write(value.toJSON(), path, ancestors)
  }
  if (Predicate.isBigInt(value)) throw new EffectKeyError({ path, reason: "a BigInt has no JSON form" })
  if (value === undefined || Predicate.isFunction(value) || Predicate.isSymbol(value)) return undefined
  if (!Predicate.isObjectOrArray(value)) return JSON.stringify(value)
  if (ancestors.includes(value)) throw new EffectKeyError({ path, reason: "the value refers to itself (a cycle)" })
  const inside = [...ancestors, value]
  if (Array.isArray(value)) {
    return `[${value.map((item, i) => write(item, `${path}[${i}]`, inside) ?? "null").join(",")}]`
  }
  const entries = Object.keys(value).sort().flatMap((key) => {
    const text = write((value as Record<string, unknown>)[key], `${path}.${key}`, inside)
    return text === undefined ? [] : [`${JSON.stringify(key)}:${text}`]
  })
  return `{${entries.join(",")}}`
}

/**
 * The lowercase hex SHA-256 of a text, on the runtime's WebCrypto.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const digest = AI.sha256Hex("abc") // Effect<"ba7816bf...">
 * ```
 *
 * @since 0.1.0
 * @category keys
 */
export const sha256Hex = (text: string): Effect.Effect<string> =>
  Effect.flatMap(
    Effect.service(WebCrypto.WebCrypto),
    (crypto) =>
      Effect.promise(() => crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))).pipe(
        Effect.map((digest) => Hex.encode(new Uint8Array(digest)))
      )
  )

/**
 * What a key strategy knows about a call.
 *
 * @since 0.1.0
 * @category models
 */
export interface KeyContext {
  readonly run: RunContext["Service"]
  readonly toolName: string
  readonly toolCallId: string
}

/**
 * Makes the effect key of a call. A custom strategy may return the key or an
 * Effect of it.
 *
 * @since 0.1.0
 * @category models
 */
export type KeyStrategy<Input> = (
  input: Input,
  context: KeyContext
) => string | Effect.Effect<string, EffectKeyError>

/**
 * `<runId>:<toolName>:<sha256 hex of the canonical JSON input>`: the default.
 * The same call with the same input in the same run is applied once.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const key = AI.EffectKey.perRun({ issue: 7 }, {
 *   run: { runId: "run-1", threadId: "t-1", agent: "responder", trigger: "webhook" },
 *   toolName: "comment",
 *   toolCallId: "call_1"
 * }) // Effect<"run-1:comment:5c1f...">
 * ```
 *
 * @since 0.1.0
 * @category keys
 */
export const perRun = (input: unknown, context: KeyContext): Effect.Effect<string, EffectKeyError> =>
  Effect.flatMap(
    Effect.fromResult(canonicalJson(input)),
    (json) => Effect.map(sha256Hex(json), (digest) => `${context.run.runId}:${context.toolName}:${digest}`)
  )

/**
 * `<threadId>:<toolName>:<toolCallId>`: one application per tool call of a
 * thread. Use it when the same call comes back in a later request, as when a
 * client resubmits a conversation or resumes an interrupted one: core
 * re-executes a tool call of the history that has no result, and such a
 * request usually has a new run id.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const key = AI.EffectKey.perToolCall({}, {
 *   run: { runId: "run-2", threadId: "t-1", agent: "responder", trigger: "webhook" },
 *   toolName: "comment",
 *   toolCallId: "call_1"
 * }) // "t-1:comment:call_1"
 * ```
 *
 * @since 0.1.0
 * @category keys
 */
export const perToolCall = (_input: unknown, context: KeyContext): string =>
  `${context.run.threadId}:${context.toolName}:${context.toolCallId}`

const markerPattern = /<!-- chamberu:effect=(\S+) -->/g

/**
 * The hidden HTML comment `<!-- chamberu:effect=<key> -->` to embed in what a
 * tool creates. Characters that could end the comment early or split the
 * marker (`>`, `<`, a second `-` of `--`, white space, and `%` itself) are
 * percent-encoded; other keys appear byte for byte.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * AI.effectMarker("run-1:comment:42") // "<!-- chamberu:effect=run-1:comment:42 -->"
 * ```
 *
 * @since 0.1.0
 * @category markers
 */
export const effectMarker = (key: string): string => `<!-- chamberu:effect=${escapeKey(key)} -->`

/**
 * The effect keys of every marker in a text, in order.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * AI.findEffectMarker(`Thanks!\n${AI.effectMarker("run-1:comment:42")}`) // ["run-1:comment:42"]
 * ```
 *
 * @since 0.1.0
 * @category markers
 */
export const findEffectMarker = (text: string): ReadonlyArray<string> =>
  [...text.matchAll(markerPattern)].flatMap((match) => {
    try {
      return [decodeURIComponent(match[1] ?? "")]
    } catch {
      return [] // not a marker this module wrote
    }
  })

const escapeKey = (key: string): string => {
  let out = ""
  for (const char of key) {
    if (char === "%" || char === "<" || char === ">" || /\s/.test(char) || (char === "-" && out.endsWith("-"))) {
      out += encodeURIComponent(char).replace(/-/g, "%2D")
    } else {
      out += char
    }
  }
  return out
}
