/**
 * The validation every stream-log backend runs before an upsert writes
 * anything, as core's `UpsertableStreamDurability` asks: each entry replaces
 * the one stored at its position, or comes after every stored and preceding
 * entry; otherwise the whole batch is refused.
 */

/** The positions of a batch that are new (pushed after the tail), or why the batch is refused: its first position that cannot be written. */
export type UpsertPlan =
  | { readonly _tag: "Planned"; readonly pushed: ReadonlySet<number> }
  | { readonly _tag: "Refused"; readonly seq: number; readonly reason: string }

/** Plans an upsert of the positions `seqs` over what is stored. */
export const planUpsert = (
  seqs: ReadonlyArray<number>,
  stored: { readonly tail: number; readonly has: (seq: number) => boolean }
): UpsertPlan => {
  let tail = stored.tail
  const pushed = new Set<number>()
  for (const seq of seqs) {
    if (stored.has(seq)) continue
    if (seq <= tail) {
      return {
        _tag: "Refused",
        seq,
        reason: `position ${seq} is not stored and is at or before the tail ${tail}; a new offset must come after every stored and preceding one`
      }
    }
    tail = seq
    pushed.add(seq)
  }
  return { _tag: "Planned", pushed }
}
