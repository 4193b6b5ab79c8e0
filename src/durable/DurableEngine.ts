/**
 * The workflow engines durable runs run on, each with the run store
 * (`DurableRunStore`) beside it.
 *
 * - {@link layerMemory}: `WorkflowEngine.layerMemory` (from
 *   `effect/workflow`), one process, no storage; for tests, and for runs
 *   that need only joining and approvals.
 * - {@link layerSingleRunner}: `ClusterWorkflowEngine` on SQL storage
 *   (PostgreSQL), one runner per process. A process that starts takes the
 *   shards no live runner holds and resumes every unfinished run in them by
 *   itself. Runners coordinate through storage alone.
 * - {@link layerSocketRunner}: the same engine and storage, with runners
 *   that also talk to each other over TCP, each on its own host and port:
 *   a message reaches the runner that owns its run at once, instead of at
 *   its next read of storage.
 * - {@link layerSqlite}: the cluster engine on one SQLite file, the embedded
 *   default: one runner, in the one process that holds the file's engine
 *   lock; a process restarted after a crash takes the lock over once its
 *   lease lapsed and resumes every unfinished run.
 *
 * The cluster engines need `@effect/platform-node`, an optional peer: it is
 * loaded when one of their layers is built, so that a program on the memory
 * engine runs without it.
 *
 * @since 0.1.0
 */
import { Config, ConfigProvider, Duration, Effect, Layer, Option } from "effect"
import { ClusterWorkflowEngine, RunnerAddress, type ShardingConfig, SingleRunner } from "effect/cluster"
import type { SocketServer } from "effect/socket"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { WorkflowEngine } from "effect/workflow"
import type { EffectStoreError } from "../EffectStore.ts"
import { Locks, type LockTimeout } from "../Locks.ts"
import { layerSqliteClient } from "../sqlite/SqliteClient.ts"
import { layerSqlite as sqliteEffectStore } from "../sqlite/SqliteEffectStore.ts"
import { DurableRunStore } from "./DurableRunStore.ts"

/**
 * The memory engine and the run store in memory: one process, nothing kept
 * across a restart. For tests, and for runs that need only joining and
 * approvals.
 *
 * @example
 * ```ts
 * import { DurableEngine } from "@tanstack/ai-effect/durable"
 *
 * const EngineLive = DurableEngine.layerMemory
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<WorkflowEngine.WorkflowEngine | DurableRunStore> = Layer.merge(
  WorkflowEngine.layerMemory,
  DurableRunStore.layerMemory
)

/**
 * Options of {@link layerSingleRunner}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SingleRunnerOptions {
  /**
   * Settings of the runner, over those read from the environment (effect's
   * names in constant case: `SHARD_LOCK_EXPIRATION`, ...; see
   * docs/durable-runs.md). The ones that matter most, with this package's
   * defaults where the environment sets none:
   * - `entityMessagePollInterval`: how often storage is read for messages
   *   the runner missed; 1 second (10 in effect);
   * - `shardLockExpiration`: how long a runner that stopped beating is still
   *   listed, and so how long its runs wait for another runner: 15 seconds
   *   (35 in effect);
   * - `shardLockRefreshInterval`: its heartbeat, 5 seconds (10 in effect).
   *   A heartbeat is also a deadline: a runner whose heartbeat takes longer
   *   (a loaded database, a stalled process) gives up every shard it holds
   *   and runs the steps it had in flight again, so the interval keeps
   *   room above the slowest heartbeat under load (about 1 second with 500
   *   runs in flight on one runner).
   * - `shardsPerGroup`: effect's 300 on PostgreSQL. Each read of storage
   *   names every shard the runner holds, which a run pays twice (a run of
   *   the bench took 5–12% less with one shard). The count decides which
   *   shard stores a run's messages, so every runner of a database needs
   *   the same one, and a runner reads only the shards it holds: change it
   *   only while no run is in flight. {@link layerSqlite} uses 1.
   *
   * On PostgreSQL a shard's lock is an advisory lock of the runner's
   * session, which the server releases when the runner's connection ends:
   * a runner that is only slow does not lose a shard to another while it
   * still holds its connection.
   */
  readonly shardingConfig?: Partial<ShardingConfig.ShardingConfig["Service"]> | undefined
}

/**
 * `ClusterWorkflowEngine` with its messages, replies and shard locks in SQL
 * storage, for one runner in this process. Provide a `SqlClient` (PostgreSQL:
 * `PgClient.layer` from `@effect/sql-pg`); the tables are made on first use.
 *
 * The runner reads the rest of its settings from the environment, as
 * effect's cluster does: `HOST` and `PORT` among them, which name the
 * runner. A platform that sets `PORT` for its HTTP server changes the
 * runner's address too; give several processes on one machine different
 * ones.
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { DurableEngine } from "@tanstack/ai-effect/durable"
 * import { Layer, Redacted } from "effect"
 *
 * export const EngineLive = DurableEngine.layerSingleRunner().pipe(
 *   Layer.provide(PgClient.layer({ url: Redacted.make("postgres://localhost/app") }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSingleRunner = (
  options: SingleRunnerOptions = {}
): Layer.Layer<WorkflowEngine.WorkflowEngine | DurableRunStore, Config.ConfigError | SqlError, SqlClient.SqlClient> =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.merge(DurableRunStore.layerSql),
    Layer.provide(Layer.unwrap(Effect.map(
      runnerSettings(options),
      (shardingConfig) => SingleRunner.layer({ shardingConfig })
    ))),
    Layer.provide(Layer.unwrap(Effect.map(
      platformNode("layerSingleRunner", () => import("@effect/platform-node/NodeCrypto")),
      (NodeCrypto) => NodeCrypto.layerDigest
    )))
  )

/**
 * Options of {@link layerSocketRunner}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SocketRunnerOptions extends SingleRunnerOptions {
  /** Where this runner listens for the others, and how they reach it. */
  readonly host: string
  readonly port: number
}

/**
 * `ClusterWorkflowEngine` with SQL storage, for several runners that talk to
 * each other over TCP: this process's runner listens on `host:port`, and the
 * others reach it there. Provide a `SqlClient` (PostgreSQL). When a runner
 * dies, the others take its shards once its locks expire
 * (`shardLockExpiration`) and resume its runs.
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { DurableEngine } from "@tanstack/ai-effect/durable"
 * import { Layer, Redacted } from "effect"
 *
 * export const EngineLive = DurableEngine.layerSocketRunner({ host: "10.0.0.7", port: 34431 }).pipe(
 *   Layer.provide(PgClient.layer({ url: Redacted.make("postgres://db/app") }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSocketRunner = (
  options: SocketRunnerOptions
): Layer.Layer<
  WorkflowEngine.WorkflowEngine | DurableRunStore,
  Config.ConfigError | SocketServer.SocketServerError | SqlError,
  SqlClient.SqlClient
> =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.merge(DurableRunStore.layerSql),
    Layer.provide(Layer.unwrap(Effect.zipWith(
      platformNode("layerSocketRunner", () => import("@effect/platform-node/NodeClusterSocket")),
      runnerSettings({
        shardingConfig: {
          runnerAddress: Option.some(RunnerAddress.make(options.host, options.port)),
          ...options.shardingConfig
        }
      }),
      (NodeClusterSocket, shardingConfig) => NodeClusterSocket.layer({ storage: "sql", shardingConfig })
    )))
  )

/**
 * Options of {@link layerSqlite}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteEngineOptions extends SingleRunnerOptions {
  /** The SQLite file of the engine's storage and the run store (created when missing). */
  readonly filename: string
  /**
   * How long the engine lock of a process that stopped renewing it (it was
   * killed) holds the file: a process started after a crash waits at most
   * this long before it resumes the runs. Default 5 seconds.
   */
  readonly lockLease?: Duration.Input | undefined
}

/**
 * The cluster workflow engine and the run store on one SQLite file, with no
 * database server: the embedded default. Effect's cluster keeps its shard
 * locks in a table whose rows a second runner on the same file would not
 * respect (every runner of a file has the same address), so one
 * process runs the file's durable runs: it holds the file's **engine lock**
 * (a fenced claim with a lease, in the file) for as long as the layer is
 * up. A second process fails to build the layer with `LockTimeout` (it
 * waits one lease first, which is what a restart after a crash needs); for
 * several runners, use PostgreSQL ({@link layerSingleRunner},
 * {@link layerSocketRunner}).
 *
 * With one runner per file, the runner keeps its runs in one shard
 * (`shardsPerGroup` 1 whatever `SHARDS_PER_GROUP` says, where effect's
 * default of 300 made each read of storage name 300 shards): a run took
 * 10–16% less. A file written with more shards has its messages moved to
 * the one shard as the layer starts, so that its unfinished runs resume.
 * Another count in `shardingConfig` moves nothing.
 *
 * @example
 * ```ts
 * import { DurableEngine } from "@tanstack/ai-effect/durable"
 *
 * // A killed process's runs resume when the program starts again, within the lock's lease.
 * export const EngineLive = DurableEngine.layerSqlite({ filename: ".data/runs.db" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = (
  options: SqliteEngineOptions
): Layer.Layer<
  WorkflowEngine.WorkflowEngine | DurableRunStore,
  Config.ConfigError | SqlError | LockTimeout | EffectStoreError
> => {
  const lease = Duration.fromInputUnsafe(options.lockLease ?? "5 seconds")
  // Waits one lease and a little more: a restart finds the lock of the process it replaces lapsed.
  const engineLock = Layer.effectDiscard(Effect.gen(function*() {
    const locks = yield* Locks
    const kept = yield* locks.acquire(`durable-engine:${options.filename}`)
    yield* Effect.forkScoped(kept.pipe(
      Effect.catchTag("LockLost", (lost) =>
        Effect.logError(`Another process took the durable engine lock of ${options.filename} (${lost.message}): stop this process`))
    ))
  })).pipe(
    Layer.provide(Locks.layer({ lease, waitFor: Duration.sum(lease, Duration.seconds(1)) })),
    Layer.provide(sqliteEffectStore({ filename: options.filename }))
  )
  const shardsPerGroup = options.shardingConfig?.shardsPerGroup ?? 1
  // One process runs the file, so its runner has one address whatever `PORT` says: a restart takes
  // the shards of the process it replaces back at once, instead of after their locks expire.
  const runner = layerSingleRunner({
    shardingConfig: { runnerAddress: Option.some(RunnerAddress.make("localhost", 34431)), ...options.shardingConfig, shardsPerGroup }
  })
  const client = layerSqliteClient({ filename: options.filename })
  const storage = shardsPerGroup === 1 ? Layer.provideMerge(intoOneShard, client) : client
  // The lock is taken before the runner starts, so that a second process never resumes a run.
  return Layer.provide(runner, storage).pipe(Layer.provide(engineLock))
}

/**
 * The messages of a file written with more shards (effect's default of 300,
 * before `layerSqlite` used one), moved to shard 1 of their group before the
 * runner starts: a runner reads only the shards it holds, so an unfinished
 * run would wait forever. Processed messages move too, since an answered
 * approval makes a suspended run's request unprocessed again where it lies.
 * The table is effect's `SqlMessageStorage` under its default prefix, which
 * `SingleRunner` uses; a shard id is `group:number`, and the group names
 * here (`default`) hold no colon.
 */
const intoOneShard = Layer.effectDiscard(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const tables = yield* sql`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cluster_messages'`
  if (tables.length === 0) return
  yield* sql`UPDATE cluster_messages SET shard_id = substr(shard_id, 1, instr(shard_id, ':')) || '1'
    WHERE shard_id <> substr(shard_id, 1, instr(shard_id, ':')) || '1'`
}))

/**
 * The runner's settings: the caller's, else the environment's (read as
 * effect's cluster reads it), else this package's defaults over effect's;
 * see {@link SingleRunnerOptions}.
 */
const runnerSettings = (
  options: SingleRunnerOptions
): Effect.Effect<Partial<ShardingConfig.ShardingConfig["Service"]>, Config.ConfigError> =>
  Config.all({
    entityMessagePollInterval: Config.Duration("entityMessagePollInterval").pipe(Config.withDefault(Duration.seconds(1))),
    shardLockExpiration: Config.Duration("shardLockExpiration").pipe(Config.withDefault(Duration.seconds(15))),
    shardLockRefreshInterval: Config.Duration("shardLockRefreshInterval").pipe(Config.withDefault(Duration.seconds(5)))
  }).parse(ConfigProvider.fromEnv().pipe(ConfigProvider.constantCase)).pipe(
    Effect.map((fromEnvironment) => ({ ...fromEnvironment, ...options.shardingConfig }))
  )

/**
 * A module of `@effect/platform-node`, loaded when the layer that needs it is
 * built; without the package, the layer dies saying what to install.
 */
const platformNode = <Module>(layer: string, load: () => Promise<Module>): Effect.Effect<Module> =>
  Effect.tryPromise({
    try: load,
    catch: (cause) =>
      new Error(
        `DurableEngine.${layer} needs the optional peer @effect/platform-node (npm install @effect/platform-node): ${
          cause instanceof Error ? cause.message : String(cause)
        }`,
        { cause }
      )
  }).pipe(Effect.orDie)
