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

/** The options of an adapter method. */
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
 * A summarize adapter that plays a script. It records the options of every call in `calls`.
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
 * @category models
 */
export class ScriptedSummarizeAdapter extends BaseSummarizeAdapter<"scripted", object> {
  readonly name = "scripted"
  readonly calls: Array<OptionsOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>> = []
  readonly #script: ScriptedAnswer<OptionsOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>, ResultOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>>
  constructor(script: ScriptedAnswer<OptionsOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>, ResultOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>>) {
    super({}, "scripted")
    this.#script = script
  }
  summarize(options: OptionsOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>): Promise<ResultOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>> {
    return answer(this.calls, this.#script, options)
  }
}

/**
 * A summarize adapter that plays a script. Shorthand for `new ScriptedSummarizeAdapter(script)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedSummarize = (script: ScriptedAnswer<OptionsOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>, ResultOf<BaseSummarizeAdapter<"scripted", object>["summarize"]>>): ScriptedSummarizeAdapter => new ScriptedSummarizeAdapter(script)

/**
 * An embedding adapter that plays a script. It records the options of every call in `calls`.
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
 * @category models
 */
export class ScriptedEmbeddingAdapter extends BaseEmbeddingAdapter<"scripted"> {
  readonly name = "scripted"
  readonly calls: Array<OptionsOf<BaseEmbeddingAdapter<"scripted">["createEmbeddings"]>> = []
  readonly #script: ScriptedAnswer<OptionsOf<BaseEmbeddingAdapter<"scripted">["createEmbeddings"]>, ResultOf<BaseEmbeddingAdapter<"scripted">["createEmbeddings"]>>
  constructor(script: ScriptedAnswer<OptionsOf<BaseEmbeddingAdapter<"scripted">["createEmbeddings"]>, ResultOf<BaseEmbeddingAdapter<"scripted">["createEmbeddings"]>>) {
    super("scripted")
    this.#script = script
  }
  createEmbeddings(options: OptionsOf<BaseEmbeddingAdapter<"scripted">["createEmbeddings"]>): Promise<ResultOf<BaseEmbeddingAdapter<"scripted">["createEmbeddings"]>> {
    return answer(this.calls, this.#script, options)
  }
}

/**
 * An embedding adapter that plays a script. Shorthand for `new ScriptedEmbeddingAdapter(script)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedEmbedding = (script: ScriptedAnswer<OptionsOf<BaseEmbeddingAdapter<"scripted">["createEmbeddings"]>, ResultOf<BaseEmbeddingAdapter<"scripted">["createEmbeddings"]>>): ScriptedEmbeddingAdapter => new ScriptedEmbeddingAdapter(script)

/**
 * An image adapter that plays a script. It records the options of every call in `calls`.
 *
 * @since 0.1.0
 * @category models
 */
export class ScriptedImageAdapter extends BaseImageAdapter<"scripted"> {
  readonly name = "scripted"
  readonly calls: Array<OptionsOf<BaseImageAdapter<"scripted">["generateImages"]>> = []
  readonly #script: ScriptedAnswer<OptionsOf<BaseImageAdapter<"scripted">["generateImages"]>, ResultOf<BaseImageAdapter<"scripted">["generateImages"]>>
  constructor(script: ScriptedAnswer<OptionsOf<BaseImageAdapter<"scripted">["generateImages"]>, ResultOf<BaseImageAdapter<"scripted">["generateImages"]>>) {
    super("scripted")
    this.#script = script
  }
  generateImages(options: OptionsOf<BaseImageAdapter<"scripted">["generateImages"]>): Promise<ResultOf<BaseImageAdapter<"scripted">["generateImages"]>> {
    return answer(this.calls, this.#script, options)
  }
}

/**
 * An image adapter that plays a script. Shorthand for `new ScriptedImageAdapter(script)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedImage = (script: ScriptedAnswer<OptionsOf<BaseImageAdapter<"scripted">["generateImages"]>, ResultOf<BaseImageAdapter<"scripted">["generateImages"]>>): ScriptedImageAdapter => new ScriptedImageAdapter(script)

/**
 * A text-to-speech adapter that plays a script. It records the options of every call in `calls`.
 *
 * @since 0.1.0
 * @category models
 */
export class ScriptedSpeechAdapter extends BaseTTSAdapter<"scripted"> {
  readonly name = "scripted"
  readonly calls: Array<OptionsOf<BaseTTSAdapter<"scripted">["generateSpeech"]>> = []
  readonly #script: ScriptedAnswer<OptionsOf<BaseTTSAdapter<"scripted">["generateSpeech"]>, ResultOf<BaseTTSAdapter<"scripted">["generateSpeech"]>>
  constructor(script: ScriptedAnswer<OptionsOf<BaseTTSAdapter<"scripted">["generateSpeech"]>, ResultOf<BaseTTSAdapter<"scripted">["generateSpeech"]>>) {
    super("scripted")
    this.#script = script
  }
  generateSpeech(options: OptionsOf<BaseTTSAdapter<"scripted">["generateSpeech"]>): Promise<ResultOf<BaseTTSAdapter<"scripted">["generateSpeech"]>> {
    return answer(this.calls, this.#script, options)
  }
}

/**
 * A text-to-speech adapter that plays a script. Shorthand for `new ScriptedSpeechAdapter(script)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedSpeech = (script: ScriptedAnswer<OptionsOf<BaseTTSAdapter<"scripted">["generateSpeech"]>, ResultOf<BaseTTSAdapter<"scripted">["generateSpeech"]>>): ScriptedSpeechAdapter => new ScriptedSpeechAdapter(script)

/**
 * A transcription adapter that plays a script. It records the options of every call in `calls`.
 *
 * @since 0.1.0
 * @category models
 */
export class ScriptedTranscriptionAdapter extends BaseTranscriptionAdapter<"scripted"> {
  readonly name = "scripted"
  readonly calls: Array<OptionsOf<BaseTranscriptionAdapter<"scripted">["transcribe"]>> = []
  readonly #script: ScriptedAnswer<OptionsOf<BaseTranscriptionAdapter<"scripted">["transcribe"]>, ResultOf<BaseTranscriptionAdapter<"scripted">["transcribe"]>>
  constructor(script: ScriptedAnswer<OptionsOf<BaseTranscriptionAdapter<"scripted">["transcribe"]>, ResultOf<BaseTranscriptionAdapter<"scripted">["transcribe"]>>) {
    super("scripted")
    this.#script = script
  }
  transcribe(options: OptionsOf<BaseTranscriptionAdapter<"scripted">["transcribe"]>): Promise<ResultOf<BaseTranscriptionAdapter<"scripted">["transcribe"]>> {
    return answer(this.calls, this.#script, options)
  }
}

/**
 * A transcription adapter that plays a script. Shorthand for `new ScriptedTranscriptionAdapter(script)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedTranscription = (script: ScriptedAnswer<OptionsOf<BaseTranscriptionAdapter<"scripted">["transcribe"]>, ResultOf<BaseTranscriptionAdapter<"scripted">["transcribe"]>>): ScriptedTranscriptionAdapter => new ScriptedTranscriptionAdapter(script)

/**
 * An audio adapter that plays a script. It records the options of every call in `calls`.
 *
 * @since 0.1.0
 * @category models
 */
export class ScriptedAudioAdapter extends BaseAudioAdapter<"scripted"> {
  readonly name = "scripted"
  readonly calls: Array<OptionsOf<BaseAudioAdapter<"scripted">["generateAudio"]>> = []
  readonly #script: ScriptedAnswer<OptionsOf<BaseAudioAdapter<"scripted">["generateAudio"]>, ResultOf<BaseAudioAdapter<"scripted">["generateAudio"]>>
  constructor(script: ScriptedAnswer<OptionsOf<BaseAudioAdapter<"scripted">["generateAudio"]>, ResultOf<BaseAudioAdapter<"scripted">["generateAudio"]>>) {
    super("scripted")
    this.#script = script
  }
  generateAudio(options: OptionsOf<BaseAudioAdapter<"scripted">["generateAudio"]>): Promise<ResultOf<BaseAudioAdapter<"scripted">["generateAudio"]>> {
    return answer(this.calls, this.#script, options)
  }
}

/**
 * An audio adapter that plays a script. Shorthand for `new ScriptedAudioAdapter(script)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedAudio = (script: ScriptedAnswer<OptionsOf<BaseAudioAdapter<"scripted">["generateAudio"]>, ResultOf<BaseAudioAdapter<"scripted">["generateAudio"]>>): ScriptedAudioAdapter => new ScriptedAudioAdapter(script)

/**
 * A rerank adapter that plays a script. It records the options of every call in `calls`.
 *
 * @since 0.1.0
 * @category models
 */
export class ScriptedRerankAdapter extends BaseRerankAdapter<"scripted", object> {
  readonly name = "scripted"
  readonly calls: Array<OptionsOf<BaseRerankAdapter<"scripted", object>["rerank"]>> = []
  readonly #script: ScriptedAnswer<OptionsOf<BaseRerankAdapter<"scripted", object>["rerank"]>, ResultOf<BaseRerankAdapter<"scripted", object>["rerank"]>>
  constructor(script: ScriptedAnswer<OptionsOf<BaseRerankAdapter<"scripted", object>["rerank"]>, ResultOf<BaseRerankAdapter<"scripted", object>["rerank"]>>) {
    super({}, "scripted")
    this.#script = script
  }
  rerank(options: OptionsOf<BaseRerankAdapter<"scripted", object>["rerank"]>): Promise<ResultOf<BaseRerankAdapter<"scripted", object>["rerank"]>> {
    return answer(this.calls, this.#script, options)
  }
}

/**
 * A rerank adapter that plays a script. Shorthand for `new ScriptedRerankAdapter(script)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedRerank = (script: ScriptedAnswer<OptionsOf<BaseRerankAdapter<"scripted", object>["rerank"]>, ResultOf<BaseRerankAdapter<"scripted", object>["rerank"]>>): ScriptedRerankAdapter => new ScriptedRerankAdapter(script)

/**
 * A video adapter that plays a script: the job it starts, and the status and
 * URL it reports for any job. It records the options of every job it starts
 * in `calls`.
 *
 * @since 0.1.0
 * @category models
 */
export class ScriptedVideoAdapter extends BaseVideoAdapter<"scripted"> {
  readonly name = "scripted"
  readonly calls: Array<OptionsOf<BaseVideoAdapter["createVideoJob"]>> = []
  readonly #script: ScriptedVideo
  constructor(script: ScriptedVideo) {
    super({}, "scripted")
    this.#script = script
  }
  createVideoJob(options: OptionsOf<BaseVideoAdapter["createVideoJob"]>): Promise<ResultOf<BaseVideoAdapter["createVideoJob"]>> {
    return answer(this.calls, this.#script.job, options)
  }
  getVideoStatus(jobId: string): Promise<ResultOf<BaseVideoAdapter["getVideoStatus"]>> {
    return Promise.resolve(this.#script.status(jobId))
  }
  getVideoUrl(jobId: string): Promise<ResultOf<BaseVideoAdapter["getVideoUrl"]>> {
    return Promise.resolve(this.#script.url(jobId))
  }
}

/**
 * The script of a {@link ScriptedVideoAdapter}.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedVideo {
  readonly job: ScriptedAnswer<OptionsOf<BaseVideoAdapter["createVideoJob"]>, ResultOf<BaseVideoAdapter["createVideoJob"]>>
  readonly status: (jobId: string) => ResultOf<BaseVideoAdapter["getVideoStatus"]>
  readonly url: (jobId: string) => ResultOf<BaseVideoAdapter["getVideoUrl"]>
}

/**
 * A video adapter that plays a script. Shorthand for
 * `new ScriptedVideoAdapter(script)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedVideo = (script: ScriptedVideo): ScriptedVideoAdapter => new ScriptedVideoAdapter(script)
