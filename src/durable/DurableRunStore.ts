/**
 * What every process on one engine reads about a durable run, beside the
 * engine's own storage: the fingerprint of the input the run started with,
 * its generation (how often a failed run was tried again), the approvals it
 * asked for, pending or answered, and the steps it recorded (its model
 * turns, tool calls and approval requests, and a cancel).
 *
 * The workflow engine keeps what a run did where only the run itself reads
 * it, so a caller in another process could not list the approvals a run
 * waits for, nor tell an unknown run from one that waits. This store answers
 * both, and answers an approval once: the first answer wins, by
 * compare-and-set.
 *
 * A run records each of its steps here itself, in one write, rather than as
 * an activity of the engine (four statements and the engine's own hand-over
 * per step); a run that replays reads them all in one read. A step is
 * recorded once: the first recording wins, and a second answers it.
 *
 * `DurableEngine`'s layers provide it: in memory beside the memory engine,
 * and on the engine's own SQL database (PostgreSQL, SQLite) beside the
 * cluster engine.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { DurableRunStoreError } from "./DurableRunError.ts"

/**
 * A tool call that waits for approval: the call, and what the model passed
 * it.
 *
 * @example
 * ```ts
 * import type { DurableRunStore } from "@tanstack/ai-effect/durable"
 *
 * const pending: DurableRunStore.ApprovalRequest = { toolCallId: "call_1", toolName: "refund", input: { orderId: "A-100" } }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ApprovalRequest {
  readonly toolCallId: string
  readonly toolName: string
  readonly input: unknown
}

/**
 * An approval a run asked for, and where it stands.
 *
 * @example
 * ```ts
 * import type { DurableRunStore } from "@tanstack/ai-effect/durable"
 *
 * const answered: DurableRunStore.Approval = { toolCallId: "call_1", toolName: "refund", input: {}, state: "approved" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Approval extends ApprovalRequest {
  readonly state: "pending" | "approved" | "declined"
}

/**
 * A run as the store knows it: the fingerprint of its input, and its
 * generation (0 until a failed run is tried again).
 *
 * @example
 * ```ts
 * import type { DurableRunStore } from "@tanstack/ai-effect/durable"
 *
 * const run: DurableRunStore.RunRecord = { fingerprint: "9f86d0…", generation: 0 }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface RunRecord {
  readonly fingerprint: string
  readonly generation: number
}

/**
 * What answering an approval found: it was pending and now holds this
 * answer, it was answered already (with `approved`), or the run never asked
 * for it.
 *
 * @example
 * ```ts
 * import type { DurableRunStore } from "@tanstack/ai-effect/durable"
 *
 * const first: DurableRunStore.Answer = { _tag: "Answered" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Answer =
  | { readonly _tag: "Answered" }
  | { readonly _tag: "AlreadyAnswered"; readonly approved: boolean }
  | { readonly _tag: "UnknownCall" }

/**
 * The store's operations. Each is one atomic step; `begin` and `answer` are
 * compare-and-set, so that two processes agree on the first input of a run
 * and on the first answer to an approval.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** Records a run's input fingerprint unless the run is known; answers the record, the first one's. */
  readonly begin: (runId: string, fingerprint: string) => Effect.Effect<RunRecord, DurableRunStoreError>
  /** The record of a run, if it was ever started. */
  readonly find: (runId: string) => Effect.Effect<Option.Option<RunRecord>, DurableRunStoreError>
  /** Moves a run from generation `from` to the next; false when another caller moved it first. */
  readonly advance: (runId: string, from: number) => Effect.Effect<boolean, DurableRunStoreError>
  /** Records an approval the run asks for, as pending; asking again changes nothing. */
  readonly request: (runId: string, request: ApprovalRequest) => Effect.Effect<void, DurableRunStoreError>
  /** Answers a pending approval, once. */
  readonly answer: (runId: string, toolCallId: string, approved: boolean) => Effect.Effect<Answer, DurableRunStoreError>
  /** Every approval the run asked for, in the order it asked. */
  readonly approvals: (runId: string) => Effect.Effect<ReadonlyArray<Approval>, DurableRunStoreError>
  /** The steps a generation of the run recorded: each step's name and its encoded result. */
  readonly steps: (runId: string, generation: number) => Effect.Effect<ReadonlyMap<string, string>, DurableRunStoreError>
  /** Records a step's encoded result unless the step is recorded; answers the recorded result, the first one. */
  readonly record: (runId: string, generation: number, step: string, result: string) => Effect.Effect<string, DurableRunStoreError>
}

/**
 * The store of durable runs.
 *
 * @example
 * ```ts
 * import { DurableRunStore } from "@tanstack/ai-effect/durable"
 * import { Effect } from "effect"
 *
 * const pending = Effect.gen(function*() {
 *   const runs = yield* DurableRunStore.DurableRunStore
 *   const approvals = yield* runs.approvals("issue-42")
 *   return approvals.filter((approval) => approval.state === "pending")
 * })
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export class DurableRunStore extends Context.Service<DurableRunStore, Service>()("@tanstack/ai-effect/durable/DurableRunStore") {
  /**
   * The store in memory, for the memory engine: one process.
   *
   * @example
   * ```ts
   * import { DurableRunStore } from "@tanstack/ai-effect/durable"
   *
   * const layer = DurableRunStore.DurableRunStore.layerMemory
   * ```
   */
  static readonly layerMemory: Layer.Layer<DurableRunStore> = Layer.sync(DurableRunStore, () => makeMemory())

  /**
   * The store on the `SqlClient` in context (PostgreSQL or SQLite), in three
   * tables it creates when missing: `ai_effect_durable_runs`,
   * `ai_effect_durable_approvals` and `ai_effect_durable_steps`.
   *
   * @example
   * ```ts
   * import { DurableRunStore } from "@tanstack/ai-effect/durable"
   *
   * const layer = DurableRunStore.DurableRunStore.layerSql
   * ```
   */
  static readonly layerSql: Layer.Layer<DurableRunStore, SqlError, SqlClient> = Layer.effect(DurableRunStore, Effect.suspend(() => makeSql()))
}

const makeMemory = (): Service => {
  const runs = new Map<string, { fingerprint: string; generation: number }>()
  const approvals = new Map<string, Map<string, { request: ApprovalRequest; state: Approval["state"] }>>()
  const steps = new Map<string, Map<string, string>>()
  const of = (runId: string) => {
    let calls = approvals.get(runId)
    if (calls === undefined) approvals.set(runId, calls = new Map())
    return calls
  }
  return {
    begin: (runId, fingerprint) =>
      Effect.sync(() => {
        const known = runs.get(runId)
        if (known !== undefined) return { ...known }
        runs.set(runId, { fingerprint, generation: 0 })
        return { fingerprint, generation: 0 }
      }),
    find: (runId) => Effect.sync(() => Option.map(Option.fromUndefinedOr(runs.get(runId)), (run) => ({ ...run }))),
    advance: (runId, from) =>
      Effect.sync(() => {
        const run = runs.get(runId)
        if (run === undefined || run.generation !== from) return false
        run.generation = from + 1
        return true
      }),
    request: (runId, request) =>
      Effect.sync(() => {
        const calls = of(runId)
        if (!calls.has(request.toolCallId)) calls.set(request.toolCallId, { request, state: "pending" })
      }),
    answer: (runId, toolCallId, approved) =>
      Effect.sync((): Answer => {
        const call = approvals.get(runId)?.get(toolCallId)
        if (call === undefined) return { _tag: "UnknownCall" }
        if (call.state !== "pending") return { _tag: "AlreadyAnswered", approved: call.state === "approved" }
        call.state = approved ? "approved" : "declined"
        return { _tag: "Answered" }
      }),
    approvals: (runId) =>
      Effect.sync(() => Array.from(approvals.get(runId)?.values() ?? [], ({ request, state }) => ({ ...request, state }))),
    steps: (runId, generation) => Effect.sync(() => new Map(steps.get(`${generation}:${runId}`))),
    record: (runId, generation, step, result) =>
      Effect.sync(() => {
        const key = `${generation}:${runId}`
        let recorded = steps.get(key)
        if (recorded === undefined) steps.set(key, recorded = new Map())
        const first = recorded.get(step)
        if (first !== undefined) return first
        recorded.set(step, result)
        return result
      })
  }
}

const ApprovalRow = Schema.Struct({
  tool_call_id: Schema.String,
  tool_name: Schema.String,
  input: Schema.String,
  state: Schema.Literals(["pending", "approved", "declined"])
})

const decodeRows = Schema.decodeUnknownEffect(Schema.Array(ApprovalRow))
const parseInput = Schema.decodeUnknownEffect(Schema.fromJsonString(Schema.Unknown))

const makeSql = Effect.fnUntraced(function*() {
  const sql = yield* SqlClient
  const runs = sql("ai_effect_durable_runs")
  const approvals = sql("ai_effect_durable_approvals")
  const steps = sql("ai_effect_durable_steps")
  yield* sql`CREATE TABLE IF NOT EXISTS ${runs} (
    run_id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    generation INTEGER NOT NULL,
    created_at BIGINT NOT NULL
  )`.pipe(
    Effect.andThen(sql`CREATE TABLE IF NOT EXISTS ${approvals} (
      run_id TEXT NOT NULL,
      tool_call_id TEXT NOT NULL,
      tool_name TEXT NOT NULL,
      input TEXT NOT NULL,
      state TEXT NOT NULL,
      requested_at BIGINT NOT NULL,
      PRIMARY KEY (run_id, tool_call_id)
    )`),
    Effect.andThen(sql`CREATE TABLE IF NOT EXISTS ${steps} (
      run_id TEXT NOT NULL,
      generation INTEGER NOT NULL,
      step TEXT NOT NULL,
      result TEXT NOT NULL,
      PRIMARY KEY (run_id, generation, step)
    )`),
    // Processes starting together race on IF NOT EXISTS (PostgreSQL's catalog
    // may refuse the second creation); one more attempt finds the table there.
    Effect.retry({ times: 5, schedule: Schedule.spaced("50 millis") })
  )
  const failed = (operation: string, runId: string) => (cause: unknown) => new DurableRunStoreError({ operation, runId, cause })
  const toRecord = (row: { readonly fingerprint: string; readonly generation: unknown }): RunRecord => ({
    fingerprint: row.fingerprint,
    generation: Number(row.generation)
  })
  return DurableRunStore.of({
    begin: (runId, fingerprint) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        // One statement: the insert, or the row already there (the no-op update makes RETURNING answer it).
        const rows = yield* sql<{ readonly fingerprint: string; readonly generation: unknown }>`INSERT INTO ${runs}
          (run_id, fingerprint, generation, created_at) VALUES (${runId}, ${fingerprint}, 0, ${now})
          ON CONFLICT (run_id) DO UPDATE SET run_id = excluded.run_id
          RETURNING fingerprint, generation`
        return toRecord(rows[0]!)
      }).pipe(Effect.mapError(failed("begin", runId))),
    find: (runId) =>
      sql<{ readonly fingerprint: string; readonly generation: unknown }>`SELECT fingerprint, generation FROM ${runs}
        WHERE run_id = ${runId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromUndefinedOr(rows[0]), toRecord)),
        Effect.mapError(failed("find", runId))
      ),
    advance: (runId, from) =>
      sql`UPDATE ${runs} SET generation = ${from + 1} WHERE run_id = ${runId} AND generation = ${from} RETURNING run_id`.pipe(
        Effect.map((rows) => rows.length === 1),
        Effect.mapError(failed("advance", runId))
      ),
    request: (runId, request) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        yield* sql`INSERT INTO ${approvals} (run_id, tool_call_id, tool_name, input, state, requested_at)
          VALUES (${runId}, ${request.toolCallId}, ${request.toolName}, ${JSON.stringify(request.input ?? null)}, 'pending', ${now})
          ON CONFLICT (run_id, tool_call_id) DO NOTHING`
      }).pipe(Effect.mapError(failed("request", runId))),
    answer: (runId, toolCallId, approved) =>
      Effect.gen(function*() {
        const answered = yield* sql`UPDATE ${approvals} SET state = ${approved ? "approved" : "declined"}
          WHERE run_id = ${runId} AND tool_call_id = ${toolCallId} AND state = 'pending' RETURNING state`
        if (answered.length === 1) return { _tag: "Answered" } as const
        const [row] = yield* sql<{ readonly state: string }>`SELECT state FROM ${approvals}
          WHERE run_id = ${runId} AND tool_call_id = ${toolCallId}`
        return row === undefined
          ? { _tag: "UnknownCall" } as const
          : { _tag: "AlreadyAnswered", approved: row.state === "approved" } as const
      }).pipe(Effect.mapError(failed("answer", runId))),
    approvals: (runId) =>
      Effect.gen(function*() {
        const rows = yield* decodeRows(
          yield* sql`SELECT tool_call_id, tool_name, input, state FROM ${approvals}
            WHERE run_id = ${runId} ORDER BY requested_at, tool_call_id`
        )
        return yield* Effect.forEach(rows, (row) =>
          Effect.map(parseInput(row.input), (input): Approval => ({
            toolCallId: row.tool_call_id,
            toolName: row.tool_name,
            input,
            state: row.state
          })))
      }).pipe(Effect.mapError(failed("approvals", runId))),
    steps: (runId, generation) =>
      sql<{ readonly step: string; readonly result: string }>`SELECT step, result FROM ${steps}
        WHERE run_id = ${runId} AND generation = ${generation}`.pipe(
        Effect.map((rows) => new Map(rows.map((row) => [row.step, row.result]))),
        Effect.mapError(failed("read the steps", runId))
      ),
    record: (runId, generation, step, result) =>
      // One statement: the insert, or the result recorded first (the no-op update makes RETURNING answer it).
      sql<{ readonly result: string }>`INSERT INTO ${steps} (run_id, generation, step, result)
        VALUES (${runId}, ${generation}, ${step}, ${result})
        ON CONFLICT (run_id, generation, step) DO UPDATE SET step = excluded.step
        RETURNING result`.pipe(
        Effect.map((rows) => rows[0]!.result),
        Effect.mapError(failed("record a step", runId))
      )
  })
})
