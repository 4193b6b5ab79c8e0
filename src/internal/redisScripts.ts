/**
 * Lua scripts sent by their SHA-1, computed here.
 *
 * `Redis.eval` looks each script up in a cache of the hashes Redis
 * answered to `SCRIPT LOAD`, on every call: about 10 µs of a 60–70 µs
 * claim on a local Redis (a scratch run). The hash is known in advance,
 * so a call is one `EVALSHA`; a Redis that does not know the script (it
 * restarted, or `SCRIPT FLUSH` ran) answers `NOSCRIPT`, and the call loads
 * it and sends the `EVALSHA` again, as `Redis.eval` does.
 */
import { createHash } from "node:crypto"
import { Effect } from "effect"
import type { Redis, RedisError, Script } from "effect/persistence/Redis"

const isNoScript = (error: RedisError) => String(error.cause).includes("NOSCRIPT")

/** `script` as a function of its parameters on `redis`: one `EVALSHA`, and a `SCRIPT LOAD` when Redis lost it. */
export const evalSha = <Config extends { readonly params: ReadonlyArray<unknown>; readonly result: unknown }>(
  redis: Redis["Service"],
  script: Script<Config>
) => {
  const sha = createHash("sha1").update(script.lua).digest("hex")
  const load = redis.send("SCRIPT", "LOAD", script.lua)
  return (...params: Config["params"]): Effect.Effect<Config["result"], RedisError> => {
    const args = [sha, String(script.numberOfKeys(...params)), ...script.params(...params).map(String)]
    const send = redis.send<Config["result"]>("EVALSHA", ...args)
    return Effect.catchIf(send, isNoScript, () => Effect.andThen(load, send))
  }
}
