/**
 * A conformance suite for delivery-durability backends: every MUST of core's
 * `StreamDurability` and `UpsertableStreamDurability` doc comments, and the
 * fencing of producers that this package's logs add, as claims that any test
 * runner can run.
 *
 * Each claim takes a harness that makes a producer or a reader of a run's
 * log and throws when the backend breaks the claim. Run them on core's
 * `memoryStream` as the reference and on every backend of yours.
 *
 * @since 0.1.0
 */
import type { StreamChunk, UpsertableStreamDurability } from "@tanstack/ai"

/**
 * How a suite reaches the backend under test.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurabilityHarness {
  /** The adapter of one request on the run: a producer without an offset, a reader from `offset`. */
  readonly open: (runId: string, offset?: string) => UpsertableStreamDurability | Promise<UpsertableStreamDurability>
  /** Whether a producer superseded by a newer one is refused (this package's logs); core's `memoryStream` is not fenced. */
  readonly fenced: boolean
}

/**
 * One claim of the suite: its name, and the check that throws when the
 * backend breaks it.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurabilityClaim {
  readonly name: string
  readonly check: (harness: DurabilityHarness) => Promise<void>
}

const chunk = (delta: string): StreamChunk =>
  // Core's chunk type, as an adapter writes it.
  ({ type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta, timestamp: 0 }) as StreamChunk

const deltas = (entries: ReadonlyArray<{ readonly chunk: StreamChunk }>): Array<string> =>
  entries.map(({ chunk }) => chunk.type === "TEXT_MESSAGE_CONTENT" ? chunk.delta : chunk.type)

const fail = (message: string): never => {
  throw new Error(message)
}

const same = (actual: unknown, expected: unknown, what: string): void => {
  if (JSON.stringify(actual) !== JSON.stringify(expected)) {
    fail(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`)
  }
}

const rejects = async (attempt: () => Promise<unknown>, what: string): Promise<void> => {
  try {
    await attempt()
  } catch {
    return
  }
  fail(`${what}: it was accepted`)
}

const collect = async (iterable: AsyncIterable<{ readonly offset: string; readonly chunk: StreamChunk }>) => {
  const out: Array<{ readonly offset: string; readonly chunk: StreamChunk }> = []
  for await (const entry of iterable) out.push(entry)
  return out
}

const freshRun = (claim: string) => `conformance-${claim}-${crypto.randomUUID()}`

/** A producer that stored `texts`, and their offsets. */
const produced = async (harness: DurabilityHarness, runId: string, texts: ReadonlyArray<string>) => {
  const producer = await harness.open(runId)
  const offsets = await producer.append(texts.map(chunk))
  return { producer, offsets }
}

/**
 * The claims, in the order of core's doc comments.
 *
 * @example
 * ```ts
 * import { memoryStream } from "@tanstack/ai"
 * import { durabilityClaims } from "@tanstack/ai-effect/testing"
 * import { describe, it } from "vitest"
 *
 * describe("core's memoryStream", () => {
 *   for (const claim of durabilityClaims) {
 *     it(claim.name, () => claim.check({ open: (runId, offset) => memoryStream({ runId, offset: offset ?? null }), fenced: false }))
 *   }
 * })
 * ```
 *
 * @since 0.1.0
 * @category conformance
 */
export const durabilityClaims: ReadonlyArray<DurabilityClaim> = [
  {
    name: "append returns exactly one offset per chunk, in order, each unique and usable as an SSE id",
    check: async (harness) => {
      const { offsets } = await produced(harness, freshRun("append"), ["a", "b", "c"])
      same(offsets.length, 3, "offsets of 3 chunks")
      if (new Set(offsets).size !== 3) fail(`offsets are not unique: ${JSON.stringify(offsets)}`)
      for (const offset of offsets) {
        if (offset.length === 0 || /[\0\r\n]/.test(offset) || offset !== offset.trim()) fail(`offset ${JSON.stringify(offset)} cannot be an SSE id`)
      }
      const { offsets: more } = await produced(harness, freshRun("append-empty"), [])
      same(more, [], "offsets of an empty batch")
    }
  },
  {
    name: "read from the start returns every chunk in append order, with the offsets append returned, and ends once the log is closed",
    check: async (harness) => {
      const runId = freshRun("read")
      const { producer, offsets } = await produced(harness, runId, ["a", "b"])
      const later = await producer.append([chunk("c")])
      await producer.close()
      const read = await collect((await harness.open(runId, "-1")).read("-1"))
      same(deltas(read), ["a", "b", "c"], "chunks read from the start")
      same(read.map(({ offset }) => offset), [...offsets, ...later], "offsets read from the start")
    }
  },
  {
    name: "read after an offset returns only what is strictly after it",
    check: async (harness) => {
      const runId = freshRun("read-after")
      const { producer, offsets } = await produced(harness, runId, ["a", "b", "c"])
      await producer.close()
      const read = await collect((await harness.open(runId, offsets[0])).read(offsets[0]!))
      same(deltas(read), ["b", "c"], "chunks after the first offset")
      same(deltas(await collect((await harness.open(runId, offsets[2])).read(offsets[2]!))), [], "chunks after the last offset")
    }
  },
  {
    name: "read tails an open log: a reader that caught up receives later appends and ends when the producer closes",
    check: async (harness) => {
      const runId = freshRun("tail")
      const { producer, offsets } = await produced(harness, runId, ["a"])
      const reader = (await harness.open(runId, offsets[0])).read(offsets[0]!)[Symbol.asyncIterator]()
      const next = reader.next()
      await producer.append([chunk("b")])
      same(deltas([(await next).value]), ["b"], "the chunk appended while the reader waited")
      const end = reader.next()
      await producer.close()
      same((await end).done, true, "the read after close")
    }
  },
  {
    name: "snapshot never waits: it resolves with what is stored while the log is open, [] for a run with nothing stored, and a fresh array",
    check: async (harness) => {
      const runId = freshRun("snapshot")
      const { producer, offsets } = await produced(harness, runId, ["a", "b"])
      const first = await producer.snapshot()
      same(deltas(first), ["a", "b"], "snapshot of an open log")
      same(first.map(({ offset }) => offset), offsets, "offsets of the snapshot")
      first.length = 0
      same(deltas(await producer.snapshot()), ["a", "b"], "a snapshot after the first one was emptied")
      same(await (await harness.open(freshRun("snapshot-unknown"))).snapshot(), [], "snapshot of an unknown run")
    }
  },
  {
    name: "upsert replaces the chunk stored at an offset, and replaying a stored range adds no duplicate",
    check: async (harness) => {
      const runId = freshRun("upsert")
      const { producer, offsets } = await produced(harness, runId, ["a", "b"])
      const returned = await producer.upsert([{ offset: offsets[1]!, chunk: chunk("B") }, { offset: offsets[0]!, chunk: chunk("a") }])
      same(returned, [offsets[1], offsets[0]], "offsets upsert returned, in the order supplied")
      same(deltas(await producer.snapshot()), ["a", "B"], "the log after the upsert")
      await producer.upsert([{ offset: offsets[0]!, chunk: chunk("a") }, { offset: offsets[1]!, chunk: chunk("B") }])
      same(deltas(await producer.snapshot()), ["a", "B"], "the log after replaying the range")
    }
  },
  {
    name: "upsert refuses a batch with an offset it did not mint, another run's offset, a repeated offset or a hole, and stores none of it",
    check: async (harness) => {
      const runId = freshRun("upsert-refused")
      const { producer, offsets } = await produced(harness, runId, ["a", "b"])
      const { offsets: foreign } = await produced(harness, freshRun("upsert-other"), ["x"])
      const replace = { offset: offsets[0]!, chunk: chunk("changed") }
      await rejects(() => producer.upsert([replace, { offset: "not-an-offset", chunk: chunk("x") }]), "an offset the backend did not mint")
      await rejects(() => producer.upsert([replace, { offset: foreign[0]!, chunk: chunk("x") }]), "another run's offset")
      await rejects(() => producer.upsert([replace, { offset: offsets[1]!, chunk: chunk("x") }, { offset: offsets[1]!, chunk: chunk("y") }]), "a repeated offset")
      // A sparse array: index 1 is a hole.
      const holed: Array<{ offset: string; chunk: StreamChunk }> = [replace]
      holed[2] = { offset: offsets[1]!, chunk: chunk("x") }
      await rejects(() => producer.upsert(holed), "a batch with a hole")
      same(deltas(await producer.snapshot()), ["a", "b"], "the log after the refused batches")
    }
  },
  {
    name: "a read of a run with nothing stored fails instead of waiting forever: at once from a resume offset, within a deadline from the start",
    check: async (harness) => {
      const runId = freshRun("unknown")
      const { producer, offsets } = await produced(harness, runId, ["a"])
      await producer.close()
      const elsewhere = freshRun("unknown-elsewhere")
      // An offset of a stored run, sent for a run that has nothing stored.
      await rejects(() => collect((async function*() {
        yield* (await harness.open(elsewhere, offsets[0])).read(offsets[0]!)
      })()), "a resume offset for another, unknown run")
      await rejects(async () => collect((await harness.open(elsewhere, "-1")).read("-1")), "a join from the start of an unknown run")
    }
  },
  {
    name: "fenced appends: once a newer producer claimed the log, the older producer's appends and closes are refused and nothing it sends is stored",
    check: async (harness) => {
      if (!harness.fenced) return
      const runId = freshRun("fenced")
      const { producer: first } = await produced(harness, runId, ["first-1"])
      const { producer: second } = await produced(harness, runId, ["second-1"])
      await rejects(() => first.append([chunk("first-2")]), "an append of the superseded producer")
      await rejects(() => first.upsert([]), "an upsert of the superseded producer")
      await rejects(() => first.close(), "a close of the superseded producer")
      await second.append([chunk("second-2")])
      same(deltas(await second.snapshot()), ["first-1", "second-1", "second-2"], "the log the newer producer continued")
      await second.close()
    }
  }
]
