/**
 * `@tanstack/ai-effect`: TanStack AI tools written as Effects, chat runs as
 * Effect Streams, and side effects that apply at most once.
 *
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * ```
 *
 * @since 0.1.0
 */
export * from "./Agent.ts"
export * from "./Chat.ts"
export * as EffectKey from "./EffectKey.ts"
export { canonicalJson, EffectKeyError, sha256Hex } from "./EffectKey.ts"
export * as EffectMarker from "./EffectMarker.ts"
export { effectMarker, findEffectMarker } from "./EffectMarker.ts"
export * from "./EffectStore.ts"
export * from "./Reconcile.ts"
export * from "./RunContext.ts"
export * from "./ServerSentEvents.ts"
export * from "./ServerTool.ts"
export { isToolSchema, type ToolSchema, ToolSchemaError, type ToolSchemaOptions, toolSchema } from "./ToolSchema.ts"
export * from "./Activities.ts"
export { AiError, type AiErrorReason, failOnProviderError } from "./AiError.ts"
