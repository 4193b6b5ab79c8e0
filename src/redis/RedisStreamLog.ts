/**
 * The delivery log on Redis: three keys per run under one hash tag (its
 * meta hash with the producer's epoch, the tail and whether it closed; its
 * chunks by position; and their positions in order), written by Lua scripts
 * so that every write is one atomic round trip that checks the producer's
 * epoch first. A log expires on Redis's own clock, `retention` after its
 * last write. Each write also publishes the run's new tail, and the readers
 * of every process that subscribes wake at once; the readers' shared poll
 * finds what was published while a subscriber reconnected.
 *
 * @since 0.1.0
 */
import type { StreamChunk } from "@tanstack/ai"
import { Duration, Effect, Layer } from "effect"
import { Redis, script } from "effect/persistence/Redis"
import { listenForTails, pollTails, type Tail } from "../internal/tailPoll.ts"
import { evalSha } from "../internal/redisScripts.ts"
import { type Entry, InvalidOffset, type Page, ProducerFenced, StreamLog, StreamLogError, type StreamLogOptions } from "../StreamLog.ts"

/**
 * Options of {@link layerRedisStreamLog}.
 *
 * @since 0.1.0
 * @category models
 */
export interface RedisStreamLogOptions extends StreamLogOptions {
  /** The prefix of every key this log writes. Default `ai-effect:log:`. */
  readonly prefix?: string | undefined
  /**
   * How often a reader that caught up looks for what another process
   * stored; a write of the reader's own log layer wakes it at once. The
   * readers waiting in one layer share each look: one pipeline asks for
   * the tails of all their runs. Default 50 milliseconds.
   */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * Each write publishes the run's new tail on the channel `<prefix>tails`,
   * and a layer whose readers wait subscribes to it (a connection of its
   * own), so that they wake as soon as another process writes. Every
   * subscribed process hears every run's writes. Default `true`.
   */
  readonly notify?: boolean | undefined
  /**
   * How often the readers' poll looks while the layer is subscribed (from
   * the moment its subscription fails, it looks every `pollInterval`
   * again): it then only finds what a subscriber may miss, such as a
   * publication during a reconnect. A look sends a command per waiting run,
   * so 1,000 readers polled every 50 milliseconds are 20,000 commands a
   * second. Never less often than `pollInterval`. Default 1 second.
   */
  readonly listeningPollInterval?: Duration.Input | undefined
}

// KEYS: the meta hash, the chunks hash, the positions sorted set. ARGV[1]: the epoch.
const owned = `
local epoch, complete = unpack(redis.call('HMGET', KEYS[1], 'epoch', 'complete'))
if tonumber(epoch) ~= tonumber(ARGV[1]) or complete == '1' then return {'fenced'} end`

const keepFor = (argument: string) => `
for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ${argument}) end`

/** The channel a write publishes its run's new tail on (empty when the log does not announce), and the run's id. */
type Announced = readonly [channel: string, runId: string]

// ARGV[3]: the channel ('' when the log does not announce), ARGV[4]: the run id.
const announce = (tail: string, complete: 0 | 1) => `
if ARGV[3] ~= '' then redis.call('PUBLISH', ARGV[3], ${tail} .. ' ${complete} ' .. ARGV[4]) end`

const claimScript = script((meta: string, chunks: string, seqs: string, retention: number) => [meta, chunks, seqs, retention], {
  numberOfKeys: 3,
  lua: `
if redis.call('HGET', KEYS[1], 'complete') == '1' then return {'closed', redis.call('HGET', KEYS[1], 'epoch')} end
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSETNX', KEYS[1], 'tail', 0)
redis.call('HSETNX', KEYS[1], 'complete', 0)${keepFor("ARGV[1]")}
return {'claimed', tostring(epoch)}`
}).withReturnType<ReadonlyArray<string>>()

const appendScript = script(
  (meta: string, chunks: string, seqs: string, epoch: number, retention: number, announced: Announced, batch: ReadonlyArray<string>) => [
    meta,
    chunks,
    seqs,
    epoch,
    retention,
    ...announced,
    ...batch
  ],
  {
    numberOfKeys: 3,
    lua: `${owned}
local tail = tonumber(redis.call('HGET', KEYS[1], 'tail'))
local first = tail + 1
for index = 5, #ARGV do
  tail = tail + 1
  redis.call('HSET', KEYS[2], tail, ARGV[index])
  redis.call('ZADD', KEYS[3], tail, tail)
end
redis.call('HSET', KEYS[1], 'tail', tail)${keepFor("ARGV[2]")}${announce("tail", 0)}
return {'appended', tostring(first)}`
  }
).withReturnType<ReadonlyArray<string>>()

const upsertScript = script(
  (meta: string, chunks: string, seqs: string, epoch: number, retention: number, announced: Announced, entries: ReadonlyArray<string>) => [
    meta,
    chunks,
    seqs,
    epoch,
    retention,
    ...announced,
    ...entries
  ],
  {
    numberOfKeys: 3,
    lua: `${owned}
local tail = tonumber(redis.call('HGET', KEYS[1], 'tail'))
for index = 5, #ARGV, 2 do
  local seq = tonumber(ARGV[index])
  if redis.call('HEXISTS', KEYS[2], seq) == 0 then
    if seq <= tail then return {'refused', tostring(seq), tostring(tail)} end
    tail = seq
  end
end
for index = 5, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[index], ARGV[index + 1])
  redis.call('ZADD', KEYS[3], ARGV[index], ARGV[index])
end
redis.call('HSET', KEYS[1], 'tail', tail)${keepFor("ARGV[2]")}${announce("tail", 0)}
return {'upserted'}`
  }
).withReturnType<ReadonlyArray<string>>()

const closeScript = script(
  (meta: string, chunks: string, seqs: string, epoch: number, retention: number, announced: Announced) => [
    meta,
    chunks,
    seqs,
    epoch,
    retention,
    ...announced
  ],
  {
    numberOfKeys: 3,
    lua: `${owned}
redis.call('HSET', KEYS[1], 'complete', 1)${keepFor("ARGV[2]")}${announce("'0'", 1)}
return {'closed'}`
  }
).withReturnType<ReadonlyArray<string>>()

const readScript = script((meta: string, chunks: string, seqs: string, after: number, limit: number) => [meta, chunks, seqs, after, limit], {
  numberOfKeys: 3,
  lua: `
local complete = redis.call('HGET', KEYS[1], 'complete')
if not complete then return {'unknown'} end
local positions = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[1], '+inf', 'LIMIT', 0, tonumber(ARGV[2]))
local answer = {complete}
if #positions > 0 then
  local stored = redis.call('HMGET', KEYS[2], unpack(positions))
  for index = 1, #positions do
    answer[#answer + 1] = positions[index]
    answer[#answer + 1] = stored[index]
  end
end
return answer`
}).withReturnType<ReadonlyArray<string>>()

/**
 * The delivery log on the `Redis` service in context (for example
 * `NodeRedis.layer` from `@effect/platform-node`).
 *
 * @example
 * ```ts
 * import { NodeRedis } from "@effect/platform-node"
 * import { layerRedisStreamLog } from "@tanstack/ai-effect/redis"
 * import { Layer } from "effect"
 *
 * export const StreamLogLive = layerRedisStreamLog({ retention: "1 day" }).pipe(
 *   Layer.provide(NodeRedis.layer({ url: "redis://127.0.0.1:6379" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRedisStreamLog = (options?: RedisStreamLogOptions): Layer.Layer<StreamLog, never, Redis> =>
  Layer.effect(StreamLog, makeRedisStreamLog(options))

/**
 * Makes the Redis delivery log on the `Redis` service in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRedisStreamLog = Effect.fnUntraced(function*(options?: RedisStreamLogOptions) {
  const redis = yield* Redis
  const prefix = options?.prefix ?? "ai-effect:log:"
  const retention = Duration.toMillis(Duration.fromInputUnsafe(options?.retention ?? "24 hours"))
  const pollInterval = Duration.fromInputUnsafe(options?.pollInterval ?? "50 millis")
  const channel = options?.notify ?? true ? `${prefix}tails` : ""
  // One hash tag per run: its three keys live in one slot of a cluster.
  const keysOf = (runId: string) => {
    const tag = `${prefix}{${encodeURIComponent(runId)}}`
    return [`${tag}:meta`, `${tag}:chunks`, `${tag}:seqs`] as const
  }
  const failed = (operation: string, runId: string) => (cause: unknown) =>
    new StreamLogError({ operation, runId, reason: "unavailable", cause })
  const claimLua = evalSha(redis, claimScript)
  const appendLua = evalSha(redis, appendScript)
  const upsertLua = evalSha(redis, upsertScript)
  const closeLua = evalSha(redis, closeScript)
  const readLua = evalSha(redis, readScript)

  const backend = {
    claim: (runId: string) =>
      Effect.flatMap(claimLua(...keysOf(runId), retention).pipe(Effect.mapError(failed("claim", runId))), ([answer, epoch]) =>
        answer === "closed" ? Effect.fail(new ProducerFenced({ runId, epoch: Number(epoch) })) : Effect.succeed(Number(epoch))),
    append: (runId: string, epoch: number, batch: ReadonlyArray<StreamChunk>) =>
      Effect.flatMap(
        appendLua(...keysOf(runId), epoch, retention, [channel, runId], batch.map((chunk) => JSON.stringify(chunk))).pipe(Effect.mapError(failed("append", runId))),
        ([answer, first]) =>
          answer === "fenced"
            ? Effect.fail(new ProducerFenced({ runId, epoch }))
            : Effect.succeed(batch.map((_, index) => Number(first) + index))
      ),
    upsert: (runId: string, epoch: number, entries: ReadonlyArray<Entry>) =>
      Effect.flatMap(
        upsertLua(...keysOf(runId), epoch, retention, [channel, runId], entries.flatMap((entry) => [String(entry.seq), JSON.stringify(entry.chunk)])).pipe(
          Effect.mapError(failed("upsert", runId))
        ),
        ([answer, seq, tail]): Effect.Effect<void, ProducerFenced | InvalidOffset> => {
          if (answer === "fenced") return Effect.fail(new ProducerFenced({ runId, epoch }))
          if (answer !== "refused") return Effect.void
          return Effect.fail(
            new InvalidOffset({
              offset: StreamLog.offsetOf(runId, Number(seq)),
              reason: `position ${seq} is not stored and is at or before the tail ${tail}; a new offset must come after every stored and preceding one`
            })
          )
        }
      ),
    close: (runId: string, epoch: number) =>
      Effect.flatMap(closeLua(...keysOf(runId), epoch, retention, [channel, runId]).pipe(Effect.mapError(failed("close", runId))), ([answer]) =>
        answer === "fenced" ? Effect.fail(new ProducerFenced({ runId, epoch })) : Effect.void),
    read: (runId: string, after: number, limit: number) =>
      Effect.flatMap(readLua(...keysOf(runId), after, limit).pipe(Effect.mapError(failed("read", runId))), ([complete, ...rest]) =>
        Effect.try({
          try: (): Page => {
            if (complete === "unknown") return { entries: [], complete: false, known: false }
            const entries: Array<Entry> = []
            for (let index = 0; index < rest.length; index += 2) {
              // The log stores what core handed it: a chunk, as JSON.
              entries.push({ seq: Number(rest[index]), chunk: JSON.parse(rest[index + 1]!) as StreamChunk })
            }
            return { entries, complete: complete === "1", known: true }
          },
          catch: (cause) => new StreamLogError({ operation: "read", runId, reason: "corrupt", cause })
        })),
    // Another process's write is heard as it is published, or seen at the next poll, one for every waiting reader (once
    // a second while subscribed, for what the subscriber missed).
    // A run's keys have a slot of their own, so the poll sends a command per run, in one pipeline.
    awaitChange: yield* pollTails(pollInterval, (runIds) =>
      Effect.map(
        Effect.forEach(runIds, (runId) => redis.send<ReadonlyArray<string | null>>("HMGET", keysOf(runId)[0], "tail", "complete"), {
          concurrency: "unbounded"
        }),
        (answers) => {
          const found = new Map<string, Tail>()
          answers.forEach(([tail, complete], index) => {
            if (complete != null) found.set(runIds[index]!, { seq: Number(tail ?? 0), complete: complete === "1" })
          })
          return found
        }
      ), channel === "" ? undefined : listenForTails(redis.subscribe(channel), (message) => message.message), options?.listeningPollInterval)
  }
  return yield* StreamLog.make(backend, options)
})
