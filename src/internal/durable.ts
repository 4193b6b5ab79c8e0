/**
 * Helpers of the durable stores (SQL, Redis): their errors, and records kept
 * as JSON text.
 */
import { Effect, Schema } from "effect"
import { type EffectId, EffectStoreError, Recorded, type StoreOperation } from "../EffectStore.ts"

/** A driver's failure, as the store error of an operation. */
export const unavailable = (operation: StoreOperation, id: EffectId) => (cause: unknown) =>
  new EffectStoreError({ operation, ...id, reason: "unavailable", cause })

const decodeRecord = Schema.decodeUnknownEffect(Schema.fromJsonString(Recorded))

/** A record as a durable store keeps it (JSON text); one it cannot decode is `corrupt`. */
export const readRecord = (operation: StoreOperation, id: EffectId, text: string): Effect.Effect<Recorded, EffectStoreError> =>
  Effect.mapError(decodeRecord(text), (cause) => new EffectStoreError({ operation, ...id, reason: "corrupt", cause }))
