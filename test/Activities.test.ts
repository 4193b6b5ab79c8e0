/**
 * The activities beside chat as Effects: each through a scripted adapter;
 * summarize, embed, images and structured output through the real OpenAI
 * adapter against the fake server; interruption aborting the request;
 * provider errors as typed AiError reasons; decode failures naming the path.
 */
import { describe, expect, it } from "@effect/vitest"
import { vi } from "vitest"
import * as AI from "@tanstack/ai-effect"
import {
  fakeOpenAI,
  scriptedAudio,
  scriptedEmbedding,
  scriptedImage,
  scriptedRerank,
  scriptedSpeech,
  scriptedSummarize,
  scriptedText,
  scriptedTranscription,
  scriptedVideo
} from "@tanstack/ai-effect/testing"
import { createOpenaiChat, createOpenaiEmbedding, createOpenaiImage, createOpenaiSummarize } from "@tanstack/ai-openai"
import { Deferred, Effect, Fiber, type Scope, Schema, Stream } from "effect"
import { inMemoryTracer } from "./support/tracing.ts"

const usage = { promptTokens: 7, completionTokens: 3, totalTokens: 10 }
const Ticket = Schema.Struct({ title: Schema.String, priority: Schema.Literals(["low", "high"]) })

describe("activities through scripted adapters", () => {
  it.effect("summarize returns the adapter's summary, and summarizeStream streams it", () =>
    Effect.gen(function*() {
      const adapter = scriptedSummarize(({ text }) => ({ id: "s1", model: "scripted", summary: `short: ${text}`, usage }))
      const result = yield* AI.summarize({ adapter, text: "a long text", maxLength: 20 })
      expect(result.summary).toBe("short: a long text")
      expect(adapter.calls[0]).toMatchObject({ text: "a long text", maxLength: 20 })
      const chunks = yield* Stream.runCollect(AI.summarizeStream({ adapter, text: "streamed" }))
      expect(chunks.map((chunk) => chunk.type)).toContain("RUN_FINISHED")
    }))

  it.effect("embed, rerank, generateImage, generateSpeech, generateTranscription and generateAudio return their adapters' results", () =>
    Effect.gen(function*() {
      const vectors = yield* AI.embed({
        adapter: scriptedEmbedding(({ input }) => ({ id: "e", model: "scripted", embeddings: input.map((_, index) => ({ vector: [index], index })) })),
        input: ["a", "b"]
      })
      expect(vectors.embeddings.map((embedding) => embedding.vector)).toEqual([[0], [1]])
      const ranked = yield* AI.rerank({
        adapter: scriptedRerank(() => ({ id: "r", ranking: [{ index: 1, score: 0.9 }, { index: 0, score: 0.1 }], usage })),
        query: "refunds",
        documents: ["Shipping", "Refunds"]
      })
      expect(ranked.rerankedDocuments).toEqual(["Refunds", "Shipping"])
      const images = yield* AI.generateImage({ adapter: scriptedImage(() => ({ id: "i", model: "scripted", images: [{ url: "https://img/1" }] })), prompt: "harbour" })
      expect(images.images).toEqual([{ url: "https://img/1" }])
      const speech = yield* AI.generateSpeech({ adapter: scriptedSpeech(() => ({ id: "t", model: "scripted", audio: "UklGRg==", format: "wav" })), text: "Hello" })
      expect(speech.format).toBe("wav")
      const transcript = yield* AI.generateTranscription({
        adapter: scriptedTranscription(() => ({ id: "tr", model: "scripted", text: "hello world" })),
        audio: "UklGRg=="
      })
      expect(transcript.text).toBe("hello world")
      const audio = yield* AI.generateAudio({
        adapter: scriptedAudio(() => ({ id: "a", model: "scripted", audio: { b64Json: "UklGRg==", contentType: "audio/wav" } })),
        prompt: "rain"
      })
      expect(audio.audio).toMatchObject({ contentType: "audio/wav" })
    }))

  it.effect("generateVideo starts a job, and getVideoJobStatus reports it", () =>
    Effect.gen(function*() {
      const adapter = scriptedVideo({
        job: () => ({ jobId: "job-1", model: "scripted" }),
        status: (jobId) => ({ jobId, status: "completed", progress: 100 }),
        url: (jobId) => ({ jobId, url: "https://video/1" })
      })
      const job = yield* AI.generateVideo({ adapter, prompt: "a harbour at dawn" })
      expect(job.jobId).toBe("job-1")
      const status = yield* AI.getVideoJobStatus({ adapter, jobId: "job-1" })
      expect(status).toMatchObject({ jobId: "job-1", status: "completed" })
    }))

  it.effect("generateObject decodes the model's JSON with the Effect Schema", () =>
    Effect.gen(function*() {
      const adapter = scriptedText([{ text: `{"title":"Checkout down","priority":"high"}` }])
      const ticket = yield* AI.generateObject({ adapter, messages: [{ role: "user", content: "The checkout is down" }], schema: Ticket })
      expect(ticket).toEqual({ title: "Checkout down", priority: "high" })
    }))

  it.effect("a structured answer that does not fit the schema is AiError (decode), naming the path", () =>
    Effect.gen(function*() {
      const adapter = scriptedText([{ text: `{"title":"Checkout down","priority":"urgent"}` }])
      const error = yield* Effect.flip(AI.generateObject({ adapter, messages: [{ role: "user", content: "?" }], schema: Ticket }))
      expect(error).toMatchObject({ _tag: "AiError", activity: "generateObject", reason: "decode" })
      expect(error.message).toContain(`["priority"]`)
    }))

  it.live("interrupting the fiber aborts the request: the adapter's abort signal fires", () =>
    Effect.gen(function*() {
      const asked = yield* Deferred.make<void>()
      const adapter = scriptedSummarize(() =>
        Effect.runPromise(Deferred.succeed(asked, undefined)).then(() => new Promise<never>(() => {})))
      const running = yield* Effect.forkChild(AI.summarize({ adapter, text: "never answered" }))
      yield* Deferred.await(asked)
      yield* Fiber.interrupt(running)
      expect(adapter.calls[0]?.abortSignal?.aborted).toBe(true)
    }))

  it.effect("each activity runs in a span named after it, with the model, the provider and the token usage", () =>
    Effect.gen(function*() {
      const { spans, tracer } = inMemoryTracer()
      const adapter = scriptedSummarize(() => ({ id: "s1", model: "scripted", summary: "short", usage }))
      yield* AI.summarize({ adapter, text: "text" }).pipe(Effect.withTracer(tracer))
      const span = spans.find((span) => span.name === "AI.summarize")
      expect(Object.fromEntries(span!.attributes)).toMatchObject({
        "gen_ai.operation.name": "summarize",
        "gen_ai.request.model": "scripted",
        "gen_ai.provider.name": "scripted",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3
      })
    }))
})

describe("activities through the real OpenAI adapter, against the fake server", () => {
  it.live("summarize, embed, generateImage and generateObject answer from the provider, with the requests it received", () =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([{ text: "A short summary." }, { text: `{"title":"Checkout down","priority":"high"}` }])
      const config = { baseURL: server.baseURL, maxRetries: 0 }
      const summary = yield* AI.summarize({ adapter: createOpenaiSummarize("gpt-5.2", "test-key", config), text: "A long text." })
      expect(summary.summary).toBe("A short summary.")
      const vectors = yield* AI.embed({ adapter: createOpenaiEmbedding("text-embedding-3-small", "test-key", config), input: ["a", "bb"] })
      expect(vectors.embeddings).toHaveLength(2)
      const images = yield* AI.generateImage({ adapter: createOpenaiImage("gpt-image-1", "test-key", config), prompt: "harbour", numberOfImages: 2 })
      expect(images.images).toHaveLength(2)
      const ticket = yield* AI.generateObject({
        adapter: createOpenaiChat("gpt-5.2", "test-key", config),
        messages: [{ role: "user", content: "The checkout is down" }],
        schema: Ticket
      })
      expect(ticket).toEqual({ title: "Checkout down", priority: "high" })
      expect(server.otherRequests.map((request) => request.path)).toEqual(["/v1/embeddings", "/v1/images/generations"])
      expect(server.otherRequests[0]?.body).toMatchObject({ input: ["a", "bb"], model: "text-embedding-3-small" })
      // The structured request carried the schema as strict JSON Schema.
      expect(JSON.stringify(server.requests[1]?.text)).toContain(`"additionalProperties":false`)
    }).pipe(Effect.scoped))

  it.live("interrupting a generateObject aborts its HTTP request: the fake server sees it go away", () =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([{ text: `{"title":"late","priority":"low"}`, delayMs: 5_000 }])
      const running = yield* Effect.forkChild(
        AI.generateObject({
          adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL, maxRetries: 0 }),
          messages: [{ role: "user", content: "?" }],
          schema: Ticket
        })
      )
      // The request has reached the server.
      while (server.requests.length === 0) yield* Effect.sleep("5 millis")
      yield* Fiber.interrupt(running)
      while (server.aborted() === 0) yield* Effect.sleep("5 millis")
      expect(server.aborted()).toBe(1)
    }).pipe(Effect.scoped))

  const failing = (endpoint: { readonly failure?: { readonly status: number }; readonly malformed?: boolean }) =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([], { embeddings: endpoint })
      return yield* Effect.flip(
        AI.embed({ adapter: createOpenaiEmbedding("text-embedding-3-small", "test-key", { baseURL: server.baseURL, maxRetries: 0 }), input: ["a"] })
      )
    }).pipe(Effect.scoped)

  it.live("HTTP 429 is AiError rate-limited, with the status", () =>
    Effect.map(failing({ failure: { status: 429 } }), (error) => expect(error).toMatchObject({ reason: "rate-limited", status: 429 })))

  it.live("HTTP 500 is AiError provider, with the status", () =>
    Effect.map(failing({ failure: { status: 500 } }), (error) => expect(error).toMatchObject({ reason: "provider", status: 500 })))

  it.live("HTTP 400 is AiError invalid-request", () =>
    Effect.map(failing({ failure: { status: 400 } }), (error) => expect(error).toMatchObject({ reason: "invalid-request", status: 400 })))

  it.live("a malformed body is AiError decode", () =>
    Effect.map(failing({ malformed: true }), (error) => expect(error).toMatchObject({ reason: "decode" })))

  it.live("a failing activity prints nothing to the console: its failure is the typed AiError, not also core's error log", () =>
    Effect.gen(function*() {
      const printed: Array<unknown> = []
      const spies = (["error", "warn", "log", "info"] as const).map((level) =>
        vi.spyOn(console, level).mockImplementation((...args) => void printed.push(args))
      )
      const error = yield* failing({ failure: { status: 500 } }).pipe(Effect.ensuring(Effect.sync(() => spies.forEach((spy) => spy.mockRestore()))))
      expect(error).toMatchObject({ _tag: "AiError", reason: "provider" })
      expect(printed).toEqual([])
    }))

  // Every activity classifies the provider's answer the same way, whichever endpoint it calls.
  const statuses = [[401, "authentication"], [403, "authentication"], [429, "rate-limited"], [404, "invalid-request"], [500, "provider"]] as const
  const activities: ReadonlyArray<readonly [string, (status: number) => Effect.Effect<unknown, AI.AiError, Scope.Scope>]> = [
    ["summarize", (status) =>
      Effect.flatMap(fakeOpenAI([{ failure: { status } }]), (server) =>
        AI.summarize({ adapter: createOpenaiSummarize("gpt-5.2", "test-key", { baseURL: server.baseURL, maxRetries: 0 }), text: "A text." }))],
    ["embed", (status) =>
      Effect.flatMap(fakeOpenAI([], { embeddings: { failure: { status } } }), (server) =>
        AI.embed({ adapter: createOpenaiEmbedding("text-embedding-3-small", "test-key", { baseURL: server.baseURL, maxRetries: 0 }), input: ["a"] }))],
    ["generateImage", (status) =>
      Effect.flatMap(fakeOpenAI([], { images: { failure: { status } } }), (server) =>
        AI.generateImage({ adapter: createOpenaiImage("gpt-image-1", "test-key", { baseURL: server.baseURL, maxRetries: 0 }), prompt: "a harbour" }))],
    ["generateObject", (status) =>
      Effect.flatMap(fakeOpenAI([{ failure: { status } }]), (server) =>
        AI.generateObject({
          adapter: createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL, maxRetries: 0 }),
          messages: [{ role: "user", content: "?" }],
          schema: Ticket
        }))]
  ]
  for (const [activity, run] of activities) {
    for (const [status, reason] of statuses) {
      it.live(`${activity}: HTTP ${status} is AiError ${reason}, with the status`, () =>
        Effect.map(Effect.flip(Effect.scoped(run(status))), (error) => expect(error).toMatchObject({ _tag: "AiError", reason, status })))
    }
  }
})
