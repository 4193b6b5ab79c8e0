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
export * from "./Chat.ts"
export * from "./RunContext.ts"
export * from "./ServerTool.ts"
export * from "./ToolSchema.ts"
