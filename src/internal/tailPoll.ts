/**
 * One poll for all the readers of a store-backed delivery log that wait in
 * one process.
 *
 * A reader that has read everything waits for its run's log to change. A
 * store with no signal is polled, and a poll per reader grows with the
 * readers: 1,000 clients watching runs that another node produces, each
 * polling every 50 ms, are 20,000 reads a second. Here the waiting readers
 * share one loop: each interval, one request per `maxRunsPerPoll` runs asks
 * the store for the tail of every run someone waits on, and only the
 * readers whose run moved on, closed or is gone are woken to read.
 *
 * A store that announces its writes (PostgreSQL's `NOTIFY`) gives the same
 * tails as they are written: the readers they concern wake at once, and the
 * poll stays, for an announcement lost while its listener reconnects, and
 * looks less often while the listener listens: a look is not free (a
 * request per run on Redis, milliseconds of statements for many runs).
 */
import { Duration, Effect, Exit, Latch, Queue, Schedule, type Scope } from "effect"

/** A run's log as a poll sees it: its last position, and whether it is closed. */
export interface Tail {
  readonly seq: number
  readonly complete: boolean
}

/** The runs one request of a poll asks about, so that a statement's parameters stay within every driver's limit. */
export const maxRunsPerPoll = 500

interface Reader {
  readonly after: number
  readonly wake: () => void
}

/** What a store's listener tells the waiting readers. */
export interface Announced {
  /** A run's tail, as a write announced it. */
  readonly tail: (runId: string, tail: Tail) => void
  /**
   * Run by the listener once it listens (again), from when on every write is
   * announced: asks for the tails of the runs someone waits on, as a poll does,
   * for what was written before.
   */
  readonly listening: Effect.Effect<void>
  /** Run by the listener when it stops listening (it failed, and tries again): until it listens again, only the poll finds writes. */
  readonly stopped: Effect.Effect<void>
}

/** Listens for the tails a store announces, for as long as its scope is open. */
export type Announcements = (announced: Announced) => Effect.Effect<void, never, Scope.Scope>

/**
 * The announcements a store publishes on a channel, each a payload
 * `<tail> <0|1 complete> <run id>`: `subscribe` answers once it listens, and
 * after it fails, it subscribes again a second later.
 */
export const listenForTails = <Message>(
  subscribe: Effect.Effect<Queue.Dequeue<Message, unknown>, unknown, Scope.Scope>,
  payloadOf: (message: Message) => string
): Announcements =>
(announced) =>
  Effect.scoped(Effect.gen(function*() {
    const messages = yield* subscribe
    yield* announced.listening
    while (true) {
      for (const message of yield* Queue.takeAll(messages)) {
        const payload = payloadOf(message)
        const tailEnd = payload.indexOf(" ")
        const completeEnd = payload.indexOf(" ", tailEnd + 1)
        if (tailEnd < 1 || completeEnd !== tailEnd + 2) continue
        announced.tail(payload.slice(completeEnd + 1), { seq: Number(payload.slice(0, tailEnd)), complete: payload[tailEnd + 1] === "1" })
      }
    }
  })).pipe(Effect.ensuring(announced.stopped), Effect.retry(Schedule.spaced("1 second")), Effect.ignore)

const unknownTail = (_runId: string): Tail | undefined => undefined

/** How many runs' announced tails are remembered for readers that wait after the announcement. */
const maxRemembered = 10_000

/**
 * The `awaitChange` of a polled backend: it completes once a poll finds the
 * run's log past `after`, closed, or not stored (a reader then reads and
 * decides), or once a poll fails (each reader's own read then fails or
 * succeeds). The loop runs in the current scope, and waits without a timer
 * while nobody waits.
 *
 * `tails` answers the runs it finds stored and not expired; it is given at
 * most `maxRunsPerPoll` runs at a time. `announcements`, when the store has
 * them, start with the first reader that waits and last as long as the
 * scope, so that a process that only writes holds no listener; while they
 * listen, the poll looks every `whileListening` instead (default 1 second,
 * never less often than every `interval`), and within `interval` of the
 * listener stopping.
 */
export const pollTails = (
  interval: Duration.Duration,
  tails: (runIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, Tail>, unknown>,
  announcements?: Announcements,
  whileListening: Duration.Input = "1 second"
): Effect.Effect<(runId: string, after: number) => Effect.Effect<void>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const waiting = new Map<string, Set<Reader>>()
    const someoneWaits = Latch.makeUnsafe(false)
    let listening = false

    /** Wakes the readers of `runIds` whose run moved past them, closed, or has no tail (gone, or unknown). */
    const wakeMoved = (runIds: Iterable<string>, tailOf: (runId: string) => Tail | undefined) => {
      const woken: Array<Reader> = []
      for (const runId of runIds) {
        const readers = waiting.get(runId)
        if (readers === undefined) continue
        const tail = tailOf(runId)
        for (const reader of readers) {
          if (tail !== undefined && !tail.complete && tail.seq <= reader.after) continue
          readers.delete(reader)
          woken.push(reader)
        }
        if (readers.size === 0) waiting.delete(runId)
      }
      // Woken once every set is settled: a reader whose read answers at once may wait again before this returns.
      for (const reader of woken) reader.wake()
    }

    const lookAtTails = Effect.gen(function*() {
      const runIds = [...waiting.keys()]
      for (let start = 0; start < runIds.length; start += maxRunsPerPoll) {
        const asked = runIds.slice(start, start + maxRunsPerPoll)
        const found = yield* Effect.exit(tails(asked))
        wakeMoved(asked, Exit.isSuccess(found) ? (runId) => found.value.get(runId) : unknownTail)
      }
    })

    // The poll wakes every interval, and while the listener listens looks only once `whileListening` has passed.
    const intervalMillis = Duration.toMillis(interval)
    const whileListeningMillis = Math.max(intervalMillis, Duration.toMillis(Duration.fromInputUnsafe(whileListening)))
    let sinceLook = 0
    const poll = Effect.gen(function*() {
      yield* someoneWaits.await
      yield* Effect.sleep(interval)
      sinceLook += intervalMillis
      if (!listening || sinceLook >= whileListeningMillis) {
        sinceLook = 0
        yield* lookAtTails
      }
      // Checked and closed in one step: a reader that comes later opens it again.
      if (waiting.size === 0) someoneWaits.closeUnsafe()
    })
    yield* Effect.forkScoped(Effect.forever(poll))

    // The tails announced lately, oldest first. A write may be announced while a reader's read of the run is still
    // on its way back, before the reader waits: the reader finds the announcement here instead of at the next poll.
    const announced = new Map<string, Tail>()
    if (announcements !== undefined) {
      const tail = (runId: string, tail: Tail) => {
        announced.delete(runId)
        announced.set(runId, tail)
        if (announced.size > maxRemembered) announced.delete(announced.keys().next().value!)
        wakeMoved([runId], () => tail)
      }
      yield* Effect.forkScoped(Effect.andThen(
        someoneWaits.await,
        announcements({
          tail,
          listening: Effect.andThen(Effect.sync(() => listening = true), lookAtTails),
          stopped: Effect.sync(() => listening = false)
        })
      ))
    }

    return (runId: string, after: number) =>
      Effect.callback<void>((resume) => {
        const tail = announced.get(runId)
        if (tail !== undefined && (tail.complete || tail.seq > after)) return resume(Effect.void)
        const reader: Reader = { after, wake: () => resume(Effect.void) }
        const readers = waiting.get(runId) ?? new Set()
        waiting.set(runId, readers.add(reader))
        someoneWaits.openUnsafe()
        return Effect.sync(() => {
          readers.delete(reader)
          if (readers.size === 0 && waiting.get(runId) === readers) waiting.delete(runId)
        })
      })
  })
