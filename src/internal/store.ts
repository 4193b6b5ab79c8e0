/**
 * Internals shared by the store layers: option defaults, the slot of an
 * effect id, and the in-memory backend.
 */
import { Clock, Duration, Effect, Option } from "effect"
import { Claim, ClaimLost, type EffectId, type EffectStore, type EffectStoreBackend, type Recorded, type StoreOptions } from "../EffectStore.ts"

/** The default retention of a record, and of the history of a key's claims. */
const defaultRetention = Duration.hours(24)

const defaultTimeout = Duration.seconds(5)

/** The retention of a store's options, in ms. */
export const retentionOf = (options: StoreOptions | undefined): number =>
  Duration.toMillis(options?.retention === undefined ? defaultRetention : Duration.fromInputUnsafe(options.retention))

/** The deadline of a store's operations. */
export const timeoutOf = (options: StoreOptions | undefined): Duration.Duration =>
  options?.timeout === undefined ? defaultTimeout : Duration.fromInputUnsafe(options.timeout)

/** One string per effect id; tool names cannot hold a NUL. */
export const idKey = (id: EffectId): string => `${id.tool}\u0000${id.key}`

const MadeAt = Symbol.for("@tanstack/ai-effect/EffectStore/madeAt")

interface MadeAt {
  readonly madeAt: number
  warned: boolean
}

/** Marks a memory store with the moment it was made, for {@link shouldWarnMadeInRun}. */
export const markMadeAt = (store: EffectStore.Service): EffectStore.Service =>
  Object.assign(store, { [MadeAt]: { madeAt: performance.now(), warned: false } satisfies MadeAt })

/**
 * Whether a memory store was made after the chat run was created, that is,
 * inside the request; true once per store, so that the warning is logged once.
 */
export const shouldWarnMadeInRun = (store: EffectStore.Service, runCreatedAt: number): boolean => {
  const mark = (store as { readonly [MadeAt]?: MadeAt })[MadeAt]
  if (mark === undefined || mark.warned || mark.madeAt < runCreatedAt) return false
  mark.warned = true
  return true
}

interface MemoryEntry {
  fence: number
  /** The holder of the claim; `undefined` once recorded or released. */
  owner: string | undefined
  leaseExpiresAt: number
  recorded: Recorded | undefined
  /** When the entry may be forgotten: a record's retention, or a claim's history. */
  expiresAt: number
}

export const makeMemoryBackend = (capacity: number, retention: number): EffectStoreBackend => {
  // A Map iterates in insertion order, so its first key is the oldest entry.
  const entries = new Map<string, MemoryEntry>()
  // One long-lived iterator walks from the oldest entry on: a fresh iterator
  // per eviction would step over every deleted slot at the front again.
  let oldest = entries.keys()
  const touch = (slot: string, entry: MemoryEntry) => {
    entries.delete(slot)
    entries.set(slot, entry)
    while (entries.size > capacity) {
      let next = oldest.next()
      if (next.done === true) {
        oldest = entries.keys()
        next = oldest.next()
      }
      if (next.done !== true) entries.delete(next.value)
    }
  }
  const live = (slot: string, now: number): MemoryEntry | undefined => {
    const entry = entries.get(slot)
    if (entry === undefined) return undefined
    if (entry.expiresAt > now) return entry
    entries.delete(slot)
    return undefined
  }
  const held = (id: EffectId, fence: number, now: number): MemoryEntry | undefined => {
    const entry = live(idKey(id), now)
    return entry !== undefined && entry.fence === fence && entry.owner !== undefined && entry.recorded === undefined
      ? entry
      : undefined
  }
  return {
    get: (id) =>
      Effect.map(Clock.currentTimeMillis, (now) => Option.fromUndefinedOr(live(idKey(id), now)?.recorded)),
    claim: (id, { owner, ttl }) =>
      Effect.map(Clock.currentTimeMillis, (now): Claim => {
        const slot = idKey(id)
        const entry = live(slot, now)
        if (entry?.recorded !== undefined) return Claim.Recorded({ recorded: entry.recorded })
        if (entry?.owner !== undefined && entry.leaseExpiresAt > now) {
          return Claim.Busy({ owner: entry.owner, expiresAt: entry.leaseExpiresAt })
        }
        const leaseExpiresAt = now + Duration.toMillis(ttl)
        const fence = (entry?.fence ?? 0) + 1
        touch(slot, { fence, owner, leaseExpiresAt, recorded: undefined, expiresAt: leaseExpiresAt + retention })
        return Claim.Claimed({ fence, takenOver: entry?.owner !== undefined })
      }),
    put: (id, recorded, { fence }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const entry = held(id, fence, now)
        if (entry === undefined) return Effect.fail(new ClaimLost({ ...id, fence }))
        touch(idKey(id), { ...entry, owner: undefined, recorded, expiresAt: now + retention })
        return Effect.void
      }),
    release: (id, { fence }) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = held(id, fence, now)
        if (entry !== undefined) Object.assign(entry, { owner: undefined, leaseExpiresAt: now, expiresAt: now + retention })
      }),
    renew: (id, { fence, ttl }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const entry = held(id, fence, now)
        if (entry === undefined) return Effect.fail(new ClaimLost({ ...id, fence }))
        entry.leaseExpiresAt = now + Duration.toMillis(ttl)
        entry.expiresAt = entry.leaseExpiresAt + retention
        return Effect.void
      })
  }
}
