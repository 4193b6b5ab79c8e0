/**
 * Effect markers: an effect key embedded in what a tool creates (a comment
 * body, a pull request description) as a hidden HTML comment, so that a
 * reconciler (`alreadyApplied`) can find an effect an earlier attempt
 * applied.
 *
 * `effectMarker` writes `<!-- chamberu:effect=<key> -->` byte for byte as the
 * reconciliation spec does, and `findEffectMarker` reads it back. Anyone who
 * can write a comment can type such a marker, so a reconciler should trust
 * only what its own account wrote, or use signed markers: `signedEffectMarkers(secret)`
 * adds an HMAC-SHA-256 of the key, and finds only markers whose signature
 * verifies.
 *
 * @since 0.1.0
 */
import { Predicate, Redacted } from "effect"

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
    const key = decodeKey(match[1] ?? "")
    return key === undefined ? [] : [key]
  })

/** A key as a marker holds it, decoded; `undefined` for text this module did not write. */
const decodeKey = (escaped: string): string | undefined => {
  try {
    return decodeURIComponent(escaped)
  } catch {
    return undefined
  }
}

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

const signedMarkerPattern = /<!-- chamberu:effect=(\S+) sig=([0-9a-f]{64}) -->/g

/**
 * Markers signed with a secret: {@link SignedEffectMarkers.marker} writes
 * `<!-- chamberu:effect=<key> sig=<hmac> -->`, and {@link SignedEffectMarkers.find} returns
 * only the keys whose signature verifies.
 *
 * @since 0.1.0
 * @category models
 */
export interface SignedEffectMarkers {
  /** The signed marker of a key, to embed where the effect lands. */
  readonly marker: (key: string) => string
  /** The keys of every marker in a text whose signature verifies, in order. */
  readonly find: (text: string) => ReadonlyArray<string>
}

/**
 * Signed effect markers: the marker carries an HMAC-SHA-256 of the key under
 * `secret`, so a marker typed by someone else, copied onto another key, or
 * carrying a wrong signature is not found. Signatures are compared in
 * constant time. Needs `node:crypto` (Node, Deno, Bun).
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Redacted } from "effect"
 *
 * const markers = AI.signedEffectMarkers(Redacted.make("a long random secret"))
 * const body = `Thanks!\n${markers.marker("run-1:comment:42")}`
 * markers.find(body) // ["run-1:comment:42"]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const signedEffectMarkers = (secret: string | Redacted.Redacted<string>): SignedEffectMarkers => {
  const crypto = globalThis.process?.getBuiltinModule?.("node:crypto")
  if (crypto === undefined) throw new Error("signedEffectMarkers needs node:crypto, which this runtime does not have")
  const key = Predicate.isString(secret) ? secret : Redacted.value(secret)
  if (key.length === 0) throw new RangeError("signedEffectMarkers needs a non-empty secret")
  const sign = (effectKey: string) => crypto.createHmac("sha256", key).update(effectKey).digest()
  return {
    marker: (effectKey) => `<!-- chamberu:effect=${escapeKey(effectKey)} sig=${sign(effectKey).toString("hex")} -->`,
    find: (text) =>
      [...text.matchAll(signedMarkerPattern)].flatMap((match) => {
        const effectKey = decodeKey(match[1] ?? "")
        if (effectKey === undefined) return []
        const expected = sign(effectKey)
        const given = Buffer.from(match[2] ?? "", "hex")
        return given.length === expected.length && crypto.timingSafeEqual(given, expected) ? [effectKey] : []
      })
  }
}
