/**
 * `@tanstack/ai-effect`: TanStack AI tools written as Effects, chat runs as
 * Effect Streams, and side effects that apply at most once.
 *
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * ```
 *
 * Each name is exported once: the effect-key strategies and the lease
 * protocol as the namespaces `AI.EffectKey` and `AI.EffectLease`, everything
 * else by its own name.
 *
 * @since 0.1.0
 */

// Server tools and chat runs
export { chat, ChatError, type ChatMessage, type ChatOptions, type ChatRequestParams, type ChatRequirements, type CoreTool, fromChatParams } from "./Chat.ts"
export {
  isServerTool,
  type ServerTool,
  serverTool,
  type ServerToolOptions,
  type ToolCall,
  ToolCallError,
  type ToolHandler,
  toolProgressEvent,
  wrapToolsForRun
} from "./ServerTool.ts"
export { isToolSchema, type ToolSchema, ToolSchemaError, type ToolSchemaOptions, toolSchema } from "./ToolSchema.ts"
export { RunContext } from "./RunContext.ts"
export { type Agent, type AgentTools, defineAgent, runAgent, type RunAgentOptions } from "./Agent.ts"
export { toServerSentEvents } from "./ServerSentEvents.ts"
export { AiError, type AiErrorReason, failOnProviderError } from "./AiError.ts"

// Effect tools: side effects applied at most once
export {
  type AlreadyApplied,
  type EffectCall,
  effectOutcomeEvent,
  effectTool,
  effectToolCalls,
  type EffectToolOptions,
  type Outcome,
  Remote,
  type RemoteReconciler
} from "./EffectTool.ts"
export {
  EffectCheckTimeout,
  EffectInDoubt,
  EffectInProgress,
  EffectKeyError,
  EffectKeyReused,
  EffectTakenOver,
  type EffectToolError,
  ToolOutputError
} from "./EffectToolError.ts"
export * as EffectKey from "./EffectKey.ts"
export * as EffectLease from "./EffectLease.ts"
export { effectMarker, findEffectMarker, type SignedEffectMarkers, signedEffectMarkers } from "./EffectMarker.ts"
export {
  Claim,
  ClaimLost,
  type EffectId,
  EffectStore,
  type EffectStoreBackend,
  EffectStoreError,
  type MemoryStoreOptions,
  Recorded,
  RecordedJson,
  type StoreOperation,
  type StoreOptions
} from "./EffectStore.ts"

// Delivery logs: resumable streams
export {
  type Entry,
  InvalidOffset,
  type LogRequest,
  type Page,
  ProducerFenced,
  StreamLog,
  type StreamLogBackend,
  StreamLogError,
  type StreamLogOptions,
  UnknownRun
} from "./StreamLog.ts"

export { type Thread, ThreadStore, type ThreadStoreBackend, ThreadStoreError, type ThreadStoreOptions } from "./ThreadStore.ts"
export { LockLost, Locks, type LocksOptions, LockTimeout } from "./Locks.ts"

// Activities
export {
  embed,
  generateAudio,
  generateAudioStream,
  generateImage,
  generateImageStream,
  generateObject,
  type GenerateObjectOptions,
  generateSpeech,
  generateSpeechStream,
  generateTranscription,
  generateTranscriptionStream,
  generateVideo,
  generateVideoStream,
  getVideoJobStatus,
  rerank,
  summarize,
  summarizeStream,
  type VideoJobStatus
} from "./Activities.ts"
