/**
 * Effect keys: what makes two tool calls "the same effect".
 *
 * An effect tool applies its side effect at most once per effect key. The
 * default key, {@link perRun}, is `<runId>:<toolName>:<sha256 of the canonical
 * JSON input>`: the same call with the same input in the same run is applied
 * once. {@link perToolCall} keys by thread and tool call instead, for calls
 * that come back in a later request with a new run id.
 *
 * @since 0.1.0
 */
import { Effect, Result } from "effect"
import { WebCrypto } from "effect/crypto"
import { Hex } from "effect/encoding"
import { writeCanonical } from "./internal/json.ts"
import { EffectKeyError } from "./EffectToolError.ts"
import { perRunKey } from "./internal/keys.ts"
import type { RunContext } from "./RunContext.ts"

/**
 * The canonical JSON of a value: object keys sorted, `undefined` dropped,
 * `toJSON` honoured (a Date serializes through it). Equal inputs give equal
 * text whatever the order of their keys.
 *
 * A value that JSON cannot carry whole fails with an `EffectKeyError` naming
 * its path, rather than giving two different inputs one key: a BigInt, a
 * cycle, a `Map`, `Set`, `WeakMap`, `WeakSet`, `RegExp` or `Promise`, and a
 * class instance with no enumerable property and no `toJSON` (its JSON form
 * would be `{}`). The walk is iterative, so no nesting depth can overflow the
 * stack.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Result } from "effect"
 *
 * AI.EffectKey.canonicalJson({ b: 1, a: [true, undefined], c: undefined }) // Result.succeed('{"a":[true,null],"b":1}')
 * ```
 *
 * @since 0.1.0
 * @category keys
 */
export const canonicalJson = (value: unknown): Result.Result<string, EffectKeyError> =>
  Result.mapError(writeCanonical(value), (problem) => new EffectKeyError(problem))

// node:crypto hashes in the calling fiber (its one-shot `hash`, which makes
// no Hash object); a WebCrypto digest is a promise round trip for every key,
// which costs more than the hash itself.
const nodeCrypto = globalThis.process?.getBuiltinModule?.("node:crypto")

/** A synchronous SHA-256 in hex; `hash` is missing from some runtimes' `node:crypto`. */
const nodeSha256Hex: ((text: string) => string) | undefined = nodeCrypto === undefined
  ? undefined
  : typeof nodeCrypto.hash === "function"
  ? (text) => nodeCrypto.hash("sha256", text, "hex")
  : (text) => nodeCrypto.createHash("sha256").update(text).digest("hex")

/**
 * The lowercase hex SHA-256 of a text: synchronous `node:crypto` where the
 * runtime has it, the runtime's WebCrypto elsewhere.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const digest = AI.EffectKey.sha256Hex("abc") // Effect<"ba7816bf...">
 * ```
 *
 * @since 0.1.0
 * @category keys
 */
export const sha256Hex = (text: string): Effect.Effect<string> => {
  if (nodeSha256Hex !== undefined) return Effect.sync(() => nodeSha256Hex(text))
  return Effect.flatMap(
    Effect.service(WebCrypto.WebCrypto),
    (crypto) =>
      Effect.promise(() => crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))).pipe(
        Effect.map((digest) => Hex.encode(new Uint8Array(digest)))
      )
  )
}

/**
 * The fingerprint of an input: the SHA-256 of its canonical JSON. An effect
 * store keeps it beside each record, so that a call whose key was recorded
 * with another input can be told apart (see the `onKeyReuse` option of
 * `AI.effectTool`).
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 *
 * const fingerprint = AI.EffectKey.fingerprint({ issue: 7, body: "Thanks" }) // Effect<"9c1e...">
 * ```
 *
 * @since 0.1.0
 * @category keys
 */
export const fingerprint = (input: unknown): Effect.Effect<string, EffectKeyError> =>
  Effect.flatMap(Effect.fromResult(canonicalJson(input)), sha256Hex)

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
  Effect.map(fingerprint(input), (digest) => perRunKey(context, digest))

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
