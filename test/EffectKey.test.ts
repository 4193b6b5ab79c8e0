import { createHash, createHmac } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { Effect, Redacted, Result } from "effect"

const run = { runId: "run-1", threadId: "thread-1", agent: "responder", trigger: "webhook" }

describe("AI.EffectKey.canonicalJson", () => {
  it("sorts object keys, so equal inputs give equal text whatever their key order", () => {
    expect(AI.EffectKey.canonicalJson({ b: 1, a: { d: 2, c: 3 } })).toEqual(AI.EffectKey.canonicalJson({ a: { c: 3, d: 2 }, b: 1 }))
    expect(AI.EffectKey.canonicalJson({ b: 1, a: { d: 2, c: 3 } })).toEqual(Result.succeed(`{"a":{"c":3,"d":2},"b":1}`))
  })

  it("drops undefined from objects and writes it as null in arrays, as JSON does", () => {
    expect(AI.EffectKey.canonicalJson({ a: undefined, b: [undefined, 1] })).toEqual(Result.succeed(`{"b":[null,1]}`))
  })

  it("serializes values with toJSON, such as a Date, through toJSON", () => {
    expect(AI.EffectKey.canonicalJson({ at: new Date("2026-12-02T10:00:00.000Z") })).toEqual(
      Result.succeed(`{"at":"2026-12-02T10:00:00.000Z"}`)
    )
  })

  it("fails with an EffectKeyError naming the path of a BigInt", () => {
    const result = AI.EffectKey.canonicalJson({ order: { total: 10n } })
    expect(Result.isFailure(result) && result.failure).toMatchObject({ _tag: "EffectKeyError", path: "$.order.total" })
  })

  it("fails with an EffectKeyError naming the path of a cycle", () => {
    const node: Record<string, unknown> = { name: "root", children: [] }
    ;(node.children as Array<unknown>).push(node)
    const result = AI.EffectKey.canonicalJson(node)
    expect(Result.isFailure(result) && result.failure).toMatchObject({ _tag: "EffectKeyError", path: "$.children[0]" })
  })

  it("writes strings and object keys in Unicode NFC: a name typed composed or decomposed is one text, sorted alike", () => {
    const composed = "Zo\u00eb"
    const decomposed = "Zoe\u0308"
    expect(AI.EffectKey.canonicalJson({ name: decomposed, [decomposed]: 1, Zof: 2 })).toEqual(
      AI.EffectKey.canonicalJson({ name: composed, [composed]: 1, Zof: 2 })
    )
    expect(AI.EffectKey.canonicalJson([decomposed])).toEqual(Result.succeed(`["${composed}"]`))
  })

  it("escapes strings and keys as JSON does, so that the text reads back as the input", () => {
    const input = {
      'quote " and \\ backslash': "tab\t, newline\n, NUL\u0000, DEL\u007f",
      "\u2028 separator": ["emoji 🎉", "lone \ud800 surrogate", -0, 1e21, Number.NaN, null, true]
    }
    const result = AI.EffectKey.canonicalJson(input)
    // The keys are in sorted order already: "q" comes before U+2028.
    expect(result).toEqual(Result.succeed(JSON.stringify(input)))
    expect(JSON.parse(Result.getOrThrow(result))).toEqual(JSON.parse(JSON.stringify(input)))
  })

  it("writes values nested 100,000 levels deep without overflowing the stack", () => {
    let deep: unknown = "leaf"
    // JSON.stringify itself overflows at this depth, so the expected text is built alongside.
    let expected = `"leaf"`
    for (let level = 0; level < 100_000; level++) {
      deep = level % 2 === 0 ? [deep] : { next: deep }
      expected = level % 2 === 0 ? `[${expected}]` : `{"next":${expected}}`
    }
    expect(AI.EffectKey.canonicalJson(deep)).toEqual(Result.succeed(expected))
  })

  it("accepts a value that appears twice without being a cycle", () => {
    const shared = { id: 1 }
    expect(AI.EffectKey.canonicalJson({ a: shared, b: shared })).toEqual(Result.succeed(`{"a":{"id":1},"b":{"id":1}}`))
  })
})

describe("AI.EffectKey", () => {
  it.effect("perRun is <runId>:<toolName>:<sha256 hex of the canonical JSON input>", () =>
    Effect.gen(function*() {
      const key = yield* AI.EffectKey.perRun({ issue: 7, body: "Thanks" }, { run, toolName: "comment", toolCallId: "call_1" })
      const digest = createHash("sha256").update(`{"body":"Thanks","issue":7}`).digest("hex")
      expect(key).toBe(`run-1:comment:${digest}`)
    }))

  it.effect("perRun gives the same key for the same input in another key order, and another key in another run", () =>
    Effect.gen(function*() {
      const context = { run, toolName: "comment", toolCallId: "call_1" }
      const a = yield* AI.EffectKey.perRun({ issue: 7, body: "x" }, context)
      const b = yield* AI.EffectKey.perRun({ body: "x", issue: 7 }, { ...context, toolCallId: "call_2" })
      const c = yield* AI.EffectKey.perRun({ issue: 7, body: "x" }, { ...context, run: { ...run, runId: "run-2" } })
      expect(a).toBe(b)
      expect(c).not.toBe(a)
    }))

  it("perToolCall is <threadId>:<toolName>:<toolCallId>, the same in every run of the thread", () => {
    const context = { run, toolName: "comment", toolCallId: "call_1" }
    expect(AI.EffectKey.perToolCall({ issue: 7 }, context)).toBe("thread-1:comment:call_1")
    expect(AI.EffectKey.perToolCall({ issue: 7 }, { ...context, run: { ...run, runId: "run-2" } })).toBe(
      "thread-1:comment:call_1"
    )
  })
})

describe("AI.effectMarker", () => {
  it("is the hidden HTML comment <!-- chamberu:effect=<key> -->, byte for byte", () => {
    expect(AI.effectMarker("run-1:comment:42")).toBe("<!-- chamberu:effect=run-1:comment:42 -->")
  })

  it.each(["a-->b", "a--!>b", "a>b", "a<!--b", "two words", "50%", "a---b", "ends-"])(
    "cannot end the HTML comment early, and reads back as the same key: %s",
    (key) => {
      const marker = AI.effectMarker(key)
      const inner = marker.slice("<!--".length, -"-->".length)
      expect(inner).not.toContain("--")
      expect(inner).not.toContain(">")
      expect(inner).not.toContain("<")
      expect(AI.findEffectMarker(`before ${marker} after`)).toEqual([key])
    }
  )

  it("findEffectMarker returns the keys of every marker in a text, in order", () => {
    const text = `Hello\n${AI.effectMarker("k1")}\nand ${AI.effectMarker("k2")}`
    expect(AI.findEffectMarker(text)).toEqual(["k1", "k2"])
    expect(AI.findEffectMarker("no marker here <!-- other comment -->")).toEqual([])
  })
})

describe("AI.signedEffectMarkers", () => {
  const markers = AI.signedEffectMarkers(Redacted.make("test secret"))

  it("writes <!-- chamberu:effect=<key> sig=<HMAC-SHA-256 of the key> --> and finds the key again", () => {
    const expected = createHmac("sha256", "test secret").update("run-1:comment:42").digest("hex")
    expect(markers.marker("run-1:comment:42")).toBe(`<!-- chamberu:effect=run-1:comment:42 sig=${expected} -->`)
    expect(markers.find(`Thanks!\n${markers.marker("run-1:comment:42")}`)).toEqual(["run-1:comment:42"])
  })

  it("finds no marker whose signature does not verify: typed, copied onto another key, or signed with another secret", () => {
    const copied = markers.marker("run-0:comment:1").replace("run-0:comment:1", "run-1:comment:1")
    const otherSecret = AI.signedEffectMarkers("another secret").marker("run-1:comment:1")
    expect(markers.find(`${AI.effectMarker("run-1:comment:1")} ${copied} ${otherSecret}`)).toEqual([])
  })

  it("keeps the unsigned marker byte for byte as the spec writes it, and it does not read signed ones", () => {
    expect(AI.effectMarker("k")).toBe("<!-- chamberu:effect=k -->")
    expect(AI.findEffectMarker(markers.marker("k"))).toEqual([])
  })

  it("escapes keys as the unsigned marker does, so that no key can end the comment early", () => {
    const marker = markers.marker("a-->b")
    expect(marker.slice("<!--".length, -"-->".length)).not.toContain("--")
    expect(markers.find(marker)).toEqual(["a-->b"])
  })
})
