/**
 * `npm run orders`: the orders example end to end on this machine. It starts the
 * offline model (a fake OpenAI Responses API on 127.0.0.1), serves the route
 * from route.ts, and has a ChatClient (what the browser runs) ask about two
 * orders. The conversation is printed as the client sees it.
 */
import { ChatClient, fetchServerSentEvents } from '@tanstack/ai-client'
import { startFakeOpenAI } from '@tanstack/ai-effect/testing'
import { serve } from '../http.ts'
import { ordersModel } from './offline-model.ts'
import { POST } from './route.ts'

const model = await startFakeOpenAI(ordersModel)
// The OpenAI client reads these; route.ts stays exactly what a deployed app runs.
process.env.OPENAI_BASE_URL = model.baseURL
process.env.OPENAI_API_KEY ??= 'offline'

const server = await serve({ 'POST /api/chat': POST })
const client = new ChatClient({ connection: fetchServerSentEvents(`${server.url}/api/chat`) })

try {
  for (const question of ['Where is order A-100?', 'And where is order B-200?']) {
    await client.sendMessage(question)
  }
  for (const message of client.getMessages()) {
    for (const part of message.parts) {
      if (part.type === 'text') console.log(`${message.role}: ${part.content}`)
      if (part.type === 'tool-call') console.log(`  tool ${part.name}(${part.arguments})`)
      if (part.type === 'tool-result') console.log(`  result ${typeof part.content === 'string' ? part.content : JSON.stringify(part.content)}`)
    }
  }
} finally {
  await server.close()
  await model.close()
}
