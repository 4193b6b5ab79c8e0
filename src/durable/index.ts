/**
 * Durable agent runs on Effect's workflow engine (`effect/workflow` on
 * `effect/cluster`): a run survives the crash of its process.
 *
 * @since 0.1.0
 */
export * as DurableAgent from "./DurableAgent.ts"
export * as DurableEngine from "./DurableEngine.ts"
export * as DurableRunError from "./DurableRunError.ts"
export * as DurableRunStore from "./DurableRunStore.ts"
