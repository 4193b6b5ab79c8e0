/**
 * Scripted adapters for the activities beside chat: each answers from a
 * function of the options it receives, records those options, and honours
 * the abort signal core forwards, so that a test can check what the
 * provider was asked and that an interrupted activity aborted its request.
 *
 * @since 0.1.0
 */
import {
  BaseAudioAdapter,
  BaseEmbeddingAdapter,
  BaseImageAdapter,
  BaseRerankAdapter,
  BaseSummarizeAdapter,
  BaseTranscriptionAdapter,
  BaseTTSAdapter,
  BaseVideoAdapter
} from "@tanstack/ai/adapters"

type OptionsOf<F> = F extends (options: infer O) => unknown ? O : never
type ResultOf<F> = F extends (...args: ReadonlyArray<any>) => Promise<infer R> ? R : never

/**
 * How a scripted adapter answers: a value of the activity's result, or a
 * function of the options (which may return a promise, or throw).
 *
 * @since 0.1.0
 * @category models
 */
export type ScriptedAnswer<Options, Result> = Result | ((options: Options) => Result | Promise<Result>)

/** Answers a call: records it, and rejects when the forwarded signal aborts first. */
const answer = async <Options, Result>(
  calls: Array<Options>,
  script: ScriptedAnswer<Options, Result>,
  options: Options
): Promise<Result> => {
  calls.push(options)
  const signal = (options as { readonly abortSignal?: AbortSignal }).abortSignal
  const result = Promise.resolve(typeof script === "function" ? (script as (options: Options) => Result | Promise<Result>)(options) : script)
  if (signal === undefined) return result
  return Promise.race([
    result,
    new Promise<never>((_, reject) => {
      if (signal.aborted) reject(signal.reason)
      signal.addEventListener("abort", () => reject(signal.reason), { once: true })
    })
  ])
}

/**
 * A summarize adapter that plays a script.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { scriptedSummarize } from "@tanstack/ai-effect/testing"
 *
 * const adapter = scriptedSummarize(({ text }) => ({ id: "s1", model: "scripted", summary: text.slice(0, 10), usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 } }))
 * const summary = AI.summarize({ adapter, text: "A long text about many things" })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
type SummarizeCall = OptionsOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>

export const scriptedSummarize = (
  script: ScriptedAnswer<SummarizeCall, ResultOf<BaseSummarizeAdapter["summarize"]>>
) =>
  new (class ScriptedSummarizeAdapter extends BaseSummarizeAdapter<"scripted", object> {
    readonly name = "scripted"
    readonly calls: Array<SummarizeCall> = []
    summarize(options: SummarizeCall) {
      return answer(this.calls, script, options)
    }
  })({}, "scripted")

/**
 * An embedding adapter that plays a script.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { scriptedEmbedding } from "@tanstack/ai-effect/testing"
 *
 * const adapter = scriptedEmbedding(({ input }) => ({
 *   id: "e1",
 *   model: "scripted",
 *   embeddings: input.map((_, index) => ({ vector: [index, 1], index }))
 * }))
 * const vectors = AI.embed({ adapter, input: ["a", "b"] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedEmbedding = (
  script: ScriptedAnswer<OptionsOf<BaseEmbeddingAdapter["createEmbeddings"]>, ResultOf<BaseEmbeddingAdapter["createEmbeddings"]>>
) =>
  new (class ScriptedEmbeddingAdapter extends BaseEmbeddingAdapter<"scripted"> {
    readonly name = "scripted"
    readonly calls: Array<OptionsOf<BaseEmbeddingAdapter["createEmbeddings"]>> = []
    createEmbeddings(options: OptionsOf<BaseEmbeddingAdapter["createEmbeddings"]>) {
      return answer(this.calls, script, options)
    }
  })("scripted")

/**
 * An image adapter that plays a script.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedImage = (
  script: ScriptedAnswer<OptionsOf<BaseImageAdapter["generateImages"]>, ResultOf<BaseImageAdapter["generateImages"]>>
) =>
  new (class ScriptedImageAdapter extends BaseImageAdapter<"scripted"> {
    readonly name = "scripted"
    readonly calls: Array<OptionsOf<BaseImageAdapter["generateImages"]>> = []
    generateImages(options: OptionsOf<BaseImageAdapter["generateImages"]>) {
      return answer(this.calls, script, options)
    }
  })("scripted")

/**
 * A text-to-speech adapter that plays a script.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedSpeech = (
  script: ScriptedAnswer<OptionsOf<BaseTTSAdapter["generateSpeech"]>, ResultOf<BaseTTSAdapter["generateSpeech"]>>
) =>
  new (class ScriptedSpeechAdapter extends BaseTTSAdapter<"scripted"> {
    readonly name = "scripted"
    readonly calls: Array<OptionsOf<BaseTTSAdapter["generateSpeech"]>> = []
    generateSpeech(options: OptionsOf<BaseTTSAdapter["generateSpeech"]>) {
      return answer(this.calls, script, options)
    }
  })("scripted")

/**
 * A transcription adapter that plays a script.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedTranscription = (
  script: ScriptedAnswer<OptionsOf<BaseTranscriptionAdapter["transcribe"]>, ResultOf<BaseTranscriptionAdapter["transcribe"]>>
) =>
  new (class ScriptedTranscriptionAdapter extends BaseTranscriptionAdapter<"scripted"> {
    readonly name = "scripted"
    readonly calls: Array<OptionsOf<BaseTranscriptionAdapter["transcribe"]>> = []
    transcribe(options: OptionsOf<BaseTranscriptionAdapter["transcribe"]>) {
      return answer(this.calls, script, options)
    }
  })("scripted")

/**
 * An audio adapter that plays a script.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedAudio = (
  script: ScriptedAnswer<OptionsOf<BaseAudioAdapter["generateAudio"]>, ResultOf<BaseAudioAdapter["generateAudio"]>>
) =>
  new (class ScriptedAudioAdapter extends BaseAudioAdapter<"scripted"> {
    readonly name = "scripted"
    readonly calls: Array<OptionsOf<BaseAudioAdapter["generateAudio"]>> = []
    generateAudio(options: OptionsOf<BaseAudioAdapter["generateAudio"]>) {
      return answer(this.calls, script, options)
    }
  })("scripted")

/**
 * A rerank adapter that plays a script.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedRerank = (
  script: ScriptedAnswer<OptionsOf<BaseRerankAdapter["rerank"]>, ResultOf<BaseRerankAdapter["rerank"]>>
) =>
  new (class ScriptedRerankAdapter extends BaseRerankAdapter<"scripted"> {
    readonly name = "scripted"
    readonly calls: Array<OptionsOf<BaseRerankAdapter["rerank"]>> = []
    rerank(options: OptionsOf<BaseRerankAdapter["rerank"]>) {
      return answer(this.calls, script, options)
    }
  })({}, "scripted")

/**
 * A video adapter that plays a script: the job it starts, and the status and
 * URL it reports for any job.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedVideo = (script: {
  readonly job: ScriptedAnswer<OptionsOf<BaseVideoAdapter["createVideoJob"]>, ResultOf<BaseVideoAdapter["createVideoJob"]>>
  readonly status: (jobId: string) => ResultOf<BaseVideoAdapter["getVideoStatus"]>
  readonly url: (jobId: string) => ResultOf<BaseVideoAdapter["getVideoUrl"]>
}) =>
  new (class ScriptedVideoAdapter extends BaseVideoAdapter<"scripted"> {
    readonly name = "scripted"
    readonly calls: Array<OptionsOf<BaseVideoAdapter["createVideoJob"]>> = []
    createVideoJob(options: OptionsOf<BaseVideoAdapter["createVideoJob"]>) {
      return answer(this.calls, script.job, options)
    }
    getVideoStatus(jobId: string) {
      return Promise.resolve(script.status(jobId))
    }
    getVideoUrl(jobId: string) {
      return Promise.resolve(script.url(jobId))
    }
  })({}, "scripted")
