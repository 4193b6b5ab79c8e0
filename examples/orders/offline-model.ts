/**
 * A small offline stand-in for the model, served as a fake OpenAI Responses
 * API: it looks up any order id the user mentions with `get_order`, then
 * answers from the tool result. It lets the example run on a machine with no
 * API key and no network.
 */
import type { FakeReply, ResponsesRequest } from '@tanstack/ai-effect/testing'

const orderId = /\b[A-Z]-\d+\b/

export function ordersModel(request: ResponsesRequest): FakeReply {
  const last = request.input.at(-1)
  if (last?.type === 'function_call_output') {
    const call = request.input.find((item) => item.type === 'function_call' && item.call_id === last.call_id)
    const { id } = JSON.parse(String(call?.arguments ?? '{}')) as { id?: string }
    const output = JSON.parse(String(last.output)) as { status?: string; error?: string }
    return output.error === undefined
      ? { text: `Order ${id} is ${output.status}.` }
      : { text: `I could not find order ${id}. The order system said: ${output.error}` }
  }
  const id = textOf(last).match(orderId)?.[0]
  return id === undefined
    ? { text: 'Ask me about an order, for example "Where is order A-100?"' }
    : { toolCalls: [{ name: 'get_order', args: { id } }] }
}

function textOf(item: Record<string, unknown> | undefined): string {
  const content = item?.content
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((part: { text?: unknown }) => (typeof part.text === 'string' ? part.text : '')).join(' ')
}
