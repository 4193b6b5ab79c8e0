/**
 * The workflow engines durable runs run on.
 *
 * - `WorkflowEngine.layerMemory` (from `effect/workflow`): one process, no
 *   storage; for tests, and for runs that need only joining and approvals.
 * - {@link layerSingleRunner}: `ClusterWorkflowEngine` on SQL storage
 *   (PostgreSQL), one runner per process. A process that starts takes the
 *   shards no live runner holds and resumes every unfinished run in them by
 *   itself. Runners coordinate through storage alone.
 * - {@link layerSocketRunner}: the same engine and storage, with runners
 *   that also talk to each other over TCP, each on its own host and port:
 *   a message reaches the runner that owns its run at once, instead of at
 *   its next read of storage.
 *
 * @since 0.1.0
 */
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import { type Config, Layer, Option } from "effect"
import { ClusterWorkflowEngine, RunnerAddress, type ShardingConfig, SingleRunner } from "effect/cluster"
import type { SocketServer } from "effect/socket"
import type { SqlClient } from "effect/sql"
import type { WorkflowEngine } from "effect/workflow"

/**
 * Options of {@link layerSingleRunner}.
 *
 * @since 0.1.0
 * @category models
 */
export interface SingleRunnerOptions {
  /**
   * Settings of the runner, over those read from the environment (see
   * docs/durable-runs.md). The ones that matter most:
   * `entityMessagePollInterval` (how often storage is read for messages the
   * runner missed; 1 second here, 10 by default in effect), and
   * `shardLockExpiration` (how long a dead runner's shards stay locked).
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
): Layer.Layer<WorkflowEngine.WorkflowEngine, Config.ConfigError, SqlClient.SqlClient> =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.provide(
      SingleRunner.layer({ shardingConfig: { entityMessagePollInterval: "1 second", ...options.shardingConfig } })
    ),
    Layer.provide(NodeCrypto.layerDigest)
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
): Layer.Layer<WorkflowEngine.WorkflowEngine, Config.ConfigError | SocketServer.SocketServerError, SqlClient.SqlClient> =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.provide(NodeClusterSocket.layer({
      storage: "sql",
      shardingConfig: {
        runnerAddress: Option.some(RunnerAddress.make(options.host, options.port)),
        entityMessagePollInterval: "1 second",
        ...options.shardingConfig
      }
    }))
  )
