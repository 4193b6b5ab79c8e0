/**
 * Internals shared by the store layers: option defaults and the slot of an
 * effect id.
 */
import { Duration } from "effect"

/** The default retention of a record, and of the history of a key's claims. */
const defaultRetention = Duration.hours(24)

const defaultTimeout = Duration.seconds(5)

/** The retention of a store's options, in ms. */
export const retentionOf = (options: { readonly retention?: Duration.Input | undefined } | undefined): number =>
  Duration.toMillis(options?.retention === undefined ? defaultRetention : Duration.fromInputUnsafe(options.retention))

/** The deadline of a store's operations. */
export const timeoutOf = (options: { readonly timeout?: Duration.Input | undefined } | undefined): Duration.Duration =>
  options?.timeout === undefined ? defaultTimeout : Duration.fromInputUnsafe(options.timeout)

/** One string per effect id; tool names cannot hold a NUL. */
export const idKey = (id: { readonly tool: string; readonly key: string }): string => `${id.tool}\u0000${id.key}`

const InMemory = Symbol.for("@tanstack/ai-effect/EffectStore/InMemory")

/** Marks a store made by `layerMemory`, so that an effect tool can tell the stores it runs against apart. */
export const markInMemory = <Store extends object>(store: Store): Store => Object.assign(store, { [InMemory]: true })

/** Whether a store was made by `layerMemory`. */
export const isInMemory = (store: object): boolean => InMemory in store
