/**
 * The activities of TanStack AI beside chat, as Effects: summarize, embed,
 * rerank, images, speech, transcription, audio, video, and structured output.
 *
 * Each `AI.<activity>(options)` takes the options of the core activity and
 * returns an `Effect` of its result that fails with one typed error,
 * {@link AiError}, whose `reason` says what went wrong (a rate limit, a bad
 * request, the provider, a response that does not decode, an abort).
 * Interrupting the fiber aborts the provider request: the activity's
 * `abortSignal` is the Effect's own. Where core streams (`stream: true`), the
 * `…Stream` form is an Effect `Stream` of the same AG-UI chunks. Every
 * activity runs in a span named after it (`AI.summarize`, …) with the
 * OpenTelemetry GenAI attributes and, where core reports it, the token usage.
 *
 * @since 0.1.0
 */
import {
  chat as coreChat,
  embed as coreEmbed,
  generateAudio as coreGenerateAudio,
  generateImage as coreGenerateImage,
  generateSpeech as coreGenerateSpeech,
  generateTranscription as coreGenerateTranscription,
  generateVideo as coreGenerateVideo,
  getVideoJobStatus as coreGetVideoJobStatus,
  rerank as coreRerank,
  summarize as coreSummarize
} from "@tanstack/ai"
import type { AnyTextAdapter, EmbeddingAdapter, StreamChunk } from "@tanstack/ai"
import type {
  AudioActivityOptions,
  AudioAdapter,
  ImageActivityOptions,
  ImageAdapter,
  RerankActivityOptions,
  RerankAdapter,
  SummarizeActivityOptions,
  SummarizeAdapter,
  TranscriptionActivityOptions,
  TranscriptionAdapter,
  TTSActivityOptions,
  TTSAdapter,
  VideoAdapter,
  VideoCreateOptions
} from "@tanstack/ai/adapters"
import type { TextActivityOptions } from "@tanstack/ai/adapters"
import { Effect, Predicate, Schema, Stream } from "effect"
import { scopedAbortController } from "./internal/abort.ts"
import { fromAsyncIterableBatched } from "./internal/batched.ts"
import { unwrapScoped } from "./internal/scoped.ts"
import { addReportedUsage, type Usage } from "./internal/agui.ts"
import { usageAttributes } from "./internal/telemetry.ts"
import { type AiError, toAiError } from "./AiError.ts"
import type { ChatMessage } from "./Chat.ts"
import { assertObjectRoot, toolSchema, type ToolSchemaOptions } from "./ToolSchema.ts"

interface ModelOf {
  readonly model: string
  readonly name: string
}

const spanOf = (operation: string, adapter: ModelOf) => ({
  attributes: {
    "gen_ai.operation.name": operation,
    "gen_ai.request.model": adapter.model,
    "gen_ai.provider.name": adapter.name
  }
})

// A span per call need not capture a stack trace.
const noStackTrace = { captureStackTrace: false } as const

/** The token usage a result reports, in core's form or AG-UI's, on the current span. */
const annotateUsage = (result: unknown) => {
  if (!Predicate.hasProperty(result, "usage")) return Effect.void
  const usage: Usage = { input: 0, output: 0 }
  addReportedUsage(usage, result.usage)
  return Effect.annotateCurrentSpan(usageAttributes(usage))
}

/** Runs one activity call: aborted on interruption, typed on failure, traced. */
// Every core activity call below passes `debug: false` before the caller's
// options: core would print each failure to the console (`❌
// [tanstack-ai:errors]`) while the Effect returns it as a typed AiError. A
// caller who wants core's logs passes `debug` and gets them.
const runActivity = <A>(
  activity: string,
  operation: string,
  adapter: ModelOf,
  run: (signal: AbortSignal) => Promise<A>
): Effect.Effect<A, AiError> =>
  Effect.suspend(() => {
    // The signal Effect hands the promise, kept to tell an abort from a failure.
    let requestSignal: AbortSignal | undefined
    return Effect.tryPromise({
      try: (signal) => {
        requestSignal = signal
        return run(signal)
      },
      catch: (error) => toAiError(activity, error, requestSignal ?? new AbortController().signal)
    })
  }).pipe(
    Effect.tap(annotateUsage),
    Effect.withSpan(`AI.${activity}`, spanOf(operation, adapter), noStackTrace)
  )

/** Runs one streaming activity: its request is aborted when the stream stops. */
const streamActivity = (
  activity: string,
  operation: string,
  adapter: ModelOf,
  start: (signal: AbortSignal) => AsyncIterable<StreamChunk>
): Stream.Stream<StreamChunk, AiError> =>
  unwrapScoped(
    Effect.gen(function*() {
      const controller = yield* scopedAbortController()
      return fromAsyncIterableBatched(start(controller.signal), (error) => toAiError(activity, error, controller.signal))
    })
  ).pipe(Stream.withSpan(`AI.${activity}`, { ...spanOf(operation, adapter), ...noStackTrace }))

/** The options of a core activity, without the parts this module owns. */
type Options<O> = Omit<O, "stream" | "abortSignal">

/**
 * Summarizes a text.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { openaiSummarize } from "@tanstack/ai-openai"
 *
 * const summary = AI.summarize({ adapter: openaiSummarize("gpt-5.2"), text: "A long text…", maxLength: 50 })
 * ```
 *
 * @since 0.1.0
 * @category activities
 */
export const summarize = <TAdapter extends SummarizeAdapter<string, object>>(
  options: Options<SummarizeActivityOptions<TAdapter, false>>
) =>
  runActivity("summarize", "summarize", options.adapter, (abortSignal) =>
    coreSummarize<TAdapter, false>({ debug: false, ...options, stream: false, abortSignal } as SummarizeActivityOptions<TAdapter, false>))

/**
 * Summarizes a text as a Stream of AG-UI chunks.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { openaiSummarize } from "@tanstack/ai-openai"
 * import { Stream } from "effect"
 *
 * const chunks = AI.summarizeStream({ adapter: openaiSummarize("gpt-5.2"), text: "A long text…" }).pipe(Stream.runCollect)
 * ```
 *
 * @since 0.1.0
 * @category activities
 */
export const summarizeStream = <TAdapter extends SummarizeAdapter<string, object>>(
  options: Options<SummarizeActivityOptions<TAdapter, true>>
): Stream.Stream<StreamChunk, AiError> =>
  streamActivity("summarize", "summarize", options.adapter, (abortSignal) =>
    coreSummarize<TAdapter, true>({ debug: false, ...options, stream: true, abortSignal } as SummarizeActivityOptions<TAdapter, true>))

/**
 * Embeds texts. Core's embedding activity takes no abort signal: an
 * interrupted `embed` stops waiting, and the request runs to its end.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { openaiEmbedding } from "@tanstack/ai-openai"
 *
 * const vectors = AI.embed({ adapter: openaiEmbedding("text-embedding-3-small"), input: ["first", "second"] })
 * ```
 *
 * @since 0.1.0
 * @category activities
 */
export const embed = <TAdapter extends EmbeddingAdapter<string, any, any, any>>(
  options: Parameters<typeof coreEmbed<TAdapter>>[0]
) => runActivity("embed", "embeddings", options.adapter, () => coreEmbed<TAdapter>({ debug: false, ...options }))

/**
 * Reranks documents against a query.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import type { AnyRerankAdapter } from "@tanstack/ai"
 *
 * declare const adapter: AnyRerankAdapter
 * const ranked = AI.rerank({ adapter, query: "refunds", documents: ["Shipping policy", "Refund policy"] })
 * ```
 *
 * @since 0.1.0
 * @category activities
 */
export const rerank = <TAdapter extends RerankAdapter<string, any>>(
  options: Options<RerankActivityOptions<TAdapter>>
) =>
  runActivity("rerank", "rerank", options.adapter, (abortSignal) =>
    coreRerank<TAdapter>({ debug: false, ...options, abortSignal } as RerankActivityOptions<TAdapter>))

/**
 * Generates images.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { openaiImage } from "@tanstack/ai-openai"
 *
 * const images = AI.generateImage({ adapter: openaiImage("gpt-image-1"), prompt: "A calm harbour at dawn" })
 * ```
 *
 * @since 0.1.0
 * @category activities
 */
export const generateImage = <TAdapter extends ImageAdapter<string, any, any, any>>(
  options: Options<ImageActivityOptions<TAdapter, false>>
) =>
  runActivity("generateImage", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateImage<TAdapter, false>({ debug: false, ...options, stream: false, abortSignal } as ImageActivityOptions<TAdapter, false>))

/**
 * Generates images as a Stream of AG-UI chunks.
 *
 * @since 0.1.0
 * @category activities
 */
export const generateImageStream = <TAdapter extends ImageAdapter<string, any, any, any>>(
  options: Options<ImageActivityOptions<TAdapter, true>>
): Stream.Stream<StreamChunk, AiError> =>
  streamActivity("generateImage", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateImage<TAdapter, true>({ debug: false, ...options, stream: true, abortSignal } as ImageActivityOptions<TAdapter, true>))

/**
 * Generates speech from text.
 *
 * @since 0.1.0
 * @category activities
 */
export const generateSpeech = <TAdapter extends TTSAdapter<string, any>>(
  options: Options<TTSActivityOptions<TAdapter, false>>
) =>
  runActivity("generateSpeech", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateSpeech<TAdapter, false>({ debug: false, ...options, stream: false, abortSignal } as TTSActivityOptions<TAdapter, false>))

/**
 * Generates speech as a Stream of AG-UI chunks.
 *
 * @since 0.1.0
 * @category activities
 */
export const generateSpeechStream = <TAdapter extends TTSAdapter<string, any>>(
  options: Options<TTSActivityOptions<TAdapter, true>>
): Stream.Stream<StreamChunk, AiError> =>
  streamActivity("generateSpeech", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateSpeech<TAdapter, true>({ debug: false, ...options, stream: true, abortSignal } as TTSActivityOptions<TAdapter, true>))

/**
 * Transcribes audio.
 *
 * @since 0.1.0
 * @category activities
 */
export const generateTranscription = <TAdapter extends TranscriptionAdapter<string, any>>(
  options: Options<TranscriptionActivityOptions<TAdapter, false>>
) =>
  runActivity("generateTranscription", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateTranscription<TAdapter, false>(
      { debug: false, ...options, stream: false, abortSignal } as TranscriptionActivityOptions<TAdapter, false>
    ))

/**
 * Transcribes audio as a Stream of AG-UI chunks.
 *
 * @since 0.1.0
 * @category activities
 */
export const generateTranscriptionStream = <TAdapter extends TranscriptionAdapter<string, any>>(
  options: Options<TranscriptionActivityOptions<TAdapter, true>>
): Stream.Stream<StreamChunk, AiError> =>
  streamActivity("generateTranscription", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateTranscription<TAdapter, true>(
      { debug: false, ...options, stream: true, abortSignal } as TranscriptionActivityOptions<TAdapter, true>
    ))

/**
 * Generates audio (music, sound).
 *
 * @since 0.1.0
 * @category activities
 */
export const generateAudio = <TAdapter extends AudioAdapter<string, any>>(
  options: Options<AudioActivityOptions<TAdapter, false>>
) =>
  runActivity("generateAudio", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateAudio<TAdapter, false>({ debug: false, ...options, stream: false, abortSignal } as AudioActivityOptions<TAdapter, false>))

/**
 * Generates audio as a Stream of AG-UI chunks.
 *
 * @since 0.1.0
 * @category activities
 */
export const generateAudioStream = <TAdapter extends AudioAdapter<string, any>>(
  options: Options<AudioActivityOptions<TAdapter, true>>
): Stream.Stream<StreamChunk, AiError> =>
  streamActivity("generateAudio", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateAudio<TAdapter, true>({ debug: false, ...options, stream: true, abortSignal } as AudioActivityOptions<TAdapter, true>))

/**
 * Starts a video job; poll it with {@link getVideoJobStatus}.
 *
 * @since 0.1.0
 * @category activities
 */
export const generateVideo = <TAdapter extends VideoAdapter<string, any, any, any, any, any>>(
  options: Options<VideoCreateOptions<TAdapter, false>>
) =>
  runActivity("generateVideo", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateVideo<TAdapter, false>({ debug: false, ...options, stream: false, abortSignal } as VideoCreateOptions<TAdapter, false>))

/**
 * Generates a video as a Stream of AG-UI chunks, polling the job until it ends.
 *
 * @since 0.1.0
 * @category activities
 */
export const generateVideoStream = <TAdapter extends VideoAdapter<string, any, any, any, any, any>>(
  options: Options<VideoCreateOptions<TAdapter, true>>
): Stream.Stream<StreamChunk, AiError> =>
  streamActivity("generateVideo", "generate_content", options.adapter, (abortSignal) =>
    coreGenerateVideo<TAdapter, true>({ debug: false, ...options, stream: true, abortSignal } as VideoCreateOptions<TAdapter, true>))

/**
 * What {@link getVideoJobStatus} reports of a job: its status, progress, URL
 * and usage, as core reports them (core's own name for it is not exported).
 *
 * @since 0.1.0
 * @category models
 */
export type VideoJobStatus = Awaited<ReturnType<typeof coreGetVideoJobStatus>>

/**
 * The status of a video job.
 *
 * @since 0.1.0
 * @category activities
 */
export const getVideoJobStatus = <TAdapter extends VideoAdapter<string, any, any, any, any, any>>(
  options: Parameters<typeof coreGetVideoJobStatus<TAdapter>>[0]
): Effect.Effect<VideoJobStatus, AiError> => runActivity("getVideoJobStatus", "generate_content", options.adapter, () => coreGetVideoJobStatus<TAdapter>(options))

/**
 * Options of {@link generateObject}.
 *
 * @since 0.1.0
 * @category models
 */
export interface GenerateObjectOptions<TAdapter extends AnyTextAdapter, S extends Schema.Codec<any, any, never, any>>
  extends Omit<TextActivityOptions<TAdapter, undefined, false>, "outputSchema" | "stream" | "abortController" | "tools" | "messages">
{
  /** The conversation; a readonly array is accepted, since it is only read. */
  readonly messages?: ReadonlyArray<ChatMessage<TAdapter>>
  /** The Effect Schema of the object: sent as a strict JSON Schema, and decoded with. */
  readonly schema: S
  /** `{ strict: false }` for a schema outside OpenAI's strict subset; see `AI.toolSchema`. */
  readonly schemaOptions?: ToolSchemaOptions | undefined
}

/**
 * Asks the model for an object of an Effect Schema. The schema goes to the
 * provider as the strict JSON Schema `AI.toolSchema` makes (closed objects,
 * inlined definitions), and the answer is decoded with it: an answer that
 * does not fit fails with `AiError` (reason `decode`) whose message names
 * the path. A strict schema whose root is not an object throws a
 * `ToolSchemaError` at once, since OpenAI's strict output refuses it.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { openaiText } from "@tanstack/ai-openai"
 * import { Schema } from "effect"
 *
 * const Ticket = Schema.Struct({ title: Schema.String, priority: Schema.Literals(["low", "high"]) })
 *
 * const ticket = AI.generateObject({
 *   adapter: openaiText("gpt-5.2"),
 *   messages: [{ role: "user", content: "The checkout page is down for everyone." }],
 *   schema: Ticket
 * }) // Effect<{ readonly title: string; readonly priority: "low" | "high" }, AI.AiError>
 * ```
 *
 * @since 0.1.0
 * @category activities
 */
export const generateObject = <TAdapter extends AnyTextAdapter, S extends Schema.Codec<any, any, never, any>>(
  options: GenerateObjectOptions<TAdapter, S>
): Effect.Effect<S["Type"], AiError> => {
  const { schema, schemaOptions, ...chatOptions } = options
  const outputSchema = toolSchema(schema, schemaOptions)
  // Strict structured output takes an object at the root; without strict mode the provider decides.
  if (outputSchema.strict) assertObjectRoot(outputSchema, "The schema of a strict structured output")
  return runActivity("generateObject", "chat", options.adapter, (signal) => {
    const abortController = new AbortController()
    signal.addEventListener("abort", () => abortController.abort(signal.reason), { once: true })
    // Core's options are generic over the schema it infers; this call passes a checked tool schema.
    return coreChat({
      debug: false,
      ...chatOptions,
      // A copy: core's option is a mutable array, and the caller's may be readonly.
      ...(chatOptions.messages === undefined ? {} : { messages: [...chatOptions.messages] }),
      outputSchema,
      stream: false,
      abortController
    } as unknown as Parameters<typeof coreChat>[0]) as Promise<S["Type"]>
  })
}
