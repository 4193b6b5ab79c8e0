/**
 * Guards for tool arguments as a model sends them, before core reads them.
 *
 * Core keeps the arguments an adapter parsed (the `input` of
 * `TOOL_CALL_END`) in place of the text the model sent, and writes them back
 * with `JSON.stringify`. So text that did not parse reaches the tool as `{}`
 * (the model then reads "Missing key"), and arguments nested thousands of
 * levels deep overflow the stack and end the whole run. The guarded adapter
 * drops such an `input`, so that core parses the text itself: the model
 * reads that the arguments were not valid JSON, or the tool schema refuses
 * the depth, and the run goes on.
 */
import type { AnyTextAdapter, StreamChunk } from "@tanstack/ai"
import { Predicate } from "effect"

/** A model turn's last chunk, with the turn's token usage. */
type RunFinished = Extract<StreamChunk, { readonly type: "RUN_FINISHED" }>

/** Tool arguments nested deeper than this are refused; no tool schema needs as many levels. */
export const maxArgumentDepth = 512

/** Whether a JSON value nests deeper than `limit`, walked without recursion. */
export const nestsDeeperThan = (value: unknown, limit: number): boolean => {
  const pending: Array<readonly [unknown, number]> = [[value, 0]]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [current, depth] = next
    if (!Predicate.isObjectOrArray(current)) continue
    if (depth >= limit) return true
    for (const child of Object.values(current)) pending.push([child, depth + 1])
  }
  return false
}

const isJson = (text: string): boolean => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/**
 * The adapter with every `TOOL_CALL_END` checked against the argument text
 * the model streamed. `onRunFinished` sees each model turn's `RUN_FINISHED`
 * as the adapter streams it (its token usage), from the same look at each
 * chunk, so that nothing downstream reads every chunk's type again.
 *
 * A proxy, not an object whose prototype is the adapter: apps make an
 * adapter per request, and V8 pays about 4 µs to turn a fresh object into a
 * prototype, after which each run's wrapper has a hidden class of its own
 * and core's every read of the adapter misses its inline cache.
 */
export const guardArguments = <TAdapter extends AnyTextAdapter>(
  adapter: TAdapter,
  onRunFinished?: (chunk: RunFinished) => void
): TAdapter => {
  const chatStream = (options: Parameters<TAdapter["chatStream"]>[0]) => guardStream(adapter.chatStream(options), onRunFinished)
  // The target is an empty object, not the adapter: a proxy must answer a read-only own property of
  // its target with that property's value, and a test double's `chatStream` is often one. Typed as the
  // adapter, since every read goes to the adapter.
  return new Proxy({} as TAdapter, {
    get: (_, key) => key === "chatStream" ? chatStream : Reflect.get(adapter, key),
    has: (_, key) => Reflect.has(adapter, key),
    getPrototypeOf: () => Reflect.getPrototypeOf(adapter)
  })
}

/**
 * The chunks with each `TOOL_CALL_END` checked. A plain iterator over the
 * adapter's, not an async generator: it costs one `then` per chunk, where a
 * generator would add several turns of the microtask queue to every delta.
 */
const guardStream = (
  chunks: AsyncIterable<StreamChunk>,
  onRunFinished: ((chunk: RunFinished) => void) | undefined
): AsyncIterable<StreamChunk> => ({
  [Symbol.asyncIterator]: () => {
    const iterator = chunks[Symbol.asyncIterator]()
    const argumentText = new Map<string, string>()
    const check = (chunk: StreamChunk): StreamChunk => {
      if (chunk.type === "RUN_FINISHED") {
        onRunFinished?.(chunk)
      } else if (chunk.type === "TOOL_CALL_ARGS") {
        argumentText.set(chunk.toolCallId, (argumentText.get(chunk.toolCallId) ?? "") + chunk.delta)
      } else if (chunk.type === "TOOL_CALL_END" && chunk.input !== undefined) {
        const text = argumentText.get(chunk.toolCallId)
        argumentText.delete(chunk.toolCallId)
        const unreadable = (text !== undefined && text.trim() !== "" && !isJson(text)) ||
          nestsDeeperThan(chunk.input, maxArgumentDepth)
        if (unreadable) {
          const { input: _input, ...withoutInput } = chunk
          return withoutInput
        }
      }
      return chunk
    }
    // Made once per stream, and the adapter's own result handed on, so that a chunk costs no allocation here.
    const checked = (result: IteratorResult<StreamChunk>): IteratorResult<StreamChunk> => {
      if (result.done === true) return result
      const chunk = check(result.value)
      return chunk === result.value ? result : { done: false, value: chunk }
    }
    return {
      next: () => iterator.next().then(checked),
      return: (value?: unknown) => iterator.return?.(value) ?? Promise.resolve({ done: true, value }),
      throw: (error?: unknown) => iterator.throw?.(error) ?? Promise.reject(error)
    }
  }
})
