/**
 * An in-memory tracer that keeps every span, for tests of span trees.
 */
import { Tracer } from 'effect'

/** A tracer that keeps the spans it makes, for a test to read. */
export const inMemoryTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    },
  })
  return { spans, tracer }
}
