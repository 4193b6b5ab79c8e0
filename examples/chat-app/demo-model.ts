/**
 * The offline demo model, served as a fake OpenAI Responses API when no
 * `OPENAI_API_KEY` is set. It follows a small script:
 *
 * - an order id (`A-100`) → `get_order`; with "track" → `track_shipment`;
 * - "notify me" → `notify` (and "notify me twice" calls it twice in one step);
 * - "refund" with an order id → `refund`, which a person approves first;
 * - a tool result → a sentence about it.
 */
import type { FakeReply, ResponsesRequest } from '@tanstack/ai-effect/testing'

const orderId = /\b[A-Z]-\d+\b/

export function demoModel(request: ResponsesRequest): FakeReply {
  const lastUser = request.input.findLastIndex((item) => item.role === 'user')
  const results = request.input.slice(lastUser + 1).filter((item) => item.type === 'function_call_output')
  // Two identical calls (the second replayed) read as one sentence.
  if (results.length > 0) return words([...new Set(results.map((result) => describe(request, result)))].join(' '))

  const text = textOf(request.input[lastUser])
  const id = text.match(orderId)?.[0]
  if (/notify me/i.test(text)) {
    const call = { name: 'notify', args: { to: 'you@example.com', text: `Update about ${id ?? 'your order'}` } }
    return { toolCalls: /twice/i.test(text) ? [call, call] : [call] }
  }
  if (id !== undefined && /refund/i.test(text)) return { toolCalls: [{ name: 'refund', args: { id } }] }
  if (id !== undefined && /track/i.test(text)) return { toolCalls: [{ name: 'track_shipment', args: { id } }] }
  if (id !== undefined) return { toolCalls: [{ name: 'get_order', args: { id } }] }
  return words('I am the offline demo model. Ask "Where is order A-100?", "Track A-100", "Notify me about A-100", or "Refund A-100".')
}

function describe(request: ResponsesRequest, result: Record<string, unknown>): string {
  const call = request.input.find((item) => item.type === 'function_call' && item.call_id === result.call_id)
  const output = JSON.parse(String(result.output)) as Record<string, unknown>
  if (call?.name === 'refund' && output.error === 'User declined tool execution') return `The refund of ${argumentsOf(call).id} was declined: nothing was refunded.`
  if (typeof output.error === 'string') return `That did not work: ${output.error}.`
  switch (call?.name) {
    case 'get_order':
      return `Order ${argumentsOf(call).id} is ${output.status}.`
    case 'track_shipment':
      return `Shipment ${output.id} ${output.status}.`
    case 'notify':
      return `I sent the notification (outbox message #${output.messageId}).`
    case 'refund':
      return `Order ${output.id} is refunded (outbox message #${output.messageId}).`
    default:
      return 'Done.'
  }
}

const argumentsOf = (call: Record<string, unknown>) => JSON.parse(String(call.arguments ?? '{}')) as Record<string, string>

/** A reply streamed word by word, as a model streams it. */
const words = (text: string): FakeReply => ({ text: text.split(/(?<= )/) })

function textOf(item: Record<string, unknown> | undefined): string {
  const content = item?.content
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((part: { text?: unknown }) => (typeof part.text === 'string' ? part.text : '')).join(' ')
}
