/**
 * Tool approvals through the documented route, end to end: a ChatClient over
 * HTTP, the route built on one runtime for the process, and the real OpenAI
 * adapter against the fake Responses API. The client's answer comes back in
 * the next request (`resume`, `parentRunId`), and the route passes it on with
 * `AI.fromChatParams`.
 */
import { chatParamsFromRequest, toolDefinition, toServerSentEventsResponse } from "@tanstack/ai"
import { ChatClient, fetchServerSentEvents } from "@tanstack/ai-client"
import * as AI from "@tanstack/ai-effect"
import { type FakeOpenAIServer, startFakeOpenAI } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Effect, Layer, ManagedRuntime, Schema, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { serve } from "../examples/http.ts"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const refundDef = toolDefinition({
  name: "refund",
  description: "Refunds an order",
  inputSchema: AI.toolSchema(Schema.Struct({ orderId: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ refundId: Schema.String })),
  needsApproval: true
})

/** The app: a refund effect tool keyed per tool call, on a store built once for the process. */
const startApp = async () => {
  const refunds: Array<string> = []
  const model: FakeOpenAIServer = await startFakeOpenAI((request, index) => {
    const answered = request.input.some((item) => item.type === "function_call_output")
    return index === 0 || !answered ? { toolCalls: [{ name: "refund", args: { orderId: "A-100" }, id: "call_refund" }] } : { text: "Done." }
  })
  const refund = AI.effectTool(
    refundDef,
    ({ orderId }) => Effect.sync(() => {
      refunds.push(orderId)
      return { refundId: `R-${refunds.length}` }
    }),
    { effectKey: AI.EffectKey.perToolCall }
  )
  const runtime = ManagedRuntime.make(Layer.mergeAll(AI.EffectStore.layerMemory()))
  const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: model.baseURL })
  const requests: Array<unknown> = []
  const POST = async (request: Request) => {
    const params = await chatParamsFromRequest(request)
    requests.push(params)
    const stream = AI.chat({ adapter, ...AI.fromChatParams(params), tools: [refund] })
    return toServerSentEventsResponse(await runtime.runPromise(Stream.toAsyncIterableEffect(stream)))
  }
  const server = await serve({ "POST /api/chat": POST })
  cleanups.push(async () => {
    await server.close()
    await model.close()
    await runtime.dispose()
  })
  return { url: `${server.url}/api/chat`, refunds, model, requests, POST }
}

const approvalOf = (client: ChatClient) => {
  const part = client.getMessages().flatMap((message) => message.parts).find((part) => part.type === "tool-call" && part.approval !== undefined)
  return part?.type === "tool-call" ? part : undefined
}

/**
 * Answers the pending approval as a UI does. This client does not hold the
 * tool's definition, so it binds the interrupt generically and resolves it
 * with the payload its response schema asks for.
 */
const answer = (client: ChatClient, approved: boolean) => {
  const pending = client.getPendingInterrupts()
  expect(pending).toHaveLength(1)
  for (const interrupt of pending) if (interrupt.kind === "generic") interrupt.resolveInterrupt({ approved })
}

const toolResultOf = (client: ChatClient) =>
  client.getMessages().flatMap((message) => message.parts).find((part) => part.type === "tool-result")

describe("tool approvals through the route", () => {
  it("approved: the client's answer resumes the run, and the server tool runs exactly once", async () => {
    const app = await startApp()
    const client = new ChatClient({ connection: fetchServerSentEvents(app.url) })
    await client.sendMessage("Refund A-100")
    const pending = approvalOf(client)
    expect(pending?.state).toBe("approval-requested")
    expect(app.refunds).toEqual([])

    answer(client, true)
    await expect.poll(() => toolResultOf(client)).toBeDefined()
    expect(app.refunds).toEqual(["A-100"])
    expect(JSON.stringify(toolResultOf(client))).toContain("R-1")
    // The resumed request carried the answer, and the route passed it on.
    expect(app.requests[1]).toMatchObject({ resume: [{ interruptId: pending!.approval!.id, status: "resolved", payload: { approved: true } }] })
  })

  it("denied: the run resumes without running the tool", async () => {
    const app = await startApp()
    const client = new ChatClient({ connection: fetchServerSentEvents(app.url) })
    await client.sendMessage("Refund A-100")
    answer(client, false)
    await expect.poll(() => app.requests.length).toBeGreaterThan(1)
    await expect.poll(() => client.getIsLoading()).toBe(false)
    expect(app.refunds).toEqual([])
    // The run resumed past the approval: the model was asked again, with the denied call's result.
    expect(app.model.requests).toHaveLength(2)
    expect(app.model.requests[1]?.input.some((item) => item.type === "function_call_output" && item.call_id === "call_refund")).toBe(true)
  })

  it("the same approved request sent twice: the perToolCall effect is applied once, the second replays it", async () => {
    const app = await startApp()
    const client = new ChatClient({ connection: fetchServerSentEvents(app.url) })
    await client.sendMessage("Refund A-100")
    answer(client, true)
    await expect.poll(() => app.refunds.length).toBe(1)
    // A retry of the very request that carried the approval (a flaky network, a double click).
    const approved = app.requests[1] as Record<string, unknown>
    const replay = await app.POST(new Request(app.url, { method: "POST", body: JSON.stringify(approved), headers: { "content-type": "application/json" } }))
    // The retried request runs the approved call again, and its record answers.
    expect(await replay.text()).toContain("R-1")
    expect(app.refunds).toEqual(["A-100"])
  })
})
