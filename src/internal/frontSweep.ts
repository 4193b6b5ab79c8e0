/**
 * Drops entries from the front of a Map (its oldest, in insertion order)
 * while they are due, for the memory stores whose entries expire in the
 * order they were last written.
 *
 * One long-lived iterator walks the Map, and the entry it stopped at is kept
 * until it is due: a fresh iterator per sweep would step over every deleted
 * slot at the front again (with 100,000 entries, 41.5 µs a sweep against
 * 0.4 µs, in a scratch run), since V8 compacts a Map only when it grows.
 */

/**
 * The sweep of `map`: each call drops entries from its front while `due`
 * says so, calling `dropped` with each key, and stops at the first that is
 * not due. The values are the entries' objects, one per write; an entry
 * written again must be deleted first, so that it moves to the back, where
 * the sweep meets it again.
 */
export const frontSweep = <K, V extends object>(map: Map<K, V>, dropped?: (key: K) => void) => {
  // Advanced only while an entry is left that it has not passed, the walker never finishes, so it sees every later entry.
  const walker = map.entries()
  let front: [K, V] | undefined
  return (due: (value: V) => boolean): void => {
    while (map.size > 0) {
      // The entry the walker stopped at may have been written again (it is then further back) or deleted since.
      if (front === undefined || map.get(front[0]) !== front[1]) {
        const next = walker.next()
        if (next.done === true) return
        front = next.value
      }
      if (!due(front[1])) return
      map.delete(front[0])
      dropped?.(front[0])
      front = undefined
    }
  }
}
